"""`trainfit plan --max-oom-risk`: options judged by their out-of-memory probability instead of a flat headroom."""

from __future__ import annotations

import json
import random

import pytest

import trainfit.uncertainty as unc
from trainfit.uncertainty import Bands

QWEN_A10 = ("plan", "--model", "qwen2-7b", "--method", "lora", "--dataset-tokens", "20M", "--gpu", "a10", "--json")


@pytest.fixture
def bands(monkeypatch):
    """Synthetic residuals (memory: truth/prediction log-normal, sd 0.08; throughput sd 0.3), independent of the
    shipped file so the test pins the plan's logic, not the data."""
    rng = random.Random(7)
    res = [{"metric": "memory", "method": "lora", "memory_kind": "nvidia-smi", "framework_known": known,
            "log_residual": rng.gauss(0.0, 0.08)} for known in (True, False) for _ in range(200)]
    res += [{"metric": "throughput", "method": "lora", "memory_kind": None, "framework_known": known,
             "log_residual": rng.gauss(0.0, 0.3)} for known in (True, False) for _ in range(200)]
    b = Bands(res)
    monkeypatch.setattr(unc, "shipped_bands", lambda: b)
    return b


def _one_a10(doc):
    chosen = [r for r in doc["recommendations"] + doc["pareto"] if r["gpu"] == "a10" and r["gpus_per_node"] == 1
              and r["nodes"] == 1]
    risky = [r for r in doc["rejected_for_risk"] if r["gpus"] == 1]
    return chosen, risky


def test_one_a10_is_listed_with_its_risk(run_cli, bands):
    code, out, err = run_cli(*QWEN_A10)
    assert code == 0, err
    doc = json.loads(out)
    chosen, risky = _one_a10(doc)
    assert risky and not chosen
    r = risky[0]
    assert r["oom_risk"] > 0.05 and r["memory_gib"] < r["gpu_memory_gib"]  # fits by the point estimate, not by risk
    assert r["safe_memory_gib"] < r["memory_gib"]
    assert "out-of-memory risk" in doc["excluded_gpus"].get("a10", "") or doc["recommendations"]
    for rec in doc["recommendations"]:
        assert rec["oom_risk"] <= 0.05
        assert rec["uncertainty"]["hours"]["low"] < rec["hours"] < rec["uncertainty"]["hours"]["high"]
    # accepting that risk makes the one-A10 option a candidate, with its risk stated
    code, out, err = run_cli(*QWEN_A10, "--max-oom-risk", f"{min(0.99, r['oom_risk'] + 0.01):.2f}")
    assert code == 0, err
    chosen, risky = _one_a10(json.loads(out))
    assert chosen and not risky and all(0.05 < c["oom_risk"] <= r["oom_risk"] + 0.01 for c in chosen)


def test_text_output_names_the_rejected_option(run_cli, bands):
    code, out, err = run_cli(*QWEN_A10[:-1])
    assert code == 0, err
    assert "rejected for out-of-memory risk" in out and "1 x a10" in out and "--max-oom-risk" in out


@pytest.mark.parametrize("value", ["0", "1", "-0.1", "1.5"])
def test_bad_max_oom_risk(run_cli, value):
    code, _, err = run_cli(*QWEN_A10, "--max-oom-risk", value)
    assert code == 2 and "--max-oom-risk" in err
