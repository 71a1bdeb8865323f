"""Serving speed: prefill -> time to first token, decode -> time per output token, throughput under a load.

Rooflines per GPU (one of `tp`): a pass takes max(FLOPs / (peak x MFU), bytes / (bandwidth x efficiency)), plus
two all-reduces per layer of the pass's hidden states when tensor-parallel (Megatron-LM's TP layout: one after
attention, one after the MLP; nccl-tests' bus-bandwidth model: 2 (n-1)/n of the buffer per GPU), plus the
engine's per-step overhead.

A decode step also costs the host (CPU) work of its running sequences (scheduler, sampled tokens, detokenising, one
streamed chunk each; host_us_per_seq): it adds to the step where the engine waits for it (vLLM V1 before async
scheduling) and is a floor, max(GPU step, host work), where the engine overlaps it (vLLM with async scheduling,
SGLang's overlap scheduler); host_serial in serving.yaml says which.

FLOPs (Kaplan et al. 2020 / PaLM appendix B convention): 2 x matmul weights per token; causal attention adds
2 x L x s^2 x q_dim for a prompt of s tokens (QK^T and PV, half of the square), and 4 x L x c x q_dim per decoded
token at context c. The LM head runs on the last prompt token only (vLLM computes logits for sampled positions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from functools import lru_cache

from ..estimate.flops import attention_flops_per_token
from ..estimate.params import count_params, layer_tensors
from ..estimate.params import matmul_params_per_token as _matmul_params
from ..spec.cluster import Cluster
from ..spec.model import ModelSpec
from .engines import EngineSettings
from .memory import MemoryBreakdown, kv_bytes_for_request, kv_read_bytes
from .spec import ServingSpec


@lru_cache(maxsize=256)
def matmul_params_per_token(m: ModelSpec) -> int:
    return _matmul_params(m)


@dataclass(frozen=True)
class Roofline:
    """What one pass costs on one GPU; `bound` names the larger side. `host_s`: the engine's host (CPU) work for a
    decode step's running sequences, `host_serial`: the share of it the GPU step waits for (host_work below)."""

    compute_s: float
    memory_s: float
    comm_s: float
    overhead_s: float
    host_s: float = 0.0
    host_serial: float = 1.0

    @property
    def gpu_s(self) -> float:
        return max(self.compute_s, self.memory_s) + self.comm_s + self.overhead_s

    def with_gpu(self, extra_s: float = 0.0) -> float:
        """The step with `extra_s` more GPU work in it (prompt chunks): max(GPU + host_serial x host, host), i.e. the
        sum where the engine waits for its host work (host_serial 1), the longer of the two where it overlaps it (0)."""
        return max(self.gpu_s + extra_s + self.host_serial * self.host_s, self.host_s)

    @property
    def seconds(self) -> float:
        return self.with_gpu()

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.memory_s else "memory"


def _peak(s: ServingSpec, cluster: Cluster) -> float:
    gpu = cluster.gpu
    if s.weights == "fp8" and gpu.fp8_supported and gpu.peak("fp8"):
        return gpu.peak("fp8")  # W8A8 fp8 GEMMs on Ada/Hopper
    return gpu.peak("bf16") or gpu.peak("fp16") or gpu.peak("fp32")


def _allreduce_s(tokens: float, m: ModelSpec, s: ServingSpec, cluster: Cluster, view) -> float:
    if s.tp <= 1:
        return 0.0
    buf = tokens * m.hidden * 2.0
    bus = cluster.intra_bytes_per_s * view("allreduce_bus_efficiency")
    one = view("allreduce_latency_us", cluster.intra_link) * 1e-6 + 2 * (s.tp - 1) / s.tp * buf / bus
    return 2 * m.layers * one


def _overhead_s(m: ModelSpec, s: ServingSpec, view) -> float:
    per_layer = view("layer_overhead_us") + (0.0 if s.cuda_graphs else view("eager_launch_overhead_us_per_layer"))
    return view("step_overhead_ms") * 1e-3 + per_layer * 1e-6 * m.layers


def _stream_s(mem: MemoryBreakdown, weight_bytes: float, kv_bytes: float, s: ServingSpec, cluster: Cluster,
              view) -> float:
    """Reading weights (quantised Linears at their kernels' efficiency) and KV at the decode efficiency."""
    bw = cluster.gpu.memory_bandwidth
    quant = s.weights not in ("bf16", "fp16", "fp8")
    share = (mem.weights.linears + mem.weights.scales) / mem.weights.total if quant and mem.weights.total else 0.0
    eff_q = view("quantized_bandwidth_efficiency") if quant else 1.0
    eff = view("decode_bandwidth_efficiency")
    return weight_bytes * (share / (bw * eff_q) + (1 - share) / (bw * eff)) + kv_bytes / (bw * eff)


