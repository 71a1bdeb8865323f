"""Trace cases as a validation source of their own (issue 19): a traced step written as a case (the case door,
memory_kind allocated), read back by `validate` beside the published runs and compared with the analytic allocated
peak (no allocator cache, no CUDA context), and never pulling `calibrate`'s allocator or context knobs."""

import copy
import json
import sys
from pathlib import Path

import pytest

from trainfit.calibrate import MOVES_KINDS, candidate_params, cv_folds, fit, split
from trainfit.catalog.efficiency import Efficiencies
from trainfit.units import GiB
from trainfit.validate import TRACE_SOURCE, load_cases, predict_case, source_group, validate

ROOT = Path(__file__).resolve().parents[1]
DEV = str(ROOT / "data" / "validation" / "published_dev.jsonl")
TRACE = str(ROOT / "data" / "validation" / "trace_cases.jsonl")

sys.path.insert(0, str(ROOT / "benchmarks"))


@pytest.fixture(scope="module")
def trace_cases():
    return load_cases([TRACE])


@pytest.fixture(scope="module")
def dev_cases():
    return load_cases([DEV])


def _conformance():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import conformance

    return conformance


# LoRA on a tied family with lm_head trained in full and foreach AdamW: the two fields the case door gained for traces
DRAW = dict(family="qwen2", layers=2, method="lora", precision="bf16", param_dtype="fp32", optimizer="adamw",
            optimizer_impl="foreach", grad_ckpt="none", attention="sdpa", micro_batch=2, seq_len=128, task="sft",
            lora_rank=8, lora_targets=("q_proj", "v_proj"), modules_to_save=("lm_head",))


def test_a_trace_case_round_trips_through_the_case_reader():
    """The case a traced draw writes, read back by validate's case reader, is the workload that was estimated: the
    same training fields, model and one-GPU view, so the same analytic allocated peak to the byte; and the truth
    it carries is the traced peak."""
    conformance = _conformance()
    d = conformance.Draw(**DRAW)
    row = conformance.run_one(d, {"seed": 7, "index": 3})
    case = json.loads(json.dumps(row["case"]))  # as read from a file
    assert source_group(case) == TRACE_SOURCE and case["measured"]["memory_kind"] == "allocated"
    assert case["measured"]["peak_memory_bytes"] == round(row["traced_bytes"])
    assert case["training"]["optimizer_impl"] == "foreach" and case["training"]["modules_to_save"] == ["lm_head"]
    est = predict_case(case, Efficiencies.default())
    t = est.training
    assert (t.method.value, t.optimizer_impl.value, t.modules_to_save, t.lora_targets, t.lora_rank) == \
        ("lora", "foreach", ("lm_head",), ("q_proj", "v_proj"), 8)
    assert (est.model.layers, est.strategy.gpus, t.seq_len, t.micro_batch) == (2, 1, 128, 2)
    assert est.memory.allocated == pytest.approx(row["analytic_bytes"], rel=1e-12)
    rep = validate([case], Efficiencies.default())
    assert not rep.skipped and rep.rows[0].truth == TRACE_SOURCE
    assert rep.rows[0].error["memory"] == pytest.approx(abs(row["error"]), abs=1e-6)


def test_shipped_trace_cases_are_schema_cases_of_the_trace_source(trace_cases):
    assert 40 <= len(trace_cases) <= 60
    schema_training = {"method", "lora_rank", "lora_targets", "modules_to_save", "precision", "param_dtype", "task",
                       "optimizer", "optimizer_impl", "seq_len", "micro_batch", "grad_accum", "global_batch",
                       "grad_ckpt", "selective_ac", "attention", "fixed_length", "avg_len", "max_len", "framework"}
    for c in trace_cases:
        assert source_group(c) == TRACE_SOURCE
        assert set(c["training"]) <= schema_training, set(c["training"]) - schema_training
        m = c["measured"]
        assert m["memory_kind"] == "allocated" and m["peak_memory_gib"] == pytest.approx(m["peak_memory_bytes"] / GiB)
        assert m["tokens_per_s_per_gpu"] is None and m["step_time_s"] is None
        assert c["hardware"]["num_gpus"] == 1 and c["parallel"]["fsdp"] is None
    assert len({c["id"] for c in trace_cases}) == len(trace_cases)
    assert not validate(trace_cases, Efficiencies.default()).skipped  # every one is predicted


