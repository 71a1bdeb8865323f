"""All requests at once (serving/burst.py): the cohort-and-jump simulation equals a plain step-by-step one, and the
makespan it gives is what a steady state cannot: the prompts first, a tail at a small batch."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.serving.burst import burst
from trainfit.serving.speed import closed_loop

from serving_reference import plain_run, setup


_setup = setup
_plain = plain_run


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 900), st.integers(1, 300)), min_size=1, max_size=60),
       st.sampled_from([8, 32, 64]), st.sampled_from([256, 2048]))
def test_the_grouped_simulation_equals_the_plain_one(reqs, b_max, budget):
    """Cohorts and jumps change nothing but the context bucket a step's roofline is read at (64 tokens): within
    3% of the step-by-step run on throughput and mean TTFT."""
    m, s, e, mem, cluster, view = _setup(budget)
    ins, outs = [r[0] for r in reqs], [r[1] for r in reqs]
    load = burst(m, s, e, mem, cluster, view, ins, outs, b_max)
    tput, ttft = _plain(m, s, e, mem, cluster, view, ins, outs, b_max)
    assert load.output_tokens_per_s == pytest.approx(tput, rel=0.03)
    assert load.ttft_s - view("ttft_overhead_ms") * 1e-3 == pytest.approx(ttft, rel=0.03)


def test_a_burst_is_slower_than_the_steady_state_and_its_ttft_is_the_prompt_queue():
    """1000 equal requests at once on 64 slots: the makespan holds the prompts and a last, partly filled wave, so
    output tokens/s stay below the closed loop at 64; the mean TTFT is about half the run (each request waits for
    the waves before it), far above one prompt's."""
    m, s, e, mem, cluster, view = _setup()
    n = 1000
    load = burst(m, s, e, mem, cluster, view, [512] * n, [128] * n, 64)
    steady = closed_loop(m, s, e, mem, cluster, view, 64)
    assert load.output_tokens_per_s < steady.output_tokens_per_s
    makespan = n * 128 / load.output_tokens_per_s
    assert 0.35 * makespan < load.ttft_s < 0.65 * makespan
    assert load.ttft_s > 20 * steady.ttft_s
    assert math.isfinite(load.tpot_s) and load.tpot_s > 0


def test_the_cli_sends_all_requests_at_once(run_cli):
    """`--request-rate inf --num-prompts N`: the run simulated; --json says so with a flag (no infinite number in
    the JSON), the table's title counts the requests in either language; without --num-prompts, or with --compare,
    a clear error (exit 2)."""
    import json

    code, out, err = run_cli("serving", "--model", "qwen2-7b", "--gpu", "a10", "--request-rate", "inf",
                             "--num-prompts", "500", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["workload"]["all_at_once"] and doc["workload"]["num_prompts"] == 500
    assert doc["workload"]["request_rate"] is None and "Infinity" not in out
    steady = json.loads(run_cli("serving", "--model", "qwen2-7b", "--gpu", "a10", "--concurrency", "500",
                                "--json")[1])
    assert doc["speed"]["ttft_ms"] > 10 * steady["speed"]["ttft_ms"]  # the wait for the prompts before
    for lang, words in (("en", "500 requests at once"), ("zh", "500 个请求同时发出")):
        code, out, err = run_cli("serving", "--model", "qwen2-7b", "--gpu", "a10", "--request-rate", "inf",
                                 "--num-prompts", "500", "--lang", lang)
        assert code == 0 and words in out, err
    for extra in ([], ["--num-prompts", "0"], ["--num-prompts", "5", "--compare", "a10,l20"]):
        code, out, err = run_cli("serving", "--model", "qwen2-7b", "--request-rate", "inf", *extra,
                                 *([] if "--compare" in extra else ["--gpu", "a10"]))
        assert code == 2 and "num-prompts" in err and "Traceback" not in err, err
