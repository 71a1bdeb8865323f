"""Request mixes (variable lengths) for `trainfit serving --workload fixed|uniform|sharegpt|FILE`.

A mix is N (input, output) lengths drawn deterministically by quantiles (stratified: the i-th request sits at
u = (i + 0.5) / N of the input distribution and at an interleaved u' of the output one, so the two are independent
and the sample has the distribution's mean without random noise). N = num_prompts (default 1000, at most 4096).

- fixed: every request input_len / output_len (speed.py's closed_loop / open_loop, unchanged).
- uniform: vLLM's random dataset. vllm/benchmarks/datasets.py RandomDataset.get_sampling_params at vLLM commit
  0056b87fc1fda2642f39dda4392824c425dd1638
  (https://github.com/vllm-project/vllm/blob/0056b87fc1fda2642f39dda4392824c425dd1638/vllm/benchmarks/datasets.py):
  input in integers [floor(L_in (1 - r)), ceil(L_in (1 + r))], output in [max(1, floor(L_out (1 - r))),
  max(1, ceil(L_out (1 + r)))], both ends included (numpy rng.integers(low, high + 1)), 0 <= r < 1 (default 0.0).
  vLLM subtracts the tokenizer's special tokens from L_in first; trainfit has no tokenizer and does not.
- sharegpt: the quantiles of catalog/data/sharegpt_lengths.yaml (its header names the data, the filter and the
  published means), scaled so that the mix's means are input_len / output_len (the means of a dataset case, or
  the published ShareGPT_V3 means 229.7 / 203.1 when the CLI is given no lengths).
- FILE: a CSV (input,output per line, a header allowed) or JSONL ({"input": n, "output": m}) of lengths, read
  through trainfit.userfiles (size cap, UTF-8, line cap; bad rows are one clear error, exit 2).

Speed of continuous batching over a mix (closed forms in the mix's moments; for a one-length mix they are
speed.py's formulas term by term, so the fixed path is unchanged):
- throughput: b requests in flight, each slot serving requests one after another (renewal): requests/s =
  b / E[lifetime], lifetime = prefill(in) + (b - 1) E[prefill compute folded into decode] + (out - 1) decode steps;
  output tokens/s = requests/s x E[out].
- a decode step's mean context is length-biased: a request decodes out steps, so the batch holds
  E[out (in + out / 2)] / E[out] tokens per request, and long requests hold KV and batch slots longer; the KV
  a slot needs for admission is likewise E[out (in + out)] / E[out].
- prefill: the mean of prefill(in) over the mix (so E[in] and E[in^2] for attention both count).
- open loop: Little's law as in speed.py; queueing as an M/G/1 queue (Pollaczek-Khinchine, Kleinrock vol. 1,
  W = rho (1 + C_s^2) / (2 mu (1 - rho))), C_s the coefficient of variation of a request's service time; for one
  length C_s = 0 and this is speed.py's M/D/1.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from functools import lru_cache

from ..errors import ServingError
from .memory import kv_bytes_for_request
from .burst import burst
from .speed import Load, _prefill_cached, decode_step

DEFAULT_PROMPTS = 1000  # vLLM / SGLang benchmarks' --num-prompts default
MAX_PROMPTS = 4096  # requests drawn at most (each distinct prompt length costs one prefill roofline)
MAX_FILE_BYTES = 16 * 1024 * 1024  # a length file: two integers a line; 16 MB is over a million requests
MAX_FILE_ROWS = 200_000
MAX_LINE = 4096
NAMES = ("fixed", "uniform", "sharegpt")
WHAT = "request-length file"


@dataclass(frozen=True)
class Mix:
    kind: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    range_ratio: float = 0.0
    path: str = ""

    @property
    def mean_in(self) -> float:
        return sum(self.inputs) / len(self.inputs)

    @property
    def mean_out(self) -> float:
        return sum(self.outputs) / len(self.outputs)

    def summary(self) -> dict:
        def stats(xs):
            ys = sorted(xs)
            return {"mean": round(sum(ys) / len(ys), 1), "p50": _pct(ys, 50), "p99": _pct(ys, 99), "max": ys[-1]}

        out = {"kind": self.kind, "requests": len(self.inputs), "input": stats(self.inputs),
               "output": stats(self.outputs)}
        if self.kind == "uniform":
            out["range_ratio"] = self.range_ratio
        if self.path:
            out["path"] = self.path
        return out


def _pct(sorted_xs, q: float) -> int:
    """The nearest-rank percentile (the q-th of sorted values)."""
    k = max(0, min(len(sorted_xs) - 1, math.ceil(q / 100 * len(sorted_xs)) - 1))
    return int(sorted_xs[k])


def _grid(n: int) -> tuple[list[float], list[float]]:
    """Stratified positions u_i = (i + 0.5) / n, and the same set reordered (stride coprime to n) for outputs."""
    u = [(i + 0.5) / n for i in range(n)]
    k = max(1, round(n * 0.6180339887))
    while math.gcd(k, n) != 1:
        k += 1
    return u, [u[(i * k) % n] for i in range(n)]


def uniform_mix(input_len: int, output_len: int, ratio: float, n: int) -> Mix:
    lo_i, hi_i = math.floor(input_len * (1 - ratio)), math.ceil(input_len * (1 + ratio))
    lo_o, hi_o = max(1, math.floor(output_len * (1 - ratio))), max(1, math.ceil(output_len * (1 + ratio)))
    lo_i = max(1, lo_i)
    u, v = _grid(n)
    ins = tuple(lo_i + min(hi_i - lo_i, int(x * (hi_i - lo_i + 1))) for x in u)
    outs = tuple(lo_o + min(hi_o - lo_o, int(x * (hi_o - lo_o + 1))) for x in v)
    return Mix("uniform", ins, outs, ratio)


@lru_cache(maxsize=1)
def sharegpt_shape() -> dict:
    from ..catalog._io import read_yaml

    return read_yaml("sharegpt_lengths.yaml")


def _quantile(points: list[float], values: list[float], u: float) -> float:
    x = u * 100
    for j in range(1, len(points)):
        if x <= points[j]:
            a, b = points[j - 1], points[j]
            return values[j - 1] + (values[j] - values[j - 1]) * (x - a) / (b - a)
    return float(values[-1])


def _scaled(raw: list[float], mean: float) -> tuple[int, ...]:
    f = mean / (sum(raw) / len(raw))
    return tuple(max(1, round(x * f)) for x in raw)


def sharegpt_mix(input_mean: float, output_mean: float, n: int, max_len: int | None = None) -> Mix:
    d = sharegpt_shape()
    u, v = _grid(n)
    ins = _scaled([_quantile(d["percent"], d["input"], x) for x in u], input_mean)
    outs = _scaled([_quantile(d["percent"], d["output"], x) for x in v], output_mean)
    if max_len:  # a request longer than the context is cut (the engine would refuse it)
        ins = tuple(min(i, max_len - 1) for i in ins)
        outs = tuple(max(1, min(o, max_len - i)) for i, o in zip(ins, outs))
    return Mix("sharegpt", ins, outs)


def _row(text: str, path: str, line: int) -> tuple[int, int] | None:
    """One line of a length file -> (input, output); None for a blank, comment or header line."""
    from ..userfiles import load_user_json

    t = text.strip()
    if not t or t.startswith("#"):
        return None
    if t.startswith("{"):
        doc = load_user_json(t, f"{path}:{line}")
        keys = [("input", "output"), ("input_len", "output_len"), ("prompt_len", "output_len")]
        pair = next(((doc[a], doc[b]) for a, b in keys if a in doc and b in doc), None)
    else:
        cells = [c.strip() for c in t.split(",")]
        if line == 1 and len(cells) >= 2 and not cells[0].lstrip("-").isdigit():
            return None  # a CSV header
        pair = tuple(cells[:2]) if len(cells) >= 2 else None
    try:
        a, b = (int(x) if not isinstance(x, bool) else None for x in pair)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        a = b = None
    if not isinstance(a, int) or not isinstance(b, int) or a < 1 or b < 1:
        raise ServingError("sv_e_mix_row", path=path, line=line, text=t[:80])
    return a, b


@lru_cache(maxsize=8)
def _read_file(path: str, mtime: float, size: int) -> tuple[tuple[int, int], ...]:
    from ..userfiles import iter_user_lines

    rows = []
    for line, text in iter_user_lines(path, WHAT, MAX_FILE_BYTES, MAX_LINE):
        pair = _row(text, path, line)
        if pair is not None:
            rows.append(pair)
            if len(rows) > MAX_FILE_ROWS:
                raise ServingError("sv_e_mix_rows", path=path, cap=MAX_FILE_ROWS)
    if not rows:
        raise ServingError("sv_e_mix_empty", path=path)
    return tuple(rows)


def file_mix(path: str, n: int, max_len: int | None = None) -> Mix:
    from ..userfiles import check_size

    st = check_size(path, WHAT, MAX_FILE_BYTES)
    rows = _read_file(path, st.st_mtime, st.st_size)
    if len(rows) > n:  # evenly spaced rows, in file order
        rows = tuple(rows[int(i * len(rows) / n)] for i in range(n))
    if max_len:
        for i, o in rows:
            if i + o > max_len:
                raise ServingError("sv_e_ctx", n=i + o, max=max_len)
    return Mix("file", tuple(r[0] for r in rows), tuple(r[1] for r in rows), path=path)


def build_mix(s, num_prompts: int | None = None, max_len: int | None = None) -> Mix:
    """The spec's mix: `s.workload` is fixed | uniform | sharegpt | file:PATH (ServingSpec checked the name)."""
    n = max(1, min(MAX_PROMPTS, int(num_prompts or DEFAULT_PROMPTS)))
    if s.workload == "uniform":
        return uniform_mix(s.input_len, s.output_len, s.range_ratio, n)
    if s.workload == "sharegpt":
        return sharegpt_mix(s.input_len, s.output_len, n, max_len)
    if s.workload.startswith("file:"):
        return file_mix(os.path.expanduser(s.workload[5:]), n, max_len)
    return Mix("fixed", (s.input_len,), (s.output_len,))


