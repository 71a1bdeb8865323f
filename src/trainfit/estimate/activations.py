"""Activation memory: the tensors autograd saves for the backward pass, per Transformer block and per token.

The model follows the eager Hugging Face implementation (transformers 5.x, read from modeling_llama.py,
modeling_gpt2.py, modeling_bert.py and PEFT's lora.Linear) op by op, in the spirit of Korthikanti et al. 2022,
"Reducing Activation Recomputation in Large Transformer Models" (section 4.1: per-layer activation bytes
34·s·b·h + 5·a·s²·b for GPT with dropout). Their formula assumes fused LayerNorm and fp16 everywhere; Hugging Face
code differs, so each saved tensor is listed by name:

* RMSNorm upcasts to fp32 (`hidden_states.to(torch.float32)`) and that fp32 copy is saved (4·h bytes per token).
* A Linear saves its input only when its weight is trainable; a frozen base weight (LoRA, QLoRA) saves nothing —
  except bitsandbytes' 4-bit matmul before 0.43.2, which kept its input whenever any gradient flowed through it.
* PEFT casts each adapter's input to the adapter dtype (fp32) — one copy per adapted module; under autocast the
  bf16 re-cast of that copy is what is saved.
* Under autocast with fp32 weights (mixed precision without DeepSpeed/FSDP) every Linear saves its own bf16 cast of
  an fp32 input, and the residual stream is fp32.
* SDPA / FlashAttention save q, k, v, the output and the log-sum-exp (4·heads bytes); eager attention saves the fp32
  softmax (4·a·s per token) and its low-precision copy.
* Attention-logit soft-capping (Gemma-2's `attn_logit_softcapping`: scores / cap, tanh, * cap, in eager_attention_
  forward of modeling_gemma2.py) saves tanh's output, one more s x s tensor per head in the scores' dtype. SDPA has
  no soft-capping: transformers runs such a model's eager attention when SDPA is asked for (`attention_that_runs`).

`tests/test_activations_autograd.py` pins these per-layer numbers to what autograd actually saves.

LitGPT's own model code (TrainingSpec.model_code "litgpt", Regime.litgpt) differs where it saves: k and v repeated to
every query head before SDPA, dropout before each adapter, a fused qkv adapter's zero-padding, the attention output
copied before proj (`_litgpt_*` below; its loss and loop in memory.py `litgpt_logits_items`).
`tests/test_litgpt_code.py` checks that path against LitGPT itself, traced.
"""

from __future__ import annotations

from functools import lru_cache

from dataclasses import dataclass

from ..i18n import say
from ..spec.model import ModelSpec
from ..spec.training import Attention, GradCkpt


@dataclass(frozen=True)
class Regime:
    """Dtypes seen by the forward pass."""

    act: int  # bytes of matmul outputs (2 bf16/fp16, 4 fp32)
    weight: int  # bytes of the block's weights during forward (4: fp32 weights under autocast)
    autocast: bool  # torch.autocast active
    adapter: int = 4  # bytes of LoRA adapter weights (PEFT keeps them in fp32)
    # QLoRA through PEFT's prepare_model_for_kbit_training: embeddings and norms in fp32 make the hidden states fp32,
    # and bitsandbytes' Linear4bit returns its output in its input's dtype, so the MLP's intermediates are fp32
    kbit_upcast: bool = False
    # bitsandbytes < 0.43.2: every frozen 4-bit Linear keeps its input for backward (TrainingSpec.kbit_keeps_inputs)
    kbit_keeps_inputs: bool = False
    # LitGPT's model and loop code runs the step (TrainingSpec.model_code "litgpt"), not transformers/PEFT
    litgpt: bool = False
    # PEFT's lora_dropout > 0 (TrainingSpec.lora_dropout; LitGPT's own dropout is counted on its path)
    lora_dropout: bool = False

    @property
    def residual(self) -> int:
        """Residual stream dtype: fp32 when the embedding and norm weights are fp32."""
        return 4 if self.weight == 4 or self.kbit_upcast else self.act

    @property
    def amp_casts(self) -> bool:
        """Each Linear casts its fp32 input to bf16 (and saves the copy)."""
        return self.autocast and self.weight == 4 and self.act < 4


@dataclass(frozen=True)
class Trainable:
    """What in one block takes gradients."""

    linears: frozenset[str]  # canonical roles with trainable base weights: q k v o gate up down
    adapters: frozenset[str]  # roles with a LoRA adapter
    norms: bool
    lora_rank: int = 0
    needs_input_grad: bool = True  # False for frozen blocks below every trainable one (no backward at all)
    # LoRA on fused 3-D expert tensors (PEFT's ParamWrapper): elements per mean block of the expert weights PEFT
    # merges with their adapters (baddbmm) for each forward; the merged copy is saved for the input gradient
    merged_expert_elements: float = 0.0
    wrapped_expert_roles: frozenset[str] = frozenset()  # roles of those fused expert tensors (gate, up, down)


