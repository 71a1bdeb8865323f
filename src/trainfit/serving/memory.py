"""Serving memory per GPU: weights by format, the engine's KV budget, KV bytes per token and capacity.

Every function returns bytes (SI units inside; GiB only for display).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..estimate.params import global_tensors, layer_linears, layer_tensors
from ..spec.hardware import GpuSpec
from ..spec.model import ModelSpec
from ..units import GiB
from . import engine_lmdeploy as lmd
from . import hybrid
from .engines import EngineSettings
from .spec import WEIGHT_BITS, ServingSpec

GROUP = 128  # AWQ / GPTQ group size of the common 4-bit checkpoints (quantize_config.json "group_size": 128)


def kv_heads_per_gpu(m: ModelSpec, tp: int) -> int:
    """vLLM/SGLang shard KV heads over TP and replicate them when TP exceeds them: max(1, kv_heads // tp)."""
    return max(1, m.kv_heads // tp)


def _linear_bytes(fmt: str, rows: int, cols: int) -> tuple[float, float]:
    """(packed weight bytes, scale/zero/index bytes) of one (rows=out, cols=in) Linear in a format.

    - bf16/fp16: 2 bytes per weight.
    - fp8 (vLLM --quantization fp8, Fp8LinearMethod): 1 byte + one fp32 weight scale and input scale per Linear.
    - int8 (W8A8, compressed-tensors channelwise): 1 byte + an fp32 scale per output channel.
    - awq (AutoAWQ GEMM, 4 bit, group 128): qweight in x out/8 int32 = in*out/2 bytes; qzeros in/128 x out/8
      int32; scales in/128 x out fp16 (vLLM awq.py AWQLinearMethod.create_weights).
    - gptq (4 bit, group 128): the same qweight/qzeros/scales plus g_idx, one int32 per input feature
      (vLLM gptq.py GPTQLinearMethod.create_weights).
    """
    n = rows * cols
    if fmt in ("bf16", "fp16"):
        return 2.0 * n, 0.0
    if fmt == "fp8":
        return float(n), 8.0
    if fmt == "int8":
        return float(n), 4.0 * rows
    groups = math.ceil(cols / GROUP)
    extra = groups * rows * 2 + groups * rows / 8 * 4  # scales (fp16) + packed zeros (int32 holds 8)
    if fmt == "gptq":
        extra += 4.0 * cols
    return n * WEIGHT_BITS[fmt] / 8, extra


@dataclass(frozen=True)
class Weights:
    linears: float  # quantised (or 16-bit) Linear weights of the blocks
    scales: float  # their scales, zeros, group indices
    unquantised: float  # embeddings, LM head, norms, biases, routers, other block tensors: 16-bit in every format

    @property
    def total(self) -> float:
        return self.linears + self.scales + self.unquantised


def weights_per_gpu(m: ModelSpec, fmt: str, tp: int) -> Weights:
    """Weights one of `tp` GPUs holds. Linears, the embedding and the LM head are split over TP (vocab-parallel);
    norms are replicated; K/V projections are replicated when TP exceeds the KV heads."""
    lin = scales = 0.0
    for layer_lin in layer_linears(m):
        rows = layer_lin.out_features
        if layer_lin.roles in (("k",), ("v",)) and tp > m.kv_heads:
            rows = rows * tp // m.kv_heads  # each GPU holds one replicated KV head
        w, sc = _linear_bytes(fmt, rows, layer_lin.in_features)
        lin += w * layer_lin.count * layer_lin.share  # share: the blocks that hold it (a hybrid's groups)
        scales += sc * layer_lin.count * layer_lin.share
    # the rest of a block in 16 bit: norms, biases, routers and what is no Linear (a Mamba mixer's or a gated
    # DeltaNet's conv1d, A_log, dt_bias, D), split over TP like the channels they belong to
    # (a router that is an nn.Linear is one of the Linears above: not counted twice)
    linear_modules = {x.module for x in layer_linears(m)}
    rest_layer = sum(t.numel for t in layer_tensors(m) if t.role in ("norm", "bias", "router", "other")
                     and not (t.role == "router" and t.module in linear_modules))
    norms = sum(t.numel for t in layer_tensors(m) if t.role == "norm") * m.layers
    glob = sum(t.numel for t in global_tensors(m))
    glob_norms = sum(t.numel for t in global_tensors(m) if t.role == "norm")
    unq = 2.0 * ((m.layers * rest_layer - norms + glob - glob_norms) / tp + norms + glob_norms)
    return Weights(linears=m.layers * lin / tp, scales=m.layers * scales / tp, unquantised=unq)


def kv_dtype_bytes(s: ServingSpec) -> int:
    """auto = the model's dtype (2 bytes for bf16/fp16 and for quantised weights, whose activations are 16-bit)."""
    return 1 if s.kv_cache_dtype == "fp8" else 2


def mla_latent(m: ModelSpec) -> int | None:
    """MLA (DeepSeek-V2/V3): one compressed latent (kv_lora_rank + qk_rope_head_dim) per token per layer."""
    extra = m.extra or {}
    rank = getattr(m, "kv_lora_rank", None) or extra.get("kv_lora_rank")
    if not rank:
        return None
    rope = getattr(m, "qk_rope_head_dim", None) or extra.get("qk_rope_head_dim") or 64
    return int(rank) + int(rope)


def sliding_layers(m: ModelSpec) -> tuple[int, int | None]:
    """(layers with a sliding window, the window). Mistral v0.1 and Mixtral use it in every layer when
    config.json sets `sliding_window`; Gemma-2 in every other layer. Qwen2's `sliding_window` is off unless
    `use_sliding_window` (not kept by the model reader), so it counts as full attention."""
    window = (m.extra or {}).get("sliding_window")
    if not window:
        return 0, None
    if m.model_type in ("mistral", "mixtral"):
        return m.layers, int(window)
    if m.model_type == "gemma2":
        return m.layers // 2, int(window)
    return 0, None


def token_bytes(m: ModelSpec, s: ServingSpec) -> int:
    """One token's KV in one attention layer on one GPU: K and V of its KV heads, or MLA's latent (replicated on
    every TP rank)."""
    latent = mla_latent(m)
    if latent:
        return latent * kv_dtype_bytes(s)
    return 2 * kv_heads_per_gpu(m, s.tp) * m.head_dim * kv_dtype_bytes(s)


def layout(m: ModelSpec, s: ServingSpec) -> hybrid.Layout | None:
    """vLLM's hybrid KV layout of this model (hybrid.py), or None."""
    return hybrid.layout(m, s, token_bytes(m, s), bool(mla_latent(m)))


def kv_bytes_per_token(m: ModelSpec, s: ServingSpec) -> int:
    """Per GPU, all layers: 2 (K and V) x layers x KV heads x head_dim x dtype bytes; MLA: layers x latent x bytes
    (the latent is replicated on every TP rank). LMDeploy's int8/int4 KV: engine_lmdeploy.kv_bytes_per_token.
    vLLM's hybrid manager counts every layer (padded to whole groups) the same way (hybrid.py); SGLang's KV pool of a
    hybrid holds the full-attention layers only (hybrid_sglang.py)."""
    lay = layout(m, s)
    if s.engine == "lmdeploy" and s.kv_cache_dtype != "auto":
        return lmd.kv_bytes_per_token(lay.full if lay else m.layers, m.kv_heads, m.head_dim, s.tp, s.kv_cache_dtype,
                                      s.version)
    if lay is None:
        return m.layers * token_bytes(m, s)
    return (lay.padded_layers if lay.engine == "vllm" else lay.full) * token_bytes(m, s)


def kv_bytes_for_request(m: ModelSpec, s: ServingSpec, tokens: int, block: int) -> float:
    """KV of one request of `tokens` tokens, in whole blocks; sliding-window layers keep at most the window (vLLM's
    hybrid manager: the window and a block, and one page per mamba state: hybrid.py)."""
    lay = layout(m, s)
    if lay and lay.engine != "vllm":  # its KV pool; the states are a pool of their own
        return float(tokens * kv_bytes_per_token(m, s))
    if lay:
        return lay.request_bytes(tokens, lay.block_size(block))
    per_layer = kv_bytes_per_token(m, s) / m.layers
    sw, window = sliding_layers(m)
    blocks = math.ceil(tokens / block)
    full = (m.layers - sw) * blocks * block
    capped = sw * math.ceil(min(tokens, window or tokens) / block) * block
    return per_layer * (full + capped)


def kv_read_bytes(m: ModelSpec, s: ServingSpec, context: int) -> float:
    """Bytes one decode step reads for one request at `context` tokens (hybrid.Layout.read_bytes)."""
    lay = layout(m, s)
    return lay.read_bytes(context) if lay else kv_bytes_for_request(m, s, context, 1)


def forward_peak(m: ModelSpec, T: int, tp: int) -> float:
    """Peak activations of a forward pass over T tokens (16-bit): the residual stream and the normalised input (2h;
    4h under TP, where the row-parallel output and its all-reduced copy coexist) beside the MLP's gate/up output
    and its activation (3f/tp; 2f/tp for two-matrix MLPs), or attention's q/k/v (whichever is larger)."""
    f = m.intermediate * max(1, m.experts_per_tok) / tp
    mlp = (3 if m.gated_mlp else 2) * f
    per_token = 2 * ((4 if tp > 1 else 2) * m.hidden + mlp)
    attn = 2 * (2 * m.hidden + (m.q_dim + 2 * m.kv_dim) / tp)
    return T * max(per_token, attn)


def activation_peak(m: ModelSpec, e: EngineSettings, tp: int, view) -> float:
    """The activation peak of vLLM's profiling pass over T = max_num_batched_tokens tokens as max_num_seqs
    sequences.

    - V0 (< 0.8): the forward peak plus fp32 logits of the sampled rows, `sampler_logits_copies` of them (vocab
      split over TP).
    - V1: the forward pass and the sampler run one after the other, so the peak is the larger of the forward peak
      and the last hidden states (T x h, 16-bit) beside the sampler's peak: S = min(max_num_seqs, T) rows of logits
      over the whole vocabulary on every TP rank, `sampler_bytes_<implementation>` bytes per logit element
      (fp32 logits, their probabilities and, on the PyTorch path, the sort's values and int64 indices)."""
    T = e.max_num_batched_tokens
    rows = min(e.max_num_seqs, T)
    fwd = forward_peak(m, T, tp)
    if e.sampler == "v0":
        return fwd + rows * m.vocab / tp * 4 * view("sampler_logits_copies")
    sampler = rows * m.vocab * view(f"sampler_bytes_{e.sampler}")
    return max(fwd, T * m.hidden * 2 + sampler)


def non_torch(s: ServingSpec, e: EngineSettings, view) -> float:
    """Memory outside PyTorch's allocator that the profiler subtracts (GiB): cuBLAS/NCCL workspaces; V1 adds the
    custom all-reduce's buffers under TP."""
    if not s.vllm_v1:
        return view("vllm_non_torch_gib") + (view("vllm_non_torch_tp_gib") if s.tp > 1 else 0.0)
    return view("vllm_v1_non_torch_gib") + (view("vllm_custom_all_reduce_gib") if e.custom_all_reduce else 0.0)


@dataclass(frozen=True)
class MemoryBreakdown:
    total_gpu: float  # what cudaMemGetInfo reports as total
    fraction: float  # gpu_memory_utilization / mem_fraction_static
    weights: Weights
    activation: float
    non_torch: float
    cuda_graphs: float
    kv_budget: float  # may be negative: does not fit
    kv_per_token: int
    num_blocks: int
    block_size: int
    kv_tokens: int
    max_model_len: int
    request_bytes: float  # KV of one max_model_len request
    buffers: float = 0.0  # non-parameter buffers loaded with the weights (rotary caches)
    pool_bytes: float = 0.0  # vLLM's hybrid manager: the bytes of its blocks (num_blocks is per group there)
    hybrid: dict | None = None  # vLLM's hybrid manager: layers by kind, groups, blocks a max-length request takes
    max_running: int | None = None  # SGLang's cap on running requests from a hybrid's states (hybrid_sglang.py)

    @property
    def capacity(self) -> float:
        """Bytes of KV the allocated blocks hold."""
        return self.pool_bytes or self.num_blocks * self.block_size * self.kv_per_token

    @property
    def max_concurrency(self) -> float:
        """Requests of max_model_len tokens the allocated blocks hold (vLLM's 'Maximum concurrency')."""
        capacity = self.capacity
        kv = capacity / self.request_bytes if self.request_bytes else 0.0
        return kv if self.max_running is None else min(kv, float(self.max_running))

    def to_dict(self) -> dict:
        return {"total_gpu_gib": round(self.total_gpu / GiB, 3), "memory_fraction": self.fraction,
                "weights_gib": round(self.weights.total / GiB, 3),
                "weights": {"linears_gib": round(self.weights.linears / GiB, 3),
                            "scales_zeros_gib": round(self.weights.scales / GiB, 4),
                            "unquantised_gib": round(self.weights.unquantised / GiB, 3)},
                "weight_buffers_gib": round(self.buffers / GiB, 3),
                "activation_peak_gib": round(self.activation / GiB, 3), "non_torch_gib": round(self.non_torch / GiB, 3),
                "cuda_graphs_gib": round(self.cuda_graphs / GiB, 3), "kv_cache_gib": round(self.kv_budget / GiB, 3),
                "kv_bytes_per_token": self.kv_per_token, "block_size": self.block_size,
                "num_gpu_blocks": self.num_blocks,
                "kv_cache_tokens": self.kv_tokens, "max_model_len": self.max_model_len,
                "max_concurrency": round(self.max_concurrency, 2), **({"hybrid": self.hybrid} if self.hybrid else {})}


def memory(m: ModelSpec, s: ServingSpec, e: EngineSettings, gpu: GpuSpec, view) -> MemoryBreakdown:
    total = gpu.memory_bytes * (1.0 - view("memory_reserved_fraction")) - view("cuda_driver_reserved_gib") * GiB
    w = weights_per_gpu(m, s.weights, s.tp)
    if e.engine == "sglang":
        buffers = view("sglang_load_extra_gib") * GiB
    else:
        buffers = view("vllm_v1_weights_buffers_gib" if s.vllm_v1 else "weights_buffers_gib") * GiB
    if e.engine == "lmdeploy":  # engine_lmdeploy.py: fraction x (free after the weights - runtime reserve)
        buffers, graphs, other = 0.0, 0.0, view("lmdeploy_pre_kv_gib")
        act = lmd.runtime_reserve(e.details["backend"], e.max_num_batched_tokens, e.max_num_seqs, m.vocab)
        lay = layout(m, s)  # a hybrid's states (hybrid.py): the PyTorch engine's off the free memory, TurboMind's
        states = state_slots(e) * lay.state * lay.state_bytes if lay else 0.0  # inside the fraction's share
        pytorch = e.details["backend"] == "pytorch"
        budget = lmd.kv_budget(total, w.total, other * GiB + (states if pytorch else 0.0), act, e.memory_fraction,
                               e.details["cache_fraction_of"] == "total") - (0.0 if pytorch else states)
        if lay:
            return state_pooled(m, s, e, lay, total, w, act, other * GiB, budget)
    elif e.engine == "vllm":
        act = activation_peak(m, e, s.tp, view)
        other = non_torch(s, e, view)
        graphs = view("vllm_cuda_graph_gib") * GiB if e.subtracts_cuda_graphs else 0.0
        budget = total * e.memory_fraction - w.total - buffers - act - other * GiB - graphs
    else:
        # SGLang: fraction x (free memory once the CUDA context and NCCL exist) - what loading the weights took
        act, graphs = 0.0, 0.0
        context = view("sglang_context_gib") * GiB
        other = (e.memory_fraction * context) / GiB
        budget = e.memory_fraction * (total - context) - w.total - buffers
    per_token = kv_bytes_per_token(m, s)
    lay = layout(m, s)  # None on every engine but vLLM and SGLang
    if lay and lay.engine == "sglang":  # a state pool beside the full-attention KV pool (hybrid_sglang.py)
        return _sglang_hybrid(m, s, e, lay, total, w, act, other, graphs, budget, per_token, buffers)
    if lay:  # vLLM's num_gpu_blocks are blocks of one group's layers (hybrid.py)
        page = e.block_size * lay.token_bytes * lay.group_size
        pool = int(budget // page) if budget > 0 else 0
        need = lay.blocks_per_request(e.max_model_len, e.block_size, e.max_num_batched_tokens)
        tokens = int(pool / need * e.max_model_len) if lay.reports_capacity else \
            pool // sum(lay.groups().values()) * e.block_size
        hybrid = {"full_attention_layers": lay.full, "sliding_window_layers": lay.sliding, "window": lay.window,
                  "state_layers": lay.state, "state_bytes_per_request": lay.state_bytes,
                  "group_size": lay.group_size, "groups": sum(lay.groups().values()),
                  "state_pages_per_request": lay.state_pages, "blocks_per_max_len_request": need}
        return MemoryBreakdown(total, e.memory_fraction, w, act, other * GiB, graphs, budget, per_token, pool,
                               e.block_size, tokens, e.max_model_len, need * page, buffers, float(pool * page), hybrid)
    blocks = max(0, int(budget // (per_token * e.block_size)))
    return MemoryBreakdown(total, e.memory_fraction, w, act, other * GiB, graphs, budget, per_token, blocks,
                           e.block_size, blocks * e.block_size, e.max_model_len,
                           kv_bytes_for_request(m, s, e.max_model_len, e.block_size), buffers)


def _sglang_hybrid(m: ModelSpec, s: ServingSpec, e: EngineSettings, lay: hybrid.Layout, total: float, w: Weights,
                   act: float, other: float, graphs: float, rest: float, cell: int, buffers: float) -> MemoryBreakdown:
    """SGLang's pools for a hybrid (hybrid_sglang.py): the states first, the full-attention KV in what is left."""
    from .hybrid_sglang import MAMBA_FULL_MEMORY_RATIO, pools

    radix = s.prefix_caching is not False
    got = pools(rest, lay.state * lay.state_bytes, cell, radix, s.max_num_seqs, s.version)
    details = {**pool_details(lay, got.states), "max_running_requests": got.max_running, "radix_cache": radix,
               "mamba_full_memory_ratio": MAMBA_FULL_MEMORY_RATIO}
    return MemoryBreakdown(total, e.memory_fraction, w, act, other * GiB, graphs, got.kv, cell, got.tokens, 1,
                           got.tokens, e.max_model_len, float(e.max_model_len * cell), buffers, 0.0, details,
                           max_running=got.max_running)


def pool_details(lay: hybrid.Layout, slots: int) -> dict:
    """What `--json` carries of an engine's state pool beside its full-attention KV (SGLang, TensorRT-LLM, LMDeploy)."""
    return {"full_attention_layers": lay.full, "state_layers": lay.state, "state_bytes_per_request": lay.state_bytes,
            "state_slots": slots, "state_pool_gib": round(slots * lay.state * lay.state_bytes / GiB, 3)}


def state_slots(e: EngineSettings) -> int:
    """The request states TensorRT-LLM or LMDeploy allocate beside the KV pool (hybrid.py): one per request of
    max_batch_size, and LMDeploy's PyTorch engine a few more (hybrid.LMDEPLOY_PYTORCH_EXTRA_STATES)."""
    pytorch = e.engine == "lmdeploy" and e.details.get("backend") == "pytorch"
    return e.max_num_seqs + (hybrid.LMDEPLOY_PYTORCH_EXTRA_STATES if pytorch else 0)


def state_pooled(m: ModelSpec, s: ServingSpec, e: EngineSettings, lay: hybrid.Layout, total: float, w: Weights,
                 act: float, other: float, budget: float) -> MemoryBreakdown:
    """TensorRT-LLM's or LMDeploy's memory for a hybrid: the states' pool, then the full-attention KV in `budget`."""
    per_token = kv_bytes_per_token(m, s)
    blocks = max(0, int(budget // (per_token * e.block_size))) if budget > 0 else 0
    return MemoryBreakdown(total, e.memory_fraction, w, act, other, 0.0, budget, per_token, blocks, e.block_size,
                           blocks * e.block_size, e.max_model_len,
                           kv_bytes_for_request(m, s, e.max_model_len, e.block_size), 0.0, 0.0,
                           pool_details(lay, state_slots(e)))
