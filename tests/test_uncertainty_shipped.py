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


def test_a_stack_not_seen_is_banded_from_leave_one_stack_out_residuals():
    """Issue 35: a new stack is a new draw. The shipped cv_framework.json (`trainfit calibrate published_dev.jsonl
    --cv framework`) holds every stack's values predicted by a fit that never saw the stack; an unseen stack's band
    is drawn from those residuals (uncertainty.new_group_draw), a seen stack's from the leave-one-source-out ones.
    Each stack's values against a band drawn from the other stacks' residuals: memory 81% of 104, throughput 89% of
    234 (2026-12-08). Memory is held to the goal, 75-85%. Throughput is held to 75-90%: its 234 values are six stacks,
    151 of them composer's, whose bias lies in the middle of the others', so they are all covered; on synthetic
    stacks of these sizes the draw holds 82% on average with a spread of 16 points between draws of the stacks
    (tests/test_uncertainty.py holds the draw's level; the empirical quantiles held 79% here and 63% for memory)."""
    from trainfit.catalog._io import read_text
    from trainfit.uncertainty import Bands

    doc = json.loads(read_text("cv_framework.json"))
    assert doc["by"] == "framework" and not any(r["framework_known"] for r in doc["residuals"])
    for metric, high in (("throughput", 0.9), ("memory", 0.85)):
        cov = doc["overall"][metric]["band_coverage"]
        assert cov["n"] >= 100 and 0.75 <= cov["coverage"] <= high, (metric, cov)
    shipped = shipped_bands()
    lofo = Bands(doc["residuals"])
    source = Bands(json.loads(read_text("cv_source.json"))["residuals"])
    for method in ("full", "lora", "qlora"):
        assert shipped.interval("throughput", method, None, False) == lofo.interval("throughput", method, None, False)
        assert shipped.interval("throughput", method, None, True) == \
            source.interval("throughput", method, None, True)
    assert shipped.interval("throughput", "lora", None, False) != source.interval("throughput", "lora", None, False)


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


QWEN_A10 = ("estimate", "--model", "qwen2-7b", "--gpu", "a10", "--method", "lora", "--seq-len", "2048",
            "--grad-ckpt", "full", "--json")


def _width(doc, key):
    band = doc["uncertainty"][key]
    return band["high"] / band["low"]


def test_stated_framework_narrows_the_band_and_says_which(run_cli):
    """--framework NAME: a stack the calibration has seen gets its own (narrower) band; no --framework, or a stack
    it has not seen ('other'), gets the wide band of any stack. The JSON names the band used."""
    docs = {}
    for fw in (None, "hf-trainer", "other"):
        code, out, err = run_cli(*QWEN_A10, *(("--framework", fw) if fw else ()))
        assert code == 0, err
        docs[fw] = json.loads(out)
    assert docs[None]["uncertainty"]["band"] == "unstated-stack" and docs[None]["uncertainty"]["framework"] is None
    assert docs["other"]["uncertainty"]["band"] == "unseen-stack"
    known = docs["hf-trainer"]["uncertainty"]
    assert known["band"] == "known-stack" and known["framework"] == "hf-trainer" and known["framework_known"]
    for key in ("memory_gib", "tokens_per_s"):  # never narrower for an unstated stack
        assert _width(docs["hf-trainer"], key) <= _width(docs[None], key), key
        assert _width(docs["other"], key) == _width(docs[None], key), key
    # memory: strictly narrower (LoRA throughput of known stacks is as spread as any stack's: QwenLM/Qwen's
    # left-out throughput residuals alone span the unstated band). Since each source weighs the same in a cell the
    # known-stack band is no longer set by Qwen's 47 runs alone: 0.82 of the unstated width on the shipped residuals
    # (0.6 before that change), 0.90 since an unseen stack's band pools every source instead of taking the union of
    # the seen and unseen bands' extremes (uncertainty.py), 0.93 since the memory model reads LitGPT's own code (the
    # left-out residuals every unseen-stack band pools are smaller: LitGPT's left-out memory error 17.3% -> 4.7%)
    assert _width(docs["hf-trainer"], "memory_gib") < _width(docs[None], "memory_gib")
    assert docs["hf-trainer"]["fit_probability"] != docs[None]["fit_probability"]


def test_stated_framework_applies_its_defaults_and_factors(run_cli):
    """torchtune trains bf16 weights (frameworks.yaml) and has fitted factors (calibration.yaml by_framework)."""
    code, out, err = run_cli(*QWEN_A10, "--framework", "torchtune")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["config"]["param_dtype"] == "bf16"
    assert doc["efficiencies"]["framework_logits_factor"]["from"] == "by_framework[torchtune]"
    code, out, _ = run_cli(*QWEN_A10, "--framework", "torchtune", "--param-dtype", "fp32")
    assert json.loads(out)["config"]["param_dtype"] == "fp32"  # a stated value beats the stack's default


def test_unknown_framework_is_one_line_with_did_you_mean(run_cli):
    for cmd in (QWEN_A10, ("compare", "--model", "qwen2-7b", "--method", "lora", "--gpu", "a10"),
                ("plan", "--model", "qwen2-7b", "--method", "lora", "--dataset-tokens", "10M", "--gpu", "a10")):
        code, out, err = run_cli(*cmd, "--framework", "torchtun")
        assert code == 2 and "Traceback" not in err, err
        assert "did you mean: torchtune" in err and len(err.strip().splitlines()) == 1, err


def test_plan_reads_the_stated_stacks_band(run_cli):
    base = ("plan", "--model", "qwen2-7b", "--task", "sft", "--method", "lora", "--dataset-tokens", "200M",
            "--epochs", "3", "--seq-len", "2048", "--gpu", "a10", "--json")
    bands = {}
    for fw in (None, "hf-trainer"):
        code, out, err = run_cli(*base, *(("--framework", fw) if fw else ()))
        assert code == 0, err
        bands[fw] = json.loads(out)["band"]
    assert bands[None]["name"] == "unstated-stack" and bands["hf-trainer"]["name"] == "known-stack"


def test_python_api_takes_the_framework():
    import trainfit
    from trainfit.errors import SpecError
    from trainfit.report.estimate import estimate_dict

    est = trainfit.estimate("qwen2-7b", "a10", method="lora", seq_len=2048, grad_ckpt="full", framework="litgpt")
    assert estimate_dict(est)["uncertainty"]["band"] == "known-stack"
    try:
        trainfit.estimate("qwen2-7b", "a10", method="lora", framework="axolotl")
    except SpecError as exc:
        assert "unknown framework" in str(exc)
    else:
        raise AssertionError("an unknown framework must be refused")