@dataclass(frozen=True)
class BlockShape:
    """What one kind of block computes where a read structure's groups differ from the mean spec: the widths of its
    MLP parts and its attention. A hand-written family has one shape, from the spec (`shape_of(m)`)."""

    dense: int = 0  # a dense MLP's intermediate size (0: none)
    routed: int = 0  # a routed expert's intermediate size (0: not a MoE block)
    topk: int = 0
    experts: int = 0
    shared: int = 0  # always-on shared experts, their intermediate sizes summed
    mla: tuple[int, int, int, int, int] | None = None  # MLA: (q_lora_rank, kv_lora_rank, qk head dim, nope dim, v dim)

    @property
    def mlp_rows(self) -> int:
        """Rows per token the MLP's input projections read: top-k routed copies, plus one for a dense MLP or the
        shared experts (which read the block's hidden states as they are)."""
        return (self.topk if self.routed else 0) + (1 if self.dense or self.shared else 0)

    @property
    def mlp_width(self) -> int:
        """Intermediate elements per token over every MLP part that runs (routed experts k times)."""
        return self.dense + self.shared + self.routed * self.topk


def shape_of(m: ModelSpec, group=None) -> BlockShape:
    """The block shape of a structure group (MLP widths from its down projections, MLA dims from its projections);
    the mean spec's when there is no group."""
    if group is None:
        if m.is_moe:
            return BlockShape(routed=m.intermediate, topk=m.experts_per_tok, experts=m.num_experts)
        return BlockShape(dense=m.intermediate)
    return _group_shape(m, group)


def _group_shape(m: ModelSpec, g) -> BlockShape:
    downs = [x for x in g.linears if "down" in x.roles]
    routed = [x for x in downs if x.kind == "routed" or x.count > 1]
    shared = sum(x.in_features for x in downs if x.kind == "shared" and x.count == 1)
    dense = sum(x.in_features for x in downs if x.kind == "" and x.count == 1)
    if not downs:  # an MLP the reader did not name: the mean spec's
        base = shape_of(m)
        dense, shared, routed_f, topk, experts = base.dense, 0, base.routed, base.topk, base.experts
    else:
        routed_f = routed[0].in_features if routed else 0
        experts = routed[0].count if routed else 0
        topk = m.experts_per_tok if routed else 0
    mla = None
    if g.mixer == "mla":
        by = {role: x for x in g.linears for role in x.roles}
        kv_a, kv_b = by.get("kv_a"), by.get("kv_b")
        if kv_a is not None and kv_b is not None and m.heads:
            q_lora = by["q_b"].in_features if "q_b" in by else 0
            kv_lora = kv_b.in_features
            rope = kv_a.out_features - kv_lora
            qk = m.head_dim
            nope = qk - rope
            v = kv_b.out_features // m.heads - nope
            if rope > 0 and nope > 0 and v > 0:
                mla = (q_lora, kv_lora, qk, nope, v)
    return BlockShape(dense=dense, routed=routed_f, topk=topk, experts=experts, shared=shared, mla=mla)


# roles whose Linear reads the block's attention input (an adapter there makes the attention core save its inputs)
ATTENTION_INPUT_ROLES = frozenset({"q", "k", "v", "q_a", "q_b", "kv_a", "kv_b", "mixer"})


def first_block_without_input_grad(saved: dict[str, float], tr: Trainable) -> dict[str, float]:
    """The lowest block when nothing below it takes gradients (LoRA without trained embeddings): its input needs
    no gradient, so the pre-attention norm saves nothing, and neither does the attention core unless an adapter
    feeds it (LoRA on o_proj or the MLP only); the post-attention norm saves nothing when no attention module has
    an adapter. Seen in traces (DeepSeek-V3 with LoRA on o_proj: block 0 saves no attention tensors)."""
    attn_in = bool(tr.adapters & ATTENTION_INPUT_ROLES)
    attn_any = attn_in or "o" in tr.adapters
    out = {}
    for k, v in saved.items():
        if k.startswith("norm1/"):
            continue
        if k.startswith("attn/") and not attn_in:
            continue
        if k.startswith("norm2/") and not attn_any:
            continue
        out[k] = v
    return out


def block_saved(m: ModelSpec, r: Regime, tr: Trainable, seq_len: int, attention: Attention,
                group=None) -> dict[str, float]:
    """Bytes saved for backward per token in one block, by named item (no checkpointing); `group`: one group of a
    read structure (its own MLP widths, MLA dims and adapted Linears), else the mean spec's block. A fresh dict (its
    callers add to it) copied from one computed per block and regime: a step's memory asks for it four times, and a
    search asks the same block under every layout and micro-batch (issue 36)."""
    return dict(_block_saved(m, r, tr, seq_len, attention, group))


