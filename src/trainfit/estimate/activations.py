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

`tests/test_activations_trace.py` pins these per-layer numbers to what autograd actually saves.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def block_saved(m: ModelSpec, r: Regime, tr: Trainable, seq_len: int, attention: Attention) -> dict[str, float]:
    """Bytes saved for backward per token in one block, by named item (no checkpointing)."""
    if not tr.needs_input_grad and not tr.linears and not tr.adapters:
        return {}
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
    out.update(_linear_inputs(m, r, tr))
    out.update(_adapter_inputs(m, r, tr))
    out.update(_kbit_kept_inputs(m, r, tr))
    out.update(_attention_saved(m, r, seq_len, attention))
    out.update(_mlp_saved(m, r, tr))
    if m.hidden_dropout > 0:
        out["dropout/residual_masks"] = 2 * h  # bool masks after attention and MLP outputs
    return out


def _norm_saved(m: ModelSpec, r: Regime, tr: Trainable, h: int, name: str) -> dict[str, float]:
    if m.norm == "rmsnorm":
        out = {f"{name}/x_fp32": 4 * h, f"{name}/rstd": 4}
        if tr.norms:
            out[f"{name}/normalized"] = (4 if r.weight == 4 or m.norm_fp32 else r.act) * h
        return out
    # native LayerNorm saves its input and fp32 mean/rstd; the output is saved by its consumers
    return {f"{name}/input": r.residual * h, f"{name}/mean_rstd": 8}


def _linear_inputs(m: ModelSpec, r: Regime, tr: Trainable) -> dict[str, float]:
    """Inputs of Linear layers with trainable weights (needed for the weight gradient)."""
    h, f = m.hidden, m.intermediate
    lin = tr.linears
    out: dict[str, float] = {}
    experts = m.experts_per_tok if m.is_moe else 1
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
        out["linear_in/down"] = r.act * f * experts
    return out


def _adapter_modules(m: ModelSpec, adapters: frozenset[str]) -> list[tuple[int, str]]:
    """(input width, input group) of each adapted Linear module; fused modules count once."""
    spec = [(("q", "k", "v"), m.hidden, "attn_in", m.fused_qkv), (("o",), m.q_dim, "o_in", False),
            (("gate", "up"), m.hidden, "mlp_in", m.fused_gate_up), (("down",), m.intermediate, "down_in", False)]
    out: list[tuple[int, str]] = []
    for roles, width, group, fused in spec:
        hit = [role for role in roles if role in adapters]
        out += [(width, group)] * (min(1, len(hit)) if fused else len(hit))
    return out


def _adapter_inputs(m: ModelSpec, r: Regime, tr: Trainable) -> dict[str, float]:
    """LoRA: each adapted module keeps its own cast of the input, plus lora_A's r-dim output.

    PEFT casts the input to the adapter dtype (fp32); under autocast the matmul re-casts that copy to bf16, which
    is what autograd keeps. Only when no cast happens (fp32 training) do the adapters share their input tensors.
    """
    modules = _adapter_modules(m, tr.adapters)
    if not modules:
        return {}
    separate = r.autocast or r.adapter != r.act
    copy = 2 if r.autocast else r.adapter
    if separate:
        inputs = sum(copy * width for width, _ in modules)
    else:  # shared inputs; o_proj's input is the attention output, saved already
        inputs = sum(r.act * width for width, group in dict((g, (w, g)) for w, g in modules).values()
                     if group != "o_in")
    return {"lora/inputs": inputs, "lora/a_outputs": len(modules) * tr.lora_rank * copy}


def _kbit_kept_inputs(m: ModelSpec, r: Regime, tr: Trainable) -> dict[str, float]:
    """Old bitsandbytes' MatMul4Bit holds each frozen 4-bit Linear's input until backward. Inputs some other saved
    tensor already is add nothing: a trainable base weight's input, an adapter's shared input (no cast), and
    o_proj's input (the attention output, counted with attention)."""
    if not r.kbit_keeps_inputs:
        return {}
    shared = not (r.autocast or r.adapter != r.act)  # adapters read the very input tensor (see _adapter_inputs)
    seen = tr.linears | (tr.adapters if shared else frozenset())
    experts = m.experts_per_tok if m.is_moe else 1
    out = 0.0
    attn_in, mlp_in = not seen & {"q", "k", "v"}, not seen & {"gate", "up"}
    if m.parallel_block:  # attention and MLP read the same normalized input: kept once, unless either saves it
        attn_in, mlp_in = attn_in and mlp_in, False
    if attn_in:
        out += r.residual * m.hidden
    if mlp_in:
        out += r.residual * m.hidden * experts
    if "down" not in seen:
        out += (4 if r.kbit_upcast else r.act) * m.intermediate * experts
    return {"linear_in/kbit_frozen_inputs": out} if out else {}


# model_types whose eager attention computes softmax in the activation dtype (modeling_*.py, transformers 5.x)
NO_SOFTMAX_UPCAST = frozenset({"gpt2", "bert", "roberta", "falcon"})


def softmax_bytes(m: ModelSpec, r: Regime) -> int:
    """Bytes per element of eager attention's probabilities: Llama-family code upcasts softmax to fp32;
    GPT-2/BERT/RoBERTa/Falcon compute it in the activation dtype (fp32 then only under autocast)."""
    return 4 if (m.model_type not in NO_SOFTMAX_UPCAST or r.autocast) else r.act


def _attention_saved(m: ModelSpec, r: Regime, seq_len: int, attention: Attention) -> dict[str, float]:
    q, kv, a = m.q_dim, m.kv_dim, m.heads
    b = r.act
    if attention == Attention.EAGER:
        soft = softmax_bytes(m, r)
        out = {"attn/q": b * q, "attn/k_repeated": b * q, "attn/v_repeated": b * q,
               "attn/softmax_fp32": soft * a * seq_len, "attn/out": b * q}
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


def _mlp_saved(m: ModelSpec, r: Regime, tr: Trainable) -> dict[str, float]:
    b, f = (4 if r.kbit_upcast else r.act), m.intermediate
    k = m.experts_per_tok if m.is_moe else 1
    out: dict[str, float] = {}
    if m.gated_mlp:  # act(gate) * up: act saves its input, the product saves both factors
        out = {"mlp/act_in": b * f * k, "mlp/act_out": b * f * k, "mlp/up_out": b * f * k}
    else:
        out = {"mlp/act_in": b * f * k}
        if m.activation in ("gelu_new", "gelu_fast"):  # GPT-2's python tanh-GELU saves 3 intermediates
            out["mlp/gelu_tanh_intermediates"] = 3 * b * f * k
    if m.is_moe:
        out["moe/router_logits"] = 4 * m.num_experts
        out["moe/expert_inputs"] = b * m.hidden * k
    return out


def checkpointed_block(m: ModelSpec, r: Regime) -> dict[str, float]:
    """Full activation checkpointing keeps only each block's input (the residual stream)."""
    return {"checkpoint/block_input": r.residual * m.hidden}


def apply_checkpointing(saved: dict[str, float], m: ModelSpec, r: Regime, level: GradCkpt) -> dict[str, float]:
    """Per-block saved bytes under a checkpointing level (selective drops the attention core's s² tensors)."""
    if level == GradCkpt.FULL:
        return checkpointed_block(m, r)
    if level == GradCkpt.SELECTIVE:
        return {k: v for k, v in saved.items()
                if k not in ("attn/softmax_fp32", "attn/probs", "attn/dropout_mask", "attn/dropped_probs")}
    return saved
