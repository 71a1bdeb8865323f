"""Per-GPU memory of one training step: model states, activations, logits and overheads, phase by phase.

Model states follow ZeRO (Rajbhandari et al. 2020, section 3: 2Ψ + 2Ψ + KΨ bytes for mixed-precision Adam with
K = 12) and, for DeepSpeed, match DeepSpeed's own estimators exactly
(DeepSpeed 0.19 `deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs`: 2Ψ + 18Ψ/N on the
GPU, 2Ψ with the optimizer offloaded; ZeRO-1, which DeepSpeed gives no estimator for, keeps the 16-bit gradients
whole: 4Ψ + 16Ψ/N; `stage3.estimate_zero3_model_states_mem_needs`: 4·largest_layer + 18Ψ/N, + 2Ψ/N with the
optimizer offloaded, 4·largest_layer with parameters offloaded too). PyTorch DDP keeps a bucket copy of every
gradient (`gradient_as_bucket_view=False`, the default). FSDP shards fp32 parameters, gradients and optimizer
states and gathers one wrapped block (plus the next one, prefetched) in the compute dtype.

The peak is the largest of five moments of a steady-state step (optimizer states already exist), each checked
against a FakeTensor + MemTracker trace of the real code (tests/test_trace.py):
  forward_end     states + gradients held from earlier micro-batches + saved activations + autocast's weight
                  cache + the loss's forward buffers (16-bit logits, their fp32 upcast, fp32 log-probabilities;
                  with final-logit soft-capping, as Gemma-2's, the tanh output saved for backward too),
  backward_start  the same without the forward-only buffers, with the loss's backward buffers (12 B x V x token),
  backward_head   the same with the logits' gradient and the output head's weight gradient,
  backward_end    states + all gradients + the first block's activations and gradient buffers,
  optimizer       states + all gradients.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property, lru_cache

from ..catalog.efficiency import EfficiencyView
from ..errors import SpecError
from ..spec.hardware import GpuSpec
from ..spec.model import ModelSpec
from ..spec.training import (Attention, Fsdp, GradCkpt, Method, Offload, Optimizer, OptimizerImpl, Precision,
                             Strategy, Task, TrainingSpec, combination_problem)
from ..units import GiB
from .activations import (Regime, adapter_modules, adapters_copy_inputs, apply_checkpointing, attention_that_runs, block_saved,
                          first_block_without_input_grad, mlp_adapter_saved, shape_of, softmax_bytes)
from .params import Tensor, global_tensors, largest_module_params, layer_linears, layer_params, layer_tensors
from .trainable import (NF4_BYTES_PER_PARAM, NF4_SINGLE_QUANT_BYTES_PER_PARAM, ParamSplit, adafactor_state_bytes,
                        adamw_8bit_state_bytes, head_for, saves_output_head, wrapped_experts)

PARTS = ("weights", "gradients", "optimizer", "activations", "logits", "other")


def _add(bucket: dict[str, float], key: str, value: float) -> None:
    if value:
        bucket[key] = bucket.get(key, 0.0) + value


@dataclass
class Phase:
    """One moment of the step: the sum of its component buckets ("part/detail" -> bytes)."""

    name: str
    components: tuple[dict[str, float], ...]
    total: float

    @cached_property
    def items(self) -> dict[str, float]:  # read by every GPU's finish (the phases are shared): merged once
        out: dict[str, float] = {}
        for component in self.components:
            for key, value in component.items():
                _add(out, key, value)
        return out

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
    overheads: tuple[tuple[str, float], ...]  # "other/..." items outside the allocator's live peak
    regime: Regime
    notes: tuple[str, ...]
    paged: float = 0.0  # optimizer states in CUDA managed memory: outside the allocator, evicted to host under pressure
    allocator_fraction: float = 0.0  # reserved = allocated x (1 + allocator_fraction) + allocator_constant
    allocator_constant: float = 0.0

    @property
    def fits(self) -> bool:
        """Paged states page out to host memory: they never make a job not fit."""
        resident = dict(self.overheads).get("optimizer/paged_states_resident", 0.0)
        return self.device - resident <= self.usable

    @cached_property
    def detail(self) -> dict[str, float]:
        """Every item of the peak phase ("part/detail" -> bytes), overheads included; sums to `device`."""
        peak = next(p for p in self.phases if p.name == self.peak_phase)
        out = dict(peak.items)  # the phase's own dict is shared (cached)
        out.update(self.overheads)
        return out

    @cached_property
    def parts(self) -> dict[str, float]:
        """The peak by part (weights, gradients, optimizer, activations, logits, other); sums to `device`."""
        out = {p: 0.0 for p in PARTS}
        for key, value in self.detail.items():
            out[key.split("/", 1)[0]] += value
        return out

    @cached_property
    def resident_states(self) -> float:
        """Bytes that stay on each GPU through the whole step once training runs: the model's weights as stored
        (shards, not gathered copies) and the optimizer's states and master weights (paged states excluded).
        No allocator counter of a run of this setup can read less."""
        return sum(v for k, v in self.detail.items()
                   if (k.startswith("weights/") and not k.startswith("weights/gathered"))
                   or k in ("optimizer/states", "optimizer/master_fp32"))

    def gib(self) -> dict[str, float]:
        out = {k: round(v / GiB, 3) for k, v in self.parts.items()}
        out["total"] = round(self.device / GiB, 3)
        return out


def _phase(name: str, components: tuple[dict[str, float], ...], totals: dict[int, float]) -> Phase:
    """A phase whose total adds the (precomputed, by id) totals of shared component buckets."""
    return Phase(name, components, sum(totals.get(id(c)) if id(c) in totals else sum(c.values())
                                       for c in components))


@dataclass(frozen=True)
class AffineMemory:
    """Device memory as a function of micro-batch b and data-parallel GPUs n, for one method, strategy and GPU.

    Every item of every phase is a constant (unsharded states, buffers), proportional to the tokens of a micro-batch
    (activations, loss buffers) or divided by the GPUs it is sharded over (ZeRO/FSDP states), so each phase total
    is exactly p(b, n) = a + c·b + s/n for a fixed engine (one GPU, or two and more); the allocator overhead is a
    fixed fraction plus a constant, and the CUDA context and NCCL buffers constants. Three estimates fit it; the
    search then tests every micro-batch and GPU count for the price of those three. `tests/test_search.py` checks it
    against direct estimates.
    """

    intercepts: tuple[float, ...]
    per_micro_batch: tuple[float, ...]
    per_inverse_gpus: tuple[float, ...]
    overhead_fraction: float
    constant: float

    @classmethod
    def fit(cls, base: "MemoryResult", more_batch: "MemoryResult", more_gpus: "MemoryResult | None",
            b: int, n: int, b2: int, n2: int) -> "AffineMemory":
        """From estimates at (b, n), (b2, n) and (b, n2)."""
        per_b = tuple((m.total - a.total) / (b2 - b) for a, m in zip(base.phases, more_batch.phases))
        if more_gpus is None:
            per_n = (0.0,) * len(per_b)
        else:
            per_n = tuple((a.total - g.total) / (1 / n - 1 / n2) for a, g in zip(base.phases, more_gpus.phases))
        intercepts = tuple(a.total - pb * b - pn / n for a, pb, pn in zip(base.phases, per_b, per_n))
        return cls(intercepts, per_b, per_n, base.allocator_fraction,
                   base.device - base.reserved + base.allocator_constant)

    def device(self, micro_batch: int, gpus: int) -> float:
        allocated = max(a + c * micro_batch + s / gpus
                        for a, c, s in zip(self.intercepts, self.per_micro_batch, self.per_inverse_gpus))
        return allocated * (1.0 + self.overhead_fraction) + self.constant


def regime_for(t: TrainingSpec, s: Strategy) -> Regime:
    """Dtypes of the forward pass, as the generated training code runs it; whose code runs it (LitGPT's or
    transformers')."""
    r = _regime(t, s)
    if t.model_code == "litgpt":
        return replace(r, litgpt=True)
    return replace(r, lora_dropout=True) if t.is_peft and t.lora_dropout > 0 else r


def _regime(t: TrainingSpec, s: Strategy) -> Regime:
    act = 4 if t.precision == Precision.FP32 else 2
    if t.precision == Precision.FP32:
        return Regime(act=4, weight=4, autocast=False)
    if t.method in (Method.LORA, Method.QLORA):
        keeps = t.method == Method.QLORA and t.kbit_keeps_inputs
        if t.param_dtype == "bf16":  # pure 16-bit stacks (torchtune, LitGPT bf16-true): 16-bit adapters, no autocast
            return Regime(act=act, weight=2, autocast=False, adapter=2, kbit_keeps_inputs=keeps)
        # 16-bit base, fp32 adapters, Trainer's autocast; QLoRA through PEFT: fp32 hidden states
        return Regime(act=act, weight=2, autocast=True, kbit_upcast=t.method == Method.QLORA and t.kbit_fp32_upcast,
                      kbit_keeps_inputs=keeps)
    if s.engine == "deepspeed":
        return Regime(act=act, weight=2, autocast=False)  # DeepSpeed runs a bf16/fp16 module, no autocast
    if s.engine == "fsdp":
        return Regime(act=act, weight=2, autocast=True)  # FSDP mixed precision gathers params in bf16
    return Regime(act=act, weight=4 if t.param_dtype == "fp32" else 2, autocast=True)


HOST_BUFFER_FACTOR = 1.5  # DeepSpeed's `additional_buffer_factor` default in its estimators


def host_offload_bytes(t: TrainingSpec, s: Strategy, split: ParamSplit) -> float:
    """Host RAM per node that CPU offload needs, by DeepSpeed's estimator arithmetic (buffer factor 1.5):
    ZeRO-1/2 optimizer offload max(4 x GPUs, 16) x Ψ; ZeRO-3 16 x Ψ / nodes (optimizer) or 18 x Ψ / nodes (all).
    FSDP CPU offload keeps fp32 parameters, gradients and Adam states on the host: 16 x Ψ / nodes. 0 without
    offload (loading the model is not counted)."""
    if s.offload == Offload.NONE:
        return 0.0
    psi = split.trainable
    frozen = split.frozen * 2.0  # frozen 16-bit weights offloaded with the parameters
    if s.engine == "fsdp":
        return (16.0 * psi + frozen) / s.nodes * HOST_BUFFER_FACTOR
    if s.zero_stage == 3:
        per_param = 18.0 if s.offload == Offload.ALL else 16.0
        extra = frozen if s.offload == Offload.ALL else 0.0
        return (per_param * psi + extra) / s.nodes * HOST_BUFFER_FACTOR
    return psi * max(4.0 * s.gpus, 16.0) * HOST_BUFFER_FACTOR


def usable_bytes(gpu: GpuSpec, eff: EfficiencyView) -> float:
    return gpu.memory_bytes * (1.0 - eff("memory_reserved_fraction")) * (1.0 - eff("fit_headroom_fraction"))


@lru_cache(maxsize=8192)
def activation_bytes(m: ModelSpec, t: TrainingSpec, split: ParamSplit,
                     r: Regime) -> tuple[dict[str, float], float, float]:
    """(saved bytes per micro-batch by item over all blocks, their total, one block's bytes)."""
    tokens = t.tokens_per_micro_batch
    active_blocks = m.layers - split.lowest_trainable_block
    if m.structure is not None and len(m.structure.pattern) == m.layers:
        out, one_block = _structure_activations(m, t, split, r)
    else:
        per_block = block_saved(m, r, split.block_trainable, t.seq_len, t.attention)
        kept = apply_checkpointing(per_block, m, r, t.grad_ckpt, split.block_trainable, t.selective_ac)
        out = {f"activations/{k}": v * tokens * active_blocks for k, v in kept.items()}
        embedding_trains = _embedding_trains(t)
        if t.grad_ckpt != GradCkpt.FULL and split.block_trainable.adapters and not embedding_trains and \
                not split.block_trainable.adapters & {"q", "k", "v", "o"} and not split.block_trainable.linears:
            # LoRA on the MLP only, embedding frozen: nothing before the first block's MLP needs a gradient, so its
            # norms before the MLP (the pre-attention and pre-MLP ones; with sandwich norms, Gemma-2, the
            # post-attention one too) and its attention save nothing (traced: Qwen3 and Gemma-2 classifiers)
            before_mlp = ("norm1/", "attn/", "norm2/", "norm3/") if m.norms_per_layer >= 4 else \
                ("norm1/", "attn/") if m.parallel_block else ("norm1/", "attn/", "norm2/")
            for k, v in kept.items():
                if k.startswith(before_mlp):
                    out[f"activations/{k}"] -= v * tokens
        elif t.grad_ckpt != GradCkpt.FULL and split.block_trainable.adapters & {"q", "k", "v"} and \
                not embedding_trains and not split.block_trainable.linears and not split.block_trainable.norms:
            # LoRA on the attention's input projections, embedding frozen: the first block's input needs no gradient,
            # so its pre-attention norm saves nothing (first_block_without_input_grad; traced: Llama-3 and Qwen3
            # LoRA on q/v, classifiers at 2K tokens, +3.0 % and +4.9 % with it)
            for k, v in kept.items():
                if k.startswith("norm1/"):
                    out[f"activations/{k}"] -= v * tokens
            mlp_branch_frozen = r.litgpt and m.parallel_block and not split.block_trainable.adapters & {
                "gate", "up", "down"}
            if mlp_branch_frozen:
                # a LitGPT parallel block reads the same normalized input in attention and MLP: with nothing trained in
                # the MLP, the first block's MLP branch takes no gradient at all and saves nothing (LitGPT has no
                # enable_input_require_grads; traced on a Falcon-like LitGPT model)
                for k, v in kept.items():
                    if k.startswith("mlp/"):
                        out[f"activations/{k}"] -= v * tokens
            if r.litgpt and r.kbit_keeps_inputs and "linear_in/kbit_frozen_inputs" in kept:
                # nor does old bitsandbytes keep its qkv input (MatMul4Bit keeps inputs that take a gradient), nor, in
                # a parallel block, the MLP's (the same tensor), nor that frozen MLP branch's intermediate
                out["activations/linear_in/kbit_frozen_inputs"] -= (
                    r.act * m.hidden + (r.act * shape_of(m).mlp_width if mlp_branch_frozen else 0.0)) * tokens
        elif t.method == Method.FREEZE and t.grad_ckpt != GradCkpt.FULL and not embedding_trains:
            # a freeze fine-tune's lowest trained block reads a frozen block's output or the frozen embeddings',
            # which need no gradient: its pre-attention norm keeps only the normalized input its trained weight
            # needs, no fp32 input or rstd (traced: Qwen2 freeze classifier, top 2 of 4 blocks, at 4 x 2K tokens;
            # Phi-3, both of 2 blocks, at 8 x 1K)
            for k in ("norm1/x_fp32", "norm1/rstd"):
                if k in kept:
                    out[f"activations/{k}"] -= kept[k] * tokens
        one_block = sum(per_block.values()) * tokens
    merged = split.block_trainable.merged_expert_elements
    if merged:  # per block, not per token: PEFT's merged expert weights in the base dtype
        top = _top_group_merged(m, t)
        if t.grad_ckpt == GradCkpt.FULL:
            # a checkpointed block saves nothing: its merged copies live only while it runs or is recomputed (seen in
            # a trace of Qwen3-MoE cut to 4 blocks, LoRA all-linear, seq 1024: +50% before this)
            one_block += r.act * (top if top is not None else merged)
        else:
            out["activations/lora_merged_expert_weights"] = r.act * merged * active_blocks
            one_block += r.act * (top if top is not None else merged)
    # embeddings output / final norm / head input
    out["activations/final_norm_and_head_input"] = (litgpt_head_saved(m, t, r) if r.litgpt else
                                                    (4 + r.act) * m.hidden) * tokens
    if t.grad_ckpt == GradCkpt.FULL:
        # Seen in MemTracker traces of transformers' non-reentrant checkpointing (tests/test_trace.py): beyond the
        # blocks' inputs, one fp32 and one 16-bit hidden-sized tensor per micro-batch stay alive into backward. With
        # frozen embeddings (LoRA) the clean trace (tracer._grad_hooks_released) holds the 16-bit one only: the LoRA
        # trace grid was +2.3 % with both; a pure-bf16 Phi-3 LoRA classifier at 8K -6.0 % with neither
        out["activations/checkpoint/boundary_tensors"] = ((4 if _embedding_trains(t) else 0) + r.act) * m.hidden \
            * tokens
    mask = eager_mask_bytes(m, t, r) * attention_mask_kinds(m)
    if mask:
        out["activations/checkpoint/eager_attention_mask"] = mask
    return out, sum(out.values()), one_block


def _embedding_trains(t: TrainingSpec) -> bool:
    """The input embedding takes a gradient of its own: a full fine-tune, or PEFT training a copy of it
    (modules_to_save) or an adapter on it (so its output is no leaf needing `enable_input_require_grads`)."""
    return t.method == Method.FULL or any(x.strip().lower() in ("embed_tokens", "wte", "word_embeddings")
                                          for x in t.modules_to_save + t.lora_targets)


def attention_mask_kinds(m: ModelSpec) -> int:
    """How many attention masks one forward builds: one per kind of attention among the blocks (transformers'
    masking_utils builds a causal mask for full-attention blocks and another for sliding-window ones, each b x 1 x s
    x s in eager, whatever the window: traced on Gemma-2 with a window longer than the sequence too). Gemma-2's
    blocks alternate sliding (even) and global (odd) attention (Gemma2Config.layer_types' default)."""
    s = m.structure
    if s is not None and s.pattern:
        kinds = {"sliding" if s.groups[i].mixer == "sliding_attention" else "full"
                 for i in set(s.pattern) if s.groups[i].mixer in ("attention", "sliding_attention", "mla")}
        return max(1, len(kinds))
    if m.model_type == "gemma2":
        types = m.extra.get("layer_types")
        if not isinstance(types, (list, tuple)) or len(types) < m.layers:
            types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(m.layers)]
        return max(1, len(set(types[:m.layers])))
    return 1