def test_regenerating_shipped_trace_cases_reproduces_them(trace_cases):
    """Three shipped cases (the smallest workloads, for time) made again from their seed and draw index: the same
    case, traced bytes included (the environment line aside: it names the versions that made the file)."""
    conformance = _conformance()
    small = sorted(trace_cases, key=lambda c: c["training"]["seq_len"] * c["training"]["micro_batch"])[:3]
    for shipped in small:
        again = json.loads(json.dumps(conformance.regenerate(shipped)))
        assert again["measured"]["peak_memory_bytes"] == shipped["measured"]["peak_memory_bytes"], shipped["id"]
        assert {k: v for k, v in again.items() if k != "environment"} == \
            {k: v for k, v in shipped.items() if k != "environment"}


def test_validate_reports_the_trace_source_beside_published_ones(run_cli, trace_cases, tmp_path):
    """Given published runs and trace cases, validate keeps each truth's statistics apart (the published ones as
    without the traces) and puts every source, with the counter it measured, side by side."""
    code, out, err = run_cli("validate", DEV, TRACE, "--json")
    assert code == 0, err
    both = json.loads(out)
    code, out, err = run_cli("validate", DEV, "--json")
    alone = json.loads(out)
    assert alone["trace"] is None and both["trace"]["predicted"] == len(trace_cases)
    for metric in ("throughput", "memory", "mfu"):  # the measured runs' statistics are not mixed with traces
        assert {k: v for k, v in both[metric].items() if k != "band_coverage"} == \
            {k: v for k, v in alone[metric].items() if k != "band_coverage"}
    assert both["memory"]["band_coverage"] == alone["memory"]["band_coverage"]  # no band for a traced step
    trace = both["trace"]["memory"]
    trace_errs = [r["error"]["memory"] for r in both["rows"] if r["truth"] == "trace"]
    assert trace["n"] == len(trace_errs) == len(trace_cases)
    assert trace["mape"] == pytest.approx(sum(trace_errs) / len(trace_errs), abs=1e-4)
    sources = both["memory_by_source_kind"]
    assert sources["trace"] == {"allocated": {**{k: trace[k] for k in ("n", "mape", "max_ape", "worst_case")},
                                              "truth": "trace"}}
    published = {s: k for s, k in sources.items() if s != "trace"}
    assert published == alone["memory_by_source_kind"] and len(published) >= 5
    assert all(k["truth"] == "measured" for kinds in published.values() for k in kinds.values())
    assert sum(k["n"] for kinds in published.values() for k in kinds.values()) == alone["memory"]["n"]
    assert "unstated (reserved)" in sources["QwenLM/Qwen"]  # a source that names no counter says so
    code, text, err = run_cli("validate", DEV, TRACE)
    assert code == 0, err
    assert "by source and counter" in text
    line = next(x for x in text.splitlines() if "│ trace " in x and "allocated" in x)
    assert f"{trace['mape']:.1%}" in line and str(len(trace_cases)) in line
    code, _, err = run_cli("validate", DEV, TRACE, "--max-mape-trace", "0.001")
    assert code == 1 and "trace memory MAPE" in err
    code, text, err = run_cli("validate", TRACE)  # trace cases only: no empty table of measured runs
    assert code == 0 and "by source and counter" in text and "error of the predictions" not in text, err
    html = tmp_path / "v.html"
    code, _, err = run_cli("validate", DEV, TRACE, "--html", str(html))
    assert code == 0, err
    assert "trace: allocated peak (GiB)" in html.read_text() and f"trace (allocated peak): n = {trace['n']}" in \
        html.read_text()


def test_allocated_comparison_adds_no_allocator_or_context(trace_cases):
    """A trace case is compared with the allocated peak: the allocator's cache and the CUDA context, however large,
    do not move its prediction (the same case stated as reserved memory does move, so the test can fail)."""
    case = trace_cases[0]
    big = Efficiencies.default().with_overrides({"allocator_overhead_fraction": {"default": 0.5},
                                                 "allocator_overhead_gib": {"default": 4.0},
                                                 "cuda_context_gib": {"default": 3.0}})
    plain = validate([case], Efficiencies.default()).rows[0]
    heavy = validate([case], big).rows[0]
    assert heavy.predicted["peak_memory_gib"] == plain.predicted["peak_memory_gib"]
    assert heavy.error["memory"] == plain.error["memory"]
    est = predict_case(case, big)
    meas = case["measured"]["peak_memory_gib"]
    assert heavy.error["memory"] == pytest.approx(abs(est.memory.allocated / GiB - meas) / meas)
    assert est.memory.reserved > est.memory.allocated + 4 * GiB  # the overrides took effect
    reserved = copy.deepcopy(case)
    reserved["source"], reserved["measured"]["memory_kind"] = "a published run", "reserved"
    assert validate([reserved], big).rows[0].predicted["peak_memory_gib"] > heavy.predicted["peak_memory_gib"] + 4


