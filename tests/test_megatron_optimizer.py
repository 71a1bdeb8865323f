"""Megatron-Core's precision-aware optimizer (issue 34; --precision-aware-optimizer): bf16 main gradients and Adam
moments beside fp32 master weights, as NVIDIA's DeepSeek-V3 recipes run it. Priced per parameter by
layout.optimizer_bytes (from Megatron-LM core_v0.16.1's optimizer code), refused where Megatron cannot run it
(en / zh), written as Megatron-LM's own flags and parsed by its parser."""

import json
import os

import pytest

import trainfit
from trainfit.errors import SpecError, sentence_of
from trainfit.i18n.errors import localize_error

ROOT = os.path.join(os.path.dirname(__file__), "..")
JOB = dict(method="full", seq_len=4096, micro_batch=1, grad_accum=8, zero=1, gpus=8, nodes=2, pp=2, ep=8)


def _parts(e):
    return e.memory.phases[0].components[0]


@pytest.mark.parametrize("precision, master", [("bf16", 2.0), ("fp8", 4.0)])
def test_gradients_and_states_take_the_bytes_megatron_keeps(precision, master):
    """Gradients 2 bytes instead of 4; states master + 2 + 2 instead of 12, the master 2 bytes (Transformer
    Engine's remainders of the bf16 weight) in bf16 and 4 under fp8 current scaling (Megatron's own fp32 copy)."""
    plain = trainfit.estimate("qwen3-30b-a3b", "h100-sxm", precision=precision, **JOB)
    aware = trainfit.estimate("qwen3-30b-a3b", "h100-sxm", precision=precision, precision_aware_optimizer=True, **JOB)
    assert _parts(aware)["gradients/main_grads"] == pytest.approx(_parts(plain)["gradients/main_grads"] / 2)
    assert _parts(aware)["optimizer/states"] == pytest.approx(_parts(plain)["optimizer/states"] * (master + 4) / 12)
    assert _parts(aware)["weights/params"] == _parts(plain)["weights/params"]
    assert aware.time.parts["communication/dp"] < plain.time.parts["communication/dp"]  # bf16 reduce-scatter


@pytest.mark.parametrize("layout", [dict(gpus=8, zero=1), dict(gpus=8, nodes=2, pp=2, ep=8, zero=0),
                                    dict(gpus=8, nodes=2, ep=8, fsdp="full_shard")])
def test_it_needs_megatrons_distributed_optimizer_on_a_model_parallel_layout(layout):
    with pytest.raises(SpecError, match="--precision-aware-optimizer") as err:
        trainfit.estimate("qwen3-30b-a3b", "h100-sxm", method="full", seq_len=4096, grad_accum=8,
                          precision_aware_optimizer=True, **layout)
    assert "分布式优化器" in localize_error(sentence_of(err.value), "zh")


def test_the_deepseek_v3_recipe_fits_the_h100s_it_ran_on():
    """Megatron-Bridge's DeepSeek-V3 run on 1024 H100 (80 GB), with its recipe's recompute modules (mla_up_proj,
    mlp), pipeline layout and this optimizer, fits; the optimizer's bf16 gradients and moments take over 5 GiB off
    its first stage. (Until its multi-latent attention's parameters were read from its Linears, 2026-12-07, the
    stage held 0.5e9 parameters a block too many and did not fit without the optimizer.)"""
    from trainfit.catalog.efficiency import Efficiencies
    from trainfit.validate import load_cases, predict_case

    case = next(c for c in load_cases([os.path.join(ROOT, "data/validation/parallel_dev.jsonl")])
                if c["id"] == "mbridge-2509-h100-deepseek-v3-g1024-dropless")
    assert case["parallel"]["precision_aware_optimizer"] is True
    with_it = predict_case(case, Efficiencies.default())
    assert with_it.fits
    without = predict_case({**case, "parallel": {**case["parallel"], "precision_aware_optimizer": False}},
                           Efficiencies.default())
    assert without.memory.device - with_it.memory.device > 5 * 2 ** 30


def test_the_flag_reaches_megatrons_parser_and_the_cli(run_cli):
    from test_generate_3d import _setup, megatron_argv, megatron_parser

    setup = _setup("qwen3-30b-a3b", 8, 2, "megatron", pp=2, ep=8, ga=4, zero=1, ckpt="none")
    setup.choice["strategy"]["precision_aware_optimizer"] = True
    args = megatron_parser().parse_args(megatron_argv(setup) + ["--data-path", "/d", "--save", "/o"])
    assert args.use_precision_aware_optimizer and args.use_distributed_optimizer
    assert (args.main_grads_dtype, args.exp_avg_dtype, args.exp_avg_sq_dtype) == ("bf16", "bf16", "bf16")
    code, out, err = run_cli("estimate", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--gpus", "8", "--nodes",
                             "2", "--pp", "2", "--ep", "8", "--zero", "1", "--grad-accum", "8",
                             "--precision-aware-optimizer", "--json")
    assert code == 0, err
    assert json.loads(out)["config"]["precision_aware_optimizer"] is True


@pytest.mark.parametrize("flags, key", [(["--precision-aware-optimizer"], "precision_aware_optimizer"),
                                        (["--ep-overlap", "--vpp", "2", "--pp-schedule", "interleaved"],
                                         "ep_overlap")])
