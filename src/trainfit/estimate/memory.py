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

The model is a set of named terms, each a function with its source: model states in memory_states.py, saved
activations and autocast's copies in memory_acts.py, the loss's buffers in memory_loss.py, the backward's transients
in memory_backward.py, and the step's own terms below (`Step` holds what they all read). `step_terms` names them;
`MOMENTS` lists which terms each moment holds. A new term is one function and one name in the rows of the moments
where it is alive; the allocator, CUDA context and NCCL buffers are added to the peak by memory_result.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..catalog.efficiency import EfficiencyView
from ..errors import SpecError
from ..i18n import say
from ..spec.hardware import GpuSpec
from ..spec.model import ModelSpec
from ..spec.training import GradCkpt, Method, Offload, Precision, Strategy, Task, TrainingSpec, combination_problem
from .activations import Regime, apply_checkpointing, attention_that_runs, block_saved
from .params import global_tensors, largest_module_params, layer_linears, layer_params
from .trainable import NF4_BYTES_PER_PARAM, NF4_SINGLE_QUANT_BYTES_PER_PARAM, ParamSplit, head_for, saves_output_head
from .memory_acts import _autocast_copies, _larger, activation_bytes, lora_fp32_input_copy, offloaded_activations
from .memory_backward import (_embedding_end, _grads_in_bottom_block, _head_step_in_backward, _in_block_down_step,
                              _in_block_items, _in_top_block_items, _top_block_items, merged_expert_grad)
from .memory_liger import liger_items
from .memory_loss import (dpo_logits_items, dpo_reference_eager_items, final_softcap_bytes, litgpt_logits_items,
                          fused_xentropy_items, logits_bytes, logits_dtype_items, megatron_loss_items,
                          torchtune_logits_items)
from .memory_result import MemoryResult, Phase, _add, _finish, _phase, regime_for
from .memory_states import (_deepspeed_states, _fsdp_states, _largest_trainable_tensor, _optimizer_state_bytes,
                            _trainable_bytes, in_backward_step_transient, optimizer_step_transient)
# the names other modules read from here
from .memory_result import AffineMemory, PARTS, usable_bytes  # noqa: F401
from .memory_states import host_offload_bytes  # noqa: F401


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


class Step:
    """What every term reads: the job, its layout and trainable split, the efficiencies' values, and what the step's
    set-up fixes once (the forward's dtypes, the trainable weights' and gradients' bytes, the head, a block's size).
    `notes` collects what the terms say about themselves, in the order they are built."""

    def __init__(self, m: ModelSpec, t: TrainingSpec, s: Strategy, split: ParamSplit, eff: EfficiencyView):
        self.m, self.s, self.split, self.eff = m, s, split, eff
        self.t = t = attention_that_runs(m, t)
        self.n = s.gpus
        self.r = r = regime_for(t, s)
        self.notes: list[str] = []
        self.w_t, self.g_t = _trainable_bytes(t, s)
        self.head = head_for(m, t.task)
        self.block = layer_params(m)
        self.root = sum(x.numel for x in global_tensors(m, self.head))
        self.largest_module = largest_module_params(m, self.head)
        # a freeze fine-tune with fp32 weights loads the whole model in fp32 (train/runner.py `load_dtype`), its
        # frozen blocks too; LoRA/QLoRA bases are 16-bit
        self.frozen_bytes = 4.0 if t.precision == Precision.FP32 or (t.method == Method.FREEZE and r.weight == 4) \
            else 2.0
        self.frozen_shard = self.n if s.shards_params else 1
        # PEFT's prepare_model_for_kbit_training: the parameters that are not 4-bit become fp32
        self.upcast = t.method == Method.QLORA and t.kbit_fp32_upcast and t.precision != Precision.FP32
        # PEFT's modules_to_save copies keep the base model's dtype (checked against PEFT 0.21 in tests; fp32 after
        # the QLoRA upcast), and so do their gradients and torch's optimizer states; the originals stay frozen
        self.saved_bytes = 4.0 if self.upcast else self.frozen_bytes
        self.saved_apart = bool(split.saved) and s.engine not in ("deepspeed", "fsdp") and self.w_t != self.saved_bytes
        self.psi = split.trainable - (split.saved if self.saved_apart else 0.0)
        # measured runs of other training stacks (validation, calibration): 1.0 for trainfit's runner
        self.act_factor = eff("framework_activation_factor")
        self.loss_factor = eff("framework_logits_factor")
        self.tokens = t.tokens_per_micro_batch
        self.causal = t.task != Task.CLASSIFICATION
        self.accumulating = t.grad_accum > 1  # earlier micro-batches' gradients are held during the next forward


