"""Step time: per-operation roofline, optimizer step, collectives with overlap, offload traffic.

Each operation takes max(FLOPs / (peak x efficiency), bytes / (bandwidth x efficiency)) (the roofline model,
Williams et al. 2009). Matmul efficiency falls for small GEMMs (`gemm_dim_knee`). Eager PyTorch also pays a
fixed cost per operator that overlaps with GPU work: a block takes max(GPU time, operators x op_overhead_s).
LoRA adapters move what PEFT's layer reads and writes, counted op by op (`lora_traffic`). DeepSpeed ZeRO-3's
per-module fetch/release hooks add CPU time per module that holds parameters (`zero3_module_overhead_s`), hidden the
same way. Collectives follow nccl-tests' bus-bandwidth model (PERFORMANCE.md): all-reduce moves 2(n-1)/n of the buffer
per GPU, all-gather and reduce-scatter (n-1)/n each, at the bus bandwidth of the slowest link in the ring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from ..catalog.efficiency import Efficiencies, EfficiencyView, recorded_cache
from ..spec.cluster import Cluster
from ..spec.hardware import GpuSpec
from ..spec.model import ModelSpec
from ..spec.training import (Attention, GradCkpt, Method, Offload, Optimizer, OptimizerImpl, Precision, Strategy, Task,
                             TrainingSpec)
from .flops import StepFlops, attention_flops_per_token
from .activations import Regime, softmax_bytes
from .memory import regime_for
from .params import layer_linears, op_policy_split
from ..spec.choices import selective_every
from .trainable import NF4_BYTES_PER_PARAM, ParamSplit


@dataclass
class StepTime:
    """Seconds per optimizer step by component; `bound` says what limits each compute phase."""

    parts: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)  # compute | memory | overhead seconds per step

    def add(self, key: str, seconds: float, bound: str | None = None) -> None:
        if seconds:
            self.parts[key] = self.parts.get(key, 0.0) + seconds
            if bound:
                self.bound[bound] = self.bound.get(bound, 0.0) + seconds

    @property
    def total(self) -> float:
        return sum(self.parts.values())


def _peak(t: TrainingSpec, gpu: GpuSpec, eff: EfficiencyView) -> float:
    dtype = {"bf16": "bf16", "fp16": "fp16", "fp32": "tf32", "fp8": "fp8"}[t.precision.value]
    peak = gpu.peak(dtype) or gpu.peak("fp32")
    if t.precision == Precision.FP8:
        share = eff("fp8_matmul_share")
        low = gpu.peak("bf16") or peak
        peak = 1.0 / (share / peak + (1 - share) / low)
    return peak


def on_cuda_cores(precision: str, gpu: GpuSpec) -> bool:
    """fp32 matmuls on a GPU without TF32 tensor cores (Volta, Turing) run on the CUDA cores: another unit, with an
    efficiency of its own (cuda_core_matmul_efficiency), not the tensor cores' matmul_efficiency (also which of
    the two a measured case can calibrate)."""
    return precision == Precision.FP32.value and not gpu.peak("tf32")


def _on_cuda_cores(t: TrainingSpec, gpu: GpuSpec) -> bool:
    return on_cuda_cores(t.precision.value, gpu)


def _matmul_eff(eff: EfficiencyView, cuda_cores: bool) -> float:
    return eff("cuda_core_matmul_efficiency") if cuda_cores else eff("matmul_efficiency")


def _gemm(flops: float, bytes_moved: float, min_dim: float, peak: float, eff: EfficiencyView,
          bw: float, cuda_cores: bool = False) -> tuple[float, str]:
    # no work (a module read as routed in a model without a router: experts_per_tok 0) is no compute time
    if flops <= 0 or min_dim <= 0:
        return bytes_moved / (bw * eff("memory_bandwidth_efficiency")), "memory"
    eff_mm = _matmul_eff(eff, cuda_cores) * min_dim / (min_dim + eff("gemm_dim_knee"))
    t_compute = flops / (peak * eff_mm)
    t_memory = bytes_moved / (bw * eff("memory_bandwidth_efficiency"))
    return (t_compute, "compute") if t_compute >= t_memory else (t_memory, "memory")


def block_times(m: ModelSpec, t: TrainingSpec, split: ParamSplit, cluster: Cluster, eff: EfficiencyView,
                s: Strategy) -> dict[str, tuple[float, str]]:
    """Forward seconds of one block's operations for one micro-batch: {op: (seconds, bound)}."""
    return _block_times(m, t.per_micro_batch, split, cluster.gpu, eff.eff, regime_for(t, s))