@lru_cache(maxsize=4096)
def _block_saved(m: ModelSpec, r: Regime, tr: Trainable, seq_len: int, attention: Attention,
                 group=None) -> dict[str, float]:
    if not tr.needs_input_grad and not tr.linears and not tr.adapters:
        return {}
    shape = shape_of(m, group)
    h = m.hidden
    out: dict[str, float] = {}
    norm_sites = 1 if m.parallel_block else (2 if m.norms_per_layer < 4 else 4)
    if m.is_encoder:
        norm_sites = 2
    for i in range(norm_sites):
        out.update(_norm_saved(m, r, tr, h, f"norm{i + 1}"))
    if m.qk_norm:  # RMSNorm on q and k: each saves its fp32 input and a per-row rstd
        out["attn/qk_norm_fp32"] = 4 * (m.q_dim + m.kv_dim)
        if tr.norms:  # trained norm weights: the normalized q and k too, for the weights' gradient, cast back to
            # the dtype of the norm's input (the projection's output: 16-bit under autocast)
            out["attn/qk_norm_normalized"] = (4 if m.norm_fp32 else r.act) * (m.q_dim + m.kv_dim)
    out.update(_linear_inputs(m, r, tr, shape))
    if r.litgpt:
        out.update(_litgpt_adapter_inputs(m, r, tr, shape))
        out.update(_litgpt_kbit_kept_inputs(m, r, tr, shape))
        out.update(_litgpt_attention_saved(m, r, seq_len, attention, shape))
        if "o" in tr.linears:  # proj reads the attention output transposed and reshaped: a copy of its own
            out["linear_in/o"] = r.act * m.q_dim
    else:
        out.update(_adapter_inputs(m, r, tr, group))
        out.update(_kbit_kept_inputs(m, r, tr, shape))
        out.update(_attention_saved(m, r, seq_len, attention, shape))
        if attention == Attention.EAGER and shape.mla is None and not eager_output_kept(r, tr):
            del out["attn/out"]
    if not r.litgpt and "o" in tr.linears and attention != Attention.EAGER and shape.mla is None and m.fused_qkv and \
            m.position == "rope":
        # a trained o_proj keeps its input, which is a copy of the kernel's output when q comes from a fused qkv
        # projection: RoPE on q sliced from it leaves q contiguous in (batch, heads, seq, dim), the kernel's output
        # takes q's layout (torch's meta kernels: empty_like(query)), and transformers' sdpa_attention_forward
        # makes it contiguous in (batch, seq, heads, dim) — beside the output SDPA's backward keeps. A separate
        # q_proj's q keeps the projection's layout through RoPE: the output is already laid out so, no copy (traced:
        # Phi-3 full fine-tune classifiers, -3.1 % without it; Llama-3 / Qwen full fine-tunes +3 % with it)
        out["linear_in/o"] = r.act * m.q_dim
    if shape.mla is not None:  # q_a_layernorm and kv_a_layernorm (RMSNorm): fp32 inputs and rstd
        out["attn/mla_norms_fp32"] = 4 * (shape.mla[0] + shape.mla[1]) + 8
    out.update(_mlp_saved(m, r, tr, shape))
    if m.hidden_dropout > 0:
        out["dropout/residual_masks"] = 2 * h  # bool masks after attention and MLP outputs
    return out


def eager_output_kept(r: Regime, tr: Trainable) -> bool:
    """Whether eager attention's output (probs @ v, laid out for o_proj) is saved: no kernel of eager attention
    keeps it (SDPA's does), only o_proj for its weight's gradient (trained) or its adapter reading it uncast
    (`adapters_copy_inputs`: a cast or dropped copy is what the adapter keeps). Traced: Llama-3 LoRA on k and
    gate, eager, pure bf16, 4 blocks at 12 x 4K tokens: +0.2 % with it, beside the lowest block's probabilities."""
    return "o" in tr.linears or ("o" in tr.adapters and not adapters_copy_inputs(r))