# ---- model states: weights, gradients, optimizer ------------------------------------------------------------------

def frozen_weights(c: Step) -> dict[str, float]:
    """The weights that do not train (LoRA / QLoRA bases, a freeze fine-tune's lower blocks), as stored: 16-bit,
    NF4 (bitsandbytes double quantization; LitGPT single), fp32 after PEFT's k-bit upcast."""
    m, t, r, split = c.m, c.t, c.r, c.split
    states: dict[str, float] = {}
    quantized = split.quantized
    if c.upcast:
        _add(states, "weights/frozen_fp32_upcast", (split.frozen - quantized) * 4.0 / c.frozen_shard)
        c.notes.append(say("es_qlora_upcast"))
    else:
        _add(states, "weights/frozen", (split.frozen - quantized) * c.frozen_bytes / c.frozen_shard)
    nf4_bytes = NF4_SINGLE_QUANT_BYTES_PER_PARAM if r.litgpt else NF4_BYTES_PER_PARAM
    _add(states, "weights/frozen_nf4", quantized * nf4_bytes / c.frozen_shard)
    if r.litgpt and t.method == Method.QLORA and not m.tie_embeddings and t.task != Task.CLASSIFICATION:
        # LitGPT's output head is an nn.Linear that Lightning's BitsandbytesPrecision makes 4-bit like the blocks'
        head_params = m.vocab * m.hidden
        states["weights/frozen"] = states.get("weights/frozen", 0.0) - head_params * c.frozen_bytes / c.frozen_shard
        _add(states, "weights/frozen_nf4", head_params * nf4_bytes / c.frozen_shard)
    if r.litgpt and m.tie_embeddings and t.method in (Method.LORA, Method.QLORA) and t.task != Task.CLASSIFICATION:
        # LitGPT keeps a tied model's output head as a weight of its own (its checkpoints store lm_head apart; tied
        # only with `train.tie_embeddings`, unset in config_hub); under QLoRA the head is 4-bit like every nn.Linear
        # Lightning's BitsandbytesPrecision replaces (traced: Gemma-2B LoRA holds 0.98 GiB more than its HF count)
        _add(states, "weights/litgpt_untied_head", m.vocab * m.hidden * (
            nf4_bytes if t.method == Method.QLORA else c.frozen_bytes) / c.frozen_shard)
    return states


def dpo_reference(c: Step) -> dict[str, float]:
    """TRL's DPOTrainer loads the reference with the policy's own init kwargs (trl v1.9.0 dpo_trainer.py,
    `create_model_from_path(ref_model_path, **ref_model_init_kwargs)`), trainfit's runner deep-copies the policy:
    either way the reference keeps the policy's stored dtype, fp32 weights included (traced: a full fine-tune with
    fp32 weights holds two fp32 copies; -17.6 % with a 16-bit reference). LoRA/QLoRA reuse the base, adapters off."""
    t, s = c.t, c.s
    if not (t.task == Task.DPO and t.method in (Method.FULL, Method.FREEZE)):
        return {}
    fp32_policy = t.precision == Precision.FP32 or t.param_dtype == "fp32"
    ref_bytes = 4.0 if s.engine in ("single", "ddp") and fp32_policy else c.frozen_bytes
    c.notes.append(say("es_dpo_reference"))
    return {"weights/dpo_reference": c.split.total * ref_bytes / c.frozen_shard}


