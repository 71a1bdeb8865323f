"""All requests at once (serving/burst.py): the cohort-and-jump simulation equals a plain step-by-step one, and the
makespan it gives is what a steady state cannot: the prompts first, a tail at a small batch."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.catalog import get_gpu, resolve_model
from trainfit.serving.burst import burst
from trainfit.serving.engines import resolve
from trainfit.serving.knobs import knobs
from trainfit.serving.memory import memory
from trainfit.serving.spec import ServingSpec
from trainfit.serving.speed import _prefill_cached, closed_loop, decode_step
from trainfit.spec.cluster import cluster_for


def _setup(budget: int = 2048):
    m, gpu = resolve_model("qwen2.5-0.5b"), get_gpu("a100-sxm4-80gb")
    s = ServingSpec(max_num_batched_tokens=budget, max_num_seqs=64)
    view = knobs(None).for_framework(s.generation).for_gpu(gpu)
    e = resolve(s, gpu, 4096)
    return m, s, e, memory(m, s, e, gpu, view), cluster_for(gpu, 1, 1), view


def _plain(m, s, e, mem, cluster, view, inputs, outputs, b_max):
    """The reference: every step one by one, every request on its own (what burst() groups and jumps over)."""
    n, budget = len(inputs), e.max_num_batched_tokens
    left, made, first, done = list(inputs), [0] * n, [0.0] * n, [0.0] * n
    waiting, running, now = list(range(n)), [], 0.0
    while waiting or running:
        while waiting and len(running) < b_max:
            running.append(waiting.pop(0))
        decoding = [i for i in running if left[i] == 0]
        room, chunk, started = budget - len(decoding), 0.0, []
        for i in running:
            if room <= 0:
                break
            if left[i]:
                take = min(room, left[i])
                p = _prefill_cached(m, s, mem, cluster, view, inputs[i])
                chunk += take * (max(p.compute_s, 0.0) + p.comm_s) / inputs[i]
                left[i] -= take
                room -= take
                if not left[i]:
                    started.append(i)
        ctx = sum(inputs[i] + made[i] for i in decoding) / len(decoding) if decoding else 0.0
        now += (decode_step(m, s, mem, cluster, view, len(decoding), max(1.0, ctx)).seconds if decoding else 0.0)
        now += chunk
        for i in decoding + started:
            made[i] += 1
        for i in started:
            first[i] = now
        for i in [i for i in running if not left[i] and made[i] >= outputs[i]]:
            done[i] = now
            running.remove(i)
    return sum(outputs) / now, sum(first) / n


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