def spec_for(s, mix: Mix):
    """A file's lengths are its own: the spec then carries the mix's means (for tables and validation)."""
    if mix.kind != "file":
        return s
    return replace(s, input_len=max(1, round(mix.mean_in)), output_len=max(1, round(mix.mean_out)))


def case_workload(sv: dict) -> tuple[str, float] | None:
    """A validation case's serving block -> (workload, range ratio); None when it cannot be modelled.
    "workload": "dataset" is ShareGPT-like unless the case names the random dataset (then uniform, its ratio)."""
    w = str(sv.get("workload") or "fixed").lower()
    if w == "fixed":
        return "fixed", 0.0
    if w != "dataset":
        return None
    name = str(sv.get("dataset") or "sharegpt").lower()
    if name == "random":
        ratio = sv.get("range_ratio", 0.0)
        return ("uniform", float(ratio)) if isinstance(ratio, (int, float)) and 0 <= ratio < 1 else None
    return ("sharegpt", 0.0) if "sharegpt" in name else None


# ---- speed ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Terms:
    prefill_s: float  # E[prefill(in).seconds]
    extra_s: float  # E[prefill compute + comm]: what a prompt folded into decode steps adds
    mean_out: float
    context: float  # length-biased mean context of a decoding request
    kv_tokens: int  # length-biased KV a slot needs: E[out (in + out)] / E[out]
    prefills: tuple  # per request (seconds), for the service-time variance