@dataclass
class ModelStates:
    states: dict[str, float]  # resident through the step: weights, optimizer states (and gathered units)
    grads: dict[str, float]  # every gradient once backward ends
    step_buffers: dict[str, float]  # the optimizer step's own intermediates (one GPU, torch optimizers)
    paged: float  # optimizer states in CUDA managed memory


def trainable_states(c: Step, states: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """Trainable weights, their optimizer states and gradients, by engine (DeepSpeed's and FSDP's shards, one GPU's
    or DDP's whole copies with the Reducer's buckets), into `states`; returns (gradients, step buffers)."""
    m, t, s, split = c.m, c.t, c.s, c.split
    grads: dict[str, float] = {}
    step_buffers: dict[str, float] = {}
    psi, w_t = c.psi, c.w_t
    if c.saved_apart:
        opt_bytes = (_optimizer_state_bytes(m, t, replace(split, trainable=psi), w_t, False) +
                     _optimizer_state_bytes(m, t, replace(split, trainable=split.saved), c.saved_bytes, False))
        _add(states, "weights/modules_to_save", split.saved * c.saved_bytes)
        _add(grads, "gradients/modules_to_save", split.saved * c.saved_bytes)
    else:
        opt_bytes = _optimizer_state_bytes(m, t, split, w_t, s.engine == "deepspeed")
    if s.engine == "deepspeed":
        master = 4.0 * psi if t.precision != Precision.FP32 else 0.0
        trained_module = c.largest_module if t.method == Method.FULL else 0
        _deepspeed_states(s, c.n, psi, w_t, opt_bytes, master, c.largest_module, trained_module, states, grads,
                          s.offload != Offload.NONE)
    elif s.engine == "fsdp":
        # a QLoRA block is gathered in its quantized form (torchtune's NF4Tensor, bnb's packed quant_storage)
        block_bytes = 2.0 * c.block - (2.0 - NF4_BYTES_PER_PARAM) * split.quantized / m.layers
        block_grad = split.adapters / m.layers if t.is_peft else c.block  # PEFT: only the adapters have gradients
        _fsdp_states(t, s, c.n, psi, w_t, c.g_t, opt_bytes, block_grad, block_bytes, c.root, states, grads)
    else:
        _add(states, "weights/trainable", psi * w_t)
        _add(states, "optimizer/states", opt_bytes)
        _add(grads, "gradients/trainable", psi * c.g_t)
        if not t.optimizer_in_backward:
            _add(step_buffers, "optimizer/step_transient", optimizer_step_transient(
                m, t, split, w_t, psi, c.saved_bytes if c.saved_apart else 0.0))
        if s.engine == "ddp":  # the Reducer allocates its flat gradient buckets when DDP wraps the model
            _add(states, "gradients/ddp_buckets", psi * c.g_t)
    return grads, step_buffers


def in_backward_gradients(c: Step, grads: dict[str, float], step_buffers: dict[str, float]) -> None:
    """Optimizer in backward: each parameter steps and drops its gradient as soon as it is ready, so one tensor's
    gradient lives at a time (FSDP: the block being reduced); on one GPU with the step's own intermediates (traced:
    trainfit.trace's InBackward, torchtune's optimizer_in_bwd)."""
    keep = grads.get("gradients/unsharded_block", 0.0)
    grads.clear()
    if keep or c.s.engine == "fsdp":
        _add(grads, "gradients/in_backward", keep or (c.largest_module if c.t.method == Method.FULL else 0) * c.g_t)
    else:
        largest = _largest_trainable_tensor(c.m, c.t, c.split)
        _add(grads, "gradients/in_backward", largest * c.g_t)
        _add(step_buffers, "optimizer/in_backward_step_transient", in_backward_step_transient(c.t, c.w_t, largest))


def model_states(c: Step) -> ModelStates:
    states = frozen_weights(c)
    for key, value in dpo_reference(c).items():
        _add(states, key, value)
    grads, step_buffers = trainable_states(c, states)
    problem = combination_problem(c.t, c.s)
    if problem:
        raise SpecError(problem)  # a sentence of the table (errors.sentence_of)
    if c.t.optimizer_in_backward:
        in_backward_gradients(c, grads, step_buffers)
    paged = 0.0
    if c.t.paged_optimizer:  # bitsandbytes allocates paged states with cudaMallocManaged, beside PyTorch's allocator
        paged = states.pop("optimizer/states", 0.0)
        c.notes.append(say("es_paged_optimizer"))
    return ModelStates(states, grads, step_buffers, paged)


# ---- activations, loss and transients -----------------------------------------------------------------------------

def activations(c: Step) -> tuple[dict[str, float], float, float]:
    """Saved activations (activations.py), scaled by a measured stack's factor, offloaded where asked: (items,
    total, one block's)."""
    acts, acts_total, one_block = activation_bytes(c.m, c.t.per_micro_batch, c.split, c.r)
    if c.act_factor != 1.0:
        acts = {k: v * c.act_factor for k, v in acts.items()}
        acts_total, one_block = acts_total * c.act_factor, one_block * c.act_factor
    if c.t.offload_activations:
        acts = offloaded_activations(acts, c.m.layers - c.split.lowest_trainable_block)
        acts_total = sum(acts.values())
    return acts, acts_total, one_block


def other_transients(c: Step) -> dict[str, float]:
    """Buffers alive through the step: the largest quantized Linear's weight dequantized to 16 bits for its matmul
    (LitGPT: Lightning's BitsandbytesPrecision quantizes from fp16, so the weight dequantizes to fp16 and is then
    cast to bf16: two copies); DeepSpeed's communication buckets: with contiguous_gradients each backward allocates
    a reduce bucket of reduce_bucket_size 16-bit elements, two with overlap_comm (stage_1_and_2.py `backward`,
    v0.12.6: `buf_0`, `buf_1`), hidden_size² each under trainfit's and Hugging Face's "auto" configs, the stated
    number where a run's config says one (Strategy.ds_reduce_bucket)."""
    other: dict[str, float] = {}
    if c.t.method == Method.QLORA:
        _add(other, "other/nf4_dequantized_weight", (4.0 if c.r.litgpt else 2.0) * max(
            lin.in_features * lin.out_features for lin in layer_linears(c.m) if lin.count == 1))
    if c.s.engine == "deepspeed":
        _add(other, "other/comm_buckets", 2 * 2.0 * (c.s.ds_reduce_bucket or c.m.hidden * c.m.hidden))
    return other


def head_gradient(c: Step) -> float:
    """The output head's weight gradient, written in its backward (full fine-tuning; a trained head copy)."""
    m, t, s = c.m, c.t, c.s
    head_grad = (m.vocab * m.hidden * c.g_t / (c.n if s.shards_grads else 1)
                 if (t.method == Method.FULL and t.task != Task.CLASSIFICATION) else 0.0)
    if c.split.saved and c.head == "lm" and saves_output_head(t):
        head_grad = m.vocab * m.hidden * (c.saved_bytes if c.saved_apart else c.g_t) / (c.n if s.shards_grads else 1)
    return head_grad


def later_gradients(c: Step) -> float:
    """A trained block's gradients written before its attention's backward: o_proj's and the MLP's but down_proj's
    (counted as the block's first; traced: the softmax backward's moment holds them)."""
    t, s = c.t, c.s
    if not (t.method in (Method.FULL, Method.FREEZE) and s.engine in ("single", "ddp") and t.grad_accum == 1 and
            not t.optimizer_in_backward):
        return 0.0
    return c.g_t * sum(x.in_features * x.out_features * x.count * x.share for x in layer_linears(c.m)[:-1]
                       if not set(x.roles) & {"q", "k", "v"})


def forward_end_items(c: Step, softcap: float) -> dict[str, float]:
    """The loss's forward buffers: 16-bit logits, their fp32 upcast and fp32 log-probabilities (and PEFT's fp32
    copy of an adapter's input, Gemma-2's soft-capping tanh)."""
    r, m = c.r, c.m
    return {"activations/lora_fp32_input_copy": lora_fp32_input_copy(m, r, c.split, c.t),
            "logits/forward_buffers": c.loss_factor * (r.act + (4.0 if r.act < 4 else 0.0) + 4.0) * m.vocab
            * c.tokens if c.causal else 0.0, "logits/final_softcap_tanh": softcap}


def down_proj_forward(c: Step, copy: float) -> dict[str, float]:
    """The top block's down_proj under an fp32 adapter, the forward's own peak: PEFT's fp32 copy of its input is
    alive to the adapter's end, with the MLP's input, down_proj's input, the base and adapter outputs and the scaled
    one, the residual stream and the embeddings' output; the head's input does not exist yet (traced: Qwen3 LoRA on
    the MLP, fp32 adapters under autocast, a classifier at 16 x 4K without checkpointing: -5.7 % at the forward's
    end; under full checkpointing the blocks saved only their inputs, and the forward's end is the larger)."""
    r, m = c.r, c.m
    if r.lora_dropout:
        # lora_A(dropout(x)): the fp32 dropped copy and its 1-byte mask beside the copy while lora_A casts it to
        # 16 bits and multiplies, before lora_B's output and the scaled one exist (traced op by op: Llama-3 LoRA
        # all-linear, fp32 adapters under bf16 autocast, dropout 0.1, a classifier at 2 x 2K tokens, -5.4 % without
        # the dropped copy, +2.7 % with it beside the adapter's outputs)
        return {"activations/lora_fp32_input_copy": copy, "activations/lora_fp32_dropped_copy": copy,
                "activations/down_proj_forward_transients":
                    (r.act * (m.intermediate + 2 * m.hidden) + (r.residual + r.act) * m.hidden) * c.tokens}
    return {"activations/lora_fp32_input_copy": copy, "activations/down_proj_forward_transients":
            (r.act * (m.intermediate + 4 * m.hidden) + (r.residual + r.act) * m.hidden) * c.tokens}


def final_norm_backward(c: Step) -> float:
    """A classification head's backward: the final RMSNorm's backward, run op by op in fp32, holds five fp32
    hidden-sized temporaries (traced; under a language-model head the logits' gradient outweighs it). A LayerNorm
    runs as one fused kernel: only its 16-bit input gradient (traced on GPT-2, +4.6 % with RMSNorm's five). The
    head's saved input is gone by then: its backward came first (traced: Qwen2 freeze classifier, +5.3 % with it)."""
    if c.causal:
        return 0.0
    return (5 * 4.0 - c.r.act if c.m.norm == "rmsnorm" else 0.0) * c.m.hidden * c.tokens


def frozen_block_casts(c: Step) -> float:
    """A freeze fine-tune under checkpointing runs its frozen blocks' backward (trainable.py): the bottom one,
    recomputed under autocast, casts its fp32 weights and keeps the 16-bit copies for its input gradient (traced:
    Mixtral freeze at 128 tokens, -6.9 % without them)."""
    t, split = c.t, c.split
    if not (t.method == Method.FREEZE and c.r.amp_casts and split.lowest_trainable_block == 0
            and split.trainable_blocks < c.m.layers):
        return 0.0
    return 2.0 * sum(lin.in_features * lin.out_features * lin.count * lin.share for lin in layer_linears(c.m))


def bottom_block_casts(c: Step) -> float:
    """The lowest trained block's backward under autocast with fp32 weights: the 16-bit copies of its weights that
    its matmuls saved for the input's gradient (in the forward, or in its recompute under full checkpointing) are
    alive at its peak, the MLP's backward, but down_proj's, freed by its own backward just before (seen op by op:
    Qwen3 full fine-tune, hidden 2048, full checkpointing, a classifier at 6 x 256 tokens: -4.1 % without them)."""
    t, split = c.t, c.split
    if not (c.r.amp_casts and c.s.engine in ("single", "ddp") and (t.method == Method.FULL or (
            t.method == Method.FREEZE and (t.grad_ckpt != GradCkpt.FULL or split.lowest_trainable_block == 0)))):
        return 0.0
    linears = layer_linears(c.m)
    return 2.0 * sum(lin.in_features * lin.out_features * lin.count * lin.share for lin in linears[:-1])


def litgpt_loss(c: Step, acts: dict[str, float], other: dict[str, float]) -> tuple[list[dict[str, float]],
                                                                                  dict[str, float], dict[str, float]]:
    """LitGPT's loop and chunked loss (litgpt_logits_items): the previous step's logits (and old bitsandbytes' kept
    inputs of its graph) alive until the model returns, then the loss's 16-bit log-probabilities. Returns the
    forward's candidate moments, the backward's start and the head's backward."""
    m, t, r = c.m, c.t, c.r
    prev_kept = acts.get("activations/linear_in/kbit_frozen_inputs", 0.0) + (
        r.act * m.hidden * c.tokens if t.method == Method.QLORA and r.kbit_keeps_inputs else 0.0)
    returned, before_last, loss_end, lit_backward, lit_head = (
        {k: (v if k.startswith("activations/") else v * c.loss_factor) for k, v in items.items()}
        for items in litgpt_logits_items(m, t, r, prev_kept))
    moments = [returned, loss_end]
    if t.method == Method.QLORA:
        # the 4-bit head's matmul, per chunk in forward and again in its backward: its weight dequantized to fp16
        # and cast to bf16, beyond the largest block Linear's (other/nf4_dequantized_weight)
        extra = max(0.0, 4.0 * m.vocab * m.hidden - other.get("other/nf4_dequantized_weight", 0.0))
        before_last["other/nf4_dequantized_head"] = lit_head["other/nf4_dequantized_head"] = extra
        moments.append(before_last)
    return moments, lit_backward, lit_head


# ---- the step's moments, assembled from the terms ------------------------------------------------------------------

# Which terms each moment of the step holds, in order (the docstring at the top says why). "forward_end" is the
# largest of its candidates (forward_end_candidates); optimizer-in-backward has no step of its own after backward:
# every tensor was stepped, and its gradient freed, in backward (the largest, the embedding, at its end).
MOMENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # start of backward: saved log-probabilities, their gradient and the fp32 logits' gradient (12 B x V x token)
    ("backward_start", ("states", "other", "acts", "held", "saved_casts", "loss_start")),
    # the output head's backward: the 16-bit logits gradient and the head's weight gradient
    ("backward_head", ("states", "other", "acts", "held", "saved_casts", "head_backward")),
    # the first block's backward: its activations (saved, or recomputed under checkpointing) are alive while
    # nearly every gradient already exists
    ("backward_end", ("states", "other", "bottom_block_grads", "in_block", "bottom_block_extras")),
    # the top block's backward (full fine-tuning): the blocks below still hold their activations and autocast
    # copies, the top block's gradients appear, and under autocast its largest weight's gradient passes through
    # two 16-bit temporaries (seen in traces; large for a MoE block whose experts are one 3-D tensor)
    ("backward_top_block", ("states", "other", "top_block")),
    # the tied embedding's backward, last of all: embedding_dense_backward writes a dense V x h gradient, and
    # adding it to the gradient the output head left makes a third V x h tensor before the old one is freed
    ("backward_embedding", ("states", "other", "grads", "embedding_end")),
    ("optimizer", ("states", "other", "grads", "step_buffers")),
)
IN_BACKWARD_OPTIMIZER = ("states", "other")


