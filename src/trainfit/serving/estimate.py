"""One serving setup: memory, speed under a load, whether it fits and, if not, what would.

    >>> from trainfit.serving import serve
    >>> est = serve("qwen2-7b", gpu="a10")
    >>> est.memory.kv_per_token, est.fits
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..catalog import get_gpu, get_instance, resolve_model
from ..errors import ServingError
from ..spec.cluster import Cluster, cluster_for
from ..spec.hardware import GpuSpec, InstanceSpec
from ..spec.model import ModelSpec
from . import engine_trtllm as trt
from .engines import EngineSettings, resolve
from .knobs import knobs
from .memory import MemoryBreakdown, layout, memory, mla_latent, sliding_layers
from .burst import burst
from .speed import Load, closed_loop, decode_step, max_batch, open_loop, prefill
from .spec import DEFAULT_MAX_MODEL_LEN, ServingSpec
from .workload import build_mix, mix_load, spec_for


@dataclass(frozen=True)
class Reason:
    """Why a setup does not work: an i18n key and its values (worded by report/serving.py)."""

    key: str
    values: dict = field(default_factory=dict)


@dataclass
class ServingEstimate:
    model: ModelSpec
    gpu: GpuSpec
    instance: InstanceSpec | None
    spec: ServingSpec
    engine: EngineSettings
    cluster: Cluster
    memory: MemoryBreakdown
    load: Load | None
    reasons: list[Reason]
    bandwidth_bound_tps: float  # batch-1 decode ceiling: bandwidth / weight bytes read per token
    assumptions: list  # (i18n key, values) facts, or the cluster's own notes (text)
    used: dict
    mix: object = None  # workload.Mix of a variable-length workload; None = fixed lengths
    num_prompts: int | None = None  # requests the run sends in all (with request_rate inf: all at once, burst.py)

    @property
    def fits(self) -> bool:
        return not self.reasons


def rounds(m: ModelSpec, s: ServingSpec, e: EngineSettings, mem: MemoryBreakdown, cluster: Cluster, view,
           num_prompts: int) -> Load:
    """A benchmark client at a fixed concurrency with fixed lengths, the run it states (`num_prompts`) simulated
    request by request (burst.py with `clients`). The clients start every slot at once and refill a slot the moment
    its request ends (vLLM vllm/benchmarks/serve.py `benchmark()`: one task per request, all created at once, each
    `async with semaphore` = asyncio.Semaphore(max_concurrency); SGLang's bench_serving alike; LMDeploy's
    profile_generation / profile_throughput: `concurrency` threads, each sending its next request when the last
    ends). So the first round is a burst of prompts (the last waits for all the others'), and equal requests that
    got their first token in the same step end in the same step: the groups the engine's token budget made in the
    first round come back every round (all of them in one step when the prompts fit the budget: lock-step rounds).
    TTFT counts from when a request is sent; the engine queues what its largest batch cannot take."""
    n = max(1, num_prompts)
    load = burst(m, s, e, mem, cluster, view, [s.input_len] * n, [s.output_len] * n, max_batch(s, e, mem, m),
                 clients=max(1, round(s.concurrency or 1)))
    steady = closed_loop(m, s, e, mem, cluster, view, s.concurrency or 1)  # its capacity: the largest batch's
    return replace(load, capacity_requests_per_s=steady.capacity_requests_per_s)


def check_model(m: ModelSpec, s: ServingSpec) -> None:
    if m.is_encoder:
        raise ServingError("sv_e_encoder", model=m.name)
    if m.heads % s.tp:
        raise ServingError("sv_e_tp_heads", tp=s.tp, heads=m.heads, model=m.name)
    if m.hidden <= 0 or (not mla_latent(m) and (m.kv_heads <= 0 or m.head_dim <= 0)):
        raise ServingError("sv_e_no_kv", model=m.name, hidden=m.hidden, kv=m.kv_heads, dim=m.head_dim)
    if m.structure is not None and not mla_latent(m) and \
            set(m.structure.mixers()) <= {"linear_attention", "mamba", "other"} and \
            not any({"q", "k", "v"} & set(lin.roles) for g in m.structure.groups for lin in g.linears):
        raise ServingError("sv_e_no_attention", model=m.name)  # a state-space model (Mamba, Mamba-2, ...)


def max_len_for(m: ModelSpec, s: ServingSpec) -> int:
    """--max-model-len, else trainfit's default (8192) capped at the model's positions."""
    limit = m.max_positions or DEFAULT_MAX_MODEL_LEN
    if s.max_model_len is None:
        return min(DEFAULT_MAX_MODEL_LEN, limit)
    if m.max_positions and s.max_model_len > m.max_positions:
        raise ServingError("sv_e_len", n=s.max_model_len, max=m.max_positions)
    return s.max_model_len


def _reasons(m: ModelSpec, s: ServingSpec, mem: MemoryBreakdown, gpu: GpuSpec) -> list[Reason]:
    out = []
    if s.weights == "fp8" and not gpu.fp8_supported and gpu.architecture not in ("ampere", "ada", "hopper"):
        out.append(Reason("sv_r_dtype", {"what": "fp8 weights", "gpu": gpu.id}))
    if s.weights == "bf16" and not gpu.bf16_supported:
        out.append(Reason("sv_r_dtype", {"what": "bf16", "gpu": gpu.id}))
    frac = 1.0 if s.engine in ("trtllm", "lmdeploy") else mem.fraction  # their fractions apply to the free rest
    budget = mem.total_gpu * frac - mem.buffers - mem.activation - mem.non_torch - mem.cuda_graphs
    if mem.weights.total > budget:
        out.append(Reason("sv_r_weights", {"need": mem.weights.total / 2**30, "have": max(0.0, budget) / 2**30}))
    elif mem.max_concurrency < 1:
        out.append(Reason("sv_r_kv", {"have": mem.kv_tokens, "need": mem.max_model_len}))
    return out


def estimate(m: ModelSpec, gpu: GpuSpec, s: ServingSpec, instance: InstanceSpec | None = None,
             overrides: dict | None = None, num_prompts: int | None = None, served: bool = False) -> ServingEstimate:
    """`served`: the setup is known to have run (a measured case), so its speed is predicted even when the
    predicted KV cache falls short of max_model_len (the run's unstated flags made it fit)."""
    check_model(m, s)
    view = knobs(overrides).for_framework(s.generation).for_gpu(gpu)
    e = trt.settings(m, s, gpu, max_len_for(m, s)) if s.engine == "trtllm" else resolve(s, gpu, max_len_for(m, s))
    lay = layout(m, s)  # None on every engine but vLLM and SGLang
    if lay and lay.block_size(e.block_size) != e.block_size:  # a page must hold a mamba state (hybrid.py)
        e = replace(e, block_size=lay.block_size(e.block_size))
    if s.input_len + s.output_len > e.max_model_len:
        raise ServingError("sv_e_ctx", n=s.input_len + s.output_len, max=e.max_model_len)
    mix = build_mix(s, num_prompts, e.max_model_len) if s.workload != "fixed" else None
    s = spec_for(s, mix) if mix is not None else s
    cluster = cluster_for(gpu, s.tp, 1, instance)
    mem = (trt.memory if s.engine == "trtllm" else memory)(m, s, e, gpu, view)
    if mem.max_running is not None:  # SGLang runs at most the requests its hybrid's states allow (hybrid_sglang.py)
        e = replace(e, max_num_seqs=max(1, min(e.max_num_seqs, mem.max_running)))
    reasons = _reasons(m, s, mem, gpu)
    load = None
    if not reasons or (served and all(r.key == "sv_r_kv" for r in reasons)):
        if mix is not None:
            load = mix_load(m, s, e, mem, cluster, view, mix, num_prompts)
        elif s.all_at_once and num_prompts:
            n = int(num_prompts)  # all at once: the run as the scheduler steps through it (burst.py)
            load = burst(m, s, e, mem, cluster, view, [s.input_len] * n, [s.output_len] * n, max_batch(s, e, mem, m))
        elif s.request_rate is not None:
            load = open_loop(m, s, e, mem, cluster, view, s.request_rate, num_prompts)
        elif num_prompts and (s.concurrency or 1) > 1:
            load = rounds(m, s, e, mem, cluster, view, int(num_prompts))
        else:
            load = closed_loop(m, s, e, mem, cluster, view, s.concurrency or 1)
    bw_bound = gpu.memory_bandwidth / mem.weights.total if mem.weights.total else 0.0
    notes = list(cluster.assumptions) if s.tp > 1 else []
    if s.engine == "trtllm":
        notes.append(trt.note_values(s, e, mem))
    if mem.hybrid and e.engine == "sglang":  # SGLang's state pool beside its KV pool (hybrid_sglang.py)
        h = mem.hybrid
        notes.append(("sv_hybrid_sglang", {"full": h["full_attention_layers"], "state": h["state_layers"],
                                           "slots": h["state_slots"], "gib": h["state_pool_gib"],
                                           "running": h["max_running_requests"],
                                           "ratio": h["mamba_full_memory_ratio"]}))
    elif mem.hybrid and e.engine in ("trtllm", "lmdeploy"):  # a state pool before the KV pool (hybrid.py)
        h = mem.hybrid
        notes.append(("sv_hybrid_pool", {"engine": e.engine, "full": h["full_attention_layers"],
                                         "state": h["state_layers"], "slots": h["state_slots"],
                                         "gib": h["state_pool_gib"]}))
    elif mem.hybrid:  # vLLM's hybrid KV cache manager (hybrid.py): why capacity and concurrency differ
        h = mem.hybrid
        key = "sv_hybrid_state" if h["state_layers"] else "sv_hybrid_window"
        notes.append((key, {"full": h["full_attention_layers"], "state": h["state_layers"],
                            "sliding": h["sliding_window_layers"], "window": h["window"], "block": mem.block_size,
                            "n": mem.max_model_len, "need": h["blocks_per_max_len_request"], "groups": h["groups"]}))
        if mem.kv_tokens + mem.block_size < mem.max_concurrency * mem.max_model_len:  # short by more than rounding
            notes.append(("sv_hybrid_tokens", {}))
    elif m.structure is not None and ({"linear_attention", "mamba"} & set(m.structure.mixers()) or (
            "sliding_attention" in m.structure.mixers() and not sliding_layers(m)[0])):
        notes.append(("sv_hybrid_not_modelled", {"engine": e.engine, "version": e.version}))
    if s.max_model_len is None and m.max_positions > e.max_model_len:
        notes.append(("sv_default_len", {"n": e.max_model_len, "max": m.max_positions}))  # worded by report/
    return ServingEstimate(m, gpu, instance, s, e, cluster, mem, load, reasons, bw_bound, notes, dict(view.used),
                           mix, num_prompts)


def serve(model: str | ModelSpec, gpu: str | None = None, instance: str | None = None,
          overrides: dict | None = None, num_prompts: int | None = None, **spec) -> ServingEstimate:
    """The API: names in, estimate out. `spec`: the fields of ServingSpec (tp may be given as gpus)."""
    if gpu and instance:
        raise ServingError("sv_e_both")
    if not gpu and not instance:
        raise ServingError("sv_e_where")
    m = resolve_model(model) if isinstance(model, str) else model
    inst = get_instance(instance) if instance else None
    if inst is not None and not inst.trainable:
        raise ServingError("sv_e_instance_gpu", name=instance)
    g = get_gpu(inst.gpu if inst else gpu)
    if "gpus" in spec:
        gpus = spec.pop("gpus")
        spec.setdefault("tp", gpus if gpus is not None else (inst.gpu_count if inst else 1))
    if inst is not None and spec.get("tp", 1) > (inst.gpu_count or 1):
        raise ServingError("sv_r_gpus", need=spec["tp"], have=inst.gpu_count)
    return estimate(m, g, ServingSpec(**spec), inst, overrides, num_prompts)


def with_spec(est: ServingEstimate, **changes) -> ServingSpec:
    return replace(est.spec, **changes)


__all__ = ["ServingEstimate", "Reason", "estimate", "serve", "prefill", "decode_step"]
