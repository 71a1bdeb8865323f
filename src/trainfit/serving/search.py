"""Many serving setups: what would fit instead, a GPU comparison, and the search for a serving target over the
instance catalog (TP degree x replicas per instance x instances), ranked by cost per million output tokens."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..catalog import all_instances, get_gpu
from ..catalog.instances import cheapest_price
from ..errors import SpecError
from ..spec.hardware import GpuSpec, InstanceSpec, Price
from ..spec.model import ModelSpec
from . import engine_lmdeploy as lmd
from .estimate import Reason, ServingEstimate, estimate
from .spec import ServingSpec

TP_DEGREES = (1, 2, 4, 8)
QUANTISED = ("fp8", "int8", "awq")  # tried in this order: closest to 16-bit first
LARGER_GPUS = ("l20", "a100-sxm4-80gb", "h20", "h100-sxm", "h200")


@dataclass(frozen=True)
class Alternative:
    """A change that makes the setup fit: `change` holds the ServingSpec fields (and `gpu`) it sets."""

    change: dict
    kv_tokens: int
    max_concurrency: float
    gpus: int


def _try(m: ModelSpec, gpu: GpuSpec, spec: ServingSpec, overrides) -> ServingEstimate | None:
    try:
        est = estimate(m, gpu, spec, overrides=overrides)
    except SpecError:
        return None
    return est if est.fits else None


def _alt(est: ServingEstimate, change: dict) -> Alternative:
    return Alternative(change, est.memory.kv_tokens, est.memory.max_concurrency, est.spec.tp)


def alternatives(est: ServingEstimate, overrides: dict | None = None, limit: int = 5) -> list[Alternative]:
    """What would fit: a shorter max length, fp8 KV, a quantised format, TP over more GPUs (fewest GPUs first,
    then the least lossy format), or one larger GPU."""
    m, s, gpu = est.model, est.spec, est.gpu
    out: list[Alternative] = []
    weights_fit = not any(r.key == "sv_r_weights" for r in est.reasons)
    if weights_fit:
        per_req = est.memory.request_bytes / est.memory.max_model_len
        longest = int(est.memory.capacity / per_req)
        n = 1 << max(0, longest.bit_length() - 1) if longest >= 1024 else 0
        if n and n >= s.input_len + s.output_len:
            hit = _try(m, gpu, replace(s, max_model_len=n), overrides)
            if hit:
                out.append(_alt(hit, {"max_model_len": n}))
        fewer = _fewer_states(est, overrides)
        if fewer:
            out.append(fewer)
        kv = "int8" if s.engine == "lmdeploy" else "fp8"  # LMDeploy quantises KV to int8/int4, not fp8
        if s.kv_cache_dtype != kv and not (kv == "int8" and s.kv_cache_dtype == "int4"):
            hit = _try(m, gpu, replace(s, kv_cache_dtype=kv), overrides)
            if hit:
                out.append(_alt(hit, {"kv_cache_dtype": kv}))
    out += _scale_out(est, overrides)
    big = _larger_gpu(est, overrides)
    return out[:limit - 1] + [big] if big else out[:limit]


def _fewer_states(est: ServingEstimate, overrides) -> Alternative | None:
    """A hybrid on TensorRT-LLM or LMDeploy keeps a state per request of its batch size before the KV (hybrid.py):
    the largest power-of-two --max-num-seqs below it that leaves room for a max-length request."""
    h, s = est.memory.hybrid, est.spec
    if not h or est.engine.engine not in ("trtllm", "lmdeploy") or not h.get("state_slots"):
        return None
    n = 1 << max(0, (est.engine.max_num_seqs - 1).bit_length() - 1)
    while n >= 1:
        hit = _try(est.model, est.gpu, replace(s, max_num_seqs=n), overrides)
        if hit:
            return _alt(hit, {"max_num_seqs": n})
        n //= 2
    return None


def _formats(s: ServingSpec, gpu: GpuSpec) -> list[str]:
    return [s.weights] + [f for f in QUANTISED if f != s.weights and (f != "fp8" or gpu.fp8_supported)
                          and lmd.serves(s.engine, s.lmdeploy_backend, f)]


def _scale_out(est: ServingEstimate, overrides) -> list[Alternative]:
    """Per weight format (least lossy first): the fewest GPUs of this model that fit with TP."""
    m, s, gpu = est.model, est.spec, est.gpu
    found = []
    for fmt in _formats(s, gpu):
        for tp in (t for t in TP_DEGREES if t >= s.tp and m.heads % t == 0):
            if tp == s.tp and fmt == s.weights:
                continue
            hit = _try(m, gpu, replace(s, tp=tp, weights=fmt), overrides)
            if hit:
                change = {"weights": fmt} if fmt != s.weights else {}
                if tp != s.tp:
                    change["tp"] = tp
                found.append(_alt(hit, change))
                break
    return sorted(found, key=lambda a: a.gpus)


def _larger_gpu(est: ServingEstimate, overrides) -> Alternative | None:
    """The smallest larger GPU on which one copy fits, with the least lossy format that fits there."""
    for name in LARGER_GPUS:
        big = get_gpu(name)
        if big.memory_bytes <= est.gpu.memory_bytes:
            continue
        for fmt in _formats(est.spec, big):
            hit = _try(est.model, big, replace(est.spec, tp=1, weights=fmt), overrides)
            if hit:
                change = {"gpu": big.id, "tp": 1}
                if fmt != est.spec.weights:
                    change["weights"] = fmt
                return _alt(hit, change)
    return None


# ---- comparison and search -------------------------------------------------------------------------------------

@dataclass
class Option:
    """One way to serve: an instance (or a bare GPU), TP degree, replicas per instance, instances needed."""

    gpu: str
    instance: InstanceSpec | None
    price: Price | None
    tp: int
    replicas: int  # engine copies per instance (gpu_count // tp)
    instances: int
    est: ServingEstimate
    failed: list[Reason] = field(default_factory=list)

    @property
    def output_tokens_per_s(self) -> float:
        load = self.est.load
        return load.output_tokens_per_s * self.replicas * self.instances if load else 0.0

    @property
    def cost_per_hour(self) -> float | None:
        return self.price.per_hour * self.instances if self.price else None

    @property
    def cost_per_m_output(self) -> float | None:
        tps = self.output_tokens_per_s
        return self.cost_per_hour / (tps * 3600) * 1e6 if self.price and tps else None


@dataclass(frozen=True)
class Target:
    tokens_per_s: float | None = None
    max_ttft_ms: float | None = None
    max_tpot_ms: float | None = None

    def misses(self, est: ServingEstimate) -> list[Reason]:
        return self.misses_load(est.load, est.spec.request_rate)

    def misses_load(self, load, request_rate: float | None = None) -> list[Reason]:
        out = []
        if self.max_ttft_ms and load.ttft_s * 1e3 > self.max_ttft_ms:
            out.append(Reason("sv_r_ttft", {"have": load.ttft_s * 1e3, "need": self.max_ttft_ms}))
        if self.max_tpot_ms and load.tpot_s * 1e3 > self.max_tpot_ms:
            out.append(Reason("sv_r_tpot", {"have": load.tpot_s * 1e3, "need": self.max_tpot_ms}))
        if not load.stable:
            out.append(Reason("sv_r_unstable", {"have": load.capacity_requests_per_s, "need": request_rate}))
        return out


def compare(m: ModelSpec, gpus: list[str], spec: ServingSpec, overrides=None,
            providers: tuple[str, ...] = ("alibaba",)) -> list[Option]:
    """Per GPU: the smallest TP degree that fits (same format), priced by its cheapest catalog instance."""
    rows = []
    for name in gpus:
        gpu = get_gpu(name)
        last = None
        for tp in (t for t in TP_DEGREES if m.heads % t == 0):
            last = estimate(m, gpu, replace(spec, tp=tp), overrides=overrides)
            if last.fits:
                break
        inst, price = _cheapest_instance(gpu.id, last.spec.tp, providers)
        replicas = (inst.gpu_count // last.spec.tp) if inst else 1
        rows.append(Option(gpu.id, inst, price, last.spec.tp, replicas, 1, last, list(last.reasons)))
    return rows


def _cheapest_instance(gpu_id: str, tp: int, providers) -> tuple[InstanceSpec | None, Price | None]:
    best: tuple[InstanceSpec | None, Price | None] = (None, None)
    for inst in all_instances().values():
        if inst.gpu != gpu_id or not inst.trainable or inst.gpu_count < tp or inst.provider not in providers:
            continue
        price = cheapest_price(inst)
        if price and (best[1] is None or _per_gpu_tp(price, inst, tp) < _per_gpu_tp(best[1], best[0], tp)):
            best = (inst, price)
    return best


def _per_gpu_tp(price: Price, inst: InstanceSpec, tp: int) -> float:
    return price.per_hour / max(1, inst.gpu_count // tp)


def search(m: ModelSpec, spec: ServingSpec, target: Target, overrides=None, providers: tuple[str, ...] = ("alibaba",),
           formats: tuple[str, ...] | None = None) -> tuple[list[Option], int]:
    """Every priced instance of `providers` x TP degree x weight format: options that meet the target, cheapest
    per output token first, and how many setups were tried. Instances needed = ceil(target tokens/s / one
    instance's). Costs are compared in the prices' own currency: pass providers of one currency."""
    options, tried = [], 0
    formats = formats or (spec.weights,)
    for inst in all_instances().values():
        if not inst.trainable or inst.provider not in providers:
            continue
        price = cheapest_price(inst)
        if price is None:
            continue
        gpu = get_gpu(inst.gpu)
        for tp in (t for t in TP_DEGREES if t <= inst.gpu_count and m.heads % t == 0):
            for fmt in formats:
                tried += 1
                opt = _option(m, gpu, inst, price, replace(spec, tp=tp, weights=fmt), target, overrides)
                if opt is not None:
                    options.append(opt)
    options.sort(key=lambda o: (o.cost_per_m_output or math.inf, -o.output_tokens_per_s))
    return options, tried


CONCURRENCY_LADDER = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def _option(m, gpu, inst, price, spec, target: Target, overrides) -> Option | None:
    try:
        est = estimate(m, gpu, spec, instance=inst, overrides=overrides)
    except SpecError:
        return None
    if not est.fits or target.misses(est):
        return None
    if spec.concurrency is None and spec.request_rate is None:
        est = _busiest(est, target, overrides)
    replicas = inst.gpu_count // spec.tp
    per_instance = est.load.output_tokens_per_s * replicas
    n = max(1, math.ceil(target.tokens_per_s / per_instance)) if target.tokens_per_s else 1
    return Option(gpu.id, inst, price, spec.tp, replicas, n, est)


def _busiest(est: ServingEstimate, target: Target, overrides) -> ServingEstimate:
    """Without a stated load: the highest concurrency of the ladder (up to the engine's batch) whose latencies
    still meet the target. Latency grows with concurrency, so the ladder stops at the first miss."""
    from .knobs import knobs
    from .workload import batch_cap, closed_loop_for

    view = knobs(overrides).for_framework(est.spec.generation).for_gpu(est.gpu)
    cap = batch_cap(est, view)
    best_c, best_load = 1, est.load
    for c in CONCURRENCY_LADDER[1:]:
        if c > cap:
            break
        load = closed_loop_for(est, view, c, est.load.capacity_requests_per_s)
        if target.misses_load(load):
            break
        best_c, best_load = c, load
    if best_c == 1:
        return est
    return replace(est, spec=replace(est.spec, concurrency=best_c), load=best_load)