def first_block_attention_unsaved(m: ModelSpec, r: Regime, tr: Trainable, kept: dict[str, float],
                                  eager: bool) -> dict[str, float]:
    """Bytes per token of `kept` (one block's saved items) that the lowest block's attention core does not save
    when its input needs no gradient (LoRA, embedding frozen): only the projections with an adapter give q, k or v
    a gradient. Eager attention saves each matmul operand for the other's gradient: q for k's, k for q's, the
    probabilities for v's, v and the softmax output (its softcap's tanh, dropout's mask) for the scores' (q's or
    k's); RoPE and q/k norms save for their own input only. SDPA's kernel saves q, k, v, its output and log-sum-exp
    if any of them takes a gradient, nothing otherwise (LoRA on o_proj or the MLP only). Traced: Llama-3 LoRA,
    2 blocks at 4 x 1K, eager: +12.3 % on k or q alone, +27.7 % on v alone, +47 % on o_proj alone, SDPA on o_proj
    alone +8.7 %, before this."""
    q, k, v = ("q" in tr.adapters, "k" in tr.adapters, "v" in tr.adapters)
    scores = q or k
    if not eager:
        need = {key: q or k or v for key in ("attn/q", "attn/k", "attn/v", "attn/lse")}
        need["attn/out"] = q or k or v or eager_output_kept(r, tr)
    else:
        probs_apart = "attn/probs" in kept or "attn/dropped_probs" in kept
        need = {"attn/q": k, "attn/k_repeated": q, "attn/v_repeated": scores, "attn/softcap_tanh": scores,
                "attn/softmax_fp32": scores or (v and not probs_apart), "attn/probs": v,
                "attn/dropout_mask": scores, "attn/dropped_probs": v}
    out = {key: kept[key] for key, needed in need.items() if key in kept and not needed}
    share = (q * m.q_dim + k * m.kv_dim) / (m.q_dim + m.kv_dim)
    for key in ("attn/qk_norm_fp32", "attn/qk_norm_normalized"):
        if key in kept:
            out[key] = kept[key] * (1.0 - share)
    return out


def _norm_saved(m: ModelSpec, r: Regime, tr: Trainable, h: int, name: str) -> dict[str, float]:
    if m.norm == "rmsnorm":
        out = {f"{name}/x_fp32": 4 * h, f"{name}/rstd": 4}
        if tr.norms:
            out[f"{name}/normalized"] = (4 if r.weight == 4 or m.norm_fp32 else r.act) * h
        return out
    # native LayerNorm saves its input and fp32 mean/rstd; the output is saved by its consumers
    return {f"{name}/input": r.residual * h, f"{name}/mean_rstd": 8}


def _linear_inputs(m: ModelSpec, r: Regime, tr: Trainable, shape: BlockShape) -> dict[str, float]:
    """Inputs of Linear layers with trainable weights (needed for the weight gradient)."""
    h = m.hidden
    lin = tr.linears
    out: dict[str, float] = {}
    experts = shape.mlp_rows
    if r.amp_casts:  # one bf16 cast per Linear module reading an fp32 input
        qkv_modules = 1 if m.fused_qkv else len(lin & {"q", "k", "v"})
        mlp_in_modules = (1 if m.fused_gate_up or not m.gated_mlp else len(lin & {"gate", "up"})) \
            if lin & {"gate", "up"} else 0
        if qkv_modules and lin & {"q", "k", "v"}:
            out["linear_in/qkv_casts"] = 2 * h * qkv_modules
        if mlp_in_modules:
            out["linear_in/mlp_casts"] = 2 * h * mlp_in_modules * experts
    else:
        if lin & {"q", "k", "v"}:
            out["linear_in/qkv"] = r.act * h
        if lin & {"gate", "up"}:
            out["linear_in/mlp"] = r.act * h * experts
    # o_proj reads the attention output (already saved by the attention kernel) -> nothing extra for SDPA.
    if "down" in lin:
        out["linear_in/down"] = r.act * shape.mlp_width
    return out


def adapter_modules(m: ModelSpec, adapters: frozenset[str]) -> list[tuple[int, str]]:
    """(input width, input group) of each adapted Linear module; fused modules count once."""
    spec = [(("q", "k", "v"), m.hidden, "attn_in", m.fused_qkv), (("o",), m.q_dim, "o_in", False),
            (("gate", "up"), m.hidden, "mlp_in", m.fused_gate_up), (("down",), m.intermediate, "down_in", False)]
    out: list[tuple[int, str]] = []
    for roles, width, group, fused in spec:
        hit = [role for role in roles if role in adapters]
        out += [(width, group)] * (min(1, len(hit)) if fused else len(hit))
    return out


def _group_adapter_modules(g, adapters: frozenset[str]) -> list[tuple[int, str]]:
    """(input width, input group) of each adapted Linear of a structure group (fused modules are one Linear)."""
    out: list[tuple[int, str]] = []
    for x in g.linears:
        if x.count != 1 or not set(x.roles) & adapters:
            continue
        roles = set(x.roles)
        if "o" in roles:
            key = "o_in"
        elif roles & {"gate", "up"}:
            key = "mlp_in"
        elif "down" in roles:
            key = f"down_in:{x.module}"
        elif roles & {"q", "k", "v", "q_a", "kv_a"}:
            key = "attn_in"
        else:
            key = f"in:{x.module}"
        out.append((x.in_features, key))
    return out


