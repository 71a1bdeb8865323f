"""All requests at once (`request_rate` inf with a known number of prompts): the run as the engine schedules it,
step by step, instead of the steady state of speed.py's open loop.

The benchmarks published most (vLLM's and SGLang's `bench serve` with --request-rate inf, trtllm-bench, GPUStack's
performance lab) send every prompt at t = 0 and measure until the last request ends. Their throughput is total
output tokens over that makespan, which a steady state at the largest batch overstates: the engine first works
through the prompts (each step carries at most max_num_batched_tokens of prompt beside its decodes), and at the end
the last requests decode at a batch far below the largest; their TTFT is mostly the wait for the prompts before
them. So the run is simulated as the engines' schedulers run it (vLLM V1 `Scheduler.schedule`; SGLang's and
TensorRT-LLM's in-flight batching alike): requests are admitted in arrival order while fewer than the largest batch
run (its KV-cache and max_num_seqs limits: speed.max_batch, workload.mix_max_batch); each step decodes one token for
every running request whose prompt is done and spends the rest of the token budget on prompt chunks, oldest first
(chunked prefill); a request's first token comes out of the step that finishes its prompt. A step takes the decode
roofline of its running requests at their mean context (speed.decode_step: weights and KV read, the engine's step
overheads) plus the compute of the prompt chunks it carries (their share of speed.prefill's compute for the whole
prompt), as speed.closed_loop folds prompts into decode steps; the host work of its decoding requests adds to that or
floors it (speed.Roofline.with_gpu). Throughput = output tokens / makespan; TTFT and TPOT are means over the
requests.

Requests of the same lengths admitted together move as one cohort, and stretches of steps without prompt work are
taken in one jump to the next request's end (their contexts grow by one token a step: the jump's mean context), so a
run costs about (prompt steps + cohorts) iterations: a few ms for thousands of requests.
"""

from __future__ import annotations

import heapq
from collections import deque

from .speed import Load, Roofline, _prefill_cached, decode_step

CONTEXT_BUCKET = 64  # tokens: decode steps of one batch size and context (within this) share one roofline


class _Step:
    """Decode-step rooflines by (batch, context bucket), and prompt compute per token by prompt length."""

    def __init__(self, m, s, mem, cluster, view):
        self.args = (m, s, mem, cluster, view)
        self.decode: dict[tuple[int, int], Roofline] = {}
        self.prompt: dict[int, float] = {}

    def step_s(self, batch: int, context: float, chunk_s: float = 0.0) -> float:
        """A step decoding `batch` requests with `chunk_s` of prompt compute in it (speed.Roofline.with_gpu: the
        engine's host work for the batch hides under that GPU time or adds to it)."""
        key = (batch, int(context // CONTEXT_BUCKET))
        hit = self.decode.get(key)
        if hit is None:
            m, s, mem, cluster, view = self.args
            hit = self.decode[key] = decode_step(m, s, mem, cluster, view, batch, max(1.0, context))
        return hit.with_gpu(chunk_s)

    def per_token(self, prompt: int) -> float:
        hit = self.prompt.get(prompt)
        if hit is None:
            p = _prefill_cached(*self.args, prompt)
            hit = self.prompt[prompt] = (max(p.compute_s, 0.0) + p.comm_s) / prompt
        return hit


def _cohorts(inputs: list[int], outputs: list[int]) -> deque:
    """Waiting requests in arrival order, consecutive equal ones as one [count, input, output]."""
    out: deque = deque()
    for i, o in zip(inputs, outputs):
        if out and out[-1][1] == i and out[-1][2] == o:
            out[-1][0] += 1
        else:
            out.append([1, i, o])
    return out


def burst(m, s, e, mem, cluster, view, inputs: list[int], outputs: list[int], b_max: int) -> Load:
    """The run of len(inputs) requests sent at once (see the module docstring)."""
    cost = _Step(m, s, mem, cluster, view)
    n, budget, b_max = len(inputs), max(1, e.max_num_batched_tokens), max(1, b_max)
    waiting = _cohorts(inputs, outputs)
    prompting: deque = deque()  # [count, input, output, prompt tokens left per request], oldest first
    ends: list = []  # heap of (global decode step at which the cohort's last token comes, id, count, input, output)
    g = 0  # decode steps taken so far (a decoding cohort started at step `start` has made g - start + 1 tokens)
    dec_n, dec_a = 0, 0.0  # decoding requests; sum of count x (input + 1 - start): their context sum is a + n g
    running, now, uid = 0, 0.0, 0
    first_sum, tpot_sum, tpot_n, last_end = 0.0, 0.0, 0, 0.0
    while waiting or prompting or ends:
        while waiting and running < b_max:  # admission, oldest first
            c = waiting[0]
            k = min(c[0], b_max - running)
            prompting.append([k, c[1], c[2], c[1]])
            running += k
            c[0] -= k
            if not c[0]:
                waiting.popleft()
        room, chunk_s, started = budget - dec_n, 0.0, []
        while prompting and room > 0:
            c = prompting[0]
            k, left = c[0], c[3]
            whole = min(k, room // left)
            if whole:
                chunk_s += whole * left * cost.per_token(c[1])
                room -= whole * left
                started.append((whole, c[1], c[2]))
                c[0] -= whole
                if not c[0]:
                    prompting.popleft()
                    continue
            if room > 0:  # part of one more request's prompt: it splits off with what is left of it
                chunk_s += room * cost.per_token(c[1])
                c[0] -= 1
                if not c[0]:
                    prompting.popleft()
                prompting.appendleft([1, c[1], c[2], left - room])
                room = 0
        context = (dec_a + dec_n * g) / dec_n if dec_n else 0.0
        if not chunk_s and dec_n and (not waiting or running >= b_max):
            r = max(1, ends[0][0] - g)  # nothing to prefill until a request ends: jump there
            now += r * cost.step_s(dec_n, context + (r - 1) / 2)
            g += r
        else:
            now += cost.step_s(dec_n, context, chunk_s) if dec_n else chunk_s
            if dec_n:
                g += 1
        for k, i, o in started:  # the step that finishes a prompt samples its first token
            first_sum += k * now
            if o <= 1:
                running -= k
                last_end = now
                continue
            # counted as decoding from the next step: g then, with one token made already
            share = k * (i + 1 - g)  # its part of the decoding requests' context sum, dec_a + dec_n g
            heapq.heappush(ends, (g + o - 1, uid, k, now, o, share))
            uid += 1
            dec_n += k
            dec_a += share
        while ends and ends[0][0] <= g:
            _, _, k, t_first, o, share = heapq.heappop(ends)
            tpot_sum += k * (now - t_first) / (o - 1)
            tpot_n += k
            running -= k
            last_end = now
            dec_n -= k
            dec_a -= share
        if not dec_n:
            dec_a = 0.0  # no request decoding: the sum restarts clean
    return _load(view, n, sum(outputs), first_sum, tpot_sum, tpot_n, last_end, b_max, cost, inputs)


def _load(view, n, total_out, first_sum, tpot_sum, tpot_n, makespan, b_max, cost, inputs) -> Load:
    ttft = first_sum / n + view("ttft_overhead_ms") * 1e-3
    batch = min(b_max, n)
    m, s, mem, cluster, _ = cost.args
    bound = decode_step(m, s, mem, cluster, view, batch, sum(inputs) / n).bound
    return Load(batch, ttft, tpot_sum / tpot_n if tpot_n else 0.0, total_out / makespan, n / makespan, bound,
                0.0, stable=True, capacity_requests_per_s=n / makespan, output_len=max(1, round(total_out / n)))