@recorded_cache(maxsize=8192)
def _block_times(m: ModelSpec, t: TrainingSpec, split: ParamSplit, gpu: GpuSpec, efficiencies: Efficiencies,
                 r: Regime) -> dict[str, tuple[float, str]]:
    eff = efficiencies.shared_view(gpu)
    peak = _peak(t, gpu, eff)
    cuda_cores = _on_cuda_cores(t, gpu)
    bw = gpu.memory_bandwidth
    b = r.act
    tokens = t.tokens_per_micro_batch
    out: dict[str, tuple[float, str]] = {}
    for lin in layer_linears(m):
        routed = lin.count > 1
        k_active = m.experts_per_tok if routed else 1
        flops = 2.0 * tokens * lin.in_features * lin.out_features * k_active
        # routed experts: the GPU's own (m.expert_shards: layout.stage_model), each GEMM over its share of the
        # tokens' k copies
        held = lin.count / m.expert_shards if routed else 1
        rows = tokens * k_active / held
        w_bytes = lin.in_features * lin.out_features * held * b
        moved = tokens * (lin.in_features + lin.out_features) * b * k_active + w_bytes
        seconds, bound = _gemm(flops, moved, min(rows, lin.in_features, lin.out_features), peak, eff, bw,
                               cuda_cores)
        # share: the fraction of blocks holding it. A read structure's mean block lists a module once per block kind
        # that has it (gpt-oss: q/k/v/o and the experts in its sliding-window and its full-attention blocks, 4 + 5
        # of a PP-4 stage's 9): its time adds up over them (the bound: the larger part's)
        key = f"linear/{lin.module}"
        before, kind = out.get(key, (0.0, bound))
        out[key] = (before + seconds * lin.share, kind if before > seconds * lin.share else bound)
    att_flops = attention_flops_per_token(m, t.seq_len) * tokens
    if t.attention == Attention.EAGER:
        s2_bytes = t.sequences_per_micro_batch * m.heads * t.seq_len ** 2 * _eager_s2_bytes(m, r, t.fused_softmax)
        out["attention/core"] = max(_gemm(att_flops, s2_bytes, m.head_dim, peak, eff, bw, cuda_cores),
                                    (s2_bytes / (bw * eff("memory_bandwidth_efficiency")), "memory"))
    else:
        work = att_flops * eff("causal_attention_work")
        att_peak = (gpu.peak("bf16") or peak) if t.precision == Precision.FP8 else peak  # fp8 recipes keep bf16 attention
        att_eff = eff("attention_efficiency")
        if cuda_cores:  # the fused kernel on CUDA cores: the same share of the GEMM's efficiency as on tensor cores
            att_eff *= eff("cuda_core_matmul_efficiency") / eff("matmul_efficiency")
        if t.triton_attention:  # FlashAttention in Triton: slower than FlashAttention-2 (efficiency.yaml)
            att_eff /= eff("triton_attention_forward_slowdown")
        out["attention/core"] = (work / (att_peak * att_eff), "compute")
    elementwise = eff("elementwise_passes_per_layer") * m.hidden * tokens * b
    if m.is_moe:
        elementwise += 4 * m.hidden * tokens * b * m.experts_per_tok  # token gather/scatter per expert
    out["elementwise"] = (elementwise / (bw * eff("memory_bandwidth_efficiency")), "memory")
    if t.method == Method.QLORA:  # bitsandbytes dequantizes each NF4 weight to 16 bit before its matmul
        weights = sum(lin.in_features * lin.out_features * lin.count * lin.share for lin in layer_linears(m))
        per_weight = GPTQ_UNPACK_BYTES_PER_PARAM if t.gptq_base else NF4_BYTES_PER_PARAM + 2.0
        out["qlora/dequantize"] = (weights * per_weight / (bw * eff("memory_bandwidth_efficiency")), "memory")
    if split.adapters:
        ada_bytes = split.adapters / m.layers * r.adapter + tokens * _adapter_bytes(m, t, split, r)[0]
        out["lora/adapters"] = (ada_bytes / (bw * eff("memory_bandwidth_efficiency")), "memory")
    return out


def linears_per_block(m: ModelSpec, linears=None) -> float:
    """The Linear modules of the mean block (of `linears`, a subset of its Linears, if given): each counted at the
    share of blocks holding it, so a module that a read structure lists once per block kind counts once."""
    return sum(lin.share for lin in (layer_linears(m) if linears is None else linears))


