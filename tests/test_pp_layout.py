"""Megatron-Core's custom pipeline layout (issue 34; --pipeline-model-parallel-layout, job field pp_layout), which
NVIDIA's DeepSeek-V3, Kimi K2 and GLM-5 recipes set: read as Megatron-Core reads it (its own unit tests' layouts),
refused by its rules (en / zh), what each rank holds (its memory and, with MTP layers, its output layers' time),
the virtual stages it sets, an even layout written out equal to the even split, written for Megatron-LM and parsed
by its parser."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import trainfit
from trainfit.catalog import resolve_model
from trainfit.errors import SpecError, sentence_of
from trainfit.estimate import parallel3d as p3
from trainfit.i18n.errors import localize_error
from trainfit.spec.pp_layout import LayoutSyntaxError, first_rank_in_flight, mtp_layers, parse, problem, ranks

DSV3_LAYOUT = "Et|(tt|)*30mL"  # Megatron-Bridge v0.1.0rc3 scripts/performance/run_script.py L72 (pp 8, vpp 4)
DSV3 = dict(method="full", precision="fp8", seq_len=4096, micro_batch=1, grad_accum=128, gpus=8, nodes=128, tp=2,
            pp=8, ep=64, zero=1, grad_ckpt="selective", selective_ac="mla_up_proj,mlp", ep_overlap=True,
            moe_dispatcher="deepep", precision_aware_optimizer=True)


@pytest.mark.parametrize("text, stages", [
    # Megatron-Core core_v0.16.1 parse_str_to_list's docstring and its unit tests' layouts
    ("Ettt|(tt|)*29,m|L", ("Ettt",) + ("tt",) * 29 + ("m", "L")),
    ("E|t*3|(t|)*5mL", ("E", "ttt") + ("t",) * 5 + ("mL",)),
    ("E|t*3|(t|)*3tt|m|L", ("E", "ttt", "t", "t", "t", "tt", "m", "L")),
    (DSV3_LAYOUT, ("Et",) + ("tt",) * 30 + ("mL",)),
])
def test_a_layout_reads_as_megatron_core_reads_it(text, stages):
    assert parse(text) == stages


def test_what_each_rank_holds():
    loads = ranks(parse(DSV3_LAYOUT), 8)  # stage k on rank k mod 8, its (k div 8)-th chunk
    assert [r.blocks for r in loads] == [7, 8, 8, 8, 8, 8, 8, 7]
    assert loads[0].embedding and not loads[0].loss and loads[0].chunks == (1, 2, 2, 2)
    assert loads[-1].loss and loads[-1].mtp == 1 and loads[-1].decoders == 6 and loads[-1].heads == 2
    assert mtp_layers(parse(DSV3_LAYOUT)) == 1
    assert problem(parse(DSV3_LAYOUT), 8, 61) is None


@pytest.mark.parametrize("text, pp, layers, key", [
    ("Et|(tt|)*30mL", 6, 61, "ec_pp_layout_stages"),  # 32 stages on 6 ranks
    ("Et|(tt|)*30mL", 8, 60, "ec_pp_layout_layers"),
    ("tE|(tt|)*30mL", 8, 61, "ec_pp_layout_embedding"),
    ("Et|(tt|)*30Lm", 8, 61, "ec_pp_layout_loss"),
    ("Et|(tt|)*29,tm|tL", 8, 61, "ec_pp_layout_mtp"),  # a decoder layer after the MTP layer
    ("Em|(tt|)*30tL", 8, 61, "ec_pp_layout_mtp"),  # MTP in rank 0's first chunk
])
def test_megatron_cores_rules(text, pp, layers, key):
    assert problem(parse(text), pp, layers)[0] == key


def test_a_hostile_or_mistyped_layout_is_one_clear_error():
    for text, key in (("(t)*999999999", "ec_pp_layout_long"), ("Et|(tx|)*3|L", "ec_pp_layout_chars"),
                      ("", "ec_pp_layout_empty"), ("t" * 3000, "ec_pp_layout_long")):
        with pytest.raises(LayoutSyntaxError) as err:
            parse(text)
        assert err.value.key == key


@settings(max_examples=80, deadline=None)
@given(pp=st.integers(2, 16), v=st.integers(1, 6), chunk=st.integers(1, 4), extra=st.integers(0, 8))
def test_the_first_rank_in_flight_is_megatrons_formula_for_even_chunks(pp, v, chunk, extra):
    """Rank 0's warm-up, chunk by chunk, equals Megatron's L·(1 + (p - 1)/(p·v)) for chunks of one size (and
    min(p, m)·L/p for one chunk per rank), once a step has the micro-batches to fill it."""
    layers = pp * v * chunk
    stages = parse("|".join(["E" + "t" * chunk] + ["t" * chunk] * (pp * v - 2) + ["t" * chunk + "L"]))
    m = pp * (2 + extra)  # interleaved: a multiple of pp, enough to fill the warm-up
    want = layers * (1 + (pp - 1) / (pp * v)) if v > 1 else min(pp, m) * layers / pp
    assert first_rank_in_flight(stages, pp, m) == pytest.approx(want)


def test_an_even_layout_written_out_is_the_even_split():
    job = dict(method="full", seq_len=8192, micro_batch=1, grad_accum=32, gpus=8, nodes=8, tp=4, pp=8, zero=1,
               precision="bf16")
    even = trainfit.estimate("llama-3-70b", "h100-sxm", vpp=5, pp_schedule="interleaved", **job)
    written = trainfit.estimate("llama-3-70b", "h100-sxm", pp_layout="Ett|(tt|)*38,ttL", **job)
    assert written.strategy.vpp == 5 and written.strategy.pp_schedule == "interleaved"  # set by the layout
    assert written.memory.allocated == pytest.approx(even.memory.allocated, rel=1e-12)
    assert written.step_time_s == pytest.approx(even.step_time_s, rel=1e-12)


def test_deepseek_v3s_layout_holds_its_mtp_layer_and_its_first_rank_less():
    plain = trainfit.estimate("deepseek-v3", "h100-sxm", vpp=4, pp_schedule="interleaved", **DSV3)
    laid = trainfit.estimate("deepseek-v3", "h100-sxm", pp_layout=DSV3_LAYOUT, **DSV3)
    no_mtp = trainfit.estimate("deepseek-v3", "h100-sxm", pp_layout="Et|(tt|)*30L", **DSV3)
    acts = [e.memory.phases[0].components[0]["activations/layers"] for e in (plain, laid)]
    # rank 0: 15 forwards of its 1-layer chunk and 8 of each 2-layer chunk (63 layers) against 61·(1 + 7/32)
    assert acts[1] == pytest.approx(acts[0] * 63 / (61 * (1 + 7 / 32)))
    assert laid.memory.allocated < plain.memory.allocated
    # the step is the slowest rank's: ranks 1-6 (8 MoE blocks), not rank 7 (6 blocks, the MTP layer, two output
    # layers), so the MTP layer does not lengthen it; where the MTP rank is the slowest (Llama 3 8B, 4 blocks a rank
    # and the MTP layer on the last) it does
    assert laid.step_time_s == no_mtp.step_time_s
    job = dict(method="full", seq_len=8192, micro_batch=1, grad_accum=16, gpus=8, nodes=1, pp=8, zero=1)
    mtp = trainfit.estimate("llama-3-8b", "h100-sxm", pp_layout="Etttt|(tttt|)*6,ttttmL", **job)
    none = trainfit.estimate("llama-3-8b", "h100-sxm", pp_layout="Etttt|(tttt|)*6,ttttL", **job)
    assert mtp.step_time_s > none.step_time_s * 1.05
    arch = p3.arch_of(resolve_model("deepseek-v3"))
    layout = p3.Layout(tp=2, pp=8, vpp=4, ep=64, dp=64, schedule="interleaved", sequence_parallel=True,
                       distributed_optimizer=True, pp_layout=parse(DSV3_LAYOUT))
    last = p3.memory_per_gpu(arch, layout, seq_len=4096, micro_batch=1, micro_batches=128, stage="last")
    assert last.parts["logits/mtp"] == last.parts["logits/head"]
    assert p3.timed_rank(arch, layout).blocks == 8 and p3.stage_heads(arch, layout) == 1  # ranks 1-6
    last_rank = p3.Layout(**{**layout.__dict__, "timed_rank": 7})
    assert p3.stage_layers(arch, last_rank) == 7 and p3.stage_heads(arch, last_rank) == 2
    assert sorted(p3.rank_kinds(arch, layout)) == [0, 1, 7]


def test_refusals_say_why_in_both_languages():
    with pytest.raises(SpecError, match="decoder layers") as err:  # DeepSeek-V3 has 61, the layout places 60
        trainfit.estimate("deepseek-v3", "h100-sxm", pp_layout="Et|(tt|)*29,t|mL", **DSV3)
    assert "解码层" in localize_error(sentence_of(err.value), "zh")
    with pytest.raises(SpecError, match="virtual stages"):  # 32 stages on pp 8 are 4 per rank, not 2
        trainfit.estimate("deepseek-v3", "h100-sxm", pp_layout=DSV3_LAYOUT, vpp=2, pp_schedule="interleaved", **DSV3)
    with pytest.raises(SpecError, match="pp-split"):
        trainfit.estimate("deepseek-v3", "h100-sxm", pp_layout=DSV3_LAYOUT, pp_split_loss=True, **DSV3)


def test_the_cli_refuses_a_broken_layout_with_exit_2(run_cli):
    code, out, err = run_cli("estimate", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--method", "full",
                             "--gpus", "8", "--nodes", "4", "--tp", "4", "--pp", "8", "--zero", "1",
                             "--pp-layout", "Et|(tq|)*3L", "--lang", "zh")
    assert code == 2 and "未知的层字符" in err and "Traceback" not in err


def test_megatron_is_told_and_plan_keeps_it(run_cli):
    from test_generate_3d import _setup, megatron_argv, megatron_parser

    layout = "Et*6|(t*6|)*6,t*6mL"  # Qwen3-30B-A3B's 48 layers, pp 4 x vpp 2, its one MTP layer on the last rank
    setup = _setup("qwen3-30b-a3b", 8, 4, "megatron", tp=2, pp=4, vpp=2, schedule="interleaved", ep=8, etp=1, ga=32,
                   zero=1, ckpt="none")
    setup.choice["strategy"].update(pp_layout=layout)
    args = megatron_parser().parse_args(megatron_argv(setup) + ["--data-path", "/d", "--save", "/o"])
    assert args.pipeline_model_parallel_layout == layout and args.mtp_num_layers == 1
    assert args.num_layers_per_virtual_pipeline_stage is None  # Megatron-LM: one or the other
    code, out, err = run_cli("plan", "--model", "qwen3-30b-a3b", "--method", "full", "--dataset-tokens", "2B",
                             "--gpu", "h100-sxm", "--provider", "aws", "--pp", "2", "--ep", "8", "--zero", "1",
                             "--pp-layout", "E(t)*24|(t)*24L", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["recommendations"]
    assert all(r["strategy"]["pp_layout"] == "E(t)*24|(t)*24L" for r in plan["recommendations"])
