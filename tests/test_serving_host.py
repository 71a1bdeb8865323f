"""The engine's host work per running sequence (issue 37; speed.host_work, serving.yaml host_us_per_seq and
host_serial): it grows with the sequences, leaves batch 1 alone, adds to the step where the engine waits for it (vLLM V1
before async scheduling) and floors it where the engine overlaps it (vLLM >= 0.21, SGLang). The runs of ~1,000 streams
it was set for (GPUStack's performance lab) are held to the error it reaches; without it they fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainfit.catalog import get_gpu, resolve_model
from trainfit.serving.engines import resolve
from trainfit.serving.knobs import knobs
from trainfit.serving.memory import memory
from trainfit.serving.spec import ServingSpec
from trainfit.serving.speed import Roofline, decode_step
from trainfit.serving.validate import validate
from trainfit.spec.cluster import cluster_for

ROOT = Path(__file__).resolve().parents[1]
OFF = {"host_us_per_seq": 0.0}
ENGINES = {"vllm-v1": ("vllm", "0.11.0"), "vllm-v1-021": ("vllm", "0.30.0"), "sglang": ("sglang", "0.5.5")}


def _setup(generation: str, overrides=None):
    engine, version = ENGINES[generation]
    m, gpu = resolve_model("qwen3-14b"), get_gpu("h100-sxm")
    s = ServingSpec(engine=engine, engine_version=version, max_model_len=4096)
    assert s.generation == generation
    view = knobs(overrides).for_framework(s.generation).for_gpu(gpu)
    e = resolve(s, gpu, 4096)
    return m, s, memory(m, s, e, gpu, view), cluster_for(gpu, 1, 1), view


def _step(generation: str, batch: int, overrides=None) -> Roofline:
    m, s, mem, cluster, view = _setup(generation, overrides)
    return decode_step(m, s, mem, cluster, view, batch, 400.0)


def _cases(name: str) -> list[dict]:
    return [json.loads(line) for line in (ROOT / "data/validation" / name).read_text().splitlines() if line.strip()]


def _mape(rows: list[dict], metric: str = "throughput") -> float:
    errors = [r["error"][metric] for r in rows if metric in r["error"]]
    return sum(errors) / len(errors)


@pytest.mark.parametrize("generation", sorted(ENGINES))
def test_host_work_grows_with_the_running_sequences(generation):
    per_seq = knobs(None).for_framework(generation).for_gpu(get_gpu("h100-sxm"))("host_us_per_seq")
    assert per_seq > 0
    hosts = [_step(generation, b).host_s for b in (1, 16, 64, 256, 1000)]
    assert hosts == sorted(hosts) and hosts[0] == 0.0
    assert hosts[-1] == pytest.approx(999 * per_seq * 1e-6)


@pytest.mark.parametrize("generation", sorted(ENGINES))
def test_batch_one_is_unchanged(generation):
    """The first sequence's host work is in step_overhead_ms (fitted at batch 1): the term adds nothing there."""
    assert _step(generation, 1).seconds == _step(generation, 1, OFF).seconds


def test_serial_engine_adds_host_work_and_overlapped_engine_takes_the_longer():
    serial = _step("vllm-v1", 256)
    assert serial.host_serial == 1.0
    assert serial.seconds == pytest.approx(serial.gpu_s + serial.host_s)
    assert serial.seconds > _step("vllm-v1", 256, OFF).seconds
    small, big = _step("sglang", 8), _step("sglang", 1000)
    assert small.host_serial == 0.0
    assert small.host_s < small.gpu_s and small.seconds == small.gpu_s  # hidden under the GPU step
    assert big.host_s > big.gpu_s and big.seconds == big.host_s  # the host sets the pace


def test_prompt_chunks_in_a_step_hide_host_work_only_when_overlapped():
    """burst.py puts a step's prompt chunks on the GPU side: they fill the time of an overlapped engine's host work."""
    overlapped = Roofline(0.004, 0.006, 0.0, 0.001, host_s=0.010, host_serial=0.0)
    assert overlapped.with_gpu(0.0) == pytest.approx(0.010)
    assert overlapped.with_gpu(0.002) == pytest.approx(0.010)
    assert overlapped.with_gpu(0.008) == pytest.approx(0.015)
    serial = Roofline(0.004, 0.006, 0.0, 0.001, host_s=0.010, host_serial=1.0)
    assert serial.with_gpu(0.002) == pytest.approx(0.019)
    assert Roofline(0.004, 0.006, 0.0, 0.001).seconds == pytest.approx(0.007)  # no host work: the plain roofline


def test_gpustack_runs_of_a_thousand_streams_are_held_to_the_error_the_term_reaches():
    """Before: throughput MAPE 71.9% over the 14 GPUStack runs; after 44.7%: the 3 SGLang Qwen3-14B runs its
    value was fitted on 83.3% -> 6.0%, the 4 vLLM 0.11 Qwen3-14B runs (the published engine-core cost, not fitted)
    79.1% -> 64.9%. Whole file: throughput 61.4% -> 37.7%, TTFT 50.1% -> 43.3%, TPOT 49.1% -> 42.3%."""
    cases = _cases("serving_varlen_dev.jsonl")
    doc = validate(cases)
    gpustack = [r for r in doc["rows"] if r["id"].startswith("gpustack-")]
    assert len(gpustack) == 14
    assert _mape(gpustack) <= 0.46
    assert _mape([r for r in gpustack if "-qwen3-14b-" in r["id"] and "sglang" in r["id"]]) <= 0.08
    assert _mape([r for r in gpustack if "-qwen3-14b-" in r["id"] and "vllm" in r["id"]]) <= 0.66
    assert doc["throughput"]["mape"] <= 0.39
    assert doc["ttft"]["mape"] <= 0.45
    assert doc["tpot"]["mape"] <= 0.44
    without = validate(cases, OFF)
    assert _mape([r for r in without["rows"] if r["id"].startswith("gpustack-")]) > 0.6


def test_silybench_host_bound_runs_and_only_they_move():
    """vLLM 0.30 at concurrency 128-256 with fp8 weights (a fast GPU step) is held by its host work; every other run
    of serving_dev, batch 1 included, predicts as without the term."""
    cases = _cases("serving_dev.jsonl")
    on, off = validate(cases), validate(cases, OFF)
    moved = {a["id"]: a for a, b in zip(on["rows"], off["rows"]) if a["predicted"] != b["predicted"]}
    assert set(moved) <= {f"silybench-h100-qwen3-8b-fp8-{w}-c{c}" for w in ("chat-128-128", "decode-128-1024")
                          for c in (128, 256)}
    assert moved and all(r["error"]["throughput"] <= 0.17 for r in moved.values())
    by_id = {r["id"]: r for r in off["rows"]}
    assert all(r["error"]["throughput"] < by_id[i]["error"]["throughput"] for i, r in moved.items())