def _adapted(m: ModelSpec, split: ParamSplit) -> list:
    """The Linear modules of a block that carry a LoRA adapter (a fused module once)."""
    adapted = split.block_trainable.adapters
    return [lin for lin in layer_linears(m) if lin.count == 1 and adapted & set(lin.roles)]


def _adapter_bytes(m: ModelSpec, t: TrainingSpec, split: ParamSplit, r: Regime) -> tuple[float, float]:
    """Bytes per token one block's adapters move beside their frozen Linears: (forward, backward)."""
    ada = lora_traffic(r, t.lora_dropout > 0, _kbit_kind(t))
    fwd = bwd = 0.0
    for lin in _adapted(m, split):
        fwd += (ada.fwd_in * lin.in_features + ada.fwd_out * lin.out_features) * lin.share
        bwd += (ada.bwd_in * lin.in_features + ada.bwd_out * lin.out_features) * lin.share
    return fwd, bwd


def _kbit_kind(t: TrainingSpec) -> str | None:
    """Which PEFT LoRA layer wraps a frozen Linear: lora.Linear (None), lora.bnb.Linear4bit or lora.gptq.QuantLinear."""
    if t.method != Method.QLORA:
        return None
    return "gptq" if t.gptq_base else "bnb"


@dataclass(frozen=True)
class AdapterTraffic:
    """Memory traffic of one LoRA adapter beside its frozen Linear, per token: bytes per input feature and per
    output feature, forward and backward, and the kernels each launches."""

    fwd_in: float
    fwd_out: float
    bwd_in: float
    bwd_out: float
    fwd_kernels: int
    bwd_kernels: int


@lru_cache(maxsize=64)
def lora_traffic(r: Regime, dropout: bool, kbit: str | None = None) -> AdapterTraffic:
    """What PEFT's LoRA layer (peft/tuners/lora/layer.py Linear.forward; bnb.py Linear4bit, gptq.py QuantLinear)
    reads and writes per token beside the frozen Linear, op by op as the code runs them on a GPU (the rank-r
    tensors and the per-step weight casts are left out: r << in, out).

    Forward: `x = self._cast_input_dtype(x, lora_A.weight.dtype)` copies the input to the adapters' dtype (fp32
    adapters: reads x, writes an fp32 copy; a 4-bit layer under autocast skips it); `lora_dropout` (p > 0) is one
    fused native_dropout kernel (aten Dropout.cpp `is_fused_kernel_acceptable` on CUDA): reads the copy, writes the
    dropped copy and a 1-byte mask; under autocast lora_A's fp32 input is cast to 16 bit (reads 4, writes 2) before
    its matmul reads it; lora_B writes the output width; `* scaling` reads and writes it; `result + ...` reads both
    and writes the sum (a 4-bit layer first clones the base output: reads and writes it).
    Backward: the scaling's and lora_B's two matmuls read the output gradient (3 reads, 1 write); lora_A's
    input-gradient matmul writes, and its weight-gradient matmul reads, the input width; then the casts, dropout
    (reads the gradient and the mask, writes) and the first cast run backwards, and the input's gradient is added to
    the frozen Linear's (reads two, writes one). Kernels: the matmuls, casts (autocast casts both adapter weights
    to 16 bit and their gradients back), dropout, scaling, add, and AccumulateGrad of A and B.
    Checked against PEFT itself, traced op by op (tests/test_perf_mechanisms.py)."""
    xa = 4 if r.kbit_upcast else r.act  # the input's dtype
    ra = xa if kbit else r.act  # the base layer's output: a 4-bit Linear returns its input's dtype
    cast = xa != r.adapter and not (kbit and r.autocast)
    c = r.adapter if cast else xa  # dtype after the input cast
    ac_in = r.autocast and c != 2  # autocast casts lora_A's input to 16 bit
    ac_w = r.autocast and r.adapter != 2  # autocast casts each adapter weight to 16 bit
    m = 2 if r.autocast else c  # dtype of lora_A / lora_B outputs
    fwd_in = (xa + c) * cast + (2 * c + 1) * dropout + (c + 2) * ac_in + (2 if r.autocast else c)
    out_dtype = max(ra, m)
    fwd_out = m + 2 * m + (ra + m + out_dtype) + (out_dtype + ra) * (m > ra) + 2 * ra * (kbit == "bnb")
    bwd_out = 2 * m + m + m
    mi = 2 if r.autocast else c
    bwd_in = 2 * mi + (2 + c) * ac_in + (2 * c + 1) * dropout + (c + xa) * cast + 3 * xa
    fwd_k = cast + dropout + ac_in + 2 * ac_w + 2 + 1 + 1 + (m > ra) + (kbit == "bnb")
    bwd_k = 1 + 4 + 2 * ac_w + ac_in + dropout + cast + 1 + 2
    return AdapterTraffic(fwd_in, fwd_out, bwd_in, bwd_out, int(fwd_k), int(bwd_k))


