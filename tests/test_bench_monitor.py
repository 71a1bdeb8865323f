"""`bench` on the CPU (the acceptance command), the max-batch search, and `monitor`'s summary on recorded series."""

import json

import pytest

from trainfit.monitor import dcgm
from trainfit.monitor.nvml import Sample, summarize

SCHEMA_KEYS = {"id", "source", "reliability", "model", "hardware", "training", "parallel", "measured", "notes"}


@pytest.mark.slow
def test_bench_cpu_prints_a_validation_case(run_cli):
    pytest.importorskip("torch")
    code, out, err = run_cli("bench", "--model", "tiny-llama", "--device", "cpu", "--steps", "3", "--warmup", "1",
                             "--seq-len", "64", "--json")
    assert code == 0, err
    case = json.loads(out)
    assert SCHEMA_KEYS <= set(case)
    assert case["measured"]["tokens_per_s_per_gpu"] > 0 and case["measured"]["step_time_s"] > 0
    assert case["hardware"]["gpu"] == "cpu" and "CPU" in case["source"]
    assert case["estimate"]["tokens_per_s_per_gpu"] > 0 and "not comparable" in case["estimate"]["note"]
    assert case["environment"]["torch"] and case["model"]["params"] == 106816
    assert case["training"]["seq_len"] == 64 and case["training"]["framework"] == "trainfit"


@pytest.mark.slow
def test_bench_two_processes_on_cpu(run_cli, tmp_path):
    pytest.importorskip("torch")
    out_file = tmp_path / "m.jsonl"
    code, out, err = run_cli("bench", "--model", "tiny-llama", "--device", "cpu", "--steps", "2", "--warmup", "1",
                             "--seq-len", "64", "--gpus", "2", "--out", str(out_file), "--json")
    assert code == 0, err
    case = json.loads(out_file.read_text().splitlines()[-1])
    assert case["hardware"]["num_gpus"] == 2 and case["measured"]["tokens_per_s_per_gpu"] > 0


def test_find_max_batch_search(monkeypatch):
    import trainfit.bench as bench

    calls = []

    def fake_run(est, model_arg, steps, warmup, device, model_path=None):
        calls.append(est)
        return {"oom": True} if est > 13 else {"peak_memory_gib": est * 1.0, "summary": True}

    monkeypatch.setattr(bench, "run_steps", fake_run)
    best, attempts = bench.find_max_batch(lambda mb: mb, "m", "cuda", None)
    assert best == 13
    assert [a["micro_batch"] for a in attempts][:5] == [1, 2, 4, 8, 16]
    assert all(a["oom"] == (a["micro_batch"] > 13) for a in attempts)
    best, _ = bench.find_max_batch(lambda mb: mb + 100, "m", "cuda", None)
    assert best == 0


def test_bench_refuses_find_max_batch_on_cpu(run_cli):
    code, _, err = run_cli("bench", "--model", "tiny-llama", "--device", "cpu", "--find-max-batch")
    assert code == 2 and "CUDA" in err


def _series(util, mem_util, power, mem_used=10.0, total=80.0, n=20, gpu=0, **extra):
    return [Sample(t=float(i), gpu=gpu, util=util, mem_util=mem_util, mem_used_gib=mem_used, mem_total_gib=total,
                   power_w=power * 700, power_limit_w=700, sm_clock_mhz=1980, **extra) for i in range(n)]


@pytest.mark.parametrize("series,verdict", [
    (_series(0.97, 0.35, 0.92), "compute-bound"),                     # busy kernels at the power limit
    (_series(0.95, 0.75, 0.45), "memory-bandwidth-bound"),            # busy, memory controller busy, low power
    (_series(0.40, 0.10, 0.25), "starved (input or communication)"),  # idle between kernels
    (_series(0.95, 0.40, 0.85, mem_used=78.0), "close to OOM"),       # 97.5% of memory in use
    (_series(0.95, 0.30, 0.90, tensor_active=0.2, dram_active=0.7), "memory-bandwidth-bound"),  # DCGM decides
])
def test_monitor_summary_rules(series, verdict):
    assert summarize(series)["verdict"] == verdict


def test_monitor_summary_reports_the_worst_gpu():
    mixed = _series(0.97, 0.3, 0.9, gpu=0) + _series(0.3, 0.1, 0.2, gpu=1)
    s = summarize(mixed)
    assert s["verdict"] == "starved (input or communication)" and set(s["gpus"]) == {0, 1}
    assert summarize([])["verdict"] == "no samples"


def test_monitor_without_gpu_exits_2(run_cli):
    code, _, err = run_cli("monitor", "--", "true")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "NVML" in err or "GPU" in err


def test_monitor_replays_a_recorded_series(run_cli, tmp_path):
    from dataclasses import asdict

    path = tmp_path / "s.json"
    path.write_text(json.dumps({"samples": [asdict(s) for s in _series(0.96, 0.8, 0.4)]}))
    code, out, _ = run_cli("monitor", "--replay", str(path), "--json")
    assert code == 0 and json.loads(out)["verdict"] == "memory-bandwidth-bound"
    path.write_text("not json")
    code, _, err = run_cli("monitor", "--replay", str(path))
    assert code == 2 and "cannot read" in err


def test_dcgm_dmon_parsing():
    text = "#Entity   SMACT  TENSO  DRAMA\nID\nGPU 0     0.812  0.640  0.120\nGPU 1     0.500  0.100  0.700\n"
    parsed = dcgm.parse_dmon(text)
    assert parsed[0]["tensor_active"] == pytest.approx(0.64) and parsed[1]["dram_active"] == pytest.approx(0.7)


def test_gpu_matrix_dry_run():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "benchmarks/gpu_matrix.py", "--dry-run", "--only", "3"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(out) == 3 and all(line.startswith("trainfit bench --model") and "--device cuda" in line for line in out)