def liger_loss(c: Step, terms: dict[str, dict[str, float]], head_trains: bool) -> None:
    """Liger's fused linear cross-entropy in place of the head, the fp32 upcast and the loss (memory_liger.py): the
    forward's end holds its gradients and one chunk's logits, the backward starts with the gradients it kept, and
    the head's backward scales them in place (a fresh head gradient beside the accumulated one when accumulating)."""
    r = c.r
    forward, kept, head = liger_items(c.m, c.t, r.act, r.residual, r.weight, head_trains)
    terms["forward_end"] = {"activations/lora_fp32_input_copy": terms["forward_end"]["activations/lora_fp32_input_copy"],
                            **forward}
    terms["loss_start"] = kept
    if c.accumulating:
        head = {**head, "logits/liger_grad_weight": kept["logits/liger_grad_weight"]}
    terms["head_logits"] = head


@dataclass
class Terms:
    items: dict[str, dict[str, float]]  # every term of the step by name ("part/detail" -> bytes)
    totals: dict[int, float]  # the totals of the large shared terms, by id (summed once, read by every moment)
    paged: float  # optimizer states in CUDA managed memory
    litgpt_forward: list[dict[str, float]] | None  # LitGPT's own forward-end moments (litgpt_loss)


def step_terms(c: Step) -> Terms:
    """Every term of the step by name, each from its own function above."""
    m, t, s, split, r = c.m, c.t, c.s, c.split, c.r
    ms = model_states(c)
    acts, acts_total, one_block = activations(c)
    other = other_transients(c)
    head_grad = head_gradient(c)
    # autocast's bf16 copies of fp32 weights: cached for the whole forward, then kept where autograd saved them
    # (the blocks' not under full checkpointing, which recomputes the block, casts included; the head's always)
    block_casts, head_cast = _autocast_copies(m, t, split, r, c.head)
    casts = {**block_casts, **head_cast}
    softcap = c.loss_factor * final_softcap_bytes(m, t, r)
    in_block = _in_block_items(m, t, split, r, c.eff, one_block, later_gradients(c))
    if t.optimizer_in_backward and s.engine == "single":
        in_block = _larger(in_block, _in_block_down_step(m, t, split, r, c.w_t, c.g_t, in_block))
    held = ms.grads if c.accumulating else {}
    top_kept = c.act_factor * c.tokens * sum(apply_checkpointing(
        block_saved(m, r, split.block_trainable, t.seq_len, t.attention), m, r, t.grad_ckpt, split.block_trainable,
        t.selective_ac).values())
    terms = {
        "states": ms.states, "other": other, "grads": ms.grads, "acts": acts, "step_buffers": ms.step_buffers,
        "held": held, "casts": casts,
        "saved_casts": head_cast if t.grad_ckpt == GradCkpt.FULL else casts,
        "forward_end": forward_end_items(c, softcap),
        "loss_start": {"logits/loss_buffers": logits_bytes(m, t, r) * c.loss_factor,
                       "logits/final_softcap_tanh": softcap},
        "head_logits": {"logits/grad": c.loss_factor * r.act * m.vocab * c.tokens if c.causal else 0.0},
        "in_block": in_block,
        "bottom_block_grads": _grads_in_bottom_block(m, t, s, split, ms.grads, c.g_t, c.head),
        "bottom_block_extras": {
            # LoRA on fused experts: the bottom block's merged expert weight takes a full-size 16-bit gradient
            "gradients/merged_expert_weight": merged_expert_grad(m, t, r, split.lowest_trainable_block),
            "other/autocast_copies_frozen_block": frozen_block_casts(c),
            "other/autocast_copies_bottom_block": bottom_block_casts(c)},
        "top_block": _larger(
            _top_block_items(m, t, s, r, acts_total, one_block, block_casts, head_grad, c.g_t),
            _in_top_block_items(m, t, s, split, top_kept, acts, block_casts, head_grad, c.g_t, held, in_block)),
        "embedding_end": _embedding_end(m, t, s, c.head, c.g_t, ms.step_buffers),
    }
    totals = {id(ms.states): sum(ms.states.values()), id(other): sum(other.values()),
              id(ms.grads): sum(ms.grads.values()), id(acts): acts_total}
    if t.task == Task.DPO:
        dpo_forward, dpo_metrics, dpo_backward = dpo_logits_items(m, t, r)
        terms["forward_end"] = {**dpo_forward, "logits/final_softcap_tanh": softcap,
                                "activations/lora_fp32_input_copy":
                                    terms["forward_end"]["activations/lora_fp32_input_copy"]}
        terms["loss_start"] = {**{k: v * c.loss_factor for k, v in dpo_backward.items()},
                               "logits/final_softcap_tanh": softcap}
        terms["dpo_metrics"] = {k: v * c.loss_factor for k, v in dpo_metrics.items()}
        terms["dpo_reference_eager"] = dpo_reference_eager_items(m, t, r)
    litgpt_forward = None
    if r.litgpt and c.causal and t.task != Task.DPO:
        litgpt_forward, terms["loss_start"], terms["head_logits"] = litgpt_loss(c, acts, other)
    elif t.liger_kernel and c.causal and t.task != Task.DPO:
        liger_loss(c, terms, head_grad > 0)
    elif t.loss_impl != "hf" and c.causal and t.task != Task.DPO:  # torchtune's output and loss; a 16-bit loss
        items = {"logits_dtype": logits_dtype_items, "fused_xentropy": fused_xentropy_items,
                 "megatron": megatron_loss_items}.get(t.loss_impl, torchtune_logits_items)
        forward, start, head = ({k: v * c.loss_factor for k, v in x.items()} for x in items(m, t, r))
        terms["forward_end"] = {**terms["forward_end"], "logits/forward_buffers": 0.0, **forward}
        terms["loss_start"] = {**terms["loss_start"], "logits/loss_buffers": 0.0, **start}
        terms["head_logits"] = head
    terms["head_backward"] = head_backward(c, terms, head_grad, head_cast)
    return Terms(terms, totals, ms.paged, litgpt_forward)