# A GPTQ int4 base (TrainingSpec.gptq_base) as transformers/optimum load it for training with exllama disabled (the Qwen
# README's Q-LoRA: finetune.py `GPTQConfig(bits=4, disable_exllama=True)`): auto-gptq's QuantLinear
# (auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py, v0.4.2) runs its CUDA kernel only below kernel_switch_threshold
# (128) rows; a training micro-batch has more, so each forward unpacks the weight with torch ops before
# torch.matmul(x.half(), weight): bitwise_right_shift of the int32 qweight (reads 0.5, writes 4 bytes per weight),
# .to(int8) (reads 4, writes 1), bitwise_and (1 + 1), minus the zeros (1 + 1), times the fp16 scales (reads 1,
# writes 2): 16.5 bytes per weight, against bitsandbytes' 0.5 + 2. The unpacked weight is an autograd input of the
# matmul, so backward multiplies by the saved copy instead of unpacking again. Kernels per Linear: the zeros'
# shift, cast, and, +1; the weight's shift, cast, and; the subtraction and the scaling; x.half(): 10.
GPTQ_UNPACK_BYTES_PER_PARAM = 16.5
GPTQ_UNPACK_KERNELS = 10


def _eager_s2_bytes(m: ModelSpec, r: Regime, fused_softmax: bool = False) -> float:
    """Bytes read and written per attention-score element by eager attention's forward, op by op as the HF code
    runs them: QK^T writes the scores, the scale and the mask add each read and write them, softmax reads them
    and writes probabilities (fp32 when upcast or under autocast), dropout reads them and writes its output and a
    1-byte mask, the cast back reads fp32 and writes 16 bits, PV reads the probabilities.

    `fused_softmax` (TrainingSpec.fused_softmax; Megatron-LM's masked-softmax fusion, on unless
    --no-masked-softmax-fusion): QK^T is a baddbmm whose alpha applies the scale as it writes the scores, one kernel
    (scaled_upper_triang_masked_softmax) reads them and writes the 16-bit probabilities with the causal mask applied,
    dropout reads and writes them with its mask, PV reads them (megatron/model/transformer.py ParallelAttention,
    megatron/model/fused_softmax.py, SC21 scripts at de7dc40f88)."""
    b = r.act
    if fused_softmax:
        return b + (b + b) + ((b + b + 1) if m.attention_dropout > 0 else 0.0) + b
    soft = softmax_bytes(m, r)
    total = b + 2 * b + 2 * b + (b + soft)
    if m.attention_dropout > 0:
        total += soft + soft + 1
    if soft != b:
        total += soft + b
    return total + b


def _ops_per_block(t: TrainingSpec, split: ParamSplit, m: ModelSpec, eff: EfficiencyView,
                   r: Regime) -> tuple[float, float]:
    """Kernels one block launches: (forward, backward). The model's own operators about twice in backward; each
    adapter's counted kernels (`lora_traffic`); a 4-bit base's dequantization per Linear, in forward only for a
    GPTQ base (its unpacking works on buffers that take no gradient)."""
    fwd = eff("ops_per_layer_forward")
    bwd = 2 * fwd
    if split.adapters:
        ada = lora_traffic(r, t.lora_dropout > 0, _kbit_kind(t))
        n = sum(lin.share for lin in _adapted(m, split))
        fwd += ada.fwd_kernels * n
        bwd += ada.bwd_kernels * n
    if t.method == Method.QLORA:  # dequantize per Linear
        fwd += (GPTQ_UNPACK_KERNELS if t.gptq_base else 2) * linears_per_block(m)
        bwd += 0 if t.gptq_base else 2 * 2 * linears_per_block(m)
    return fwd, bwd