def _adapter_inputs(m: ModelSpec, r: Regime, tr: Trainable, group=None) -> dict[str, float]:
    """LoRA: each adapted module keeps its own cast of the input, plus lora_A's r-dim output.

    PEFT casts the input to the adapter dtype (fp32); under autocast the matmul re-casts that copy to bf16, which
    is what autograd keeps. Only when no cast happens (fp32 training) do the adapters share their input tensors.
    """
    modules = adapter_modules(m, tr.adapters) if group is None else _group_adapter_modules(group, tr.adapters)
    if not modules:
        return {}
    separate = adapters_copy_inputs(r)
    copy = 2 if r.autocast else r.adapter
    if separate:
        inputs = sum(copy * width for width, _ in modules)
    else:  # shared inputs; o_proj's input is the attention output, saved already
        inputs = sum(r.act * width for width, group in dict((g, (w, g)) for w, g in modules).values()
                     if group != "o_in")
    out = {"lora/inputs": inputs, "lora/a_outputs": len(modules) * tr.lora_rank * copy}
    if r.lora_dropout:  # each adapter's own dropout keeps its 1-byte mask (CUDA's fused native_dropout)
        out["lora/dropout_masks"] = sum(width for width, _ in modules)
    return out


def adapters_copy_inputs(r: Regime) -> bool:
    """Whether each adapter saves its own copy of its input: PEFT casts it to the adapter dtype (and autocast to
    16 bit), or dropout makes a dropped copy per adapter (lora_A saves that); otherwise adapters of one input share
    it. Traced: Qwen2.5-0.5B LoRA all-linear with lora_dropout 0.1 (the masks: 0.50 GB at 2 x 1K tokens)."""
    return r.autocast or r.adapter != r.act or r.lora_dropout


def mlp_adapter_saved(m: ModelSpec, r: Regime, tr: Trainable) -> float:
    """Bytes per token of `lora/inputs` and `lora/a_outputs` that belong to the MLP's adapters (gate, up, down):
    freed by the MLP's backward, before the attention core's (a hand-written family's block)."""
    modules = [(w, g) for w, g in adapter_modules(m, tr.adapters) if g in ("mlp_in", "down_in")]
    if not modules:
        return 0.0
    separate = adapters_copy_inputs(r)
    copy = 2 if r.autocast else r.adapter
    if separate:
        inputs = sum(copy * width for width, _ in modules)
    else:  # the adapters of one input share it
        inputs = sum(r.act * width for width, _ in dict((g, (w, g)) for w, g in modules).values())
    masks = sum(width for width, _ in modules) if r.lora_dropout else 0.0
    return inputs + len(modules) * tr.lora_rank * copy + masks


def _kbit_kept_inputs(m: ModelSpec, r: Regime, tr: Trainable, shape: BlockShape) -> dict[str, float]:
    """Old bitsandbytes' MatMul4Bit holds each frozen 4-bit Linear's input until backward. Inputs some other saved
    tensor already is add nothing: a trainable base weight's input, an adapter's shared input (no cast), and
    o_proj's input (the attention output, counted with attention)."""
    if not r.kbit_keeps_inputs:
        return {}
    shared = not adapters_copy_inputs(r)  # adapters read the very input tensor (see _adapter_inputs)
    seen = tr.linears | (tr.adapters if shared else frozenset())
    experts = shape.mlp_rows
    out = 0.0
    attn_in, mlp_in = not seen & {"q", "k", "v"}, not seen & {"gate", "up"}
    if m.parallel_block:  # attention and MLP read the same normalized input: kept once, unless either saves it
        attn_in, mlp_in = attn_in and mlp_in, False
    if attn_in:
        out += r.residual * m.hidden
    if mlp_in:
        out += r.residual * m.hidden * experts
    if "down" not in seen:
        out += (4 if r.kbit_upcast else r.act) * shape.mlp_width
    return {"linear_in/kbit_frozen_inputs": out} if out else {}


# LitGPT's LoRA dropout: config_hub/finetune/*/lora.yaml and qlora.yaml set lora_dropout 0.05, LitGPT's own default
# (litgpt/finetune/lora.py `lora_dropout: float = 0.05`)
LITGPT_LORA_DROPOUT = 0.05


def litgpt_adapter_modules(m: ModelSpec, adapters: frozenset[str], rank: int,
                           shape: BlockShape | None = None) -> list[tuple[int, int]]:
    """(input width, lora_A output width) of each adapted Linear of a LitGPT block (litgpt/lora.py): q, k and v are
    one fused Linear (LoRAQKVLinear, lora_A of rank x the adapted parts); the MLP's fc_1 and fc_2 (gate, up) are
    Linears of their own, proj (down) reads the intermediate."""
    width = (shape or shape_of(m)).mlp_width or m.intermediate
    qkv = [x for x in ("q", "k", "v") if x in adapters]
    out = [(m.hidden, rank * len(qkv))] if qkv else []
    if "o" in adapters:
        out.append((m.q_dim, rank))
    out += [(m.hidden, rank) for role in ("gate", "up") if role in adapters]
    if "down" in adapters:
        out.append((width, rank))
    return out


