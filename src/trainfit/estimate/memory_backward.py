"""Backward-pass terms: the bottom block's recomputed activations and gradient buffers, the top block's backward
(gradients appearing while the blocks below hold their activations), the output head's and the tied embedding's
backward, and optimizer-in-backward steps."""

from __future__ import annotations

from ..catalog.efficiency import EfficiencyView
from ..spec.model import ModelSpec
from ..spec.training import GradCkpt, Method, Strategy, Task, TrainingSpec
from .activations import (Regime, adapter_modules, adapters_copy_inputs, apply_checkpointing, block_saved,
                          mlp_adapter_saved, shape_of)
from .params import largest_module_params, layer_linears, layer_params, layer_tensors
from .trainable import ParamSplit, head_for, wrapped_experts
from .memory_acts import (OUTSIDE_BLOCKS, _larger, attention_mask_kinds, eager_mask_bytes, eager_softmax_backward,
                          freed_before_peak, kept_input, lora_fp32_input_copy)
from .memory_states import in_backward_step_transient


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
    if ckpt and r.residual == 4 and m.norm == "rmsnorm":
        # an fp32 residual stream under full checkpointing: the recomputed block holds one fp32 hidden-sized tensor
        # fewer than its forward saves (the storages alive at the peak of its MLP's backward, traced: 3 of the 4
        # its two RMSNorms save, and 5 of 6 with the lower blocks' checkpointed inputs at the top block; Qwen2 and
        # Qwen3 full fine-tunes with fp32 weights under autocast). Which one is not pinned down; a 16-bit residual
        # stream's recomputed block holds all it saves beside its checkpointed input (kept_input)
        own -= r.residual * m.hidden * tokens
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
        linears = layer_linears(m)
        out["gradients/output_head"] = head_grad
        if linears:  # a block read without Linear layers has no first gradient of this kind
            last = linears[-1]
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