def _backward_multiplier(op: str, weights_train: bool, t: TrainingSpec, eff: EfficiencyView,
                         adapters: float = 2.0) -> float:
    """Backward cost of an op relative to its forward: input gradient (1x) plus weight gradient (1x) if trained;
    `adapters`: the adapters' counted backward/forward traffic (`_adapter_bytes`)."""
    if op == "lora/adapters":
        return adapters
    if op.startswith("linear/"):
        return 2.0 if weights_train else 1.0
    if op == "qlora/dequantize":  # bitsandbytes dequantizes again for the input gradient; GPTQ's unpacked weight is
        return 0.0 if t.gptq_base else 1.0  # saved for it
    if op == "attention/core" and t.attention != Attention.EAGER:
        bwd = 2.0 + eff("flash_backward_recompute")  # FlashAttention's backward recomputes P
        if t.triton_attention:  # relative to a forward already slowed by the forward factor (see _block_times)
            bwd *= eff("triton_attention_backward_slowdown") / eff("triton_attention_forward_slowdown")
        return bwd
    return 2.0


@dataclass(frozen=True)
class MicroBatchTime:
    """Seconds of one micro-batch's forward and backward on one GPU, and how they split by bound."""

    forward: float
    backward: float
    bound: tuple[tuple[str, float], ...]
    # seconds of the backward during which the GPU still works through kernels the CPU has already launched: a step
    # issued after it (the optimizer's launches) runs on the CPU meanwhile
    backward_slack: float = 0.0


def compute_time(m: ModelSpec, t: TrainingSpec, s: Strategy, split: ParamSplit, flops: StepFlops,
                 cluster: Cluster, eff: EfficiencyView, st: StepTime) -> tuple[float, float]:
    """Adds forward/backward time of all micro-batches to `st`; returns (forward, backward) seconds per micro-batch."""
    mbt = _micro_batch_time(m, t.per_micro_batch, split, cluster.gpu, eff.eff, regime_for(t, s), zero3_hooked(s))
    micro = t.grad_accum
    st.add("compute/forward", micro * mbt.forward)
    st.add("compute/backward", micro * mbt.backward)
    for bound, seconds in mbt.bound:
        st.bound[bound] = st.bound.get(bound, 0.0) + micro * seconds
    return mbt.forward, mbt.backward


def zero3_hooked(s: Strategy) -> bool:
    """DeepSpeed ZeRO-3: every module holding parameters is fetched and released by hooks in forward and backward."""
    return s.engine == "deepspeed" and s.zero_stage == 3


def zero3_modules_per_block(m: ModelSpec, split: ParamSplit) -> float:
    """Modules of one block that hold parameters of their own, which ZeRO-3's hooks fetch and release: each Linear
    (a fused expert set is one module, as transformers 5 builds it), the two norms, and under LoRA each adapter's
    lora_A and lora_B (PEFT's ModuleDicts and dropout hold none: measured, they add no cost)."""
    return linears_per_block(m) + 2 + (2 * linears_per_block(m, _adapted(m, split)) if split.adapters else 0)