def _litgpt_adapter_inputs(m: ModelSpec, r: Regime, tr: Trainable, shape: BlockShape) -> dict[str, float]:
    """LitGPT's LoRA layers: each adapted Linear runs its own nn.Dropout on its input (LITGPT_LORA_DROPOUT), which
    keeps its bool mask and the dropped copy lora_A saves; lora_A's output is saved by lora_B's matmul (a conv1d in
    the fused qkv module). When the fused qkv module adapts only some of q, k, v, `zero_pad` scatters the adapter's
    output into the full width with index_copy_, whose backward keeps that source tensor (the adapted parts' width).
    Read with saved-tensor hooks on litgpt 0.4.13's Llama-3.2 block (LoRA on q and v: a 2560-wide bf16 tensor)."""
    modules = litgpt_adapter_modules(m, tr.adapters, tr.lora_rank, shape)
    if not modules:
        return {}
    per_input = (1 + r.act) if LITGPT_LORA_DROPOUT > 0 else r.act
    out = {"lora/inputs": sum(per_input * w for w, _ in modules),
           "lora/a_outputs": sum(r.act * k for _, k in modules)}
    qkv = [x for x in ("q", "k", "v") if x in tr.adapters]
    if 0 < len(qkv) < 3:
        out["lora/qkv_zero_pad_source"] = r.act * sum(m.q_dim if x == "q" else m.kv_dim for x in qkv)
    return out


def _litgpt_kbit_kept_inputs(m: ModelSpec, r: Regime, tr: Trainable, shape: BlockShape) -> dict[str, float]:
    """Old bitsandbytes' MatMul4Bit in a LitGPT block keeps every frozen 4-bit Linear's input: the normalized input
    of qkv (an adapter reads its own dropped copy, not this tensor), proj's input (the attention output transposed
    into a copy of its own, apart from the one SDPA keeps), the MLP's input (fc_1 and fc_2 read one tensor; a
    parallel block's shared norm feeds attention and MLP alike) and the MLP's intermediate (proj)."""
    if not r.kbit_keeps_inputs:
        return {}
    seen = tr.linears
    attn_in, mlp_in = not seen & {"q", "k", "v"}, not seen & {"gate", "up"}
    if m.parallel_block:
        attn_in, mlp_in = attn_in and mlp_in, False
    out = 0.0
    if attn_in:
        out += r.act * m.hidden
    if "o" not in seen:
        out += r.act * m.q_dim
    if mlp_in:
        out += r.act * m.hidden * max(1, shape.mlp_rows)
    if "down" not in seen:
        out += r.act * shape.mlp_width
    return {"linear_in/kbit_frozen_inputs": out} if out else {}


def _litgpt_attention_saved(m: ModelSpec, r: Regime, seq_len: int, attention: Attention,
                            shape: BlockShape) -> dict[str, float]:
    """LitGPT's CausalSelfAttention (litgpt/model.py 0.4.x): k and v are expanded to every query head before
    attention (`k.expand(...)`, then a reshape that copies), RoPE builds q and k anew (apply_rope and torch.cat), and
    F.scaled_dot_product_attention keeps q, k, v (each of the query width), its output and the log-sum-exp. A
    soft-capped model runs LitGPT's own eager attention, which keeps what transformers' eager path keeps."""
    if attention == Attention.EAGER or shape.mla is not None:
        return _attention_saved(m, r, seq_len, attention, shape)
    q, b = m.q_dim, r.act
    return {"attn/q": b * q, "attn/k_repeated": b * q, "attn/v_repeated": b * q, "attn/out": b * q,
            "attn/lse": 4 * m.heads}


def attention_that_runs(m: ModelSpec, t):
    """The TrainingSpec with the attention transformers really runs: SDPA cannot soft-cap the attention logits, so a
    model that soft-caps them runs its eager attention when SDPA is asked for (Gemma2PreTrainedModel._supports_sdpa
    = False: the default falls back to eager, an explicit attn_implementation="sdpa" is refused; Gemma-3's sdpa
    path raises on a softcap). FlashAttention-2 (>= 2.6) soft-caps in its kernel and stays."""
    if m.attn_softcap and t.attention == Attention.SDPA:
        return t.with_(attention=Attention.EAGER)
    return t


SOFTCAP_SDPA_NOTE = say("es_softcap_eager")  # eager attention where SDPA is asked for (i18n/sentences_estimate.py)


# model_types whose eager attention computes softmax in the activation dtype (modeling_*.py, transformers 5.x)
NO_SOFTMAX_UPCAST = frozenset({"gpt2", "bert", "roberta", "falcon"})


