"""The embedding and the loss counted as layers in the pipeline split (issue 34; Megatron-Core's
--account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split, which NVIDIA's Llama 3.1 405B and
Qwen3-235B recipes set): the first and the last stage hold one decoder layer less, the layers plus those counted
must divide by the stages (and each stage's share by the virtual stages), refused otherwise (en / zh), written
for Megatron-LM and parsed by its parser, kept by plan."""

import json

import pytest

import trainfit
from trainfit.errors import SpecError, sentence_of
from trainfit.estimate import parallel3d as p3
from trainfit.i18n.errors import localize_error

QWEN235 = dict(method="full", seq_len=4096, micro_batch=1, grad_accum=32, gpus=8, nodes=32, tp=2, pp=8, vpp=4,
               pp_schedule="interleaved", ep=32, etp=1, zero=1)


@pytest.mark.parametrize("layers, pp, first, middle, last", [(126, 8, 15, 16, 15), (94, 8, 11, 12, 11)])
def test_the_first_and_last_stage_hold_one_layer_less(layers, pp, first, middle, last):
    arch = p3.Arch(hidden=4096, layers=layers, heads=32, kv_heads=8, intermediate=11008, vocab=128256)
    t = p3.Layout(pp=pp, vpp=2, schedule="interleaved", split_embedding=True, split_loss=True)
    assert [p3.stage_layers(arch, t, s) for s in ("first", "middle", "last")] == [first, middle, last]
    assert p3.stage_params(arch, t, "first").layers == first and p3.stage_params(arch, t, "last").layers == last
    plain = p3.Layout(pp=pp, vpp=2, schedule="interleaved")
    assert p3.stage_layers(arch, plain) == -(-layers // pp)
    assert not p3.layout_problems(arch, t, 8)
    assert p3.layout_problems(arch, p3.Layout(pp=pp, vpp=4, schedule="interleaved", split_embedding=True,
                                              split_loss=True), 8) == ([] if (layers + 2) // pp % 4 == 0
                                                                       else [p3.Reason.SPLIT_ACCOUNTED])


def test_the_first_stage_holds_less_memory_and_the_time_keeps_the_busiest_stage():
    plain = trainfit.estimate("qwen3-235b-a22b", "h100-sxm", **QWEN235)
    split = trainfit.estimate("qwen3-235b-a22b", "h100-sxm", pp_split_embedding=True, pp_split_loss=True, **QWEN235)
    acts = [e.memory.phases[0].components[0]["activations/layers"] for e in (plain, split)]
    # interleaved, first stage: 8 stages' worth of its own 11 blocks in flight instead of L = 94 (Megatron's formula)
    assert acts[1] == pytest.approx(acts[0] * 11 * 8 / 94)
    assert split.memory.allocated < plain.memory.allocated
    assert split.time.parts["compute"] == plain.time.parts["compute"]  # a middle stage: 12 blocks as before


def test_a_split_that_does_not_divide_is_refused_with_the_reason():
    with pytest.raises(SpecError, match="account_for") as err:  # Llama 3 70B: 80 + 2 layers over 8 stages
        trainfit.estimate("llama-3-70b", "h100-sxm", method="full", gpus=8, nodes=4, tp=4, pp=8, zero=1,
                          grad_accum=16, pp_split_embedding=True, pp_split_loss=True)
    assert "流水线" in localize_error(sentence_of(err.value), "zh")
    with pytest.raises(SpecError):  # no pipeline: nothing to split
        trainfit.estimate("llama-3-70b", "h100-sxm", method="full", gpus=8, tp=8, zero=1, pp_split_embedding=True)
    with pytest.raises(SpecError, match="account_for"):  # data parallelism alone: refused, not ignored
        trainfit.estimate("llama-3-8b", "h100-sxm", method="full", gpus=8, zero=1, pp_split_loss=True)


def test_megatron_is_told_and_plan_keeps_it(run_cli):
    from test_generate_3d import _setup, megatron_argv, megatron_parser

    setup = _setup("qwen3-235b-a22b", 8, 32, "megatron", tp=2, pp=8, vpp=4, schedule="interleaved", ep=32, etp=1,
                   ga=32, zero=1, ckpt="none")
    setup.choice["strategy"].update(pp_split_embedding=True, pp_split_loss=True)
    args = megatron_parser().parse_args(megatron_argv(setup) + ["--data-path", "/d", "--save", "/o"])
    assert args.account_for_embedding_in_pipeline_split and args.account_for_loss_in_pipeline_split
    assert args.num_layers_per_virtual_pipeline_stage == (94 + 2) // (8 * 4)  # Megatron-LM counts them here too
    code, out, err = run_cli("plan", "--model", "qwen3-30b-a3b", "--method", "full", "--dataset-tokens", "2B",
                             "--gpu", "h100-sxm", "--provider", "aws", "--pp", "2", "--ep", "8", "--zero", "1",
                             "--pp-split-embedding", "--pp-split-loss", "--json")  # (48 + 2) / 2 = 25 per stage
    assert code == 0, err
    plan = json.loads(out)
    assert plan["recommendations"]
    assert all(r["strategy"]["pp_split_embedding"] and r["strategy"]["pp_split_loss"]
               for r in plan["recommendations"])
