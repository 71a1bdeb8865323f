"""`trainfit validate`: the accuracy line CI holds on the published development cases, the report's shape, the
memory-counter rule, and that no case — however malformed — crashes the run."""

import copy
import json
import random
from pathlib import Path

import pytest

from trainfit.catalog.efficiency import Efficiencies
from trainfit.units import GiB
from trainfit.validate import load_cases, predict_case, validate

ROOT = Path(__file__).resolve().parents[1]
DEV = str(ROOT / "data" / "validation" / "published_dev.jsonl")

# Targets of the accuracy issue on published_dev.jsonl with the shipped calibration, held here as CI limits.
# Peak memory is held over the cases whose measured peak is consistent with their stated setup (README
# "Accuracy": one published peak lies below the weights and optimizer states of its own setup and is listed
# under "excluded"; tests below check that rule).
TARGET_THROUGHPUT = 0.15
TARGET_MEMORY = 0.10
TARGET_PREDICTED = 0.85


@pytest.fixture(scope="module")
def dev_cases():
    return load_cases([DEV])


@pytest.fixture(scope="module")
def report(dev_cases):
    return validate(dev_cases, Efficiencies.default()).to_dict()


def test_ci_accuracy_limits_through_the_cli(run_cli):
    code, out, err = run_cli("validate", DEV, "--json", "--max-mape-throughput", str(TARGET_THROUGHPUT),
                             "--max-mape-memory", str(TARGET_MEMORY), "--min-predicted", str(TARGET_PREDICTED))
    doc = json.loads(out)
    assert code == 0, (err, doc["limits_failed"])
    assert doc["throughput"]["mape"] <= TARGET_THROUGHPUT
    assert doc["memory"]["mape"] <= TARGET_MEMORY
    assert doc["predicted"] >= TARGET_PREDICTED * doc["cases"]
    assert doc["oom"]["n"] >= 4 and doc["oom"]["correct"] == doc["oom"]["n"]  # every OOM case predicted as OOM


def test_report_has_every_promised_field(report):
    for key in ("cases", "predicted", "skipped", "throughput", "memory", "oom", "rows"):
        assert key in report
    for metric in ("throughput", "memory"):
        m = report[metric]
        assert {"n", "mape", "max_ape", "by_gpu", "by_method", "by_source"} <= set(m)
        assert 0 <= m["mape"] <= m["max_ape"]
        assert sum(g["n"] for g in m["by_gpu"].values()) == m["n"]
        assert sum(g["n"] for g in m["by_method"].values()) == m["n"]
    assert report["predicted"] + sum(report["skipped"].values()) == report["cases"]
    row = report["rows"][0]
    assert {"id", "predicted", "measured", "error"} <= set(row)


def test_mape_is_the_mean_of_the_rows(report):
    errs = [r["error"]["throughput"] for r in report["rows"] if "throughput" in r["error"]]
    assert len(errs) == report["throughput"]["n"]
    assert report["throughput"]["mape"] == pytest.approx(sum(errs) / len(errs), abs=1e-3)


def test_memory_counter_follows_memory_kind(dev_cases):
    case = next(c for c in dev_cases if (c["measured"] or {}).get("peak_memory_gib"))
    values = {}
    for kind in ("allocated", "reserved", "nvidia-smi"):
        c = copy.deepcopy(case)
        c["measured"]["memory_kind"] = kind
        values[kind] = validate([c], Efficiencies.default()).rows[0].predicted["peak_memory_gib"]
    assert values["allocated"] < values["reserved"] < values["nvidia-smi"]


def test_limits_exit_1(run_cli):
    code, _, err = run_cli("validate", DEV, "--max-mape-throughput", "0.01")
    assert code == 1 and "throughput MAPE" in err


def test_table_output(run_cli):
    code, out, _ = run_cli("validate", DEV, "--rows")
    assert code == 0
    assert "throughput" in out and "memory" in out and "OOM cases predicted" in out


def test_shipped_prior_is_worse_than_calibration(dev_cases, report):
    prior = validate(dev_cases, Efficiencies.shipped()).to_dict()
    assert report["throughput"]["mape"] < prior["throughput"]["mape"]
    assert report["memory"]["mape"] < prior["memory"]["mape"]


