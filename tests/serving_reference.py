"""The serving simulations' reference (tests/test_serving_burst.py, tests/test_serving_rounds.py): every engine step
one by one and every request on its own, what serving/burst.py groups into cohorts and jumps over."""

from __future__ import annotations

from trainfit.catalog import get_gpu, resolve_model
from trainfit.serving.engines import resolve
from trainfit.serving.knobs import knobs
from trainfit.serving.memory import memory
from trainfit.serving.spec import ServingSpec
from trainfit.serving.speed import _prefill_cached, decode_step
from trainfit.spec.cluster import cluster_for


def setup(budget: int = 2048):
    m, gpu = resolve_model("qwen2.5-0.5b"), get_gpu("a100-sxm4-80gb")
    s = ServingSpec(max_num_batched_tokens=budget, max_num_seqs=64)
    view = knobs(None).for_framework(s.generation).for_gpu(gpu)
    e = resolve(s, gpu, 4096)
    return m, s, e, memory(m, s, e, gpu, view), cluster_for(gpu, 1, 1), view


def plain_run(m, s, e, mem, cluster, view, inputs, outputs, b_max, clients=None):
    """(output tokens/s, mean TTFT) of the run step by step: a client sends while fewer than `clients` requests are
    in flight (None: every request at t = 0), the engine admits up to `b_max` in arrival order, each step decodes
    every running request and spends the rest of its token budget on prompt chunks, oldest first; TTFT from the
    send."""
    n, budget = len(inputs), e.max_num_batched_tokens
    clients = n if clients is None else clients
    left, made, first, sent = list(inputs), [0] * n, [0.0] * n, [0.0] * n
    unsent, waiting, running, now, in_flight = list(range(n)), [], [], 0.0, 0
    while unsent or waiting or running:
        while unsent and in_flight < clients:
            i = unsent.pop(0)
            sent[i], in_flight = now, in_flight + 1
            waiting.append(i)
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
        now += decode_step(m, s, mem, cluster, view, len(decoding), max(1.0, ctx)).with_gpu(chunk) if decoding \
            else chunk
        for i in decoding + started:
            made[i] += 1
        for i in started:
            first[i] = now - sent[i]
        for i in [i for i in running if not left[i] and made[i] >= outputs[i]]:
            running.remove(i)
            in_flight -= 1
    return sum(outputs) / now, sum(first) / n
