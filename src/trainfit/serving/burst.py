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

A benchmark client at a fixed concurrency (`clients`, estimate.rounds) is the same run with a client in front: it
sends while fewer than `clients` requests are in flight (all of them at t = 0, the next one the moment one ends),
and a request's TTFT counts from when it was sent, as the clients time it. With equal lengths the first round is a
burst and the groups its prompt steps made come back every round; TTFT's 99th percentile (the first round's last
prompts) comes with the mean.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import replace

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


class _Run:
    """The state of one simulated run (see the module docstring); `clients` None: every request sent at t = 0."""

    def __init__(self, inputs: list[int], outputs: list[int], b_max: int, clients: int | None):
        self.unsent = _cohorts(inputs, outputs)  # not yet sent by the client, in order: [count, input, output]
        self.waiting: deque = deque()  # sent, not admitted: [count, input, output, sent at]
        self.prompting: deque = deque()  # [count, input, output, prompt tokens left per request, sent at]
        self.ends: list = []  # heap of (decode step of the cohort's last token, id, count, t_first, output, share)
        self.b_max, self.clients = b_max, clients
        self.g = 0  # decode steps taken so far (a decoding cohort started at step `start` has made g - start + 1)
        self.dec_n, self.dec_a = 0, 0.0  # decoding requests; sum of count x (input + 1 - start): context sum a + n g
        self.running, self.in_flight, self.now, self.uid = 0, 0, 0.0, 0
        self.first_sum, self.tpot_sum, self.tpot_n, self.last_end = 0.0, 0.0, 0, 0.0
        self.firsts: list = []  # (TTFT, count) of every cohort that got its first token

    def busy(self) -> bool:
        return bool(self.unsent or self.waiting or self.prompting or self.ends)

    def send_and_admit(self) -> None:
        """The client sends while fewer than `clients` requests are in flight; the engine admits, oldest first,
        while fewer than the largest batch run."""
        while self.unsent and (self.clients is None or self.in_flight < self.clients):
            c = self.unsent[0]
            k = c[0] if self.clients is None else min(c[0], self.clients - self.in_flight)
            self.waiting.append([k, c[1], c[2], self.now])
            self.in_flight += k
            c[0] -= k
            if not c[0]:
                self.unsent.popleft()
        while self.waiting and self.running < self.b_max:
            c = self.waiting[0]
            k = min(c[0], self.b_max - self.running)
            self.prompting.append([k, c[1], c[2], c[1], c[3]])
            self.running += k
            c[0] -= k
            if not c[0]:
                self.waiting.popleft()

    def chunks(self, budget: int, cost: "_Step") -> tuple[float, list]:
        """This step's prompt chunks, oldest first, in the token budget its decodes leave: (their compute, the
        cohorts whose prompts they finish)."""
        room, chunk_s, started = budget - self.dec_n, 0.0, []
        prompting = self.prompting
        while prompting and room > 0:
            c = prompting[0]
            k, left = c[0], c[3]
            whole = min(k, room // left)
            if whole:
                chunk_s += whole * left * cost.per_token(c[1])
                room -= whole * left
                started.append((whole, c[1], c[2], c[4]))
                c[0] -= whole
                if not c[0]:
                    prompting.popleft()
                    continue
            if room > 0:  # part of one more request's prompt: it splits off with what is left of it
                chunk_s += room * cost.per_token(c[1])
                c[0] -= 1
                if not c[0]:
                    prompting.popleft()
                prompting.appendleft([1, c[1], c[2], left - room, c[4]])
                room = 0
        return chunk_s, started

    def step(self, chunk_s: float, cost: "_Step") -> None:
        """One step, or a jump over the steps without prompt work up to the next request's end."""
        context = (self.dec_a + self.dec_n * self.g) / self.dec_n if self.dec_n else 0.0
        if not chunk_s and self.dec_n and (not self.waiting or self.running >= self.b_max):
            r = max(1, self.ends[0][0] - self.g)  # nothing to prefill until a request ends: jump there
            self.now += r * cost.step_s(self.dec_n, context + (r - 1) / 2)
            self.g += r
        else:
            self.now += cost.step_s(self.dec_n, context, chunk_s) if self.dec_n else chunk_s
            if self.dec_n:
                self.g += 1

    def first_tokens(self, started: list) -> None:
        """The step that finishes a prompt samples its first token (its TTFT counts from when it was sent)."""
        for k, i, o, sent in started:
            self.first_sum += k * (self.now - sent)
            self.firsts.append((self.now - sent, k))
            if o <= 1:
                self.running -= k
                self.in_flight -= k
                self.last_end = self.now
                continue
            # counted as decoding from the next step: g then, with one token made already
            share = k * (i + 1 - self.g)  # its part of the decoding requests' context sum, dec_a + dec_n g
            heapq.heappush(self.ends, (self.g + o - 1, self.uid, k, self.now, o, share))
            self.uid += 1
            self.dec_n += k
            self.dec_a += share

    def retire(self) -> None:
        while self.ends and self.ends[0][0] <= self.g:
            _, _, k, t_first, o, share = heapq.heappop(self.ends)
            self.tpot_sum += k * (self.now - t_first) / (o - 1)
            self.tpot_n += k
            self.running -= k
            self.in_flight -= k
            self.last_end = self.now
            self.dec_n -= k
            self.dec_a -= share
        if not self.dec_n:
            self.dec_a = 0.0  # no request decoding: the sum restarts clean


def burst(m, s, e, mem, cluster, view, inputs: list[int], outputs: list[int], b_max: int,
          clients: int | None = None) -> Load:
    """The run of len(inputs) requests sent at once (see the module docstring); with `clients`, a benchmark client
    that keeps that many in flight (estimate.rounds): the next request goes out when one ends."""
    cost = _Step(m, s, mem, cluster, view)
    b_max = max(1, b_max)
    run = _Run(inputs, outputs, b_max, max(1, clients) if clients else None)
    while run.busy():
        run.send_and_admit()
        chunk_s, started = run.chunks(max(1, e.max_num_batched_tokens), cost)
        run.step(chunk_s, cost)
        run.first_tokens(started)
        run.retire()
    batch = min(b_max, run.clients or len(inputs), len(inputs))
    load = _load(view, len(inputs), sum(outputs), run.first_sum, run.tpot_sum, run.tpot_n, run.last_end, batch,
                 cost, inputs)
    return replace(load, ttft_p99_s=_p99(run.firsts, len(inputs)) + view("ttft_overhead_ms") * 1e-3)


def _p99(firsts: list, n: int) -> float:
    """The nearest-rank 99th percentile of the requests' TTFTs (cohorts as (TTFT, count))."""
    rank, seen = math.ceil(0.99 * n), 0
    for ttft, k in sorted(firsts):
        seen += k
        if seen >= rank:
            return ttft
    return 0.0


def _load(view, n, total_out, first_sum, tpot_sum, tpot_n, makespan, batch, cost, inputs) -> Load:
    ttft = first_sum / n + view("ttft_overhead_ms") * 1e-3
    m, s, mem, cluster, _ = cost.args
    bound = decode_step(m, s, mem, cluster, view, batch, sum(inputs) / n).bound
    return Load(batch, ttft, tpot_sum / tpot_n if tpot_n else 0.0, total_out / makespan, n / makespan, bound,
                0.0, stable=True, capacity_requests_per_s=n / makespan, output_len=max(1, round(total_out / n)))