@recorded_cache(maxsize=16384)
def _micro_batch_time(m: ModelSpec, t: TrainingSpec, split: ParamSplit, gpu: GpuSpec, efficiencies: Efficiencies,
                      r: Regime, zero3: bool = False) -> MicroBatchTime:
    eff = efficiencies.shared_view(gpu)
    ops = _block_times(m, t, split, gpu, efficiencies, r)
    weights_train = not split.adapters
    passes = 2 if t.task == Task.DPO else 1  # DPO: the reference model's forward too
    blocks_bwd = m.layers - split.lowest_trainable_block
    recompute = blocks_bwd if t.grad_ckpt == GradCkpt.FULL else 0
    every = selective_every(t.selective_ac) if t.grad_ckpt == GradCkpt.SELECTIVE else None
    if every:  # every N-th block checkpointed in full (torchtitan: layer ids N, 2N, ...), the others kept
        recompute = blocks_bwd // every
    n_fwd = m.layers * passes + recompute
    # frozen blocks a freeze fine-tune's backward runs through (under full checkpointing: see trainable.py): input
    # gradients only
    frozen_bwd = blocks_bwd - split.trainable_blocks if t.method == Method.FREEZE else 0
    trained_bwd = blocks_bwd - frozen_bwd
    fwd_block = sum(v for v, _ in ops.values())
    ada = _adapter_ratio(m, t, split, r, ops)
    bwd_block = sum(v * _backward_multiplier(k, weights_train, t, eff, ada) for k, (v, _) in ops.items())
    bwd_frozen = sum(v * _backward_multiplier(k, False, t, eff, ada) for k, (v, _) in ops.items())
    n_ops, n_ops_bwd = _ops_per_block(t, split, m, eff, r)
    launch = n_ops * eff("op_overhead_s")
    launch_bwd = n_ops_bwd * eff("op_overhead_s")
    # ZeRO-3's fetch/release hooks: CPU time per module and micro-batch, half in forward and half in backward; a
    # checkpointed block's recomputation finds its parameters already fetched (measured: it adds little)
    hooks = zero3_modules_per_block(m, split) * eff("zero3_module_overhead_s") / 2 if zero3 else 0.0
    head_fwd, head_bwd = _head_time(m, t, gpu, eff, r, weights_train)
    stack = eff("framework_time_factor")  # 1 for eager Hugging Face code; fitted for other training stacks
    if t.torch_compile:  # the same stack's code compiled (efficiency.yaml compile_time_factor)
        stack *= eff("compile_time_factor")
    # selective checkpointing that recomputes part of every block in its backward ('attention', 'op')
    partial = selective_recompute(m, t, ops)
    partial_s = sum(ops[k][0] * share for k, share in partial.items())
    partial_launch = (selective_recompute_kernels(m, t, n_ops) * eff("op_overhead_s")) if partial else 0.0
    fwd = stack * ((m.layers * passes) * max(fwd_block, launch + hooks) + head_fwd * passes)
    bwd = stack * (trained_bwd * max(bwd_block, launch_bwd + hooks) + frozen_bwd * max(bwd_frozen, launch_bwd + hooks)
                   + recompute * max(fwd_block, launch) + blocks_bwd * max(partial_s, partial_launch) + head_bwd)
    bound: dict[str, float] = {"compute": stack * (head_fwd * passes + head_bwd)}
    for k, (v, kind) in ops.items():
        bound[kind] = bound.get(kind, 0.0) + stack * v * (n_fwd + trained_bwd *
                                                          _backward_multiplier(k, weights_train, t, eff, ada)
                                                          + frozen_bwd * _backward_multiplier(k, False, t, eff, ada)
                                                          + blocks_bwd * partial.get(k, 0.0))
    excess = stack * (m.layers * passes * max(0.0, launch + hooks - fwd_block) + recompute * max(0.0, launch - fwd_block)
                      + blocks_bwd * max(0.0, partial_launch - partial_s)
                      + trained_bwd * max(0.0, launch_bwd + hooks - bwd_block)
                      + frozen_bwd * max(0.0, launch_bwd + hooks - bwd_frozen))
    if excess:
        bound["overhead"] = excess
    slack = stack * (trained_bwd * max(0.0, bwd_block - launch_bwd - hooks)
                     + frozen_bwd * max(0.0, bwd_frozen - launch_bwd - hooks)
                     + recompute * max(0.0, fwd_block - launch) + blocks_bwd * max(0.0, partial_s - partial_launch)
                     + head_bwd)
    return MicroBatchTime(fwd, bwd, tuple(bound.items()), slack)


def selective_recompute(m: ModelSpec, t: TrainingSpec, ops: dict) -> dict[str, float]:
    """The share of each forward op of a block that selective checkpointing runs again in the block's backward:
      attention  the attention core (Megatron-LM's recompute-granularity selective; train.py's selective_attention);
      op         torchtitan's per-op policy (torchtitan/parallelisms/parallelize_llama.py at 613bfd0, the same in
                 later versions: `_custom_policy` saves the outputs of aten.mm, the SDPA kernels and reduce_scatter,
                 "except every second mm", counted per block in execution order): the 2nd, 4th, 6th... Linear of
                 the block (q, k, v, o, gate, up, down: k, o and up) and every op outside that list (norms, RoPE,
                 the activation, residual adds, adapters, a 4-bit base's dequantization) run again; the attention
                 core does not;
      N          (every N-th block in full) nothing here: those blocks are counted as recomputed blocks.
    Empty outside selective checkpointing."""
    if t.grad_ckpt != GradCkpt.SELECTIVE:
        return {}
    if t.selective_ac == "attention":
        return {"attention/core": 1.0} if "attention/core" in ops else {}
    if t.selective_ac != "op":
        return {}
    out = {k: 1.0 for k in ops if not k.startswith(("linear/", "attention/"))}
    out.update({f"linear/{lin.module}": 1.0 for lin in op_policy_split(m)[1] if f"linear/{lin.module}" in ops})
    return out


def selective_recompute_kernels(m: ModelSpec, t: TrainingSpec, n_ops: float) -> float:
    """Kernels the partial recompute of `selective_recompute` launches per block: the attention core's one, or under
    torchtitan's op policy every forward kernel but the kept matmuls and the attention core."""
    if t.selective_ac == "attention":
        return 1.0
    return max(1.0, n_ops - linears_per_block(m, op_policy_split(m)[0]) - 1)