def _terms(m, s, mem, cluster, view, mix: Mix) -> _Terms:
    cache = view.__dict__.setdefault("_serving_cache", {})
    key = ("mix", id(mix))
    hit = cache.get(key)
    if hit is not None and hit[0] is mix:
        return hit[1]
    pf = {L: _prefill_cached(m, s, mem, cluster, view, L) for L in set(mix.inputs)}
    n = len(mix.inputs)
    sec = tuple(pf[i].seconds for i in mix.inputs)
    extra = sum(max(pf[i].compute_s, 0.0) + pf[i].comm_s for i in mix.inputs) / n
    w = sum(mix.outputs)
    ctx = sum(o * (i + o / 2) for i, o in zip(mix.inputs, mix.outputs)) / w
    kv = sum(o * (i + o) for i, o in zip(mix.inputs, mix.outputs)) / w
    t = _Terms(sum(sec) / n, extra, w / n, ctx, max(1, round(kv)), sec)
    cache[key] = (mix, t)
    return t


def mix_max_batch(m, s, e, mem, mix: Mix, view=None, cluster=None) -> int:
    """speed.max_batch with the length-biased KV of a slot."""
    tokens = _terms(m, s, mem, cluster, view, mix).kv_tokens if view is not None else s.input_len + s.output_len
    per_req = kv_bytes_for_request(m, s, tokens, e.block_size)
    by_kv = int(mem.capacity // per_req) if per_req else 0
    return max(0, min(e.max_num_seqs, by_kv))


def _cycle(m, s, mem, cluster, view, t: _Terms, b: float) -> tuple[float, object]:
    step = decode_step(m, s, mem, cluster, view, b, t.context)
    return t.prefill_s + (b - 1) * t.extra_s + (t.mean_out - 1) * step.seconds, step


def mix_closed_loop(m, s, e, mem, cluster, view, mix: Mix, concurrency: float,
                    capacity: float | None = None) -> Load:
    """speed.closed_loop over a mix (see the module docstring)."""
    t = _terms(m, s, mem, cluster, view, mix)
    b_max = mix_max_batch(m, s, e, mem, mix, view, cluster)
    b = max(1.0, min(concurrency, b_max))
    out = t.mean_out
    cycle, step = _cycle(m, s, mem, cluster, view, t, b)
    tpot = ((out - 1) * step.seconds + (b - 1) * t.extra_s) / max(1.0, out - 1)
    ttft = t.prefill_s + (0.5 * step.seconds if b > 1 else 0.0) + view("ttft_overhead_ms") * 1e-3
    rps = b / cycle
    if capacity is None:
        capacity = b_max / _cycle(m, s, mem, cluster, view, t, b_max)[0] if b_max else 0.0
    return Load(b, ttft, tpot, rps * out, rps, step.bound, capacity_requests_per_s=capacity,
                output_len=max(1, round(out)))


def _service_cv2(t: _Terms, mix: Mix, step_s: float, b: int) -> float:
    """C_s^2 of a request's service time at the largest batch: its prefill, its decode steps, the others' prefills."""
    times = [p + (o - 1) * step_s + (b - 1) * t.extra_s for p, o in zip(t.prefills, mix.outputs)]
    mean = sum(times) / len(times)
    var = sum((x - mean) ** 2 for x in times) / len(times)
    return var / mean ** 2 if mean > 0 else 0.0


def mix_open_loop(m, s, e, mem, cluster, view, mix: Mix, rate: float, num_prompts: int | None = None) -> Load:
    """speed.open_loop over a mix: Little's law for the requests in flight, M/G/1 queueing before the first token."""
    t = _terms(m, s, mem, cluster, view, mix)
    b_max = max(1, mix_max_batch(m, s, e, mem, mix, view, cluster))
    cycle, step = _cycle(m, s, mem, cluster, view, t, b_max)
    mu = b_max / cycle
    out = max(1, round(t.mean_out))
    if math.isinf(rate) or rate >= mu:
        full = mix_closed_loop(m, s, e, mem, cluster, view, mix, b_max if not num_prompts else min(num_prompts, b_max))
        wait = 0.0
        if num_prompts:
            wait = max(0.0, (num_prompts / full.batch - 1) / 2) * full.batch / full.requests_per_s
        return Load(full.batch, full.ttft_s + wait, full.tpot_s, full.output_tokens_per_s, full.requests_per_s,
                    full.decode_bound, wait, stable=math.isinf(rate) or bool(num_prompts),
                    capacity_requests_per_s=mu, output_len=out)
    lo, hi = 0.0, float(b_max)
    for _ in range(40):
        mid = (lo + hi) / 2
        cl = mix_closed_loop(m, s, e, mem, cluster, view, mix, max(1.0, mid), mu)
        in_system = rate * (cl.ttft_s + cl.tpot_s * (t.mean_out - 1))
        lo, hi = (mid, hi) if in_system > mid else (lo, mid)
    cl = mix_closed_loop(m, s, e, mem, cluster, view, mix, max(1.0, hi), mu)
    rho = rate / mu
    wait = rho * (1 + _service_cv2(t, mix, step.seconds, b_max)) / (2 * mu * (1 - rho))
    return Load(cl.batch, cl.ttft_s + wait, cl.tpot_s, rate * t.mean_out, rate, cl.decode_bound, wait,
                capacity_requests_per_s=mu, output_len=out)


def mix_load(m, s, e, mem, cluster, view, mix: Mix, num_prompts: int | None = None) -> Load:
    if s.all_at_once and num_prompts:  # all at once: burst.py
        return burst(m, s, e, mem, cluster, view, list(mix.inputs), list(mix.outputs),
                     mix_max_batch(m, s, e, mem, mix, view, cluster))
    if s.request_rate is not None:
        return mix_open_loop(m, s, e, mem, cluster, view, mix, s.request_rate, num_prompts)
    return mix_closed_loop(m, s, e, mem, cluster, view, mix, s.concurrency or 1)


def batch_cap(est, view) -> int:
    """The engine's largest batch for an estimate (its mix when it has one)."""
    from .speed import max_batch

    mix = getattr(est, "mix", None)
    if mix is None:
        return max_batch(est.spec, est.engine, est.memory, est.model)
    return mix_max_batch(est.model, est.spec, est.engine, est.memory, mix, view, est.cluster)


def closed_loop_for(est, view, concurrency: float, capacity: float | None = None) -> Load:
    """speed.closed_loop for an estimate, over its mix when it has one (search.py's concurrency ladder)."""
    from .speed import closed_loop

    mix = getattr(est, "mix", None)
    if mix is None:
        return closed_loop(est.model, est.spec, est.engine, est.memory, est.cluster, view, concurrency, capacity)
    return mix_closed_loop(est.model, est.spec, est.engine, est.memory, est.cluster, view, mix, concurrency,
                           capacity)
