"""Per-GPU memory of one training step: model states, activations, logits and overheads, phase by phase.

Model states follow ZeRO (Rajbhandari et al. 2020, section 3: 2Ψ + 2Ψ + KΨ bytes for mixed-precision Adam with
K = 12) and, for DeepSpeed, match DeepSpeed's own estimators exactly
(DeepSpeed 0.19 `deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs`: 2Ψ + 18Ψ/N on the
GPU, 2Ψ with the optimizer offloaded; ZeRO-1, which DeepSpeed gives no estimator for, keeps the 16-bit gradients
whole: 4Ψ + 16Ψ/N; `stage3.estimate_zero3_model_states_mem_needs`: 4·largest_layer + 18Ψ/N, + 2Ψ/N with the
optimizer offloaded, 4·largest_layer with parameters offloaded too). PyTorch DDP keeps a bucket copy of every
gradient (`gradient_as_bucket_view=False`, the default). FSDP shards fp32 parameters, gradients and optimizer
states and gathers one wrapped block (plus the next one, prefetched) in the compute dtype.

The peak is the largest of three phases of a steady-state step (optimizer states already exist):
  backward_start  states + gradients still held from earlier micro-batches + all saved activations + the loss's
                  logits buffers + the output head's gradient,
  backward_end    states + all gradients + the first block's activations and gradient buffers,
  optimizer       states + all gradients + optimizer temporaries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from ..catalog.efficiency import EfficiencyView
from ..spec.hardware import GpuSpec
from ..spec.model import ModelSpec
from ..spec.training import Fsdp, GradCkpt, Method, Offload, Optimizer, Precision, Strategy, Task, TrainingSpec
from ..units import GiB
from .activations import Regime, apply_checkpointing, block_saved
from .params import global_tensors, largest_module_params, layer_params
from .trainable import NF4_BYTES_PER_PARAM, ParamSplit, adafactor_state_bytes, head_for

PARTS = ("weights", "gradients", "optimizer", "activations", "logits", "other")


@dataclass
class Phase:
    name: str
    items: dict[str, float] = field(default_factory=dict)  # "part/detail" -> bytes

    def add(self, key: str, value: float) -> None:
        if value:
            self.items[key] = self.items.get(key, 0.0) + value

    @property
    def total(self) -> float:
        return sum(self.items.values())

    def parts(self) -> dict[str, float]:
        out = {p: 0.0 for p in PARTS}
        for key, value in self.items.items():
            out[key.split("/", 1)[0]] += value
        return out


@dataclass(frozen=True)
class MemoryResult:
    phases: tuple[Phase, ...]
    peak_phase: str
    allocated: float  # bytes, the allocator's live peak
    reserved: float  # allocated x (1 + allocator overhead)
    device: float  # reserved + CUDA context + NCCL buffers (what nvidia-smi shows)
    usable: float  # what the GPU offers the application
    parts: dict[str, float]  # the peak phase, with `other` holding overheads; sums to `device`
    detail: dict[str, float]
    regime: Regime
    notes: tuple[str, ...]

    @property
    def fits(self) -> bool:
        return self.device <= self.usable

    def gib(self) -> dict[str, float]:
        out = {k: round(v / GiB, 3) for k, v in self.parts.items()}
        out["total"] = round(self.device / GiB, 3)
        return out


def regime_for(t: TrainingSpec, s: Strategy) -> Regime:
    """Dtypes of the forward pass, as the generated training code runs it."""
    act = 4 if t.precision == Precision.FP32 else 2
    if t.precision == Precision.FP32:
        return Regime(act=4, weight=4, autocast=False)
    if t.method in (Method.LORA, Method.QLORA):
        return Regime(act=act, weight=2, autocast=True)  # 16-bit base, fp32 adapters, Trainer's autocast
    if s.engine == "deepspeed":
        return Regime(act=act, weight=2, autocast=False)  # DeepSpeed runs a bf16/fp16 module, no autocast
    if s.engine == "fsdp":
        return Regime(act=act, weight=2, autocast=True)  # FSDP mixed precision gathers params in bf16
    return Regime(act=act, weight=4 if t.param_dtype == "fp32" else 2, autocast=True)


def usable_bytes(gpu: GpuSpec, eff: EfficiencyView) -> float:
    return gpu.memory_bytes * (1.0 - eff("memory_reserved_fraction")) * (1.0 - eff("fit_headroom_fraction"))


@lru_cache(maxsize=8192)
def activation_bytes(m: ModelSpec, t: TrainingSpec, split: ParamSplit, r: Regime) -> tuple[dict[str, float], float]:
    """(saved bytes per micro-batch by item over all blocks, one block's bytes for the backward transient)."""
    tokens = t.tokens_per_micro_batch
    dropout = 0.1 if m.is_encoder or m.model_type == "gpt2" else 0.0  # HF defaults for BERT/RoBERTa/GPT-2
    per_block = block_saved(m, r, split.block_trainable, t.seq_len, t.attention, dropout)
    active_blocks = m.layers - split.lowest_trainable_block
    kept = apply_checkpointing(per_block, m, r, t.grad_ckpt)
    out = {f"activations/{k}": v * tokens * active_blocks for k, v in kept.items()}
    one_block = sum(per_block.values()) * tokens
    # embeddings output / final norm / head input
    out["activations/final_norm_and_head_input"] = (4 + r.act) * m.hidden * tokens
    return out, one_block


def logits_bytes(m: ModelSpec, t: TrainingSpec, r: Regime) -> float:
    """Loss buffers at the start of backward: fp32 log-probs saved by cross-entropy, their gradient and the
    gradient of the fp32 upcast (transformers' ForCausalLMLoss upcasts logits to fp32): 12 bytes x vocab x token.
    Classification heads produce a handful of logits."""
    if t.task == Task.CLASSIFICATION:
        return 0.0
    return 12.0 * m.vocab * t.tokens_per_micro_batch


def _trainable_bytes(t: TrainingSpec, s: Strategy) -> tuple[float, float]:
    """(bytes per trainable weight as stored on the GPU, bytes per gradient element) for the engine."""
    fp32 = t.precision == Precision.FP32
    if s.engine == "deepspeed":
        return (4.0, 4.0) if fp32 else (2.0, 2.0)
    if t.method in (Method.LORA, Method.QLORA):
        return 4.0, 4.0  # PEFT keeps adapters (and a trained head) in fp32
    w = 4.0 if fp32 or t.param_dtype == "fp32" else 2.0
    return w, w


def _optimizer_state_bytes(m: ModelSpec, t: TrainingSpec, split: ParamSplit, w_bytes: float, deepspeed: bool) -> float:
    """Optimizer state bytes for all trainable parameters (before sharding), without fp32 master weights."""
    psi = split.trainable
    state = 4.0 if (deepspeed or w_bytes == 4.0) else w_bytes  # torch keeps states in the parameter dtype
    if t.optimizer == Optimizer.ADAMW or t.optimizer == Optimizer.LAMB:
        return 2 * state * psi
    if t.optimizer == Optimizer.ADAMW_8BIT:
        return 2 * psi + 2 * 4 * psi / 2048  # bitsandbytes 8-bit m and v, fp32 absmax per 2048-element block
    if t.optimizer == Optimizer.SGD:
        return state * psi  # momentum buffer
    return adafactor_state_bytes(m, split, split.trainable_blocks)


def estimate_memory(m: ModelSpec, t: TrainingSpec, s: Strategy, gpu: GpuSpec, split: ParamSplit,
                    eff: EfficiencyView) -> MemoryResult:
    n = s.gpus
    r = regime_for(t, s)
    notes: list[str] = []
    psi, phi = split.trainable, split.frozen
    w_t, g_t = _trainable_bytes(t, s)
    head = head_for(m, t.task)
    block = layer_params(m)
    root = sum(x.numel for x in global_tensors(m, head))
    largest_module = largest_module_params(m, head)

    states = Phase("states")
    # ---- frozen weights (LoRA / QLoRA / freeze base) -----------------------------------------------------------
    frozen_bytes = 4.0 if t.precision == Precision.FP32 else 2.0
    quantized = split.quantized
    frozen_shard = n if s.shards_params else 1
    states.add("weights/frozen", (phi - quantized) * frozen_bytes / frozen_shard)
    states.add("weights/frozen_nf4", quantized * NF4_BYTES_PER_PARAM / frozen_shard)
    if t.task == Task.DPO and t.method in (Method.FULL, Method.FREEZE):
        states.add("weights/dpo_reference", split.total * frozen_bytes / frozen_shard)
        notes.append("DPO keeps a frozen reference copy of the model (LoRA/QLoRA reuse the base with adapters off)")

    # ---- trainable weights, gradients, optimizer --------------------------------------------------------------
    opt_bytes = _optimizer_state_bytes(m, t, split, w_t, s.engine == "deepspeed")
    master = 4.0 * psi if (s.engine == "deepspeed" and t.precision != Precision.FP32) else 0.0
    grads = Phase("grads")
    offload_opt = s.offload != Offload.NONE
    if s.engine == "deepspeed":
        trained_module = largest_module if t.method == Method.FULL else 0
        _deepspeed_states(s, n, psi, w_t, opt_bytes, master, largest_module, trained_module, states, grads,
                          offload_opt)
    elif s.engine == "fsdp":
        _fsdp_states(t, s, n, psi, w_t, g_t, opt_bytes, block, root, states, grads)
    else:
        states.add("weights/trainable", psi * w_t)
        states.add("optimizer/states", opt_bytes)
        grads.add("gradients/trainable", psi * g_t)
        if s.engine == "ddp":  # the Reducer allocates its flat gradient buckets when DDP wraps the model
            states.add("gradients/ddp_buckets", psi * g_t)

    # ---- activations and loss ------------------------------------------------------------------------------------
    acts, one_block = activation_bytes(m, t.with_(grad_accum=1), split, r)
    logits = logits_bytes(m, t, r)
    head_grad = (m.vocab * m.hidden * g_t / (n if s.shards_grads else 1)
                 if (t.method == Method.FULL and t.task != Task.CLASSIFICATION) else 0.0)

    other = Phase("other")
    if r.amp_casts:
        other.add("other/autocast_weight_copies", 2.0 * psi)
    elif r.autocast and split.adapters:  # fp32 adapters cast to bf16 for their matmuls, kept for backward
        other.add("other/autocast_weight_copies", 2.0 * split.adapters)
    if t.method == Method.QLORA:
        other.add("other/nf4_dequantized_weight", 2.0 * largest_module)
    if s.engine == "deepspeed":
        other.add("other/comm_buckets", 2 * 2.0 * m.hidden * m.hidden)

    grads_accum = grads.total if t.grad_accum > 1 else 0.0
    phases = (
        _phase("backward_start", states, other, acts, grads if t.grad_accum > 1 else None,
               {"logits/loss_buffers": logits, "gradients/output_head": head_grad if not grads_accum else 0.0}),
        # the first block's backward: its activations (saved, or recomputed under checkpointing) are alive while
        # nearly every gradient already exists
        _phase("backward_end", states, other, {"activations/last_block": one_block},
               grads, {"activations/backward_buffers": eff("backward_transient_intermediates") * r.act *
                       m.intermediate * t.tokens_per_micro_batch}),
        _phase("optimizer", states, other, {}, grads, {}),
    )
    return _finish(phases, gpu, eff, s, r, notes)


def _deepspeed_states(s: Strategy, n: int, psi: float, w_t: float, opt_bytes: float, master: float,
                      largest_module: int, trained_module: int, states: Phase, grads: Phase, offload_opt: bool) -> None:
    """DeepSpeed's bookkeeping; with ZeRO-3 the largest module is gathered (2 bytes x params) and, when it trains,
    its 16-bit gradient too (DeepSpeed's 4 x largest_layer for full training)."""
    fp32_grad = 4.0 * psi
    if s.zero_stage == 3:
        states.add("weights/trainable_shard", psi * w_t / n if s.offload != Offload.ALL else 0.0)
        states.add("weights/gathered_layer", 2.0 * largest_module)
        grads.add("gradients/gathered_layer", 2.0 * trained_module)
        if not offload_opt:
            states.add("optimizer/master_fp32", master / n)
            states.add("optimizer/states", opt_bytes / n)
            grads.add("gradients/fp32_partition", fp32_grad / n)
        return
    states.add("weights/trainable", psi * w_t)
    if offload_opt:  # DeepSpeed's estimator: 2Ψ on the GPU; gradients stream to the host bucket by bucket
        return
    # ZeRO-2 partitions the 16-bit gradients too (DeepSpeed 0.19: 2Ψ + 18Ψ/N); ZeRO-1 keeps them whole.
    grads.add("gradients/16bit", psi * w_t / (n if s.zero_stage == 2 else 1))
    grads.add("gradients/fp32_partition", fp32_grad / n)
    states.add("optimizer/master_fp32", master / n)
    states.add("optimizer/states", opt_bytes / n)


def _fsdp_states(t: TrainingSpec, s: Strategy, n: int, psi: float, w_t: float, g_t: float, opt_bytes: float,
                 block: int, root: int, states: Phase, grads: Phase) -> None:
    offload = s.offload != Offload.NONE
    if not offload:
        states.add("weights/trainable_shard", psi * w_t / n)
        states.add("optimizer/states", opt_bytes / n)
        grads.add("gradients/shard", psi * g_t / n)
    if s.fsdp == Fsdp.FULL_SHARD:
        states.add("weights/gathered_units", 2.0 * (root + 2 * block))  # root unit + current and prefetched block
    else:
        states.add("weights/gathered_all", 2.0 * psi)  # SHARD_GRAD_OP keeps parameters gathered
    grads.add("gradients/unsharded_block", 2.0 * block)


def _phase(name: str, states: Phase, other: Phase, acts: dict[str, float], grads: Phase | None,
           extra: dict[str, float]) -> Phase:
    ph = Phase(name)
    for src in (states.items, other.items, acts, grads.items if grads else {}, extra):
        for key, value in src.items():
            ph.add(key, value)
    return ph


def _finish(phases: tuple[Phase, ...], gpu: GpuSpec, eff: EfficiencyView, s: Strategy, r: Regime,
            notes: list[str]) -> MemoryResult:
    peak = max(phases, key=lambda p: p.total)
    allocated = peak.total
    overhead = allocated * eff("allocator_overhead_fraction")
    context = eff("cuda_context_gib") * GiB
    nccl = eff("nccl_buffers_gib") * GiB if s.gpus > 1 else 0.0
    parts = peak.parts()
    parts["other"] += overhead + context + nccl
    detail = dict(peak.items)
    detail.update({"other/allocator_overhead": overhead, "other/cuda_context": context})
    if nccl:
        detail["other/nccl_buffers"] = nccl
    return MemoryResult(phases=phases, peak_phase=peak.name, allocated=allocated, reserved=allocated + overhead,
                        device=allocated + overhead + context + nccl, usable=usable_bytes(gpu, eff), parts=parts,
                        detail=detail, regime=r, notes=tuple(notes))