def _prefill_attention_flops(m: ModelSpec, prompt: int) -> float:
    """QKᵀ and PV of a causal prefill: half of every token against the whole prompt (2 x layers x prompt² x q_dim
    for full attention). A read structure weighs its blocks (estimate/flops.py): sliding-window layers attend to
    the window, linear-attention and state-space layers have no prompt² term."""
    return m.layers * attention_flops_per_token(m, prompt) * prompt / 2


def prefill(m: ModelSpec, s: ServingSpec, mem: MemoryBreakdown, cluster: Cluster, view, prompt: int,
            seqs: int = 1) -> Roofline:
    """One pass over `seqs` prompts of `prompt` tokens (the first token of each comes out of it)."""
    head = m.vocab * m.hidden
    tokens = prompt * seqs
    flops = 2.0 * ((matmul_params_per_token(m) - head) * tokens + head * seqs)
    flops += _prefill_attention_flops(m, prompt) * seqs
    compute = flops / s.tp / (_peak(s, cluster) * view("prefill_mfu"))
    memory = _stream_s(mem, mem.weights.total, 0.0, s, cluster, view)
    return Roofline(compute, memory, _allreduce_s(tokens, m, s, cluster, view), _overhead_s(m, s, view))


def _weight_bytes_read(m: ModelSpec, mem: MemoryBreakdown, batch: float) -> float:
    """MoE: a decode step reads only the experts its tokens route to (expected distinct experts of batch x k)."""
    if not m.is_moe:
        return mem.weights.total
    share = 1.0 - (1.0 - m.experts_per_tok / m.num_experts) ** batch
    moe_fraction = routed_fraction(m)
    return mem.weights.total * (1 - moe_fraction + moe_fraction * share)


@lru_cache(maxsize=256)
def routed_fraction(m: ModelSpec) -> float:
    """The routed experts' share of the model's parameters (gpt-oss-20b 0.91, Mixtral-8x7B 0.97, DeepSeek-V3
    0.97), from its inventory; it was a stated 0.9 for every MoE."""
    routed = sum(t.numel for t in layer_tensors(m) if t.role == "expert" and t.count > 1)
    return min(1.0, m.layers * routed / count_params(m))


def decode_step(m: ModelSpec, s: ServingSpec, mem: MemoryBreakdown, cluster: Cluster, view, batch: float,
                context: float) -> Roofline:
    """One decode step of `batch` requests at mean context `context`: reads the weights and every request's KV."""
    kv = batch * kv_read_bytes(m, s, max(1, int(context)))
    memory = _stream_s(mem, _weight_bytes_read(m, mem, batch), kv, s, cluster, view)
    flops = 2.0 * matmul_params_per_token(m) * batch + m.layers * attention_flops_per_token(m, context) * batch
    compute = flops / s.tp / (_peak(s, cluster) * view("decode_mfu"))
    # attention reads the KV cache in its own kernels, after the GEMMs: a share of that read cannot hide under them
    kv_read_s = kv / (cluster.gpu.memory_bandwidth * view("decode_bandwidth_efficiency"))
    compute += view("decode_attention_serial") * kv_read_s
    return Roofline(compute, memory, _allreduce_s(batch, m, s, cluster, view), _overhead_s(m, s, view),
                    *host_work(view, batch))


def host_work(view, batch: float) -> tuple[float, float]:
    """The host work of a decode step, host_us_per_seq for each running sequence (the scheduler's bookkeeping, the
    sampled token back to Python, stop checks, detokenising, the streamed chunk), and the share of it the GPU step
    waits for (host_serial; serving.yaml names each engine's code path). The first sequence's is counted in
    step_overhead_ms, which was fitted at batch 1, so batch 1 is unchanged."""
    return max(0.0, batch - 1) * view("host_us_per_seq") * 1e-6, view("host_serial")


@dataclass(frozen=True)
class Load:
    """The result of a workload: per-request latencies and the engine's throughput."""

    batch: float  # requests decoding together
    ttft_s: float
    tpot_s: float
    output_tokens_per_s: float
    requests_per_s: float
    decode_bound: str
    queue_s: float = 0.0
    stable: bool = True
    capacity_requests_per_s: float = 0.0
    output_len: int = 1
    ttft_p99_s: float = 0.0  # the 99th percentile of TTFT where the run is simulated request by request (burst.py)

    @property
    def e2e_s(self) -> float:
        return self.ttft_s + self.tpot_s * max(0, self.output_len - 1)