def test_a_trace_case_without_allocated_kind_is_skipped(trace_cases):
    case = copy.deepcopy(trace_cases[0])
    case["measured"]["memory_kind"] = None
    rep = validate([case], Efficiencies.default())
    assert not rep.rows and list(rep.skipped) == [
        "trace case without memory_kind allocated (a trace counts allocated bytes only)"]


def test_trace_cases_do_not_pull_allocator_or_context(dev_cases, trace_cases, monkeypatch):
    """Allocated memory does not depend on the allocator's cache or the CUDA context: trace cases never count for
    those knobs (alone they make no parameter identifiable at all), and a fit with them beside published runs
    gives the same values as one without. The shipped fit leaves those knobs out (chosen by leave-one-source-out
    error, calibrate.NOT_FITTED_BY_CV); they are put back here, with their former bounds, to check the guard."""
    import trainfit.calibrate as cal

    monkeypatch.setattr(cal, "FITTED", {**cal.FITTED, "allocator_overhead_fraction": ("memory", 0.0, 0.5),
                                        "allocator_overhead_gib": ("memory", 0.0, 4.0),
                                        "cuda_context_gib": ("memory", 0.2, 3.0)})
    base = Efficiencies.shipped()
    assert candidate_params(trace_cases, base) == {}
    pool = [c for c in dev_cases if c["training"].get("framework") in ("unsloth", "torchtune")]
    params = candidate_params(pool + trace_cases, base)
    assert {p.name for p in params} & set(MOVES_KINDS)  # the knobs are fitted here, on the published runs
    trace_ids = {c["id"] for c in trace_cases}
    assert all(not trace_ids & {c["id"] for c in used} for used in params.values())
    assert fit(pool + trace_cases, base, rounds=1) == fit(pool, base, rounds=1)


def test_trace_is_one_group_and_its_own_stratum(dev_cases, trace_cases):
    folds = cv_folds(dev_cases + trace_cases, "source")
    trace_folds = [(g, test) for g, _, test in folds if g == TRACE_SOURCE]
    assert len(trace_folds) == 1 and len(trace_folds[0][1]) == len(trace_cases)
    assert all(TRACE_SOURCE not in {source_group(c) for c in test} for g, _, test in folds if g != TRACE_SOURCE)
    # adding the trace cases does not change which published cases are held back
    _, held = split(dev_cases)
    _, held_both = split(dev_cases + trace_cases)
    assert {c["id"] for c in held} == {c["id"] for c in held_both if source_group(c) != TRACE_SOURCE}


def test_trace_cli_case_out(run_cli, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    out = tmp_path / "cases.jsonl"
    code, _, err = run_cli("trace", "--model", "tiny-llama", "--method", "lora", "--seq-len", "128",
                           "--case-out", str(out))
    assert code == 0, err
    code, text, err = run_cli("trace", "--model", "tiny-llama", "--method", "lora", "--seq-len", "128",
                              "--case-out", str(out), "--json")
    assert code == 0, err
    doc = json.loads(text)
    cases = load_cases([str(out)])
    assert len(cases) == 2 and cases[0] == cases[1]  # appended; the same step traced twice is the same case
    assert cases[0]["measured"]["peak_memory_bytes"] == doc["traced_bytes"]
    row = validate(cases[:1], Efficiencies.default()).rows[0]
    assert row.truth == TRACE_SOURCE
    assert row.error["memory"] == pytest.approx(abs(doc["difference"]["percent"]) / 100, abs=2e-4)
    code, _, err = run_cli("trace", "--model", "tiny-llama", "--method", "qlora", "--seq-len", "128",
                           "--case-out", str(tmp_path / "q.jsonl"))
    assert code == 2 and "not trace truth" in err


def test_cv_by_source_leaves_trace_out_as_one_group_and_keeps_it_apart(tmp_path, dev_cases):
    """`calibrate --cv source` with trace cases: one left-out group `trace`; every published group's left-out error,
    the overall error and the bands' coverage are those of the same run without the traces (they pull nothing and
    are not mixed into the measured runs' figures)."""
    from trainfit.calibrate import cross_validate

    small = tmp_path / "small.jsonl"
    small.write_text("".join(json.dumps(c) + "\n" for c in dev_cases
                             if c["training"].get("framework") in ("unsloth", "torchtune")))
    alone = cross_validate([str(small)], "source", rounds=1)
    both = cross_validate([str(small), TRACE], "source", rounds=1)
    assert set(both["groups"]) == set(alone["groups"]) | {TRACE_SOURCE}
    assert both["groups"][TRACE_SOURCE]["left_out"] == 48 and both["trace"]["n"] == 48
    for g, s in alone["groups"].items():
        assert {k: both["groups"][g][k] for k in ("left_out", "throughput", "memory")} == \
            {k: s[k] for k in ("left_out", "throughput", "memory")}
    assert both["overall"] == alone["overall"] and "trace" not in alone