def eager_mask_bytes(m: ModelSpec, t: TrainingSpec, r: Regime) -> float:
    """Eager attention's additive causal mask, b x 1 x s x s in the hidden states' dtype (transformers'
    masking_utils builds it once per forward, the fp32 embeddings' dtype under fp32 weights): a checkpointed block
    keeps its inputs, the mask among them, until the backward ends (traced: 16 MiB at 2K tokens with fp32 weights,
    alive beside the bottom block's softmax backward; SDPA takes `is_causal` and builds none). Under selective
    checkpointing too: each block's checkpointed attention core keeps the mask among its inputs (traced: Llama-3,
    eager at 1K tokens, fp32 weights: the 4 MiB mask was -2.0 % of the peak). Without checkpointing the mask is only
    added to the scores, and freed after the forward."""
    if t.attention != Attention.EAGER or t.grad_ckpt == GradCkpt.NONE or m.is_encoder:
        return 0.0
    dtype = 4 if (r.weight == 4 or r.kbit_upcast) else 2
    return float(dtype * t.sequences_per_micro_batch * t.seq_len * t.seq_len)


def _top_group_merged(m: ModelSpec, t: TrainingSpec) -> float | None:
    """Elements of the fused expert tensors PEFT merges in the top block (a read structure); None without one."""
    s = m.structure
    if s is None or not s.pattern:
        return None
    return float(sum(x.in_features * x.out_features * x.count
                     for x in wrapped_experts(m, t.lora_targets, s.groups[s.pattern[-1]])))


def _structure_activations(m: ModelSpec, t: TrainingSpec, split: ParamSplit,
                           r: Regime) -> tuple[dict[str, float], float]:
    """A read structure block by block: each group's own MLP widths (dense-first layers, routed and shared experts)
    and attention (MLA), and the lowest block of LoRA without input gradients. (items over all blocks, the top
    block's bytes)"""
    tokens = t.tokens_per_micro_batch
    tr = split.block_trainable
    s = m.structure
    saved = {i: block_saved(m, r, tr, t.seq_len, t.attention, group=g) for i, g in enumerate(s.groups)}
    lowest = split.lowest_trainable_block
    no_input_grad = (lowest == 0 and not tr.linears and not tr.norms and not split.saved
                     and not any("embed" in x.lower() for x in t.lora_targets))
    out: dict[str, float] = {}
    for index, gi in enumerate(s.pattern[lowest:]):
        block = saved[gi]
        if index == 0 and no_input_grad:
            block = first_block_without_input_grad(block, tr)
        for k, v in apply_checkpointing(block, m, r, t.grad_ckpt, tr, t.selective_ac).items():
            out[f"activations/{k}"] = out.get(f"activations/{k}", 0.0) + v * tokens
    return out, sum(saved[s.pattern[-1]].values()) * tokens


def litgpt_head_saved(m: ModelSpec, t: TrainingSpec, r: Regime) -> float:
    """Bytes per token LitGPT's final norm and output head keep: the norm's own (RMSNorm its fp32 input, LayerNorm its
    input), the head's input where its weight trains (full) or old bitsandbytes keeps it (QLoRA), and a LoRA head's
    dropout mask, dropped copy and lora_A output (the head runs per 128-token chunk, each chunk its own dropout)."""
    out = (4.0 if m.norm == "rmsnorm" else float(r.act)) * m.hidden
    if t.method == Method.FULL or (t.method == Method.QLORA and r.kbit_keeps_inputs):
        out += r.act * m.hidden
    if t.method in (Method.LORA, Method.QLORA) and any(x.strip().lower() == "lm_head" for x in t.lora_targets):
        out += (1 + r.act) * m.hidden + r.act * t.lora_rank
    return out


LITGPT_HEAD_CHUNK = 128  # litgpt/finetune/lora.py `model(input_ids, lm_head_chunk_size=128)`; chunked_cross_entropy's 128