def softmax_bytes(m: ModelSpec, r: Regime) -> int:
    """Bytes per element of eager attention's probabilities: Llama-family code upcasts softmax to fp32;
    GPT-2/BERT/RoBERTa/Falcon compute it in the activation dtype (fp32 then only under autocast)."""
    return 4 if (m.model_type not in NO_SOFTMAX_UPCAST or r.autocast) else r.act


def _attention_saved(m: ModelSpec, r: Regime, seq_len: int, attention: Attention,
                     shape: BlockShape | None = None) -> dict[str, float]:
    q, kv, a = m.q_dim, m.kv_dim, m.heads
    b = r.act
    if shape is not None and shape.mla is not None:
        return _mla_saved(m, r, seq_len, attention, shape.mla)
    if attention == Attention.EAGER:
        soft = softmax_bytes(m, r)
        out = {"attn/q": b * q, "attn/k_repeated": b * q, "attn/v_repeated": b * q,
               "attn/softmax_fp32": soft * a * seq_len, "attn/out": b * q}
        if m.attn_softcap:  # scores / cap -> tanh -> * cap: tanh saves its output, in the scores' dtype
            out["attn/softcap_tanh"] = b * a * seq_len
        if m.attention_dropout > 0:  # dropout saves its bool mask; PV's matmul saves dropout's output instead of the probs
            out["attn/dropout_mask"] = a * seq_len
            out["attn/dropped_probs"] = b * a * seq_len
        elif b < soft:  # the probs cast back to the activation dtype, PV's saved input
            out["attn/probs"] = b * a * seq_len
        return out
    # SDPA (flash / memory-efficient kernels): q, k, v (GQA not expanded), output, log-sum-exp in fp32
    v = b * kv
    if m.fused_qkv and m.position == "rope":
        # q and k are rotated into tensors of their own, v stays a view of the fused projection's output: the whole
        # q + k + v output is kept alive (traced: Phi-3's qkv_proj)
        v = b * (q + 2 * kv)
    return {"attn/q": b * q, "attn/k": b * kv, "attn/v": v, "attn/out": b * q, "attn/lse": 4 * a}


def _mla_saved(m: ModelSpec, r: Regime, seq_len: int, attention: Attention,
               mla: tuple[int, int, int, int, int]) -> dict[str, float]:
    """Multi-head latent attention (transformers' DeepseekV2/V3 attention): q and k are built per head at the q/k
    head dim (nope + rope), the values are a view of kv_b_proj's output (nope + v per head), so saving them keeps
    that whole output alive; the output has the value head dim. A GPU runs SDPA's memory-efficient kernel for unequal
    q/k and v head dims (flash needs equal ones): q, k, v, output and the log-sum-exp are saved."""
    _, _, qk, nope, v = mla
    a, b = m.heads, r.act
    out = {"attn/q": b * a * qk, "attn/k": b * a * qk, "attn/v_kv_b_output": b * a * (nope + v), "attn/out": b * a * v}
    if attention == Attention.EAGER:
        soft = softmax_bytes(m, r)
        out["attn/softmax_fp32"] = soft * a * seq_len
        if m.attention_dropout > 0:
            out["attn/dropout_mask"] = a * seq_len
            out["attn/dropped_probs"] = b * a * seq_len
        elif b < soft:
            out["attn/probs"] = b * a * seq_len
        return out
    out["attn/lse"] = 4 * a
    return out


def _mlp_saved(m: ModelSpec, r: Regime, tr: Trainable, shape: BlockShape | None = None) -> dict[str, float]:
    shape = shape or shape_of(m)
    b, width = (4 if r.kbit_upcast else r.act), shape.mlp_width
    out: dict[str, float] = {}
    if m.gated_mlp:  # act(gate) * up: act saves its input, the product saves both factors
        out = {"mlp/act_in": b * width, "mlp/act_out": b * width, "mlp/up_out": b * width}
    else:
        out = {"mlp/act_in": b * width}
        if m.activation in ("gelu_new", "gelu_fast"):  # GPT-2's python tanh-GELU saves 3 intermediates
            out["mlp/gelu_tanh_intermediates"] = 3 * b * width
    if shape.routed:
        out["moe/router_logits"] = 4 * shape.experts
        out["moe/expert_inputs"] = b * m.hidden * shape.topk
        # experts whose (merged) weights take a gradient keep their matmul inputs: the routed rows for gate/up and
        # the gated product for down (frozen experts keep neither); seen in traces of LoRA on fused experts
        if tr.wrapped_expert_roles & {"gate", "up"}:
            out["moe/trained_expert_inputs"] = b * m.hidden * shape.topk
        if "down" in tr.wrapped_expert_roles:
            out["moe/trained_expert_down_inputs"] = b * shape.routed * shape.topk
    return out


def checkpointed_block(m: ModelSpec, r: Regime) -> dict[str, float]:
    """Full activation checkpointing keeps only each block's input (the residual stream)."""
    return {"checkpoint/block_input": r.residual * m.hidden}