def max_batch(s: ServingSpec, e: EngineSettings, mem: MemoryBreakdown, m: ModelSpec) -> int:
    """Requests that can decode together: max_num_seqs, and the KV blocks of input + output tokens each."""
    per_req = kv_bytes_for_request(m, s, s.input_len + s.output_len, e.block_size)
    by_kv = int(mem.capacity // per_req) if per_req else 0
    return max(0, min(e.max_num_seqs, by_kv))


def closed_loop(m: ModelSpec, s: ServingSpec, e: EngineSettings, mem: MemoryBreakdown, cluster: Cluster, view,
                concurrency: float, capacity: float | None = None) -> Load:
    """`concurrency` requests in flight (capped by the engine's batch). Continuous batching: over one request's
    lifetime the engine also prefills the other requests of the batch, which stretches every decode step.
    `capacity` (requests/s at the largest batch) is computed when not given. This is the steady state of staggered
    streams; a run of known length with equal requests goes in rounds instead (estimate.rounds)."""
    b_max = max_batch(s, e, mem, m)
    b = max(1.0, min(concurrency, b_max))
    inp, out = s.input_len, s.output_len
    p1 = _prefill_cached(m, s, mem, cluster, view, inp)
    step = decode_step(m, s, mem, cluster, view, b, inp + out / 2)
    p_extra = max(p1.compute_s, 0.0) + p1.comm_s  # a prompt folded into a decode step adds its compute
    cycle = p1.seconds + (b - 1) * p_extra + (out - 1) * step.seconds
    tpot = ((out - 1) * step.seconds + (b - 1) * p_extra) / max(1, out - 1)
    ttft = p1.seconds + (0.5 * step.seconds if b > 1 else 0.0) + view("ttft_overhead_ms") * 1e-3
    rps = b / cycle
    if capacity is None:
        capacity = b_max / _cycle(m, s, e, mem, cluster, view, b_max) if b_max else 0.0
    return Load(b, ttft, tpot, rps * out, rps, step.bound, capacity_requests_per_s=capacity, output_len=out)


def _prefill_cached(m, s, mem, cluster, view, prompt: int) -> Roofline:
    """prefill() memoised on the view (one estimate's view sees one setup), since every load point needs it."""
    key = ("prefill", prompt)
    cache = view.__dict__.setdefault("_serving_cache", {})
    hit = cache.get(key)
    if hit is None:
        hit = cache[key] = prefill(m, s, mem, cluster, view, prompt)
    return hit


def prefill_floor_s(m: ModelSpec, s: ServingSpec, cluster: Cluster, prompt: int) -> float:
    """The least time a full prefill of `prompt` tokens can take: its FLOPs at the GPU's dense peak (MFU 1)."""
    head = m.vocab * m.hidden
    flops = 2.0 * ((matmul_params_per_token(m) - head) * prompt + head) + _prefill_attention_flops(m, prompt)
    return flops / s.tp / _peak(s, cluster)


def _cycle(m, s, e, mem, cluster, view, b) -> float:
    p1 = _prefill_cached(m, s, mem, cluster, view, s.input_len)
    step = decode_step(m, s, mem, cluster, view, b, s.input_len + s.output_len / 2)
    return p1.seconds + (b - 1) * (p1.compute_s + p1.comm_s) + (s.output_len - 1) * step.seconds


def open_loop(m: ModelSpec, s: ServingSpec, e: EngineSettings, mem: MemoryBreakdown, cluster: Cluster, view,
              rate: float, num_prompts: int | None = None) -> Load:
    """Poisson arrivals at `rate` requests/s. Requests in flight follow Little's law (rate x time in system),
    found by bisection; queueing before the first token as an M/D/1 queue against the engine's capacity at its
    largest batch (Kleinrock, Queueing Systems vol. 1: W = rho / (2 mu (1 - rho))). At or above capacity (and for
    rate = inf, all requests at once) the engine runs at its largest batch and requests wait."""
    b_max = max(1, max_batch(s, e, mem, m))
    mu = b_max / _cycle(m, s, e, mem, cluster, view, b_max)
    if math.isinf(rate) or rate >= mu:
        full = closed_loop(m, s, e, mem, cluster, view, b_max if not num_prompts else min(num_prompts, b_max))
        wait = 0.0
        if num_prompts:
            waves = num_prompts / full.batch
            wait = max(0.0, (waves - 1) / 2) * full.batch / full.requests_per_s
        load = Load(full.batch, full.ttft_s + wait, full.tpot_s, full.output_tokens_per_s, full.requests_per_s,
                    full.decode_bound, wait, stable=math.isinf(rate) or bool(num_prompts), capacity_requests_per_s=mu,
                    output_len=s.output_len)
        return load
    lo, hi = 0.0, float(b_max)
    for _ in range(40):
        mid = (lo + hi) / 2
        cl = closed_loop(m, s, e, mem, cluster, view, max(1.0, mid))
        in_system = rate * (cl.ttft_s + cl.tpot_s * (s.output_len - 1))
        lo, hi = (mid, hi) if in_system > mid else (lo, mid)
    cl = closed_loop(m, s, e, mem, cluster, view, max(1.0, hi))
    rho = rate / mu
    wait = rho / (2 * mu * (1 - rho))
    return Load(cl.batch, cl.ttft_s + wait, cl.tpot_s, rate * s.output_len, rate, cl.decode_bound, wait,
                capacity_requests_per_s=mu, output_len=s.output_len)