def _adapter_ratio(m: ModelSpec, t: TrainingSpec, split: ParamSplit, r: Regime, ops: dict) -> float:
    """Backward / forward traffic of the block's adapters (the weights' own reads count once each way)."""
    if "lora/adapters" not in ops:
        return 2.0
    fwd, bwd = _adapter_bytes(m, t, split, r)
    tokens = t.tokens_per_micro_batch
    weights = split.adapters / m.layers * r.adapter
    return (weights + tokens * bwd) / (weights + tokens * fwd)


def _head_time(m: ModelSpec, t: TrainingSpec, gpu: GpuSpec, eff: EfficiencyView, r: Regime,
               full: bool) -> tuple[float, float]:
    if t.task == Task.CLASSIFICATION:
        return 0.0, 0.0
    peak = _peak(t, gpu, eff)
    bw = gpu.memory_bandwidth
    tokens = t.tokens_per_micro_batch
    b = r.act
    flops = 2.0 * tokens * m.hidden * m.vocab
    moved = tokens * (m.hidden + m.vocab) * b + m.hidden * m.vocab * b
    gemm, _ = _gemm(flops, moved, min(tokens, m.hidden, m.vocab), peak, eff, bw, _on_cuda_cores(t, gpu))
    loss = 24.0 * m.vocab * tokens / (bw * eff("memory_bandwidth_efficiency"))  # fp32 upcast, log-softmax, grads
    return gemm + loss / 2, gemm * (2 if full else 1) + loss / 2


# Kernels a for-loop optimizer step launches per parameter tensor, counted from the sources (one launch each, paid
# as op_overhead_s like the model's operators):
#  * torch.optim.AdamW with foreach=False (torch 2.13 optim/adam.py `_single_tensor_adam`, not capturable):
#    param.mul_ (decoupled weight decay), exp_avg.lerp_, exp_avg_sq.mul_ + addcmul_, denom = sqrt / bias correction
#    + eps (3), param.addcdiv_: 8;
#  * transformers' Adafactor (optimization.py `Adafactor.step`, a Python loop over parameters whatever the
#    optimizer_impl; HF Trainer's optim="adafactor" passes scale_parameter=False, relative_step=False): RMS of the
#    parameter (norm, div), grad**2 + eps (2), clipping by the update's RMS (norm, div, clamp_, div_), mul_(lr),
#    add_(-update) (2); a factored (2-D) tensor adds row and column means with their mul_/add_ (6) and
#    `_approx_sq_grad` (mean, div, rsqrt_, rsqrt, mul) and update.mul_(grad): 24; any other tensor exp_avg_sq.mul_ +
#    add_ and rsqrt + mul_: 16.
# fused / foreach implementations launch a few kernels per group of tensors: not counted.
FORLOOP_ADAMW_KERNELS = 8
ADAFACTOR_KERNELS = (24, 16)  # (2-D, factored), (other)


def optimizer_launches(m: ModelSpec, t: TrainingSpec, split: ParamSplit) -> float:
    """Kernel launches of one optimizer step that loops over the trainable parameter tensors in Python (Adafactor,
    AdamW with optimizer_impl forloop); 0 for fused and foreach steps. Each norm tensor (weight, and bias where the
    norm has one) counts once."""
    if t.optimizer == Optimizer.ADAFACTOR:
        kernels = ADAFACTOR_KERNELS
    elif t.optimizer == Optimizer.ADAMW and t.optimizer_impl == OptimizerImpl.FORLOOP:
        kernels = (FORLOOP_ADAMW_KERNELS, FORLOOP_ADAMW_KERNELS)
    else:
        return 0.0
    total = 0.0
    for x in split.trainable_tensors:
        tensors = max(1, round(x.rows / m.hidden)) if x.role == "norm" else 1
        blocks = split.trainable_blocks if x.per_layer else 1
        total += tensors * x.count * blocks * (kernels[0] if x.cols > 1 else kernels[1])
    return total


