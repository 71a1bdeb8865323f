"""The shipped cross-validation residuals (catalog/data/cv_source.json, `make cv`) and what they give estimate and
validate."""

from __future__ import annotations

import json
from pathlib import Path

from trainfit.uncertainty import shipped_bands
from trainfit.validate import load_cases

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT / "data" / "validation" / "published_dev.jsonl"


def test_shipped_bands_cover_about_their_level_under_cross_validation():
    """The shipped residuals come from `trainfit calibrate data/validation/published_dev.jsonl --cv source`;
    their leave-one-source-out coverage is stated in it. An 80% band should hold 80% of values +- 10 points
    (tolerance: a few hundred values in ten groups of very different size)."""
    from trainfit.catalog._io import read_text

    doc = json.loads(read_text("cv_source.json"))
    for metric in ("throughput", "memory"):
        cov = doc["overall"][metric]["band_coverage"]
        assert cov["n"] >= 50 and 0.7 <= cov["coverage"] <= 0.9, (metric, cov)
    assert shipped_bands() is not None


def test_estimate_json_carries_bands_and_fit_probability(run_cli):
    code, out, err = run_cli("estimate", "--model", "qwen2-7b", "--gpu", "a10", "--method", "lora", "--seq-len",
                             "2048", "--grad-ckpt", "full", "--json")
    assert code == 0, err
    doc = json.loads(out)
    unc, p = doc["uncertainty"], doc["fit_probability"]
    assert unc["level"] == 0.8 and 0 < p < 1
    assert unc["memory_gib"]["low"] < doc["memory_kinds_gib"]["device"] < unc["memory_gib"]["high"] * 1.001
    assert unc["tokens_per_s"]["low"] < doc["tokens_per_s"] < unc["tokens_per_s"]["high"]


def test_validate_reports_band_coverage(run_cli, tmp_path):
    dev_cases = load_cases([str(DEV)])
    small = tmp_path / "cases.jsonl"
    small.write_text("".join(json.dumps(c) + "\n" for c in dev_cases[:40]))
    code, out, err = run_cli("validate", str(small), "--json")
    assert code == 0, err
    doc = json.loads(out)
    for metric in ("throughput", "memory"):
        cov = doc[metric]["band_coverage"]
        assert cov["n"] == sum(1 for r in doc["rows"] if metric in r["band"])
        assert cov["n"] == 0 or 0 <= cov["coverage"] <= 1