def selective_policy_block(saved: dict[str, float], m: ModelSpec, r: Regime, policy: str) -> dict[str, float]:
    """The mean block's saved bytes per token under torchtitan's selective policies (TrainingSpec.selective_ac; the
    policies read from torchtitan/parallelisms/parallelize_llama.py, not traced here):
      N   every N-th block is checkpointed in full (its input kept), the others keep everything they save;
      op  the checkpoint keeps the block's input and what the policy saves in forward: the outputs of the 1st, 3rd,
          5th... matmul of the block in execution order (q, v, gate and down for a Llama block: every second one
          is recomputed instead) and the attention kernel's output and fp32 log-sum-exp per head; all else is
          recomputed in the block's backward."""
    from ..spec.choices import selective_every
    from .params import op_policy_split

    every = selective_every(policy)
    if every:
        out = {k: v * (1 - 1 / every) for k, v in saved.items()}
        for k, v in checkpointed_block(m, r).items():
            out[k] = out.get(k, 0.0) + v / every
        return out
    kept = sum(lin.out_features * lin.share * (m.experts_per_tok if lin.count > 1 else 1)
               for lin in op_policy_split(m)[0])
    return {**checkpointed_block(m, r), "sac/matmul_outputs": r.act * kept,
            "sac/attention_output": r.act * m.q_dim + 4.0 * m.heads}


# what the attention core saves beyond its inputs: recomputed under selective checkpointing
ATTENTION_CORE_SAVED = ("attn/softmax_fp32", "attn/probs", "attn/dropout_mask", "attn/dropped_probs", "attn/lse",
                        "attn/softcap_tanh")


def apply_checkpointing(saved: dict[str, float], m: ModelSpec, r: Regime, level: GradCkpt,
                        tr: Trainable | None = None, policy: str = "attention") -> dict[str, float]:
    """Per-block saved bytes under a checkpointing level. Selective checkpoints the attention core (Megatron-LM's
    selective recompute; the trace wraps transformers' attention function in torch.utils.checkpoint): it keeps
    its inputs — the rotated q and k and v, K/V not repeated to every head (the repeat is inside the core; a v
    that is a view of a fused projection keeps that output alive, as under SDPA) — and recomputes the s² scores,
    softmax and dropout and SDPA's log-sum-exp. The attention output stays where o_proj's trained weight saves it
    as its input, and is recomputed with the rest otherwise (`tr`: what trains in the block). Traced: Llama-3 cut to
    2 blocks (GQA 8/2), eager at 1K tokens, -2.45 % with the repeated K/V kept and the mask dropped; LoRA on q/v of a
    classifier at 2K tokens, +7.6 % with the output kept; LoRA on Phi-3's qkv/o in pure bf16 (the adapter reads the
    output uncast) was +4.3 % with it kept on traces that still held MemTracker's leaked tensors, and is -2.0 % without
    it on clean ones (see below); Phi-3 with fp32 weights under fp16 autocast, -3.9 % with 16-bit q and k."""
    if level == GradCkpt.FULL:
        return checkpointed_block(m, r)
    if level == GradCkpt.SELECTIVE and policy != "attention":
        return selective_policy_block(saved, m, r, policy)
    if level == GradCkpt.SELECTIVE:
        out = {k: v for k, v in saved.items() if k not in ATTENTION_CORE_SAVED}
        if "attn/k_repeated" in out:  # eager: the core's inputs are SDPA's q, k, v
            sdpa = _attention_saved(m, r, 0, Attention.SDPA)
            del out["attn/k_repeated"], out["attn/v_repeated"]
            out["attn/k"], out["attn/v"] = sdpa["attn/k"], sdpa["attn/v"]
        # (an adapter on o_proj reading the output uncast — no autocast, adapters in the activation dtype — keeps
        # it too, counted nowhere else: _adapter_inputs takes o_proj's input as the core's; traced: Qwen2 LoRA on
        # q/k/v/o in pure bf16, a classifier at 8 x 128 tokens, -4.3 % without it)
        keeps_out = tr is not None and ("o" in tr.linears or (
            "o" in tr.adapters and not r.autocast and r.adapter == r.act))
        if tr is not None and not keeps_out:
            out.pop("attn/out", None)
        out.pop("linear_in/o", None)  # the core's output is recomputed: o_proj's input is the one kept (attn/out)
        if m.position == "rope" and r.residual > r.act and "attn/q" in out and "attn/k" in out:
            # RoPE multiplies the 16-bit q and k by cos/sin tables in the hidden states' dtype: fp32 under fp32
            # weights, so the rotated q and k the core keeps are fp32 (autocast's 16-bit casts happen inside it)
            out["attn/q"] *= r.residual / r.act
            out["attn/k"] *= r.residual / r.act
        return out
    return saved
