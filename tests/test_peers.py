"""benchmarks/peers.py: trainfit next to DeepSpeed's, accelerate's and llm-analysis's estimates on the same cases.

The script runs as a user runs it (a subprocess, `--limit 40 --json`) on a sample of the published cases that has
both throughput and memory measurements, full and LoRA/QLoRA training, and a case trainfit cannot read; what it
reports is checked against counts made here from the JSONL and against `trainfit validate` itself. The restated
DeepSpeed / accelerate formulas are checked against the installed packages where they import.
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from trainfit.catalog.efficiency import Efficiencies
from trainfit.validate import load_cases, validate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "peers.py")
DEV = os.path.join(ROOT, "data", "validation", "published_dev.jsonl")
LIMIT = 40
TOOLS = ("trainfit", "deepspeed", "accelerate", "llm-analysis")
PEERS = TOOLS[1:]


def _has_memory(case):
    return bool((case.get("measured") or {}).get("peak_memory_gib"))


def _has_throughput(case):
    meas = case.get("measured") or {}
    if (case.get("training") or {}).get("fixed_length", True) is False:
        return False
    return bool(meas.get("tokens_per_s_per_gpu") or meas.get("step_time_s"))


def _sample():
    """45 cases: 10 throughput-only ones from the top of the file, 29 with a measured peak memory (full, LoRA and
    QLoRA), one memory case with tensor parallelism (trainfit cannot read it), then 5 that --limit 40 must drop."""
    cases = load_cases([DEV])
    memory = [c for c in cases if _has_memory(c)]
    tp = next(c for c in memory if ((c.get("parallel") or {}).get("tp") or 1) > 1)
    head = [c for c in cases[:10] if not _has_memory(c)]
    extra = [c for c in cases if c not in head and c not in memory][:5]
    return head + [c for c in memory if c is not tp][:29] + [tp] + extra


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    cases = _sample()
    path = tmp_path_factory.mktemp("peers") / "sample.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return path, cases[:LIMIT]


@pytest.fixture(scope="module")
def doc(sample):
    path, _ = sample
    proc = subprocess.run([sys.executable, SCRIPT, str(path), "--limit", str(LIMIT), "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_every_tool_reported_on_the_cases_considered(doc, sample):
    _, cases = sample
    assert doc["cases"] == LIMIT
    assert set(TOOLS) <= set(doc["tools"])
    expected = {"memory": sum(map(_has_memory, cases)), "throughput": sum(map(_has_throughput, cases))}
    assert doc["considered"] == expected
    assert expected["memory"] == 30 and expected["throughput"] >= 10
    for name in TOOLS:
        for metric in ("memory", "throughput"):
            entry = doc["tools"][name][metric]
            assert entry["n"] + sum(entry["skipped"].values()) == expected[metric], (name, metric, entry)
            assert entry["n"] == sum(1 for r in doc["rows"] if "ape" in r[name].get(metric, {}))


def test_scopes_and_reasons(doc, sample):
    _, cases = sample
    tools = doc["tools"]
    adapters = sum(1 for c in cases if _has_memory(c) and c["training"]["method"] in ("lora", "qlora"))
    assert adapters >= 5
    assert tools["trainfit"]["memory"]["n"] > 0 and tools["trainfit"]["throughput"]["n"] > 0
    for peer in ("deepspeed", "accelerate"):
        assert tools[peer]["memory"]["n"] > 0
        assert tools[peer]["memory"]["skipped"]["LoRA/QLoRA: estimator models full training only"] == adapters
    for r in doc["rows"]:  # a case trainfit's reader cannot read is skipped by the peers with trainfit's reason
        reason = r["trainfit"].get("memory", {}).get("skip")
        method = next(c for c in cases if c["id"] == r["id"])["training"]["method"]
        if reason and method == "full":
            for peer in ("deepspeed", "accelerate"):
                assert r[peer]["memory"] == {"skip": f"case not turned into specs: {reason}"}
        assert tools[peer]["throughput"] == {"n": 0, "mape": None, "max_ape": None, "worst_case": None,
                                             "skipped": {"throughput: not estimated by this tool":
                                                         doc["considered"]["throughput"]}}
    llma = tools["llm-analysis"]
    if llma["available"]:
        assert llma["memory"]["n"] > 0 and llma["throughput"]["n"] > 0
        assert llma["defaults_used"]["flops_efficiency"] is not None
    else:
        for metric in ("memory", "throughput"):
            assert llma[metric]["n"] == 0
            assert all(r.startswith("not available: ") for r in llma[metric]["skipped"])


def test_trainfit_numbers_are_validates(doc, sample):
    _, cases = sample
    report = validate(cases, Efficiencies.default()).to_dict()
    for metric in ("memory", "throughput"):
        ours, theirs = doc["tools"]["trainfit"][metric], report[metric]
        assert (ours["n"], ours["mape"], ours["max_ape"]) == (theirs["n"], theirs["mape"], theirs["max_ape"])


def test_errors_and_head_to_head(doc):
    rows = {r["id"]: r for r in doc["rows"]}
    for name in TOOLS:
        for metric in ("memory", "throughput"):
            entry = doc["tools"][name][metric]
            apes = [r[name][metric]["ape"] for r in rows.values() if "ape" in r[name].get(metric, {})]
            if entry["n"]:
                assert entry["mape"] == pytest.approx(sum(apes) / len(apes), abs=1e-3)
                assert rows[entry["worst_case"]][name][metric]["ape"] == pytest.approx(entry["max_ape"], abs=1e-4)
    for r in rows.values():  # an error is |pred - meas| / meas against the measured number
        for name in PEERS:
            o = r[name].get("memory", {})
            if "ape" in o:
                meas = r["measured"]["peak_memory_gib"]
                assert o["ape"] == pytest.approx(abs(o["pred"] - meas) / meas, abs=1e-3)
    for peer in PEERS:
        for metric in ("memory", "throughput"):
            h = doc["head_to_head"][peer][metric]
            assert h["n"] <= doc["tools"]["trainfit"][metric]["n"]
            assert h["n"] <= doc["tools"][peer][metric]["n"]
            both = [r for r in rows.values()
                    if "ape" in r["trainfit"].get(metric, {}) and "ape" in r[peer].get(metric, {})]
            assert h["n"] == len(both)
            if both:
                assert h["peer_mape"] == pytest.approx(sum(r[peer][metric]["ape"] for r in both) / len(both),
                                                       abs=1e-3)
    assert doc["head_to_head"]["deepspeed"]["memory"]["n"] > 0


def test_table_runs():
    proc = subprocess.run([sys.executable, SCRIPT, "--limit", "25"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "$ python benchmarks/peers.py --limit 25"
    assert lines[1].startswith("25 cases from data/validation/published_dev.jsonl")
    assert "Head to head" in proc.stdout and "llm-analysis" in proc.stdout


def _load_peers():
    spec = importlib.util.spec_from_file_location("peers_bench", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("params,largest", [(6_738_415_616, 131_072_000), (124_439_808, 38_597_376),
                                             (70_553_706_496, 1_050_673_152)])
def test_peer_arithmetic_matches_installed_packages(params, largest):
    peers = _load_peers()
    z2 = pytest.importorskip("deepspeed.runtime.zero.stage_1_and_2").estimate_zero2_model_states_mem_needs
    z3 = pytest.importorskip("deepspeed.runtime.zero.stage3").estimate_zero3_model_states_mem_needs
    for gpus, nodes in ((1, 1), (8, 1), (8, 4)):
        for off in (False, True):
            kw = dict(num_gpus_per_node=gpus, num_nodes=nodes, cpu_offload=off)
            assert peers.deepspeed_gpu_bytes(2, params, **kw) == z2(params, **kw)[1]
            for offp in (False, True):
                assert (peers.deepspeed_gpu_bytes(3, params, cpu_offload_params=offp, largest_layer_params=largest,
                                                  **kw) == z3(params, largest, cpu_offload_params=offp, **kw)[1])
    usage = pytest.importorskip("accelerate.commands.estimate").estimate_training_usage
    for dtype in ("float32", "float16", "bfloat16", "fp8", "int8"):
        theirs = max(usage(4 * params, dtype).values())
        ours = peers.accelerate_training_bytes(4 * params, dtype)
        assert ours == (None if theirs == -1 else theirs)


def test_peer_inputs_from_trainfit_specs(doc, sample):
    """DeepSpeed's and accelerate's numbers, recomputed here from the documented formulas (GiB = 2**30 bytes):
    ZeRO-3 / FSDP full_shard 4 x largest module + 18 bytes x params / GPUs; unsharded 20 bytes x params;
    accelerate 8 bytes (16-bit; 16 for fp32) per parameter of the bare model without its LM head."""
    from trainfit.estimate.params import count_params, largest_module_params
    from trainfit.estimate.trainable import head_for
    from trainfit.validate import predict_case

    _, cases = sample
    by_id = {c["id"]: c for c in cases}
    checked = 0
    for r in doc["rows"]:
        ds, acc = r["deepspeed"].get("memory", {}), r["accelerate"].get("memory", {})
        if "pred" not in ds:
            continue
        est = predict_case(by_id[r["id"]], Efficiencies.default())
        s, m, p = est.strategy, est.model, est.split.total
        assert s.offload.value == "none"
        if s.shards_params:
            expected = 4 * largest_module_params(m, head_for(m, est.training.task)) + int(18 * p / s.gpus)
        elif s.zero_stage == 0 and s.fsdp.value == "none":
            expected = 20 * p
        else:
            expected = 2 * p + int(18 * p / s.gpus)
        assert ds["pred"] == pytest.approx(expected / 2**30, abs=1e-3), r["id"]
        per_param = 16 if est.training.precision.value == "fp32" else 8  # --dtypes float32 row / float16 row
        assert acc["pred"] == pytest.approx(per_param * count_params(m, "none") / 2**30, abs=1e-3), r["id"]
        assert count_params(m, "none") <= p
        checked += 1
    assert checked == doc["tools"]["deepspeed"]["memory"]["n"] > 0