def test_plan_keeps_the_megatron_switches_it_is_given(run_cli, flags, key):
    """Found 2026-12-07: plan dropped a pinned --ep-overlap (and would have dropped --precision-aware-optimizer):
    its layouts came back without it; with it kept, a micro-batch whose estimate the EP overlap's rules refuse
    (full recomputation) crashed the search (exit 70) where it is now a counted reason."""
    code, out, err = run_cli("plan", "--model", "qwen3-30b-a3b", "--method", "full", "--dataset-tokens", "2B",
                             "--gpu", "h100-sxm", "--ep", "8", "--pp", "2", "--zero", "1", "--provider", "aws",
                             *flags, "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["recommendations"] and all(r["strategy"][key] is True for r in plan["recommendations"])
    assert all(r["strategy"]["engine"] == "megatron" for r in plan["recommendations"])


def test_a_bf16_gradient_buffer_halves_the_gradients_and_their_sync():
    """--grad-reduce-bf16 (Megatron-Core's grad_reduce_in_fp32 off, as Megatron-Bridge's performance configs run):
    the gradient buffer in the parameters' 2 bytes (distributed_data_parallel.py L147), the states untouched, the
    data-parallel reduce on half the bytes; written as Megatron-LM's --grad-reduce-in-bf16."""
    from test_generate_3d import _setup, megatron_argv, megatron_parser

    plain = trainfit.estimate("qwen3-30b-a3b", "h100-sxm", **JOB)
    bf16 = trainfit.estimate("qwen3-30b-a3b", "h100-sxm", grad_reduce_bf16=True, **JOB)
    assert _parts(bf16)["gradients/main_grads"] == pytest.approx(_parts(plain)["gradients/main_grads"] / 2)
    assert _parts(bf16)["optimizer/states"] == _parts(plain)["optimizer/states"]
    assert bf16.time.parts["communication/dp"] < plain.time.parts["communication/dp"]
    with pytest.raises(SpecError, match="--grad-reduce-bf16"):
        trainfit.estimate("qwen3-30b-a3b", "h100-sxm", method="full", gpus=8, zero=1, grad_reduce_bf16=True)
    setup = _setup("qwen3-30b-a3b", 8, 2, "megatron", pp=2, ep=8, ga=4, zero=1, ckpt="none")
    setup.choice["strategy"]["grad_reduce_bf16"] = True
    args = megatron_parser().parse_args(megatron_argv(setup) + ["--data-path", "/d"])
    assert args.grad_reduce_in_bf16


def test_megatron_bridge_model_parallel_runs_reduce_in_bf16_from_their_source():
    """source_setups.yaml megatron_bridge_grad_reduce_bf16 applies to the source's model-parallel runs (not its FSDP
    one, not where a case states the field)."""
    from trainfit.validate import load_cases, source_setups

    cases = {c["id"]: c for c in load_cases([os.path.join(ROOT, "data/validation/parallel_dev.jsonl")])}
    names = lambda cid: [e["name"] for e in source_setups(cases[cid])]  # noqa: E731
    assert "megatron_bridge_grad_reduce_bf16" in names("mbridge-2511-h100-llama31-405b-g1024-gbs512")
    assert "megatron_bridge_grad_reduce_bf16" not in names("mbridge-2511-h100-llama3-8b-g8-fsdp")
    assert "megatron_bridge_grad_reduce_bf16" not in names("mbridge-2509-h100-deepseek-v3-g1024-dropless")


def test_nemo_2407_gpt3_and_llama_pretraining_syncs_gradients_in_bf16_from_its_launcher():
    """source_setups.yaml nemo_2407_grad_sync_bf16 (NeMo-Framework-Launcher 24.07's FP8 examples of GPT-3 and Llama
    set grad_sync_dtype=bf16): their model-parallel pretraining rows, not Nemotron's, not the fine-tuning table's."""
    from trainfit.validate import load_cases, source_setups

    cases = {c["id"]: c for c in load_cases([os.path.join(ROOT, "data/validation/parallel_dev.jsonl")])}
    names = lambda cid: [e["name"] for e in source_setups(cases[cid])]  # noqa: E731
    for cid in ("nemo-2407-h100-fp8-gpt3-20b-g64", "nemo-2407-h100-fp8-llama3-70b-g64"):
        assert "nemo_2407_grad_sync_bf16" in names(cid)
    for cid in ("nemo-2407-h100-fp8-nemotron-22b-g64", "nemo-2407-h100-fp8-sft-llama2-70b-g16",
                "nemo-2407-h100-fp8-llama2-7b-g8"):  # Nemotron, the SFT table, data parallelism alone
        assert "nemo_2407_grad_sync_bf16" not in names(cid)


def test_every_megatron_bridge_model_parallel_run_is_predicted_to_fit():
    """Each ran on 80 GB H100s: with its recipe's recompute modules, precision-aware optimizer, pipeline split and
    bf16 gradient buffer, none is predicted out of memory (validate's `ran`); three NeMo 24.07 runs still are (Nemotron
    8B and 340B, the Llama 2 70B SFT: six before their launcher's bf16 gradient sync was read)."""
    from trainfit.catalog.efficiency import Efficiencies
    from trainfit.validate import is_model_parallel_case, load_cases, validate

    cases = load_cases([os.path.join(ROOT, "data/validation/parallel_dev.jsonl")])
    ran = validate(cases, Efficiencies.default()).to_dict()["ran"]
    mbridge = {c["id"] for c in cases if c["id"].startswith("mbridge-") and is_model_parallel_case(c)}
    assert len(mbridge) == 12 and not mbridge & set(ran["predicted_oom"])
    assert ran["fit"] >= 29 and len([i for i in ran["predicted_oom"] if i.startswith("nemo-2407")]) <= 3