def optimizer_time(m: ModelSpec, t: TrainingSpec, s: Strategy, split: ParamSplit, cluster: Cluster,
                   eff: EfficiencyView, st: StepTime) -> None:
    """The optimizer step: its memory traffic, or, for a step that loops over the tensors in Python, its kernel
    launches where they take longer (`optimizer_launches`); CPU Adam under offload."""
    shard = s.gpus if s.shards_optimizer else 1
    params = split.trainable / shard
    if s.offload != Offload.NONE:
        cores = cluster.host_cores or eff("host_cores_default")
        per_gpu_cores = max(1.0, cores / max(1, s.gpus_per_node))
        st.add("offload/cpu_adam", params / (eff("cpu_adam_params_per_s_per_core") * per_gpu_cores), "offload")
        return
    seconds = params * eff("optimizer_bytes_per_param") / (cluster.gpu.memory_bandwidth * eff("memory_bandwidth_efficiency"))
    launch = optimizer_launches(m, t, split) * eff("op_overhead_s")
    # launched while the GPU still runs the last backward's kernels, only the rest shows; except under fp16 loss
    # scaling: torch.amp.GradScaler.step reads found_inf with .item() (`_maybe_opt_step`) before optimizer.step, so
    # the CPU waits for the backward to finish first
    if launch > seconds and t.precision != Precision.FP16:
        launch -= _micro_batch_time(m, t.per_micro_batch, split, cluster.gpu, eff.eff, regime_for(t, s),
                                    zero3_hooked(s)).backward_slack
    if launch > seconds:
        st.add("optimizer/step", launch, "overhead")
    else:
        st.add("optimizer/step", seconds, "memory")


def _busbw(s: Strategy, cluster: Cluster, eff: EfficiencyView) -> float:
    intra = cluster.intra_bytes_per_s * eff("comm_efficiency", link=cluster.intra_link if cluster.intra_link != "single" else "pcie")
    if s.nodes == 1:
        return intra
    inter = (cluster.inter_bytes_per_s or 0.0) * eff("comm_efficiency", link=cluster.inter_link)
    return min(intra, inter) if inter else intra


def comm_time(m: ModelSpec, t: TrainingSpec, s: Strategy, split: ParamSplit, cluster: Cluster, eff: EfficiencyView,
              fwd: float, bwd: float, st: StepTime) -> None:
    n = s.gpus
    if n == 1:
        return
    bus = _busbw(s, cluster, eff)
    frac = (n - 1) / n
    psi, all_params = split.trainable, split.all_params
    grad_bytes = 2.0 if s.engine == "deepspeed" or t.precision != Precision.FP32 and t.param_dtype == "bf16" else 4.0
    if t.method in (Method.LORA, Method.QLORA) and s.engine != "deepspeed":
        grad_bytes = 4.0
    overlap = eff("comm_overlap")
    micro = t.grad_accum
    if s.shards_params:  # ZeRO-3 / FSDP full_shard: gather params in forward and backward, reduce-scatter grads
        gathers = 2 * frac * 2.0 * all_params / bus
        reduce = frac * grad_bytes * psi / bus
        per_micro = gathers + reduce
        exposed = max(0.0, per_micro - overlap * (fwd + bwd))
        st.add("communication/params_and_grads", micro * exposed, "communication")
        return
    if s.engine == "fsdp":  # SHARD_GRAD_OP: one gather per micro-batch, reduce-scatter of gradients
        per_micro = frac * 2.0 * all_params / bus + frac * grad_bytes * psi / bus
        st.add("communication/params_and_grads", micro * max(0.0, per_micro - overlap * (fwd + bwd)), "communication")
        return
    allreduce = 2 * frac * grad_bytes * psi / bus
    if s.engine == "deepspeed" and s.zero_stage == 2:  # reduce-scatter each micro-batch, all-gather after the step
        rs = frac * grad_bytes * psi / bus
        st.add("communication/grads", micro * max(0.0, rs - overlap * bwd), "communication")
        st.add("communication/param_allgather", frac * 2.0 * psi / bus, "communication")
        return
    # DDP / ZeRO-1: one all-reduce per optimizer step (no_sync on accumulation), overlapped with the last backward
    st.add("communication/grads", max(0.0, allreduce - overlap * bwd), "communication")


def offload_time(t: TrainingSpec, s: Strategy, split: ParamSplit, cluster: Cluster, eff: EfficiencyView,
                 st: StepTime) -> None:
    if s.offload == Offload.NONE:
        return
    pcie = cluster.pcie_bytes_per_s * eff("comm_efficiency", link="pcie")
    shard = s.gpus if s.shards_optimizer else 1
    psi = split.trainable / shard
    traffic = 2.0 * psi * t.grad_accum + 2.0 * psi  # gradients down (each micro-batch), 16-bit params back up
    if s.offload == Offload.ALL:
        traffic += 2 * 2.0 * split.all_params / s.gpus * t.grad_accum  # parameters in for forward and backward
    st.add("offload/pcie", traffic / pcie, "offload")