def head_backward(c: Step, terms: dict[str, dict[str, float]], head_grad: float,
                  head_cast: dict[str, float]) -> dict[str, float]:
    """The output head's backward: the logits' gradient, a classifier's final-norm backward and the head's weight
    gradient, or the head's own step in backward where it is larger."""
    return _larger({**terms["head_logits"], "activations/final_norm_backward": final_norm_backward(c),
                    "gradients/output_head": 0.0 if c.accumulating else head_grad},
                   _head_step_in_backward(c.m, c.t, c.s, c.head, c.w_t, c.g_t, head_cast))


def forward_end_candidates(c: Step, terms: dict[str, dict[str, float]],
                           litgpt_forward: list[dict[str, float]] | None) -> list[tuple[dict[str, float], ...]]:
    """The forward's end, whichever moment of it is largest: the loss upcasts the logits to fp32 while the 16-bit
    logits are still referenced; an fp32 adapter's down_proj; DPO's metrics after both forwards (accelerate wraps
    each forward in autocast: the casts no tensor saved are gone) and its reference's eager pass; LitGPT's loop."""
    base = tuple(terms[k] for k in ("states", "other", "acts", "held", "casts"))
    if litgpt_forward is not None:
        return [(*base, x) for x in litgpt_forward]
    out = [(*base, terms["forward_end"])]
    copy = terms["forward_end"]["activations/lora_fp32_input_copy"]
    if copy and not c.m.is_moe and c.t.task != Task.DPO:
        in_block_acts = {k: v for k, v in terms["acts"].items() if k != "activations/final_norm_and_head_input"}
        out.append((terms["states"], terms["other"], in_block_acts, terms["held"], terms["casts"],
                    down_proj_forward(c, copy)))
    if c.t.task == Task.DPO:
        saved = tuple(terms[k] for k in ("states", "other", "acts", "held", "saved_casts"))
        out += [(*saved, terms["dpo_metrics"]), (*saved, terms["dpo_reference_eager"])]
    return out


def memory_phases(m: ModelSpec, t: TrainingSpec, s: Strategy, split: ParamSplit, eff: EfficiencyView) -> Phased:
    """The allocated bytes of each moment of the step: the terms (step_terms) summed as MOMENTS lists them. Reads the
    GPU only through `eff` (the efficiencies' values), so two GPUs whose values agree share the phases
    (core._memory)."""
    c = Step(m, t, s, split, eff)
    found = step_terms(c)
    terms, totals = found.items, found.totals
    forward = max((_phase("forward_end", x, totals) for x in forward_end_candidates(c, terms, found.litgpt_forward)),
                  key=lambda p: p.total)
    rows = [(name, IN_BACKWARD_OPTIMIZER if name == "optimizer" and c.t.optimizer_in_backward else names)
            for name, names in MOMENTS]
    phases = (forward, *(_phase(name, tuple(terms[k] for k in names), totals) for name, names in rows))
    return Phased(phases, c.r, tuple(c.notes), found.paged, c.t)
