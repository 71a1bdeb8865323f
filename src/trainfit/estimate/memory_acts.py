"""Activation terms: what autograd saves per block (activations.py's per-tensor accounting, under checkpointing and
sequence/expert layouts), attention masks, PEFT's adapter copies, autocast's weight copies, activation offload."""

from __future__ import annotations

from functools import lru_cache

from ..spec.model import ModelSpec
from ..spec.training import Attention, GradCkpt, Method, Task, TrainingSpec
from .activations import (Regime, apply_checkpointing, block_saved, first_block_attention_unsaved,
                          first_block_without_input_grad, shape_of,
                          softmax_bytes)
from .params import layer_linears
from .trainable import ParamSplit, wrapped_experts


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
        elif t.grad_ckpt != GradCkpt.FULL and split.block_trainable.adapters & {"q", "k", "v", "o"} and \
                not embedding_trains and not split.block_trainable.linears and not split.block_trainable.norms:
            # LoRA on the attention's projections, embedding frozen: the first block's input needs no gradient,
            # so its pre-attention norm saves nothing (first_block_without_input_grad; traced: Llama-3 and Qwen3
            # LoRA on q/v, classifiers at 2K tokens, +3.0 % and +4.9 % with it), nor its attention core but what
            # the adapted projections' gradients need
            for k, v in {**_first_block_attention(m, t, r, split, kept), **{
                    k: v for k, v in kept.items() if k.startswith("norm1/")}}.items():
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


def _first_block_attention(m: ModelSpec, t: TrainingSpec, r: Regime, split: ParamSplit,
                           kept: dict[str, float]) -> dict[str, float]:
    """What the lowest block's attention core does not save without an input gradient (LoRA, embedding frozen, no
    checkpointing; activations.first_block_attention_unsaved), per token."""
    if t.grad_ckpt != GradCkpt.NONE or r.litgpt:
        return {}
    return first_block_attention_unsaved(m, r, split.block_trainable, kept, t.attention == Attention.EAGER)


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
