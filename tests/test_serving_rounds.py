"""A benchmark client at a fixed concurrency with equal requests (estimate.rounds, burst.py with `clients`): the
clients start every slot at once and refill one the moment its request ends, so the run goes in rounds whose first
is a burst of prompts; request mixes and runs of unknown length keep the staggered steady state (speed.closed_loop,
workload.mix_closed_loop)."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.serving import serve
from trainfit.serving.burst import burst
from trainfit.serving.knobs import knobs
from trainfit.serving.memory import memory
from trainfit.serving.speed import closed_loop, max_batch
from trainfit.serving.validate import predict_case
from trainfit.serving.workload import mix_closed_loop

from serving_reference import plain_run, setup

DEV = os.path.join(os.path.dirname(__file__), "..", "data", "validation", "serving_dev.jsonl")


_setup = setup
_plain = plain_run


def _view(est):
    return knobs(None).for_framework(est.spec.generation).for_gpu(est.gpu)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 900), st.integers(1, 200)), min_size=1, max_size=50),
       st.sampled_from([1, 4, 16, 64]), st.sampled_from([8, 64]), st.sampled_from([256, 2048]))
def test_the_client_run_equals_the_plain_one(reqs, clients, b_max, budget):
    """Cohorts and jumps with a client in front change nothing but the context bucket a step's roofline is read at:
    within 3% of the step-by-step run on throughput and on the mean TTFT counted from the send."""
    m, s, e, mem, cluster, view = _setup(budget)
    ins, outs = [r[0] for r in reqs], [r[1] for r in reqs]
    load = burst(m, s, e, mem, cluster, view, ins, outs, b_max, clients=clients)
    tput, ttft = _plain(m, s, e, mem, cluster, view, ins, outs, b_max, clients)
    assert load.output_tokens_per_s == pytest.approx(tput, rel=0.03)
    assert load.ttft_s - view("ttft_overhead_ms") * 1e-3 == pytest.approx(ttft, rel=0.03)


def test_one_request_in_flight_is_the_plain_closed_loop():
    """Concurrency 1: no rounds to synchronise, the run's length changes nothing (speed.closed_loop)."""
    kw = dict(gpu="a100-sxm4-80gb", input_len=1024, output_len=128, concurrency=1)
    assert serve("qwen2-7b", num_prompts=8, **kw).load == serve("qwen2-7b", **kw).load


def test_equal_requests_go_in_rounds_whose_ttft_grows_with_n():
    """N equal requests, 4 N sent by N clients: the first round is a burst, so the mean TTFT and its 99th
    percentile (the burst's last prompts) grow with N, far above the staggered steady state's one prompt; prompts
    that fit one step's budget come out together every round (lock-step: every TTFT the same); the work is the
    steady state's, so throughput stays near it."""
    m, s, e, mem, cluster, view = _setup(2048)
    s = replace(s, input_len=512, output_len=128)
    ttft, p99 = [], []
    for n in (4, 8, 32, 64):
        load = burst(m, s, e, mem, cluster, view, [512] * (4 * n), [128] * (4 * n), 64, clients=n)
        steady = closed_loop(m, s, e, mem, cluster, view, n)
        ttft.append(load.ttft_s)
        p99.append(load.ttft_p99_s)
        assert load.output_tokens_per_s == pytest.approx(steady.output_tokens_per_s, rel=0.10)
        assert load.ttft_s > (2 if n >= 32 else 1) * steady.ttft_s
        if n * 512 <= 2048:
            assert load.ttft_p99_s == pytest.approx(load.ttft_s, rel=1e-9)
        else:
            assert load.ttft_p99_s > 1.5 * load.ttft_s
    assert ttft == sorted(ttft) and len(set(ttft)) == 4
    assert p99[3] / p99[2] == pytest.approx(2.0, rel=0.25)  # the first burst's length: 64 x 512 vs 32 x 512 tokens


def test_a_client_ahead_of_the_engine_queues_in_it():
    """More clients than the engine's batch: what it cannot take waits in its queue, inside the TTFT."""
    m, s, e, mem, cluster, view = _setup(2048)
    fits = burst(m, s, e, mem, cluster, view, [256] * 256, [256] * 256, 64, clients=64)
    over = burst(m, s, e, mem, cluster, view, [256] * 256, [256] * 256, 64, clients=128)
    assert over.batch == 64 and over.output_tokens_per_s == pytest.approx(fits.output_tokens_per_s, rel=0.05)
    assert over.ttft_s > fits.ttft_s + 0.5 * 256 * (over.tpot_s or 1.0)  # a whole request's decode at least


def test_mixes_and_runs_of_unknown_length_keep_the_staggered_form():
    """A request mix (lengths vary: rounds do not hold) and a run without --num-prompts: the closed forms, as
    before."""
    est = serve("qwen2-7b", gpu="a100-sxm4-80gb", workload="sharegpt", input_len=300, output_len=200,
                concurrency=32, num_prompts=500)
    view = _view(est)
    assert est.load == mix_closed_loop(est.model, est.spec, est.engine, est.memory, est.cluster, view, est.mix, 32)
    est = serve("qwen2-7b", gpu="a100-sxm4-80gb", input_len=512, output_len=256, concurrency=32)
    assert est.load == closed_loop(est.model, est.spec, est.engine, est.memory, est.cluster, _view(est), 32)
    rounds = serve("qwen2-7b", gpu="a100-sxm4-80gb", input_len=512, output_len=256, concurrency=32, num_prompts=320)
    assert rounds.load.capacity_requests_per_s == est.load.capacity_requests_per_s  # the largest batch's, as before
    assert rounds.load.ttft_p99_s > rounds.load.ttft_s > est.load.ttft_s


def test_the_dev_ttft_the_rounds_reach():
    """silybench (vLLM 0.30 `vllm bench serve --max-concurrency N`, fixed lengths, num_prompts stated) publishes
    TTFT only as p95 / p99, so the validator (means) cannot compare it: here the predicted p99 against ttft_ms_p99
    for concurrency > 1 where the predicted batch holds every client (2 runs at 128 x 4096 tokens queue in the
    engine for want of KV: left out). Measured: 31 runs, MAPE 0.312 with rounds; the staggered steady state (every
    request the same TTFT, so its p99 is its mean) 0.829. The validator's throughput MAPE on the same file moves
    from 0.0861 to 0.0866, TTFT and TPOT do not move (no run there with concurrency > 1 measures a mean TTFT)."""
    errors, steady_errors = [], []
    with open(DEV, encoding="utf-8") as fh:
        cases = [json.loads(line) for line in fh if line.strip()]
    for case in cases:
        sv, meas = case["serving"], case["measured"]
        if not meas.get("ttft_ms_p99") or (sv.get("concurrency") or 1) <= 1:
            continue
        est = predict_case(case)
        if max_batch(est.spec, est.engine, est.memory, est.model) < sv["concurrency"]:
            continue
        want = meas["ttft_ms_p99"] * 1e-3
        errors.append(abs(est.load.ttft_p99_s - want) / want)
        steady = closed_loop(est.model, est.spec, est.engine, est.memory, est.cluster, _view(est), sv["concurrency"])
        steady_errors.append(abs(steady.ttft_s - want) / want)
    assert len(errors) == 31
    assert sum(errors) / len(errors) <= 0.32
    assert sum(steady_errors) / len(steady_errors) >= 0.8