@pytest.mark.parametrize("argv,needle", [
    (["validate", "/nonexistent.jsonl"], "cannot read"),
    (["validate", DEV, "--max-mape-memory", "15"], "fraction"),
])
def test_bad_input_exits_2(run_cli, argv, needle):
    code, _, err = run_cli(*argv)
    assert code == 2 and needle in err and "Traceback" not in err


def test_not_json_names_the_line(run_cli, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a"}\n{oops\n')
    code, _, err = run_cli("validate", str(bad))
    assert code == 2 and "bad.jsonl:2" in err


MALFORMED = [
    {},
    {"id": "x"},
    {"id": "x", "measured": {"peak_memory_gib": 10}},
    {"id": "x", "model": {"hf_config": {"hidden_size": 64}}, "measured": {"step_time_s": 1}},
    {"id": "x", "hardware": {"gpu": "tpu-v5"}, "measured": {"step_time_s": 1}},
]


def test_malformed_cases_are_skipped_not_crashed():
    r = validate(MALFORMED, Efficiencies.default()).to_dict()
    assert r["predicted"] == 0 and sum(r["skipped"].values()) == len(MALFORMED)


def _mutations(case: dict, rng: random.Random) -> dict:
    c = copy.deepcopy(case)
    junk = [None, 0, -1, 3.5, "", "zzz", [], {}, 10**9, True]
    for _ in range(rng.randint(1, 4)):
        section = rng.choice(["model", "hardware", "training", "parallel", "measured"])
        if not isinstance(c.get(section), dict):
            c[section] = rng.choice(junk)
            continue
        target = c[section].get("hf_config") if section == "model" and rng.random() < 0.7 else c[section]
        if isinstance(target, dict) and target:
            target[rng.choice(sorted(target))] = rng.choice(junk)
    return c


def test_fuzzed_cases_never_crash(dev_cases):
    """Every case either predicts or is skipped with a counted reason, whatever its fields hold."""
    rng = random.Random(20261129)
    fuzzed = [_mutations(rng.choice(dev_cases), rng) for _ in range(400)]
    r = validate(fuzzed, Efficiencies.default()).to_dict()
    assert r["predicted"] + sum(r["skipped"].values()) == len(fuzzed)
    assert sum(r["skipped"].values()) > 0


def test_tensor_parallel_cases_are_predicted(dev_cases):
    """Issue 34: the TP / PP / CP cases are estimated (estimate/model_parallel.py), none skipped."""
    tp = [c for c in dev_cases if ((c.get("parallel") or {}).get("tp") or 1) > 1]
    assert tp
    r = validate(tp, Efficiencies.default()).to_dict()
    assert r["predicted"] == len(tp) and not r["skipped"]


def test_framework_defaults_reach_the_estimate(dev_cases):
    """A null param_dtype takes the framework's default (torchtune: bf16 weights, so no fp32 master copy)."""
    case = next(c for c in dev_cases if c["training"].get("framework") == "torchtune"
                and c["training"].get("param_dtype") is None and c["training"]["method"] == "full")
    est = predict_case(case, Efficiencies.default())
    assert est.training.param_dtype == "bf16"
    # LitGPT's QLoRA rows ran an old bitsandbytes that keeps frozen 4-bit Linears' inputs; torchtune's NF4 does not
    by_id = {c["id"]: c for c in dev_cases}
    old = predict_case(by_id["litgpt-hub-a10g-llama-2-7b-qlora"], Efficiencies.default())
    assert old.training.kbit_keeps_inputs and "activations/linear_in/kbit_frozen_inputs" in old.memory.detail
    tt = predict_case(by_id["torchtune-readme-llama3-8b-qlora-rtx4090-g1"], Efficiencies.default())
    assert not tt.training.kbit_keeps_inputs


def test_offloaded_activations_from_notes_and_stack(dev_cases):
    """torchtune's 'Activation offloading to CPU on' rows and Unsloth's default (offloaded) checkpointing keep the
    blocks' saved tensors in host memory. torchtune's README publishes the pair: Llama-3.2-3B full fine-tune, 23.1
    GiB active with optimizer-in-backward, 21.8 with offloading added; the model's difference is the 27 block inputs
    it no longer holds: 1.27 GiB against the measured 1.3 (within 5%). Each row was predicted within 1% while a
    torchtune logits prior of 0.3 stood in for its chunked output and loss; with those modelled from its code
    (estimate/memory_loss.py torchtune_logits_items, 2026-12-07) both rows are 3.7% low on the shipped values: an open
    residual (a candidate, not counted: the head's weight gradient summed out of place over its 8 chunk matmuls)."""
    by_id = {c["id"]: c for c in dev_cases}
    eff = Efficiencies.shipped()
    without = predict_case(by_id["torchtune-optflags-llama3.2-3b-optimizer-in-bwd"], eff)
    offload = predict_case(by_id["torchtune-optflags-llama3.2-3b-activation-offloading"], eff)
    assert offload.training.offload_activations and not without.training.offload_activations
    drop = (without.memory.allocated - offload.memory.allocated) / GiB
    assert drop == pytest.approx(23.1 - 21.8, rel=0.05)
    assert without.memory.allocated / GiB == pytest.approx(23.1, rel=0.04)
    assert offload.memory.allocated / GiB == pytest.approx(21.8, rel=0.04)
    unsloth = [predict_case(c, eff) for c in dev_cases if c["training"].get("framework") == "unsloth"]
    assert unsloth and all(e.training.offload_activations and e.training.grad_ckpt.value == "full" for e in unsloth)
    stated = copy.deepcopy(by_id["unsloth-nb-llama31-8b-alpaca"])
    stated["training"]["grad_ckpt"], stated["notes"] = "full", ""  # plain checkpointing stated: nothing offloaded
    assert not predict_case(stated, eff).training.offload_activations


def test_variable_length_runs_are_compared_on_memory_only(dev_cases):
    """Tokens per step of a variable-length run are unknown: its throughput is not scored, its peak memory is."""
    case = next(c for c in dev_cases if c["training"].get("fixed_length") is False
                and c["measured"].get("peak_memory_gib") and c["measured"].get("step_time_s"))
    row = validate([case], Efficiencies.default()).rows[0]
    assert "memory" in row.error and "throughput" not in row.error
    fixed = copy.deepcopy(case)
    fixed["training"]["fixed_length"] = True
    assert "throughput" in validate([fixed], Efficiencies.default(), keep_inconsistent=True).rows[0].error
    # read as packed at its 2048-token cap, an Unsloth notebook's step time needs more matmul FLOP/s than its GPU
    # has: its samples were shorter (the rule of test_speeds_above_the_gpus_peak_are_listed_not_averaged)
    assert "dense" in validate([fixed], Efficiencies.default()).rows[0].excluded["throughput"][1]


@pytest.mark.parametrize("case_id,features,check", [
    ("qwen1-readme-7b-loraemb-s1024", {"lora_saves_embeddings", "fused_qkv"},
     lambda t: t.modules_to_save == ("embed_tokens", "lm_head")),
    ("torchtune-readme-llama3-8b-full-rtx4090-g1", {"optimizer_in_backward", "paged_optimizer", "torch_compile"},
     lambda t: t.optimizer_in_backward and t.paged_optimizer and t.torch_compile),
    ("qwen1-readme-7b-lora-s512", {"fused_qkv"}, lambda t: not t.modules_to_save and not t.optimizer_in_backward),
])
def test_settings_stated_in_notes_reach_the_estimate(dev_cases, case_id, features, check):
    """Settings the schema has no field for are read from the notes' fixed wording and listed on the row."""
    case = next(c for c in dev_cases if c["id"] == case_id)
    est = predict_case(case, Efficiencies.default())
    assert check(est.training)
    row = validate([case], Efficiencies.default()).rows[0]
    assert set(row.from_notes) == features and row.to_dict()["from_notes"] == list(row.from_notes)


def test_notes_features_change_the_prediction(dev_cases):
    """The same case without its notes is predicted differently: the features are modelled, not just listed."""
    case = next(c for c in dev_cases if c["id"] == "qwen1-readme-7b-loraemb-s1024")
    bare = copy.deepcopy(case)
    bare["notes"] = ""
    eff = Efficiencies.default()
    assert predict_case(case, eff).memory.allocated > predict_case(bare, eff).memory.allocated + 5 * 2**30


@pytest.mark.parametrize("kwargs,features", [
    (dict(method="lora", modules_to_save="embed_tokens,lm_head"), {"lora_saves_embeddings"}),
    (dict(method="full", optimizer="adamw-8bit", optimizer_in_backward=True, paged_optimizer=True),
     {"optimizer_in_backward", "paged_optimizer"}),
    (dict(method="lora"), set()),
])
def test_bench_notes_read_back_as_the_settings_they_ran(kwargs, features):
    """A `trainfit bench` case states the settings the schema has no field for in the words validate reads, so
    validating our own measurements predicts the setup that ran."""
    from trainfit.api import estimate
    from trainfit.bench import validation_case
    from trainfit.validate import note_features

    est = estimate("tiny-llama", "a100-sxm4-80gb", seq_len=64, grad_accum=1, **kwargs)
    case = validation_case(est, "tiny-llama", {"tokens_per_s_per_gpu": 1000.0, "step_time_s": 0.1,
                                               "peak_memory_gib": 1.0}, {"date": "2026-11-29"}, "cuda", None, None)
    assert set(note_features(case)) == features
    back = predict_case(case, Efficiencies.default()).training
    assert back.modules_to_save == est.training.modules_to_save
    assert back.optimizer_in_backward == est.training.optimizer_in_backward
    assert back.paged_optimizer == est.training.paged_optimizer


def _floor_gib(case):
    from trainfit.units import GiB
    return predict_case(case, Efficiencies.default()).memory.resident_states / GiB


def test_inconsistent_peaks_are_listed_not_averaged(dev_cases, report):
    """Only measured peaks below the weights + optimizer states of their own stated setup (beyond a GB/GiB slip)
    leave the memory statistics; each stays in its row with its error and reason, and --keep-inconsistent counts
    it again."""
    by_id = {c["id"]: c for c in dev_cases}
    excluded = {e["id"] for e in report["excluded"] if e["metric"] == "memory"}
    assert excluded == {"litgpt-hub-a10g-phi-3-full"}  # 3.8B, AdamW, bf16-true on one GPU: 28 GiB of states
    for row in report["rows"]:
        case = by_id[row["id"]]
        meas = case["measured"].get("peak_memory_gib")
        if not meas or "memory" not in {**row["error"], **row["excluded"]}:
            continue
        below = meas * 2**30 / 1e9 < _floor_gib(case)
        assert below == ("memory" in row["excluded"]), row["id"]
        assert ("memory" in row["error"]) != below
    kept = validate(dev_cases, Efficiencies.default(), keep_inconsistent=True).to_dict()
    # only the power-limited speeds (another GPU, not an inconsistent measurement) stay excluded
    assert all("power limit" in e["reason"] for e in kept["excluded"])
    assert kept["memory"]["n"] == report["memory"]["n"] + len(excluded)
    assert kept["memory"]["mape"] > report["memory"]["mape"]


def _matmul_rate(case, est=None):
    """The tensor-core FLOP/s per GPU the case's measured speed implies (a causal model's attention at half its
    work), over the GPU's peak."""
    from trainfit.validate import _ceiling_peak, measured_values

    est = est or predict_case(case, Efficiencies.default())
    meas = measured_values(case)
    faster = (meas["tokens_per_s_per_gpu"] / est.tokens_per_s_per_gpu if meas.get("tokens_per_s_per_gpu")
              else est.step_time_s / meas["step_time_s"])
    return (est.flops.matmul_floor * est.training.grad_accum / est.step_time_s * faster / _ceiling_peak(est)[0]
            / est.strategy.model_parallel)  # a model-parallel layout's GPUs share a data-parallel rank's FLOPs


A6000_ROWS = ("torchtune-readme-llama3-8b-full-rtxa6000-g1", "torchtune-readme-llama3-8b-lora-rtxa6000-g1")


def _checkpointed(case):
    """A copy of a case with full activation checkpointing (what torchtune's recipe configs state for the A6000
    rows; the rows say it was off, see below)."""
    out = copy.deepcopy(case)
    out["training"]["grad_ckpt"] = "full"
    return out


def test_speeds_above_the_gpus_peak_are_listed_not_averaged(dev_cases, report):
    """A measured speed whose matmuls would need more than the GPU's dense peak leaves the throughput statistics,
    listed with its reason. torchtune's README rows on one RTX A6000, read with the recipe config's activation
    checkpointing: Llama-3-8B LoRA at 4699 tokens/s would need 217 TFLOP/s against the card's 154.8, the full
    fine-tune at 2579 tokens/s 98% of the peak in its Linears alone and 102% with the causal attention's minimum
    (half the s² work, no FlashAttention recomputation). Those rows ran without checkpointing (their memory is twice
    the same table's RTX 4090 rows of the same recipe and batch; data/validation/published_dev.jsonl notes), so
    as published they are compared; every row compared on throughput implies at most the peak."""
    by_id = {c["id"]: c for c in dev_cases}
    fast = {e["id"] for e in report["excluded"] if e["metric"] == "throughput" and "power limit" not in e["reason"]}
    assert not fast
    assert all(by_id[i]["training"]["grad_ckpt"] == "none" for i in A6000_ROWS)
    cases = [_checkpointed(by_id[i]) for i in A6000_ROWS]
    checked = validate(cases, Efficiencies.default()).to_dict()
    fast = {e["id"]: e["reason"] for e in checked["excluded"] if e["metric"] == "throughput"}
    assert sorted(fast) == sorted(A6000_ROWS) and checked["throughput"]["n"] == 0
    for reason in fast.values():
        assert "154.8" in reason and "cannot be one GPU's" in reason and "causal attention at half" in reason
    full = predict_case(cases[0], Efficiencies.default())
    assert 1.0 < _matmul_rate(cases[0], full) < 1.05
    # without the attention term the same speed would sit just under the peak: the attention's half is what
    # makes the difference, and it is a lower bound
    linears = full.flops.total - full.flops.attention
    assert linears < full.flops.matmul_floor < full.flops.total
    for row in report["rows"]:
        if "throughput" in row["error"]:
            assert _matmul_rate(by_id[row["id"]]) <= 1.0, row["id"]
    assert {i for i in A6000_ROWS if "throughput" in next(r for r in report["rows"] if r["id"] == i)["error"]} \
        == set(A6000_ROWS)
    kept = validate(cases, Efficiencies.default(), keep_inconsistent=True).to_dict()
    assert kept["throughput"]["n"] == 2


def test_the_peak_floor_counts_half_a_causal_models_attention_and_none_of_an_encoders():
    """StepFlops.matmul_floor: total minus half the s² work for a decoder (a causal kernel skips at most the upper
    triangle), minus all of it for an encoder (its kernel may skip padding)."""
    from trainfit.estimate.flops import StepFlops

    f = StepFlops(forward=10.0, input_grad=8.0, weight_grad=6.0, recompute=0.0, attention_forward=2.0,
                  model_flops=24.0, attention=6.0)
    assert f.matmul_floor == 24.0 - 3.0
    assert StepFlops(10.0, 8.0, 6.0, 0.0, 2.0, 24.0, 6.0, causal=False).matmul_floor == 24.0 - 6.0
    # what a model's step is built with: decoders causal, encoders not
    from trainfit.catalog import resolve_model
    from trainfit.estimate.flops import step_flops
    from trainfit.estimate.trainable import split_params
    from trainfit.spec.training import Task, TrainingSpec

    for name, task, causal in (("llama-2-7b", Task.PRETRAIN, True), ("bert-base-uncased", Task.CLASSIFICATION, False)):
        m, t = resolve_model(name), TrainingSpec(seq_len=512, task=task)
        assert step_flops(m, t, split_params(m, t)).causal is causal, name


def test_speeds_of_power_limited_gpus_are_listed_not_averaged(dev_cases, report):
    """torchtitan's Grand Teton H100s ran at a 500 W power limit (benchmarks/llama3_h100_202412_torchtitan.md), not
    the 700 W the catalog's H100 SXM peaks are for: their speeds leave the throughput and MFU statistics with the
    reason, their memory stays compared; without the note, or with a limit at the TDP, the speed is compared."""
    from trainfit.validate import compare, note_power_limit_w

    limited = [c for c in dev_cases if note_power_limit_w(c) == 500.0]
    assert limited and all(c["hardware"]["gpu"] == "h100-sxm" for c in limited)
    rows = {r["id"]: r for r in report["rows"]}
    compared = [c for c in limited if c["id"] in rows]
    assert {c["id"] for c in compared} >= {"torchtitan-2412-llama3.1-8b-g8-fsdp",
                                           "torchtitan-2412-llama3.1-8b-g128-fsdp"}
    for c in compared:
        row = rows[c["id"]]
        assert "throughput" not in row["error"] and "500 W power limit" in row["excluded"]["throughput"]["reason"]
        if c["measured"].get("peak_memory_gib"):
            assert "memory" in row["error"]
    case = copy.deepcopy(compared[0])
    est = predict_case(case, Efficiencies.default())
    for notes, compared_again in ((case["notes"].replace("500W power limit", "500W"), True),
                                  (case["notes"].replace("500W power limit", "700W power limit"), True),
                                  (case["notes"], False)):
        row = compare({**case, "notes": notes}, est)
        assert ("throughput" in row.error) == compared_again, notes[:80]


def test_a_speed_just_under_the_peak_is_compared(dev_cases):
    case = _checkpointed(next(c for c in dev_cases if c["id"] == "torchtune-readme-llama3-8b-lora-rtxa6000-g1"))
    rate = _matmul_rate(case)
    assert rate > 1.3
    case["measured"]["tokens_per_s_per_gpu"] *= 0.99 / rate
    row = validate([case], Efficiencies.default()).rows[0]
    assert "throughput" in row.error and not row.excluded
    case["measured"]["tokens_per_s_per_gpu"] *= 1.02 / 0.99
    row = validate([case], Efficiencies.default()).rows[0]
    assert "throughput" not in row.error and "dense bf16 peak" in row.excluded["throughput"][1]


def test_a_peak_below_the_resident_states_is_excluded(dev_cases):
    case = copy.deepcopy(next(c for c in dev_cases if c["id"] == "qwen1-readme-7b-lora-s512"))
    floor = _floor_gib(case)
    case["measured"]["peak_memory_gib"] = floor * 0.99  # a GB/GiB slip could explain it: still compared
    row = validate([case], Efficiencies.default()).rows[0]
    assert "memory" in row.error and not row.excluded
    case["measured"]["peak_memory_gib"] = floor * 0.9
    row = validate([case], Efficiencies.default()).rows[0]
    assert "memory" not in row.error and "below" in row.excluded["memory"][1]
    assert row.excluded["memory"][0] == pytest.approx(abs(row.predicted["peak_memory_gib"] / (floor * 0.9) - 1),
                                                      abs=1e-3)


def test_a_cuda_context_the_source_measured_is_used_for_its_case(dev_cases):
    """The Hugging Face docs measured their CUDA context (pynvml after one tiny tensor: 'GPU memory occupied: 1343 MB',
    model_memory_anatomy), and their cases count memory as nvidia-smi sees it: the case's own context replaces
    efficiency.yaml's for that case only; what the caching allocator holds is unchanged."""
    case = next(c for c in dev_cases if c["id"] == "hf-docs-v100-bert-large-bs4")
    assert "includes ~1.3 GB CUDA context" in case["notes"]
    eff = Efficiencies.default()
    stated = predict_case(case, eff).memory
    plain = copy.deepcopy(case)
    plain["notes"] = plain["notes"].replace("includes ~1.3 GB CUDA context", "includes the CUDA context")
    default = predict_case(plain, eff).memory
    assert stated.reserved == default.reserved and stated.allocated == default.allocated
    expected = (1.3 - eff.for_framework(None).for_gpu(predict_case(case, eff).gpu)("cuda_context_gib")) * GiB
    assert stated.device - default.device == pytest.approx(expected, rel=1e-6)


def test_assumptions_name_the_adapter_dtype_and_the_code_a_stack_runs(dev_cases):
    """A pure 16-bit stack's LoRA adapters are bf16, not PEFT's fp32; a LitGPT job says it is estimated as LitGPT's
    code; a Hugging Face Trainer job keeps PEFT's fp32 adapters and transformers' code."""
    by_id = {c["id"]: c for c in dev_cases}
    lit = predict_case(by_id["litgpt-hub-a10g-llama-2-7b-lora"], Efficiencies.default()).assumptions
    assert any("adapters in bf16" in a for a in lit) and any(a.startswith("LitGPT's own model") for a in lit)
    hf = predict_case(by_id["qwen1-readme-7b-lora-s2048"], Efficiencies.default()).assumptions
    assert any("adapters in fp32 (PEFT default)" in a for a in hf) and not any("LitGPT" in a for a in hf)


def test_qwen_v1_projects_qkv_with_one_linear(dev_cases):
    """Every Qwen README case names Qwen v1 (HF model_type 'qwen'), whose attention has one c_attn Linear for q, k
    and v: the case is modelled with fused_qkv (one LoRA adapter, one module for ZeRO-3 to fetch); no other case."""
    seen = 0
    for case in dev_cases:
        try:
            m = predict_case(case, Efficiencies.default()).model
        except Exception:
            continue
        qwen1 = case["id"].startswith("qwen1-readme")
        seen += qwen1
        if qwen1:
            assert m.fused_qkv
        elif (case["model"]["hf_config"] or {}).get("model_type") in ("llama", "qwen2", "mistral"):
            assert not m.fused_qkv
    assert seen == 57


def test_source_setups_fill_only_what_a_case_leaves_null(dev_cases):
    """source_setups.yaml: how the Qwen README's runs were launched, from its own text and scripts. The 1.8B
    full-parameter rows (zero_stage null) run ZeRO-3 (finetune_ds.sh); the 7B rows state ZeRO-3 themselves and list
    nothing; the two-node LoRA rows run ZeRO-2 (finetune_lora_ds.sh); LoRA and Q-LoRA take finetune.py's dropout 0.05;
    a stated value is never overridden, and other sources are untouched."""
    from trainfit.validate import source_setups

    by_id = {c["id"]: c for c in dev_cases}
    eff = Efficiencies.default()

    def row(case):
        return validate([case], eff).rows[0]

    full = by_id["qwen1-readme-1.8b-full-parameter-s256"]
    assert predict_case(full, eff).strategy.zero_stage == 3
    assert row(full).from_source == ("qwen_full_parameter_zero3",)
    assert row(by_id["qwen1-readme-7b-full-parameter-s256"]).from_source == ()
    multi = by_id["qwen1-readme-7b-loramultinode-s1024"]
    assert predict_case(multi, eff).strategy.zero_stage == 2
    assert set(row(multi).from_source) == {"qwen_multinode_lora_zero2", "qwen_lora_dropout"}
    single = by_id["qwen1-readme-7b-lora-s512"]
    assert predict_case(single, eff).strategy.zero_stage == 0
    assert predict_case(single, eff).training.lora_dropout == 0.05
    stated = copy.deepcopy(full)
    stated["parallel"]["zero_stage"] = 0
    assert predict_case(stated, eff).strategy.zero_stage == 0 and row(stated).from_source == ()
    other = [c for c in dev_cases if not c["id"].startswith("qwen1-readme")]
    titan = [c for c in other if c["source"].startswith("github.com/pytorch/torchtitan benchmarks/llama3_h100_202412")]
    assert titan and all([e["name"] for e in source_setups(c)] == ["torchtitan_202412_pp_microbatches"] for c in titan)
    other = [c for c in other if c not in titan]
    assert other and not any(source_setups(c) for c in other)
    assert all(predict_case(c, eff).training.lora_dropout == 0.0 for c in other[:40]
               if c["training"].get("framework") != "litgpt" and _predicts(c, eff))


def _predicts(case, eff):
    try:
        predict_case(case, eff)
        return True
    except Exception:
        return False


def test_a_source_setup_key_nothing_reads_is_refused(monkeypatch):
    """An entry of source_setups.yaml that sets a key the reader does not apply would be listed under from_source
    while changing nothing: the catalog refuses it."""
    import trainfit.validate as v
    from trainfit.errors import CatalogError

    v._source_setup_entries.cache_clear()
    real = v._source_setup_entries.__wrapped__
    monkeypatch.setattr("trainfit.catalog._io.read_yaml",
                        lambda name: {"sources": [{"name": "x", "source": "s", "training": {"seq_len": 1}}]})
    with pytest.raises(CatalogError, match="seq_len"):
        real()
    monkeypatch.undo()
    v._source_setup_entries.cache_clear()
    assert v._source_setup_entries()  # the shipped file passes


def test_a_case_names_the_instance_it_ran_on():
    """hardware.instance: the catalog instance's network between nodes instead of the published runs' default fabric
    (Ray's Llama-2 template on 16 x g5.xlarge, one A10G each, "up to 10" Gbit/s: ZeRO-3's gathers cross that network);
    an instance the catalog lacks, or one with another GPU, is a skip with its reason."""
    from trainfit.validate import Skip

    path = Path(__file__).resolve().parents[1] / "data" / "validation" / "a10_dev.jsonl"
    case = next(json.loads(x) for x in path.read_text().splitlines() if "ray-template-16xa10g-llama-2-7b" in x)
    assert case["hardware"]["instance"] == "g5.xlarge"
    named = predict_case(case, Efficiencies.default())
    assert named.cluster.inter_bytes_per_s == pytest.approx(10e9 / 8)
    bare = copy.deepcopy(case)
    del bare["hardware"]["instance"]
    default = predict_case(bare, Efficiencies.default())
    assert default.cluster.inter_bytes_per_s > 10 * named.cluster.inter_bytes_per_s
    assert named.step_time_s > 2 * default.step_time_s  # the gathers are network-bound at 10 Gbit/s
    for wrong in ("g5.nothing", "p4d.24xlarge"):
        bad = copy.deepcopy(case)
        bad["hardware"]["instance"] = wrong
        with pytest.raises(Skip):
            predict_case(bad, Efficiencies.default())


def test_runs_that_trained_are_counted_against_a_predicted_out_of_memory():
    """A measured speed means the run trained, so it fitted: validate counts how many such runs the estimate
    predicts to fit and names the others (`ran`), and prints both (en / zh). llm-foundry's MPT runs use flash-attn's
    fused cross-entropy (frameworks.yaml composer loss_impl fused_xentropy, from its code): with transformers' fp32
    upcast loss 57 of its 151 table rows were predicted out of memory; none is now."""
    import os

    from trainfit.catalog.efficiency import Efficiencies
    from trainfit.validate import load_cases, validate

    root = os.path.join(os.path.dirname(__file__), "..")
    cases = [c for c in load_cases([os.path.join(root, "data/validation/published_dev.jsonl")])
             if (c.get("training") or {}).get("framework") == "composer"]
    ran = validate(cases, Efficiencies.default()).to_dict()["ran"]
    assert ran["n"] == 151 and ran["fit"] == 151 and ran["predicted_oom"] == []
    forced = [{**c, "training": {**c["training"], "framework": "hf-trainer"}} for c in cases]
    hf = validate(forced, Efficiencies.default()).to_dict()["ran"]
    assert hf["fit"] < 120 and len(hf["predicted_oom"]) == hf["n"] - hf["fit"]


def test_fused_cross_entropy_keeps_the_16_bit_logits_and_their_gradient():
    """flash-attn's fused cross-entropy (memory_loss.fused_xentropy_items): the logits and one fp32 log-sum-exp per
    token saved, a new 16-bit gradient in backward: 4 bytes per vocabulary entry and token at the loss's peak, where
    transformers' upcast loss keeps 12."""
    from trainfit.api import training_spec
    from trainfit.catalog import get_model
    from trainfit.estimate.memory import Regime
    from trainfit.estimate.memory_loss import fused_xentropy_items, logits_bytes

    m = get_model("llama-3-8b").spec()
    t = training_spec(method="full", seq_len=1024, micro_batch=2)
    r = Regime(act=2, weight=2, autocast=True, adapter=2, kbit_upcast=False, kbit_keeps_inputs=False, litgpt=False,
               lora_dropout=False)
    forward, start, head = fused_xentropy_items(m, t, r)
    tokens = 2 * 1024
    assert sum(start.values()) == pytest.approx(4 * m.vocab * tokens + 4 * tokens)
    assert sum(forward.values()) == pytest.approx(2 * m.vocab * tokens + 4 * tokens)
    assert head == {"logits/grad": 2.0 * m.vocab * tokens}
    assert logits_bytes(m, t, r) == 12 * m.vocab * tokens