def litgpt_logits_items(m: ModelSpec, t: TrainingSpec, r: Regime, kept_inputs: float) -> tuple[
        dict[str, float], dict[str, float], dict[str, float], dict[str, float], dict[str, float]]:
    """The logits of a LitGPT finetune step (litgpt 0.4.x finetune/lora.py and full.py, utils.chunked_cross_entropy),
    in bytes: (the model's return, the head's last chunk, the loss's end, the backward's start, the head's
    backward).

    The loop's `logits = model(...)` keeps the step's 16-bit logits until the next step's forward returns: while
    that forward runs, the previous logits are alive, and with them the previous graph, whose old-bitsandbytes
    MatMul4Bit nodes still hold their kept inputs (`ctx.tensors` is a plain attribute, not a saved tensor that
    backward frees). LoRA runs the head in 128-token chunks (a list of 16-bit chunks); full fine-tuning runs it
    whole, and the loss flattens the shifted logits, which copies them when a micro-batch holds more than one
    sequence. The loss takes each 128-row chunk through cross_entropy in the logits' dtype: log_softmax keeps its
    16-bit output. In backward each chunk's gradient passes through two 16-bit chunk-sized tensors; a whole head
    gathers the chunks' gradients into the flattened and then the shifted shape (two 16-bit logits-sized
    tensors). Traced with litgpt 0.4.13 under FakeTensorMode on the config_hub cases (Falcon-7B QLoRA: 8.75 GiB
    traced, 8.79 measured)."""
    a, v, tokens = float(r.act), float(m.vocab), t.tokens_per_micro_batch
    b = t.sequences_per_micro_batch
    shifted = b * max(0, t.seq_len - 1)
    logits = a * v * tokens
    chunked = t.method in (Method.LORA, Method.QLORA)
    if chunked:
        last = t.seq_len - LITGPT_HEAD_CHUNK * ((max(1, t.seq_len) - 1) // LITGPT_HEAD_CHUNK)
        copy = a * v * b * max(0, last - 1) if b > 1 else 0.0
        chunk = a * v * b * min(LITGPT_HEAD_CHUNK, t.seq_len)
        head = {"logits/litgpt_logits": logits, "logits/grad": 2 * chunk}
    else:
        copy = a * v * shifted if b > 1 else 0.0
        chunk = a * v * min(LITGPT_HEAD_CHUNK, shifted)
        head = {"logits/litgpt_logits": logits, "logits/grad": 2 * a * v * shifted}
    returned = {"logits/litgpt_logits": logits, "logits/litgpt_previous_step_logits": logits,
                "activations/litgpt_previous_step_kbit_inputs": kept_inputs}
    # the head's last chunk, before its logits exist (where a 4-bit head dequantizes its weight)
    chunks = max(1, -(-t.seq_len // LITGPT_HEAD_CHUNK)) if chunked else 1
    before_last = {**returned, "logits/litgpt_logits": logits * (chunks - 1) / chunks}
    loss_end = {"logits/litgpt_logits": logits, "logits/litgpt_log_softmax": a * v * shifted,
                "logits/litgpt_shifted_copy": copy}
    backward = {"logits/litgpt_logits": logits, "logits/litgpt_log_softmax": a * v * shifted,
                "logits/litgpt_chunk_grads": 2 * chunk}
    return returned, before_last, loss_end, backward, head


def logits_bytes(m: ModelSpec, t: TrainingSpec, r: Regime) -> float:
    """Loss buffers at the start of backward: fp32 log-probs saved by cross-entropy, their gradient and the
    gradient of the fp32 upcast (transformers' ForCausalLMLoss upcasts logits to fp32): 12 bytes x vocab x token.
    Classification heads produce a handful of logits."""
    if t.task == Task.CLASSIFICATION:
        return 0.0
    return 12.0 * m.vocab * t.tokens_per_micro_batch


def final_softcap_bytes(m: ModelSpec, t: TrainingSpec, r: Regime) -> float:
    """Final-logit soft-capping (Gemma-2's final_logit_softcapping: logits / cap, tanh, * cap in Gemma2ForCausalLM.
    forward): tanh saves its output, one more vocabulary-sized tensor per token in the logits' dtype, alive from the
    end of the forward until the head's backward (the division and multiplication by a number save nothing). Its
    backward holds at most three such 16-bit tensors (the saved output, the incoming and the outgoing gradient),
    less than the loss's fp32 buffers at the start of backward. Classification heads do not soft-cap."""
    if not m.final_softcap or t.task == Task.CLASSIFICATION:
        return 0.0
    return float(r.act * m.vocab * t.tokens_per_micro_batch)


DPO_ENTROPY_CHUNK_ROWS = 128  # trl/trainer/utils.py v1.9.0 `entropy_from_logits(logits, chunk_size=128)`


def dpo_logits_items(m: ModelSpec, t: TrainingSpec, r: Regime) -> tuple[dict[str, float], dict[str, float],
                                                                         dict[str, float]]:
    """The logits of a DPO step as TRL's DPOTrainer computes its loss (trl v1.9.0, dpo_trainer.py
    `DPOTrainer._compute_loss`, default sigmoid loss; traced in trainfit.trace.tracer.dpo_loss), for 2 x micro-batch
    sequences (chosen + rejected): accelerate converts each forward's 16-bit logits to fp32 (`convert_outputs_to_fp32`,
    the 16-bit ones then freed), `selective_log_softmax` takes fp32 logits through a per-row logsumexp whose backward
    keeps the fp32 logits themselves. (the policy forward's end, the logged metrics' moment, the loss backward's
    start; bytes):
      forward end  the 16-bit logits and their fp32 copy, while autocast's weight casts are still cached;
      metrics      the policy's and the reference's fp32 logits (both alive until the loss returns), the entropy's
                   flattened copy of the shifted logits (`entropy_from_logits`: the slice is not contiguous) and three
                   fp32 temporaries of its 128-row chunk;
      backward     the saved fp32 logits, gather's dense gradient, the per-row logsumexp gradients and their sum:
                   4 + 12 bytes x vocab x token."""
    tokens = t.tokens_per_micro_batch
    shifted = t.sequences_per_micro_batch * max(0, t.seq_len - 1)  # logits[..., :-1, :]
    v = float(m.vocab)
    conversion = r.act if r.act < 4 else 0.0  # accelerate converts whenever the precision is 16-bit
    forward = {"logits/dpo_16bit_logits": conversion * v * tokens, "logits/dpo_fp32_logits": 4.0 * v * tokens}
    metrics = {"logits/dpo_policy_and_reference_fp32_logits": 2 * 4.0 * v * tokens,
               "logits/dpo_entropy_flat_copy": 4.0 * v * shifted,
               "logits/dpo_entropy_chunk": 3 * 4.0 * v * min(DPO_ENTROPY_CHUNK_ROWS, shifted)}
    backward = {"logits/dpo_saved_fp32_logits": 4.0 * v * tokens, "logits/dpo_loss_backward": 12.0 * v * shifted}
    return forward, metrics, backward


def dpo_reference_eager_items(m: ModelSpec, t: TrainingSpec, r: Regime) -> dict[str, float]:
    """The reference forward of a DPO step with eager attention (under no_grad, after the policy's forward: its fp32
    logits alive): the block running it holds its attention scores in the activation dtype, their fp32 copy and the
    fp32 softmax (`softmax(x, dtype=float32)` converts first: ATen's fused half-to-float path is CUDA fp16 only), the
    causal mask it builds, b x s x s in the hidden states' dtype, and the attention's inputs (the residual and its
    norm, q and k before and after rotation, v, k and v repeated to every head). Traced: LoRA, eager, 2 x 2048 tokens,
    656 MiB of scores and mask in a 2-block Llama, 13 MiB of inputs; the same reference with fp32 weights, 568 MiB.
    With fp16 on a GPU the fused kernel skips the fp32 copy: the CPU trace, and this term, count 4 bytes a score more
    than such a run holds (bf16 converts on both). Empty for SDPA (its reference forward is outweighed by the logged
    metrics' logits)."""
    if t.attention != Attention.EAGER or m.is_encoder:
        return {}
    tokens = t.tokens_per_micro_batch
    soft = softmax_bytes(m, r)
    # an fp32 residual stream (fp32 weights under autocast) makes the mask fp32 and the rotary embedding's q and k
    # fp32: adding the mask promotes the 16-bit scores to fp32, which the softmax then takes without a copy (traced:
    # 8 bytes per score there, 10 with a 16-bit base)
    rot = 4 if r.residual == 4 else r.act
    if soft == r.act:
        scores = 2 * soft
    else:
        scores = 2 * soft if r.residual == 4 else r.act + 2 * soft
    # one mask per kind of attention block, built before the first block (Gemma-2: sliding-window and global)
    mask = (4 if (r.weight == 4 or r.kbit_upcast) else 2) * t.sequences_per_micro_batch * t.seq_len * t.seq_len \
        * attention_mask_kinds(m)
    inputs = (2 * r.residual * m.hidden + r.act * (2 * m.q_dim + 2 * m.kv_dim) + rot * (2 * m.q_dim + m.kv_dim)) \
        * tokens
    return {"logits/dpo_fp32_logits": 4.0 * m.vocab * tokens,
            "activations/dpo_reference_attention_scores": float(scores * m.heads * t.seq_len * tokens),
            "activations/dpo_reference_causal_mask": float(mask),
            "activations/dpo_reference_attention_inputs": float(inputs)}


def _trainable_bytes(t: TrainingSpec, s: Strategy) -> tuple[float, float]:
    """(bytes per trainable weight as stored on the GPU, bytes per gradient element) for the engine."""
    fp32 = t.precision == Precision.FP32
    if s.engine == "deepspeed":
        return (4.0, 4.0) if fp32 else (2.0, 2.0)
    if t.method in (Method.LORA, Method.QLORA):
        # PEFT keeps adapters (and a trained head) in fp32; pure 16-bit stacks keep them in the base dtype
        return (2.0, 2.0) if t.param_dtype == "bf16" else (4.0, 4.0)
    w = 4.0 if fp32 or t.param_dtype == "fp32" else 2.0
    return w, w


def _optimizer_state_bytes(m: ModelSpec, t: TrainingSpec, split: ParamSplit, w_bytes: float, deepspeed: bool) -> float:
    """Optimizer state bytes for all trainable parameters (before sharding), without fp32 master weights."""
    psi = split.trainable
    state = 4.0 if (deepspeed or w_bytes == 4.0) else w_bytes  # torch keeps states in the parameter dtype
    if t.optimizer == Optimizer.ADAMW or t.optimizer == Optimizer.LAMB:
        return 2 * state * psi
    if t.optimizer == Optimizer.ADAMW_8BIT:  # bitsandbytes' blockwise 8-bit m and v, per tensor
        return adamw_8bit_state_bytes(split, split.trainable_blocks, m.vocab * m.hidden)
    if t.optimizer == Optimizer.SGD:
        return state * psi  # momentum buffer
    if t.optimizer == Optimizer.SGD_NOMOMENTUM:
        return 0.0  # torch.optim.SGD with momentum 0 keeps no state (torch/optim/sgd.py: no momentum_buffer)
    return adafactor_state_bytes(m, split, split.trainable_blocks)


def _largest_trainable_tensor(m: ModelSpec, t: TrainingSpec, split: ParamSplit, with_saved: bool = True) -> int:
    """Elements of the largest trainable parameter tensor. MoE experts are one 3-D tensor per projection in
    transformers 5 (experts x out x in), gate and up fused into one (traced: Mixtral, freeze + Adafactor, whose
    per-tensor step intermediates are sized by it: -17 % with one expert's matrix)."""
    sizes = [x.rows * x.cols * (x.count if x.role == "expert" else 1) for x in split.trainable_tensors]
    gate_up = [x for x in split.trainable_tensors if x.role == "expert" and x.module in ("gate_proj", "up_proj")]
    if len(gate_up) == 2:
        sizes.append(sum(x.rows * x.cols * x.count for x in gate_up))
    if split.saved and with_saved:
        sizes.append(m.vocab * m.hidden)
    return max(sizes, default=0)


def _forloop_adamw_elements(m: ModelSpec, t: TrainingSpec, split: ParamSplit) -> int:
    """Elements of the for-loop AdamW step's intermediates at their peak: `denom = exp_avg_sq.sqrt() /
    bias_correction2_sqrt` makes two of a tensor's size, and the previous tensor's `denom` is still bound to the loop
    variable until the next one replaces it (torch/optim/adam.py `_single_tensor_adam`): 2 x a tensor + the one
    before it in parameter order, at least 2 x the largest. Traced: GPT-2's position table stepped right after the
    token embedding (-5.8 % with 2 x the largest only)."""
    def size(x: Tensor) -> int:
        return x.rows * x.cols * (x.count if x.role == "expert" else 1)

    best = 2 * _largest_trainable_tensor(m, t, split)
    block = [size(x) for x in split.trainable_tensors if x.per_layer]
    rest = [size(x) for x in split.trainable_tensors if not x.per_layer]  # in the model's order
    for seq in (block, rest):
        for prev, cur in zip(seq, seq[1:]):
            best = max(best, 2 * cur + prev)
    if block and m.layers > 1:  # a block's first tensor follows the block below's last
        best = max(best, 2 * block[0] + block[-1])
    return best


def in_backward_step_transient(t: TrainingSpec, w_bytes: float, elements: float) -> float:
    """Intermediates of one parameter's own optimizer stepping it in backward (optimizer-in-backward: one optimizer
    per parameter), for a tensor of `elements`: AdamW foreach one state's worth of it (`_foreach_sqrt` over a
    one-tensor group), for-loop two (`exp_avg_sq.sqrt() / bias_correction2_sqrt`; no previous tensor's `denom`
    survives the step, each optimizer has its own loop), fused none, SGD none, Adafactor 8 or 16 bytes per element
    as in optimizer_step_transient. Traced: Qwen2 classifier, fp32 weights, the tied embedding's step at the end
    of backward (+7.69 MiB foreach, +15.38 MiB for-loop beside its 7.69 MiB gradient)."""
    state = 4.0 if w_bytes == 4.0 else w_bytes
    if t.optimizer == Optimizer.ADAMW:
        return {OptimizerImpl.FOREACH: 1.0, OptimizerImpl.FORLOOP: 2.0}.get(t.optimizer_impl, 0.0) * state * elements
    if t.optimizer == Optimizer.ADAFACTOR:
        return (8.0 if w_bytes == 4.0 else 16.0) * elements
    return 0.0


def optimizer_step_transient(m: ModelSpec, t: TrainingSpec, split: ParamSplit, w_bytes: float, psi: float,
                             saved_bytes: float = 0.0) -> float:
    """Intermediates the optimizer's step allocates beside its states (one GPU, torch optimizers), checked against
    traced steps (benchmarks/conformance.py):
      AdamW foreach   `torch._foreach_sqrt(exp_avg_sqs)` over the whole group: one more state's worth (torch/optim/
                      adam.py `_multi_tensor_adam`);
      AdamW for-loop  `(exp_avg_sq.sqrt() / bias_correction2_sqrt)` for one tensor at a time: two of the largest;
      AdamW fused     none; SGD (momentum updated in place; without momentum the
                      parameters updated in place) none;
      Adafactor       (transformers' Adafactor) per tensor: `grad**2 + eps` and the factored estimate built from the
                      row/column factors, both fp32, plus fp32 copies of a 16-bit gradient and weight: 8 or 16 bytes
                      per element of the largest tensor.
    `saved_bytes`: PEFT's modules_to_save copies stored in a dtype of their own (a 16-bit head beside fp32 adapters):
    each dtype's tensors are sized by their own bytes — foreach's per-dtype groups add up, a per-tensor
    intermediate is the larger of the two (traced: Adafactor stepping a 16-bit lm_head copy beside fp32 adapters
    holds 16 bytes per element of the head, not 8; -23 % before)."""
    if saved_bytes and split.saved:
        adapters = optimizer_step_transient(m, t, replace(split, saved=0), w_bytes, psi)
        head = optimizer_step_transient(m, t, replace(split, saved=0, trainable_tensors=(Tensor(
            "modules_to_save", m.vocab, m.hidden, "head", per_layer=False),)), saved_bytes, split.saved)
        both = t.optimizer == Optimizer.ADAMW and t.optimizer_impl == OptimizerImpl.FOREACH
        return adapters + head if both else max(adapters, head)
    state = 4.0 if w_bytes == 4.0 else w_bytes
    if t.optimizer == Optimizer.ADAMW:
        if t.optimizer_impl == OptimizerImpl.FOREACH:
            return state * psi
        if t.optimizer_impl == OptimizerImpl.FORLOOP:
            return state * _forloop_adamw_elements(m, t, split)
        return 0.0
    if t.optimizer == Optimizer.ADAFACTOR:
        return (8.0 if w_bytes == 4.0 else 16.0) * _largest_trainable_tensor(m, t, split)
    return 0.0


def estimate_memory(m: ModelSpec, t: TrainingSpec, s: Strategy, gpu: GpuSpec, split: ParamSplit,
                    eff: EfficiencyView) -> MemoryResult:
    return finish_memory(memory_phases(m, t, s, split, eff), gpu, eff, s)


@dataclass(frozen=True)
class Phased:
    """What the GPU does not change: the step's moments (phases) and what they were built with."""

    phases: tuple[Phase, ...]
    regime: Regime
    notes: tuple[str, ...]
    paged: float
    training: TrainingSpec


def finish_memory(p: Phased, gpu: GpuSpec, eff: EfficiencyView, s: Strategy) -> MemoryResult:
    """The peak of the phases, with this GPU's allocator, CUDA context, NCCL buffers and usable memory."""
    return _finish(p.phases, gpu, eff, s, p.regime, list(p.notes), p.paged, p.training)


def memory_phases(m: ModelSpec, t: TrainingSpec, s: Strategy, split: ParamSplit, eff: EfficiencyView) -> Phased:
    """The allocated bytes of each moment of the step. Reads the GPU only through `eff` (the efficiencies' values),
    so two GPUs whose values agree share the phases (core._memory)."""
    t = attention_that_runs(m, t)
    n = s.gpus
    r = regime_for(t, s)
    notes: list[str] = []
    psi, phi = split.trainable, split.frozen
    w_t, g_t = _trainable_bytes(t, s)
    head = head_for(m, t.task)
    block = layer_params(m)
    root = sum(x.numel for x in global_tensors(m, head))
    largest_module = largest_module_params(m, head)

    states: dict[str, float] = {}
    # ---- frozen weights (LoRA / QLoRA / freeze base) -----------------------------------------------------------
    # a freeze fine-tune with fp32 weights loads the whole model in fp32 (train/runner.py `load_dtype`), its frozen
    # blocks too; LoRA/QLoRA bases are 16-bit
    frozen_bytes = 4.0 if t.precision == Precision.FP32 or (t.method == Method.FREEZE and r.weight == 4) else 2.0
    quantized = split.quantized
    frozen_shard = n if s.shards_params else 1
    upcast = t.method == Method.QLORA and t.kbit_fp32_upcast and t.precision != Precision.FP32
    if upcast:  # PEFT's prepare_model_for_kbit_training: the parameters that are not 4-bit become fp32
        _add(states, "weights/frozen_fp32_upcast", (phi - quantized) * 4.0 / frozen_shard)
        notes.append("QLoRA through PEFT: embeddings, norms and the output head are cast to fp32, which makes the "
                     "hidden states and the MLP's intermediates fp32 too (bitsandbytes returns its input's dtype)")
    else:
        _add(states, "weights/frozen", (phi - quantized) * frozen_bytes / frozen_shard)
    nf4_bytes = NF4_SINGLE_QUANT_BYTES_PER_PARAM if r.litgpt else NF4_BYTES_PER_PARAM
    _add(states, "weights/frozen_nf4", quantized * nf4_bytes / frozen_shard)
    if r.litgpt and t.method == Method.QLORA and not m.tie_embeddings and t.task != Task.CLASSIFICATION:
        # LitGPT's output head is an nn.Linear that Lightning's BitsandbytesPrecision makes 4-bit like the blocks'
        head_params = m.vocab * m.hidden
        states["weights/frozen"] = states.get("weights/frozen", 0.0) - head_params * frozen_bytes / frozen_shard
        _add(states, "weights/frozen_nf4", head_params * nf4_bytes / frozen_shard)
    if r.litgpt and m.tie_embeddings and t.method in (Method.LORA, Method.QLORA) and t.task != Task.CLASSIFICATION:
        # LitGPT keeps a tied model's output head as a weight of its own (its checkpoints store lm_head apart; tied
        # only with `train.tie_embeddings`, unset in config_hub); under QLoRA the head is 4-bit like every nn.Linear
        # Lightning's BitsandbytesPrecision replaces (traced: Gemma-2B LoRA holds 0.98 GiB more than its HF count)
        _add(states, "weights/litgpt_untied_head", m.vocab * m.hidden * (
            nf4_bytes if t.method == Method.QLORA else frozen_bytes) / frozen_shard)
    if t.task == Task.DPO and t.method in (Method.FULL, Method.FREEZE):
        # TRL's DPOTrainer loads the reference with the policy's own init kwargs (trl v1.9.0 dpo_trainer.py,
        # `create_model_from_path(ref_model_path, **ref_model_init_kwargs)`), trainfit's runner deep-copies the
        # policy: either way the reference keeps the policy's stored dtype, fp32 weights included (traced: a full
        # fine-tune with fp32 weights holds two fp32 copies; -17.6 % with a 16-bit reference)
        fp32_policy = t.precision == Precision.FP32 or t.param_dtype == "fp32"
        ref_bytes = 4.0 if s.engine in ("single", "ddp") and fp32_policy else frozen_bytes
        _add(states, "weights/dpo_reference", split.total * ref_bytes / frozen_shard)
        notes.append("DPO keeps a frozen reference copy of the model (LoRA/QLoRA reuse the base with adapters off)")

    # ---- trainable weights, gradients, optimizer --------------------------------------------------------------
    opt_bytes = _optimizer_state_bytes(m, t, split, w_t, s.engine == "deepspeed")
    grads: dict[str, float] = {}
    step_buffers: dict[str, float] = {}  # the optimizer step's own intermediates (one GPU, torch optimizers)
    # PEFT's modules_to_save copies keep the base model's dtype (checked against PEFT 0.21 in tests; fp32 after the
    # QLoRA upcast), and so do their gradients and torch's optimizer states; the originals stay among the frozen
    saved = split.saved
    saved_bytes = 4.0 if upcast else frozen_bytes
    saved_apart = saved and s.engine not in ("deepspeed", "fsdp") and w_t != saved_bytes
    if saved_apart:
        psi -= saved
        opt_bytes = (_optimizer_state_bytes(m, t, replace(split, trainable=psi), w_t, False) +
                     _optimizer_state_bytes(m, t, replace(split, trainable=saved), saved_bytes, False))
        _add(states, "weights/modules_to_save", saved * saved_bytes)
        _add(grads, "gradients/modules_to_save", saved * saved_bytes)
    master = 4.0 * psi if (s.engine == "deepspeed" and t.precision != Precision.FP32) else 0.0
    offload_opt = s.offload != Offload.NONE
    if s.engine == "deepspeed":
        trained_module = largest_module if t.method == Method.FULL else 0
        _deepspeed_states(s, n, psi, w_t, opt_bytes, master, largest_module, trained_module, states, grads,
                          offload_opt)
    elif s.engine == "fsdp":
        # a QLoRA block is gathered in its quantized form (torchtune's NF4Tensor, bnb's packed quant_storage)
        block_bytes = 2.0 * block - (2.0 - NF4_BYTES_PER_PARAM) * quantized / m.layers
        block_grad = split.adapters / m.layers if t.is_peft else block  # PEFT: only the adapters have gradients
        _fsdp_states(t, s, n, psi, w_t, g_t, opt_bytes, block_grad, block_bytes, root, states, grads)
    else:
        _add(states, "weights/trainable", psi * w_t)
        _add(states, "optimizer/states", opt_bytes)
        _add(grads, "gradients/trainable", psi * g_t)
        if not t.optimizer_in_backward:
            _add(step_buffers, "optimizer/step_transient", optimizer_step_transient(
                m, t, split, w_t, psi, saved_bytes if saved_apart else 0.0))
        if s.engine == "ddp":  # the Reducer allocates its flat gradient buckets when DDP wraps the model
            _add(states, "gradients/ddp_buckets", psi * g_t)
    problem = combination_problem(t, s)
    if problem:
        raise SpecError(problem)
    if t.optimizer_in_backward:
        # each parameter steps and drops its gradient as soon as the gradient is ready: one tensor's lives at a time
        # (FSDP: the block being reduced)
        keep = grads.get("gradients/unsharded_block", 0.0)
        grads.clear()
        if keep or s.engine == "fsdp":
            _add(grads, "gradients/in_backward", keep or (largest_module if t.method == Method.FULL else 0) * g_t)
        else:
            # one GPU: the largest tensor's gradient and its own optimizer's step intermediates (traced:
            # trainfit.trace's InBackward, torchtune's optimizer_in_bwd)
            largest = _largest_trainable_tensor(m, t, split)
            _add(grads, "gradients/in_backward", largest * g_t)
            _add(step_buffers, "optimizer/in_backward_step_transient", in_backward_step_transient(t, w_t, largest))
    paged = 0.0
    if t.paged_optimizer:  # bitsandbytes allocates paged states with cudaMallocManaged, beside PyTorch's allocator
        paged = states.pop("optimizer/states", 0.0)
        notes.append("paged optimizer: its states live in CUDA managed memory, which PyTorch's memory counters do not "
                     "see; they stay on the GPU while it has room and page out to host memory when it does not")

    # ---- activations and loss ------------------------------------------------------------------------------------
    acts, acts_total, one_block = activation_bytes(m, t.per_micro_batch, split, r)
    # measured runs of other training stacks (validation, calibration): 1.0 for trainfit's runner
    act_factor, loss_factor = eff("framework_activation_factor"), eff("framework_logits_factor")
    if act_factor != 1.0:
        acts = {k: v * act_factor for k, v in acts.items()}
        acts_total, one_block = acts_total * act_factor, one_block * act_factor
    if t.offload_activations:
        acts = offloaded_activations(acts, m.layers - split.lowest_trainable_block)
        acts_total = sum(acts.values())
    logits = logits_bytes(m, t, r) * loss_factor
    head_grad = (m.vocab * m.hidden * g_t / (n if s.shards_grads else 1)
                 if (t.method == Method.FULL and t.task != Task.CLASSIFICATION) else 0.0)
    if saved and head == "lm" and saves_output_head(t):  # the trained head copy's gradient, in its backward
        head_grad = m.vocab * m.hidden * (saved_bytes if saved_apart else g_t) / (n if s.shards_grads else 1)

    other: dict[str, float] = {}
    if t.method == Method.QLORA:
        # the largest quantized Linear's weight, dequantized to 16 bits for its matmul
        # (LitGPT: Lightning's BitsandbytesPrecision quantizes from fp16, so the weight dequantizes to fp16 and is then
        # cast to bf16 for the matmul: two copies)
        _add(other, "other/nf4_dequantized_weight", (4.0 if r.litgpt else 2.0) * max(
            lin.in_features * lin.out_features for lin in layer_linears(m) if lin.count == 1))
    if s.engine == "deepspeed":
        _add(other, "other/comm_buckets", 2 * 2.0 * m.hidden * m.hidden)

    # autocast's bf16 copies of fp32 weights: cached for the whole forward, then kept where autograd saved them
    # (the blocks' not under full checkpointing, which recomputes the block, casts included; the head's always)
    block_casts, head_cast = _autocast_copies(m, t, split, r, head)
    casts = {**block_casts, **head_cast}
    saved_casts = head_cast if t.grad_ckpt == GradCkpt.FULL else casts
    accumulating = t.grad_accum > 1  # gradients of earlier micro-batches are held during the next forward
    held = grads if accumulating else {}
    totals = {id(states): sum(states.values()), id(other): sum(other.values()), id(grads): sum(grads.values()),
              id(acts): acts_total}
    tokens = t.tokens_per_micro_batch
    causal = t.task != Task.CLASSIFICATION
    softcap = loss_factor * final_softcap_bytes(m, t, r)
    later_grads = 0.0
    if t.method in (Method.FULL, Method.FREEZE) and s.engine in ("single", "ddp") and t.grad_accum == 1 and \
            not t.optimizer_in_backward:
        # a trained block's gradients written before its attention's backward: o_proj's and the MLP's but down_proj's
        # (counted as the block's first; traced: the softmax backward's moment holds them)
        linears = layer_linears(m)
        later_grads = g_t * sum(x.in_features * x.out_features * x.count * x.share for x in linears[:-1]
                                if not set(x.roles) & {"q", "k", "v"})
    in_block = _in_block_items(m, t, split, r, eff, one_block, later_grads)
    if t.optimizer_in_backward and s.engine == "single":
        in_block = _larger(in_block, _in_block_down_step(m, t, split, r, w_t, g_t, in_block))
    top_kept = act_factor * tokens * sum(apply_checkpointing(
        block_saved(m, r, split.block_trainable, t.seq_len, t.attention), m, r, t.grad_ckpt, split.block_trainable,
        t.selective_ac).values())
    forward_end = {"activations/lora_fp32_input_copy": lora_fp32_input_copy(m, r, split, t),
                   "logits/forward_buffers": loss_factor * (r.act + (4.0 if r.act < 4 else 0.0) + 4.0) * m.vocab
                   * tokens if causal else 0.0, "logits/final_softcap_tanh": softcap}
    loss_start = {"logits/loss_buffers": logits, "logits/final_softcap_tanh": softcap}
    forward_phase = _phase("forward_end", (states, other, acts, held, casts, forward_end), totals)
    copy = forward_end["activations/lora_fp32_input_copy"]
    if copy and not m.is_moe and t.task != Task.DPO:
        # the top block's down_proj under an fp32 adapter, the forward's own peak: PEFT's fp32 copy of its input
        # is alive to the adapter's end, with the MLP's input, down_proj's input, the base and adapter outputs and
        # the scaled one, the residual stream and the embeddings' output (held by the model's forward); the head's
        # input does not exist yet (traced: Qwen3 LoRA on the MLP, fp32 adapters under autocast, a classifier at
        # 16 x 4K without checkpointing: -5.7 % at the forward's end; under full checkpointing the blocks saved only
        # their inputs, and the forward's end is the larger)
        running = {"activations/lora_fp32_input_copy": copy, "activations/down_proj_forward_transients":
                   (r.act * (m.intermediate + 4 * m.hidden) + (r.residual + r.act) * m.hidden) * tokens}
        in_block_acts = {k: v for k, v in acts.items() if k != "activations/final_norm_and_head_input"}
        totals[id(in_block_acts)] = sum(in_block_acts.values())
        forward_phase = max(forward_phase, _phase("forward_end", (states, other, in_block_acts, held, casts,
                                                                  running), totals), key=lambda p: p.total)
    if t.task == Task.DPO:
        dpo_forward, dpo_metrics, dpo_backward = dpo_logits_items(m, t, r)
        forward_end = {**dpo_forward, "logits/final_softcap_tanh": softcap,
                       "activations/lora_fp32_input_copy": forward_end["activations/lora_fp32_input_copy"]}
        loss_start = {**{k: v * loss_factor for k, v in dpo_backward.items()}, "logits/final_softcap_tanh": softcap}
        # the forward's own end (autocast's cached casts alive), or the metrics' moment after both forwards (accelerate
        # wraps each forward in autocast: the casts no tensor saved are gone)
        forward_phase = max(_phase("forward_end", (states, other, acts, held, casts, forward_end), totals),
                            _phase("forward_end", (states, other, acts, held, saved_casts, {
                                k: v * loss_factor for k, v in dpo_metrics.items()}), totals),
                            _phase("forward_end", (states, other, acts, held, saved_casts,
                                                   dpo_reference_eager_items(m, t, r)), totals),
                            key=lambda p: p.total)
    head_logits = {"logits/grad": loss_factor * r.act * m.vocab * tokens if causal else 0.0}
    if r.litgpt and causal and t.task != Task.DPO:
        # LitGPT's loop and chunked loss (litgpt_logits_items): the previous step's logits (and old bitsandbytes'
        # kept inputs of its graph) alive until the model returns, then the loss's 16-bit log-probabilities
        prev_kept = acts.get("activations/linear_in/kbit_frozen_inputs", 0.0) + (
            r.act * m.hidden * tokens if t.method == Method.QLORA and r.kbit_keeps_inputs else 0.0)
        returned, before_last, loss_end, lit_backward, lit_head = (
            {k: (v if k.startswith("activations/") else v * loss_factor) for k, v in items.items()}
            for items in litgpt_logits_items(m, t, r, prev_kept))
        moments = [returned, loss_end]
        if t.method == Method.QLORA:
            # the 4-bit head's matmul, per chunk in forward and again in its backward: its weight dequantized to fp16
            # and cast to bf16, beyond the largest block Linear's (other/nf4_dequantized_weight)
            extra = max(0.0, 4.0 * m.vocab * m.hidden - other.get("other/nf4_dequantized_weight", 0.0))
            before_last["other/nf4_dequantized_head"] = lit_head["other/nf4_dequantized_head"] = extra
            moments.append(before_last)
        forward_phase = max((_phase("forward_end", (states, other, acts, held, casts, x), totals) for x in moments),
                            key=lambda p: p.total)
        loss_start, head_logits = lit_backward, lit_head
    phases = (
        # end of forward: the loss upcasts the logits to fp32 while the bf16 logits are still referenced
        forward_phase,
        # start of backward: saved log-probabilities, their gradient and the fp32 logits' gradient (12 B x V x token)
        _phase("backward_start", (states, other, acts, held, saved_casts, loss_start), totals),
        # the output head's backward: the 16-bit logits gradient and the head's weight gradient
        _phase("backward_head", (states, other, acts, held, saved_casts, _larger({
            **head_logits,
            # a classification head's backward: the final RMSNorm's backward, run op by op in fp32, holds five
            # fp32 hidden-sized temporaries (traced; under a language-model head the logits' gradient outweighs it)
            # (a LayerNorm runs as one fused kernel: only its 16-bit input gradient, traced on GPT-2, +4.6 % with
            # RMSNorm's five)
            # (the head's saved input is gone by then: its backward came first; traced: Qwen2 freeze classifier, +5.3 %
            # with it)
            "activations/final_norm_backward": 0.0 if causal else (
                5 * 4.0 - r.act if m.norm == "rmsnorm" else 0.0) * m.hidden * tokens,
            "gradients/output_head": 0.0 if accumulating else head_grad}, _head_step_in_backward(
                m, t, s, head, w_t, g_t, head_cast))), totals),
        # the first block's backward: its activations (saved, or recomputed under checkpointing) are alive while
        # nearly every gradient already exists
        _phase("backward_end", (states, other, _grads_in_bottom_block(m, t, s, split, grads, g_t, head), in_block, {
            # LoRA on fused experts: the bottom block's merged expert weight takes a full-size 16-bit gradient
            "gradients/merged_expert_weight": merged_expert_grad(m, t, r, split.lowest_trainable_block),
            # a freeze fine-tune under checkpointing runs its frozen blocks' backward (trainable.py): the bottom one,
            # recomputed under autocast, casts its fp32 weights and keeps the 16-bit copies for its input gradient
            # (traced: Mixtral freeze at 128 tokens, -6.9 % without them)
            "other/autocast_copies_frozen_block": 2.0 * sum(
                lin.in_features * lin.out_features * lin.count * lin.share for lin in layer_linears(m))
            if t.method == Method.FREEZE and r.amp_casts and split.lowest_trainable_block == 0
            and split.trainable_blocks < m.layers else 0.0}), totals),
        # the top block's backward (full fine-tuning): the blocks below still hold their activations and autocast
        # copies, the top block's gradients appear, and under autocast its largest weight's gradient passes through
        # two 16-bit temporaries (seen in traces; large for a MoE block whose experts are one 3-D tensor)
        _phase("backward_top_block", (states, other, _larger(
            _top_block_items(m, t, s, r, acts_total, one_block, block_casts, head_grad, g_t),
            _in_top_block_items(m, t, s, split, top_kept, acts, block_casts, head_grad, g_t, held, in_block))), totals),
        # the tied embedding's backward, last of all: embedding_dense_backward writes a dense V x h gradient, and
        # adding it to the gradient the output head left makes a third V x h tensor before the old one is freed
        _phase("backward_embedding", (states, other, grads, _embedding_end(m, t, s, head, g_t, step_buffers)), totals),
        # optimizer-in-backward has no step of its own after backward: every tensor was stepped, and its gradient
        # freed, in backward (the largest, the embedding, at its end: backward_embedding)
        _phase("optimizer", (states, other) if t.optimizer_in_backward else (states, other, grads, step_buffers),
               totals),
    )
    return Phased(phases, r, tuple(notes), paged, t)


# Saved activations that belong to no block (the head side, checkpointing's boundary tensors) or are weights
OUTSIDE_BLOCKS = ("activations/final_norm_and_head_input", "activations/checkpoint/boundary_tensors",
                  "activations/checkpoint/eager_attention_mask", "activations/lora_merged_expert_weights")


def offloaded_activations(acts: dict[str, float], active_blocks: int) -> dict[str, float]:
    """The saved activations left on the GPU when the tensors blocks save for backward are offloaded to host
    memory (TrainingSpec.offload_activations): one block's worth — the one brought back ahead of its backward —
    of every per-block item; the head side stays (torchtune keeps the output layer's tensors on the GPU).
    Unsloth's offloaded checkpointing (unsloth/models/_utils.py `Unsloth_Offloaded_Gradient_Checkpointer`) copies
    each checkpointed block's input to the host in forward (`hidden_states.to("cpu", non_blocking=True)`) and back
    in that block's backward; torchtune's enable_activation_offloading (torchtune/training/_activation_offloading.py
    `OffloadActivations`, saved-tensor hooks) moves every saved tensor above 1 KiB to the host and prefetches the
    next layer's on a side stream. Checked against torchtune's README 'Optimization flags' table: Llama-3.2-3B full
    fine-tune at 2 x 4096 tokens, 23.1 GiB active without and 21.8 with offloading, the 28 block inputs' 1.31 GiB."""
    keep = 1.0 / max(1, active_blocks)
    return {k: (v if k in OUTSIDE_BLOCKS else v * keep) for k, v in acts.items()}


def _top_block_items(m: ModelSpec, t: TrainingSpec, s: Strategy, r: Regime, acts_total: float, one_block: float,
                     block_casts: dict[str, float], head_grad: float, g_t: float) -> dict[str, float]:
    """What the backward of the top block holds beyond the model states (full fine-tuning on one GPU / DDP; LoRA on
    fused MoE experts)."""
    if t.method in (Method.LORA, Method.QLORA):
        return _lora_merged_top_block(m, t, r, acts_total, one_block)
    if t.method != Method.FULL or s.engine not in ("single", "ddp") or t.optimizer_in_backward or t.grad_accum > 1:
        return {}
    top_params, largest = top_block_params(m)
    lower = 1.0 - top_params / (m.layers * layer_params(m))
    return {"activations/lower_blocks": max(0.0, acts_total - one_block),
            "other/autocast_copies_lower_blocks": sum(block_casts.values()) * lower,
            "gradients/output_head": head_grad, "gradients/top_block": top_params * g_t,
            "gradients/weight_grad_16bit_temporaries": 2 * 2.0 * largest if r.amp_casts else 0.0}


def _lora_merged_top_block(m: ModelSpec, t: TrainingSpec, r: Regime, acts_total: float,
                           one_block: float) -> dict[str, float]:
    """LoRA on fused MoE experts (PEFT's ParamWrapper merges each expert tensor with its adapter for the forward):
    the top block's backward computes the gradient of the merged weight — a full-size 16-bit tensor — before it
    reaches the adapters, while every block's activations are still held. The first one backward meets is the
    experts' down projection (the last in forward). Seen in traces: DeepSeek-V3 cut to 4 blocks, LoRA all-linear
    at seq 1024, 7.0 GiB for the down projection's 256 experts (-9.5% before this term)."""
    grad = merged_expert_grad(m, t, r, -1)
    if not grad:
        return {}
    recomputed = one_block if t.grad_ckpt == GradCkpt.FULL else 0.0
    return {"activations/all_blocks": acts_total + recomputed, "gradients/merged_expert_weight": grad}


def merged_expert_grad(m: ModelSpec, t: TrainingSpec, r: Regime, block: int) -> float:
    """Bytes of the 16-bit gradient of the first merged expert tensor a block's backward meets (the experts' down
    projection, last in forward); 0 when PEFT wraps no expert of that block (e.g. a dense-first layer)."""
    s = m.structure
    if s is None or not s.pattern or t.method not in (Method.LORA, Method.QLORA):
        return 0.0
    wrapped = wrapped_experts(m, t.lora_targets, s.groups[s.pattern[block]])
    if not wrapped:
        return 0.0
    first = next((x for x in wrapped if "down" in x.roles), max(wrapped, key=lambda x: x.in_features * x.out_features))
    return r.act * first.in_features * first.out_features * first.count


def kept_input(m: ModelSpec, r: Regime, t: TrainingSpec) -> float:
    """Under full checkpointing, the block input checkpoint saved, alive beside the recomputed block — a tensor of
    its own when the residual stream is 16-bit (the first norm then saves an fp32 upcast); an fp32 residual is the
    very tensor the first norm saves, counted with the block (traced), and so is a LayerNorm's 16-bit input (it saves
    its input as is: traced on GPT-2)."""
    return r.residual * m.hidden * t.tokens_per_micro_batch if t.grad_ckpt == GradCkpt.FULL and r.residual < 4 \
        and m.norm == "rmsnorm" else 0.0


def freed_before_peak(m: ModelSpec, r: Regime, split: ParamSplit, t: TrainingSpec) -> float:
    """Saved bytes of a block already freed at its backward's peak: with a trainable down projection the peak
    follows its weight gradient, whose saved input is then gone (traced)."""
    k = m.experts_per_tok if m.is_moe else 1
    if "down" in split.block_trainable.linears:
        return r.act * m.intermediate * k * t.tokens_per_micro_batch
    if "down" in split.block_trainable.adapters and not (r.autocast or r.adapter != r.act):
        # a 16-bit adapter on down reads the very input its frozen base does (or, under lora_dropout, its own
        # 16-bit dropped copy of it): freed with its gradients
        return r.act * m.intermediate * k * t.tokens_per_micro_batch
    return 0.0


def lora_fp32_input_copy(m: ModelSpec, r: Regime, split: ParamSplit, t: TrainingSpec,
                         in_recompute: bool = False) -> float:
    """PEFT casts an adapter's input to the adapter's dtype (fp32) before lora_A; under autocast that fp32 copy of
    down_proj's input (the widest) is alive while the block (re)computes its forward, beside everything the block
    saved so far (traced: the peak of a checkpointed block's backward, and of the forward)."""
    if "down" not in split.block_trainable.adapters or not r.autocast or r.adapter <= r.act:
        return 0.0
    # under lora_dropout its fp32 dropped copy is alive beside it while a recomputed block's lora_A runs (traced:
    # Llama-3-shaped LoRA all-linear, fp32 adapters under bf16 autocast, dropout 0.1, full checkpointing, a
    # classifier at 2 x 2K tokens: -11.9 % without it; at the forward's own end it is gone, +2.7 % with it there)
    dropped = in_recompute and r.lora_dropout
    return (2 if dropped else 1) * r.adapter * m.intermediate * t.tokens_per_micro_batch


def _larger(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return a if sum(a.values()) >= sum(b.values()) else b


def _in_block_items(m: ModelSpec, t: TrainingSpec, split: ParamSplit, r: Regime, eff: EfficiencyView,
                    one_block: float, later_grads: float = 0.0) -> dict[str, float]:
    """What the block running its backward holds beyond the model states and the other blocks' saved tensors, at
    the larger of two moments (traced: benchmarks/conformance.py):
      the MLP's backward   the block's saved (or recomputed) activations less down_proj's input, freed with its
                           weight gradient; the MLP's gradient temporaries; the gradient arriving at the block's
                           output and the one its residual branch adds; under full checkpointing the block's own
                           16-bit input and, under autocast, PEFT's fp32 copy of down_proj's input;
      eager attention's    the softmax backward's fp32 tensors are alive; the MLP's saved tensors are gone, and
      backward             the gradients of the MLP and o_proj (`later_grads`, trained blocks) already exist."""
    tokens = t.tokens_per_micro_batch
    ckpt = t.grad_ckpt == GradCkpt.FULL
    # a recomputed MoE block's MLP backward runs on tokens x top-k rows (each routed expert's share, plus any shared
    # expert): traced on Mixtral LoRA classifiers under full checkpointing at 4K tokens (-11.0 % and -12.5 % with
    # tokens x intermediate); without checkpointing the traced top block holds less than that (+7 % with it, not
    # pinned down), and keeps tokens x intermediate
    mlp_width = shape_of(m).mlp_width if m.is_moe and ckpt else m.intermediate
    common = {"activations/residual_gradients": 2.0 * r.residual * m.hidden * tokens,
              "activations/checkpoint/own_input": kept_input(m, r, t),
              "activations/checkpoint/eager_attention_mask": eager_mask_bytes(m, t, r)}
    own = one_block
    if t.grad_ckpt == GradCkpt.SELECTIVE and t.selective_ac == "attention":
        # (torchtitan's policies recompute the whole top block, or keep it: it holds all it saves, as here)
        # the MLP's backward comes before the attention core is recomputed: the block holds what it kept (traced:
        # GPT-2 LoRA on c_attn, a classifier at 16 x 4K tokens, +5.5 % with the whole block)
        whole = block_saved(m, r, split.block_trainable, t.seq_len, t.attention)
        kept = apply_checkpointing(whole, m, r, t.grad_ckpt, split.block_trainable, t.selective_ac)
        own -= eff("framework_activation_factor") * (sum(whole.values()) - sum(kept.values())) * tokens
    # PEFT's fp32 copy of down_proj's input lives in the recompute, not in the backward: a dense block's recompute
    # ends in down_proj, with everything the block saves, the MLP's input and down_proj's input still referenced by
    # the running forward, down_proj's output, and the copy; the recompute runs from the adapter's backward, the
    # first the block meets, so the gradient through its scaling exists too, beside the two residual gradients
    # (traced: Qwen3 LoRA on the MLP, fp32 adapters under
    # autocast, a classifier at 16 x 4K tokens, peaks there: +7.1 % when the copy was counted in the MLP's backward,
    # whose own buffers the recompute's transients are not). A MoE block's recompute runs expert by expert (not
    # pinned down: the copy stays with the backward there).
    copy = lora_fp32_input_copy(m, r, split, t, in_recompute=True) if ckpt else 0.0
    recompute_end = copy and not m.is_moe
    mlp = {"activations/last_block": own - freed_before_peak(m, r, split, t),
           "activations/backward_buffers": eff("backward_transient_intermediates") * r.act * mlp_width * tokens,
           "activations/lora_fp32_input_copy": 0.0 if recompute_end else copy, **common}
    if recompute_end:
        mlp = _larger(mlp, {"activations/last_block": own, "activations/lora_fp32_input_copy": copy,
                            "activations/recompute_transients": r.act * (2 * m.hidden + m.intermediate) * tokens,
                            "activations/recompute_trigger_gradient": r.act * m.hidden * tokens,
                            **common})
    adapter_forward = _mlp_in_adapter_forward(m, t, split, r, one_block, common)
    if adapter_forward:
        mlp = _larger(mlp, adapter_forward)
    eager = eager_softmax_backward(m, t, r)
    if not eager:
        return mlp
    per_token = block_saved(m, r, split.block_trainable, t.seq_len, t.attention)
    # the MLP's saved tensors are freed by its backward, recomputed blocks' too (a block recomputed under autocast
    # with fp32 weights was taken to keep them: +8..+15 % on eager classifier fine-tunes, traced)
    # (sandwich norms, Gemma-2: the post-attention norm and both feed-forward norms run after the attention core)
    # and the MLP's adapters' saved inputs (LoRA; traced: Gemma-2 LoRA all-linear classifier at 2 x 2K tokens,
    # +3.3 % with them)
    mlp_part = (sum(v for k, v in per_token.items() if k.startswith((
        "mlp/", "moe/", "linear_in/down", "linear_in/mlp", "norm2/", "norm3/", "norm4/")))
        + (mlp_adapter_saved(m, r, split.block_trainable) if m.structure is None else 0.0)) * tokens
    # and so are the adapters' own input copies of the modules whose backward came first: o_proj's, and for a read
    # structure the MLP's too (traced: Llama-3 LoRA all-linear classifier, eager at 2K tokens, +2.2 % under selective
    # checkpointing and +1.7 % without when they were kept)
    if "lora/inputs" in per_token and adapters_copy_inputs(r):
        copy = 2 if r.autocast else r.adapter
        groups = ("o_in",) if m.structure is None else ("o_in", "mlp_in", "down_in")
        mlp_part += sum(copy * (width + split.block_trainable.lora_rank)
                        for width, group in adapter_modules(m, split.block_trainable.adapters)
                        if group in groups) * tokens
    attention = {"activations/last_block_attention_part": max(0.0, one_block - mlp_part),
                 "activations/eager_softmax_backward": eager, "gradients/block_mlp_and_o": later_grads, **common}
    return _larger(mlp, attention)


def _mlp_in_adapter_forward(m: ModelSpec, t: TrainingSpec, split: ParamSplit, r: Regime, one_block: float,
                            common: dict[str, float]) -> dict[str, float] | None:
    """Under full checkpointing, the top block's recompute at the MLP's input adapter (LoRA on gate / up, a dense
    block of a hand-written family): PEFT's forward holds the base Linear's output, lora_B's output and the scaled
    one (`result + lora_B(lora_A(x)) * scaling`: three tensors of the module's output width) beside everything the
    block saved before its MLP, the residual stream the MLP's output is added to and, for a separate up_proj, the
    gate's output. With a fused gate_up (Phi-3: twice the intermediate width) this is the block's largest moment,
    not the MLP's backward (traced, op by op: Phi-3 LoRA all-linear, pure bf16, a classifier at 8K tokens, the peak
    at the gate_up adapter's multiply, -6.0 % without it). None where it does not apply."""
    tr = split.block_trainable
    if t.grad_ckpt != GradCkpt.FULL or m.is_moe or m.structure is not None:
        return None
    adapted = {role for role in tr.adapters if role in ("gate", "up")}
    if not adapted:
        return None
    tokens = t.tokens_per_micro_batch
    per_token = block_saved(m, r, tr, t.seq_len, t.attention)
    whole = sum(per_token.values())
    if whole <= 0:
        return None
    # what the MLP saves (its activations, down_proj's input, the sandwich norm after it, its adapters' inputs but
    # the MLP's own input, which is alive) is not there yet
    separate = adapters_copy_inputs(r)  # PEFT casts x (or drops it out) for each adapter (activations._adapter_inputs)
    own_input = 0.0 if separate else r.act * m.hidden  # shared with the adapters
    mlp_saved = sum(v for k, v in per_token.items() if k.startswith(("mlp/", "linear_in/down", "norm4/"))) + \
        max(0.0, mlp_adapter_saved(m, r, tr) - own_input)
    before = one_block * (whole - mlp_saved) / whole  # one_block carries the stack's activation factor
    gated_separate = m.gated_mlp and not m.fused_gate_up
    width = (2 if m.gated_mlp and m.fused_gate_up else 1) * m.intermediate
    earlier = r.act * m.intermediate if gated_separate and "up" in adapted else 0.0  # gate_proj's output
    cast = r.adapter * m.hidden if separate else 0.0  # PEFT's cast of x, a local
    return {"activations/last_block_before_mlp": before,
            "activations/mid_block_residual": r.residual * m.hidden * tokens,
            "activations/adapter_forward_outputs": (3 * r.act * width + earlier + cast) * tokens,
            "activations/recompute_trigger_gradient": r.act * m.hidden * tokens, **common}


def _in_block_down_step(m: ModelSpec, t: TrainingSpec, split: ParamSplit, r: Regime, w_t: float, g_t: float,
                        in_block: dict[str, float]) -> dict[str, float]:
    """Optimizer-in-backward on one GPU: a block's first gradient, its last Linear's (down_proj), is stepped as soon
    as it is accumulated, with the block's saved tensors still alive but before the MLP's other gradient buffers
    exist (only down_proj's input gradient): that gradient and its step's intermediates beside them. Traced: Llama-3
    freeze classifier, fp32 weights, Adafactor, full checkpointing (-9.9 % without: down_proj's 0.88 MiB fp32
    gradient and Adafactor's 1.75 MiB); a bf16 full fine-tune with foreach AdamW peaks in the MLP's backward
    instead."""
    linears = layer_linears(m)
    if not linears or not split.block_trainable.linears & set(linears[-1].roles) or \
            "activations/backward_buffers" not in in_block:
        return {}
    last = linears[-1]
    first = last.in_features * last.out_features * last.count * last.share
    out = dict(in_block)
    out["activations/backward_buffers"] = r.act * last.in_features * (m.experts_per_tok if m.is_moe else 1) * \
        t.tokens_per_micro_batch
    out["gradients/in_backward_block_first"] = first * g_t
    out["optimizer/in_backward_block_step"] = in_backward_step_transient(t, w_t, first)
    return out


def _in_top_block_items(m: ModelSpec, t: TrainingSpec, s: Strategy, split: ParamSplit, top_kept: float,
                        acts: dict[str, float], block_casts: dict[str, float], head_grad: float,
                        g_t: float, held: dict[str, float], in_block: dict[str, float]) -> dict[str, float]:
    """The peak inside the top trained block's backward (one GPU / DDP): what the bottom block's backward holds
    (its saved or recomputed activations and backward temporaries), with the gradients of the head side only and,
    instead of the block's own, what the blocks below still keep for their backward — their saved activations and
    autocast copies, or only their checkpointed inputs. The bottom block's moment is the larger when the
    gradients outweigh the blocks' activations, this one when activations do (traced: benchmarks/conformance.py)."""
    if s.engine not in ("single", "ddp") or (t.optimizer_in_backward and s.engine != "single"):
        return {}
    active = m.layers - split.lowest_trainable_block
    blocks = sum(v for k, v in acts.items() if k not in OUTSIDE_BLOCKS)
    if m.structure is not None and len(m.structure.pattern) == m.layers:
        lower = blocks * (active - 1) / max(1, active)
    else:
        # the blocks below keep all but the top block's saved tensors — not the mean block's: the lowest block of
        # LoRA on the MLP only saves no attention tensors (traced: Phi-3, LoRA on gate_up/down, eager attention at
        # 8K tokens, whose top block alone holds the s² softmax: +25 % with the mean)
        lower = max(0.0, blocks - top_kept)
    out = {"activations/lower_blocks": lower, **in_block}
    others = (attention_mask_kinds(m) - 1) * in_block.get("activations/checkpoint/eager_attention_mask", 0.0)
    if others:  # the other kinds' masks, still held by the blocks below (the bottom block's backward holds one)
        out["activations/checkpoint/other_attention_masks"] = others
    if t.grad_ckpt != GradCkpt.FULL:
        out["other/autocast_copies_lower_blocks"] = sum(block_casts.values()) * (active - 1) / max(1, active)
    if t.optimizer_in_backward:  # every gradient so far stepped and freed but a tied head's share (see above)
        if _tied_in_backward(m, t, s, _head_of(m, t)):
            out["gradients/in_backward_tied_head"] = g_t * m.vocab * m.hidden
    elif held:
        out.update({f"{k}_held": v for k, v in held.items()})
    elif t.method in (Method.FULL, Method.FREEZE):
        last = layer_linears(m)[-1]
        out["gradients/output_head"] = head_grad
        out["gradients/top_block_first"] = last.in_features * last.out_features * last.count * last.share * g_t
    else:
        out["gradients/output_head"] = head_grad
    return out


def _grads_in_bottom_block(m: ModelSpec, t: TrainingSpec, s: Strategy, split: ParamSplit, grads: dict[str, float],
                           g_t: float, head: str) -> dict[str, float]:
    """The gradients alive while the lowest trained block runs its backward (one GPU / DDP, one micro-batch, the
    optimizer after backward): every gradient but that block's own — only its first, the block's last Linear
    (down_proj), exists at the block's peak — and the input embedding's, which its backward writes after the
    blocks' (a tied embedding already holds the output head's). Seen in traces (benchmarks/conformance.py): the
    block's own and the embedding's gradients made full fine-tunes of small models 10-30 % high there. LoRA: the
    block's peak comes before any of its adapters' gradients."""
    if t.optimizer_in_backward and s.engine == "single":
        # each gradient is stepped and freed as it is accumulated: at the block's peak none is alive but, for a
        # trained tied embedding, the output head's share, waiting in autograd's input buffer for the embedding's
        # own (one AccumulateGrad per leaf, fired once both have arrived)
        return {"gradients/in_backward_tied_head": g_t * m.vocab * m.hidden} if _tied_in_backward(m, t, s, head) else {}
    if s.engine not in ("single", "ddp") or t.grad_accum > 1 or t.optimizer_in_backward or not grads:
        return grads
    linears = layer_linears(m)
    last = linears[-1] if linears else None
    if t.method in (Method.FULL, Method.FREEZE):
        block = layer_params(m)
        first = last.in_features * last.out_features * last.count * last.share if last else 0
        absent = block - first
        if t.method == Method.FULL and not (m.tie_embeddings and head == "lm"):
            absent += m.vocab * m.hidden  # the input embedding's gradient comes last
        if t.method == Method.FULL and m.position == "learned":
            # and so does a learned position table's (GPT-2's wpe; traced: +9.2 % on a GPT-2 classifier without)
            absent += m.max_positions * m.hidden
    else:  # LoRA: the block's peak comes before any of its adapters' gradients
        absent = split.adapters / m.layers
    out = dict(grads)
    if "embed_tokens" in t.modules_to_save and head == "lm" and t.is_peft:  # the trained copy's gradient comes last
        key = "gradients/modules_to_save" if "gradients/modules_to_save" in out else "gradients/trainable"
        per = out[key] / (split.saved if key == "gradients/modules_to_save" else split.trainable)
        out[key] = max(0.0, out[key] - m.vocab * m.hidden * per)
    out["gradients/trainable"] = max(0.0, out.get("gradients/trainable", 0.0) - absent * g_t)
    return out


def top_block_params(m: ModelSpec) -> tuple[float, float]:
    """(parameters of the top block, its largest weight tensor's elements); a read structure's last block group."""
    if m.structure is not None and m.structure.pattern:
        group = m.structure.groups[m.structure.pattern[-1]]
        tensors = group.tensors
        params = group.params
    else:
        tensors, params = layer_tensors(m), layer_params(m)
    largest = max((x.rows * x.cols * x.count for x in tensors if x.role in ("linear", "expert")), default=0)
    return params, largest


def _head_step_in_backward(m: ModelSpec, t: TrainingSpec, s: Strategy, head: str, w_t: float, g_t: float,
                           head_cast: dict[str, float]) -> dict[str, float]:
    """Optimizer-in-backward on one GPU: an untied, trained output head steps as soon as its gradient is
    accumulated, once its matmul's backward has freed the logits' gradient and autocast's 16-bit copy of its weight:
    its gradient and its own step's intermediates (traced: Llama-3 full fine-tune, fp32 weights, for-loop AdamW and
    Adafactor, -7.3 % without the step's fp32 V x h intermediates, +3.3 % to +7.7 % with the freed copy kept)."""
    if not (t.optimizer_in_backward and s.engine == "single" and t.method == Method.FULL and head == "lm"
            and t.task != Task.CLASSIFICATION and not m.tie_embeddings):
        return {}
    elements = m.vocab * m.hidden
    return {"gradients/output_head": g_t * elements,
            "optimizer/in_backward_head_step": in_backward_step_transient(t, w_t, elements),
            "other/autocast_head_copy_freed": -sum(head_cast.values())}


def _head_of(m: ModelSpec, t: TrainingSpec) -> str:
    return head_for(m, t.task)


def _tied_in_backward(m: ModelSpec, t: TrainingSpec, s: Strategy, head: str) -> bool:
    """A fully trained tied embedding stepped in backward on one GPU."""
    return (m.tie_embeddings and t.method == Method.FULL and head in ("lm", "mlm") and t.task != Task.CLASSIFICATION
            and s.engine == "single" and t.optimizer_in_backward)


def _embedding_end(m: ModelSpec, t: TrainingSpec, s: Strategy, head: str, g_t: float,
                   step_buffers: dict[str, float]) -> dict[str, float]:
    """What the end of backward holds beyond the gradients: a tied embedding's dense backward and its sum with the
    output head's gradient (two V x h tensors beside the head's); under optimizer-in-backward on one GPU, the
    largest tensor's own step (the embedding's, last to step), which runs once the tied sum's inputs are freed
    (traced: Qwen2 SFT, fp32 weights: three V x h gradients at the end of backward with fused and foreach AdamW
    alike, -9.5 % before)."""
    tied_sum = {"gradients/tied_embedding_backward": 2.0 * g_t * m.vocab * m.hidden
                if _tied_trained(m, t, s, head) or _tied_in_backward(m, t, s, head) else 0.0}
    if not t.optimizer_in_backward:
        return tied_sum
    step = dict(step_buffers)
    if _tied_in_backward(m, t, s, head) and step_buffers.get("optimizer/in_backward_step_transient", 0.0) and \
            max(largest_module_params(m, head), m.max_positions * m.hidden if m.position == "learned" else 0) > \
            m.vocab * m.hidden:
        # the largest tensor is not the tied embedding (GPT-2's position table at 8K positions): it steps while the
        # output head's share of the embedding's gradient still waits (traced: GPT-2 SFT, Adafactor, -14.8 % without)
        step["gradients/in_backward_tied_head"] = g_t * m.vocab * m.hidden
    return _larger(tied_sum, step)


def _tied_trained(m: ModelSpec, t: TrainingSpec, s: Strategy, head: str) -> bool:
    """A fully trained, tied input/output embedding with unsharded gradients (checked against the trace)."""
    return (m.tie_embeddings and t.method == Method.FULL and head in ("lm", "mlm") and t.task != Task.CLASSIFICATION
            and s.engine in ("single", "ddp") and not t.optimizer_in_backward)


def eager_softmax_backward(m: ModelSpec, t: TrainingSpec, r: Regime) -> float:
    """Eager attention's softmax backward, beyond the block's saved tensors: the probabilities' gradient, cast back
    to the softmax dtype (fp32 in Llama-family code), and the softmax's input gradient are alive together beside
    the saved fp32 softmax, while the low-precision probabilities PV's matmul saved are already freed: two
    softmax-sized tensors less that copy, heads x seq² per sequence (traced: benchmarks/conformance.py; at 8K
    tokens the block's backward holds three fp32 softmax-sized tensors)."""
    if t.attention != Attention.EAGER:
        return 0.0
    soft = softmax_bytes(m, r)
    probs = r.act if (m.attention_dropout > 0 or r.act < soft) else 0
    return float((2 * soft - probs) * m.heads * t.seq_len * t.tokens_per_micro_batch)


def _autocast_copies(m: ModelSpec, t: TrainingSpec, split: ParamSplit, r: Regime,
                     head: str) -> tuple[dict[str, float], dict[str, float]]:
    """bf16 copies autocast makes of fp32 matmul weights: (the blocks', the output head's). All fp32 weights under
    mixed precision with fp32 weights; only the fp32 LoRA adapters on a 16-bit base."""
    if r.amp_casts:
        blocks = m.layers * sum(lin.in_features * lin.out_features * lin.count * lin.share
                                for lin in layer_linears(m))
        if t.method == Method.FREEZE:
            blocks = blocks * split.trainable_blocks / m.layers
        head_w = m.vocab * m.hidden if head == "lm" and t.task != Task.CLASSIFICATION else 0
        return ({"other/autocast_weight_copies": 2.0 * blocks},
                # a frozen head's cast too (autocast caches only trainable leaves' casts, but the head's matmul
                # saves its weight's cast for the input's gradient)
                {"other/autocast_head_copy": 2.0 * head_w} if head_w else {})
    # QLoRA with PEFT's fp32 upcast: the output head's fp32 weight is cast to bf16 for its matmul and kept for its
    # backward
    upcast_head = (2.0 * m.vocab * m.hidden if t.method == Method.QLORA and t.kbit_fp32_upcast and r.autocast
                   and head == "lm" and t.task != Task.CLASSIFICATION else 0.0)
    head_copy = {"other/autocast_head_copy": upcast_head} if upcast_head else {}
    if r.autocast and split.adapters:
        return {"other/autocast_weight_copies": 2.0 * split.adapters}, head_copy
    return {}, head_copy


def _deepspeed_states(s: Strategy, n: int, psi: float, w_t: float, opt_bytes: float, master: float,
                      largest_module: int, trained_module: int, states: dict, grads: dict, offload_opt: bool) -> None:
    """DeepSpeed's bookkeeping; with ZeRO-3 the largest module is gathered (2 bytes x params) and, when it trains,
    its 16-bit gradient too (DeepSpeed's 4 x largest_layer for full training)."""
    fp32_grad = 4.0 * psi
    if s.zero_stage == 3:
        _add(states, "weights/trainable_shard", psi * w_t / n if s.offload != Offload.ALL else 0.0)
        _add(states, "weights/gathered_layer", 2.0 * largest_module)
        _add(grads, "gradients/gathered_layer", 2.0 * trained_module)
        if not offload_opt:
            _add(states, "optimizer/master_fp32", master / n)
            _add(states, "optimizer/states", opt_bytes / n)
            _add(grads, "gradients/fp32_partition", fp32_grad / n)
        return
    _add(states, "weights/trainable", psi * w_t)
    if offload_opt:  # DeepSpeed's estimator: 2Ψ on the GPU; gradients stream to the host bucket by bucket
        return
    # ZeRO-2 partitions the 16-bit gradients too (DeepSpeed 0.19: 2Ψ + 18Ψ/N); ZeRO-1 keeps them whole.
    _add(grads, "gradients/16bit", psi * w_t / (n if s.zero_stage == 2 else 1))
    _add(grads, "gradients/fp32_partition", fp32_grad / n)
    _add(states, "optimizer/master_fp32", master / n)
    _add(states, "optimizer/states", opt_bytes / n)


def _fsdp_states(t: TrainingSpec, s: Strategy, n: int, psi: float, w_t: float, g_t: float, opt_bytes: float,
                 block_grad: float, block_bytes: float, root: int, states: dict, grads: dict) -> None:
    offload = s.offload != Offload.NONE
    if not offload:
        _add(states, "weights/trainable_shard", psi * w_t / n)
        _add(states, "optimizer/states", opt_bytes / n)
        _add(grads, "gradients/shard", psi * g_t / n)
    if s.fsdp == Fsdp.FULL_SHARD:
        # root unit + current and prefetched block
        _add(states, "weights/gathered_units", 2.0 * root + 2 * block_bytes)
    else:
        _add(states, "weights/gathered_all", 2.0 * psi)  # SHARD_GRAD_OP keeps parameters gathered
    _add(grads, "gradients/unsharded_block", 2.0 * block_grad)


def varying_shapes_reserve(peak: Phase, t: TrainingSpec | None, eff: EfficiencyView) -> tuple[float, str | None]:
    """The caching allocator's extra reserve when shapes change from step to step (variable-length batches): blocks
    cached for one length cannot serve a longer one, so memory reserved grows beyond memory allocated. A named share
    of the activations and logits at the peak (what changes shape); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    grows segments in place and keeps a smaller one. Not in allocated memory."""
    if t is None or not t.variable_length:
        return 0.0, None
    name = "allocator_varlen_expandable_fraction" if t.expandable_segments else "allocator_varlen_fraction"
    varying = sum(v for k, v in peak.items.items() if k.startswith(("activations/", "logits/")))
    extra = eff(name) * varying
    return extra, (f"allocator: shapes vary from step to step, {extra / GiB:.2f} GiB more reserved "
                   f"({name} = {eff(name):g} of activations and logits)")


def _finish(phases: tuple[Phase, ...], gpu: GpuSpec, eff: EfficiencyView, s: Strategy, r: Regime,
            notes: list[str], paged: float = 0.0, t: TrainingSpec | None = None) -> MemoryResult:
    peak = max(phases, key=lambda p: p.total)
    allocated = peak.total
    fraction, constant = eff("allocator_overhead_fraction"), eff("allocator_overhead_gib") * GiB
    varlen, note = varying_shapes_reserve(peak, t, eff)
    if note:
        notes = [*notes, note]
    overhead = allocated * fraction + constant + varlen
    context = eff("cuda_context_gib") * GiB
    nccl = eff("nccl_buffers_gib") * GiB if s.gpus > 1 else 0.0
    overheads = [("other/allocator_overhead", overhead - varlen), ("other/cuda_context", context)]
    if varlen:
        overheads.append(("other/allocator_varying_shapes", varlen))
    if nccl:
        overheads.append(("other/nccl_buffers", nccl))
    usable = usable_bytes(gpu, eff)
    device = allocated + overhead + context + nccl
    resident = min(paged, max(0.0, usable - device))  # managed memory stays on the GPU while it has room
    if resident:
        overheads.append(("optimizer/paged_states_resident", resident))
    return MemoryResult(phases=phases, peak_phase=peak.name, allocated=allocated, reserved=allocated + overhead,
                        device=device + resident, usable=usable, overheads=tuple(overheads), regime=r,
                        notes=tuple(notes), paged=paged, allocator_fraction=fraction, allocator_constant=constant)
