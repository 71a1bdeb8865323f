"""Exact parameter inventory of a model: every weight tensor, by role, as the Hugging Face module tree has it.

The inventory is the single source for parameter counts, trainable counts (full / LoRA / QLoRA / freeze), the
largest layer (ZeRO-3 / FSDP gathers), quantizable weights (QLoRA) and Adafactor's factored states. Tests check the
counts against the Hugging Face model built on the meta device for every preset.
"""

from __future__ import annotations

from functools import lru_cache

from ..spec.model import ModelSpec
from ..spec.structure import Linear, Tensor  # noqa: F401 - the inventory types, re-exported


# Canonical Linear roles and the names users (and PEFT configs) use for them.
ROLE_NAMES = {
    "q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o",
    "gate_proj": "gate", "up_proj": "up", "down_proj": "down",
}


@lru_cache(maxsize=512)
def layer_linears(m: ModelSpec) -> tuple[Linear, ...]:
    """The Linear modules of one Transformer block, in execution order (the mean block of a read structure)."""
    if m.structure is not None:
        return m.structure.mean_linears()
    h, q, kv, f = m.hidden, m.q_dim, m.kv_dim, m.intermediate
    out: list[Linear] = []
    if m.fused_qkv:
        out.append(Linear(_qkv_name(m), ("q", "k", "v"), h, q + 2 * kv, m.qkv_bias))
    else:
        qn, kn, vn = ("query", "key", "value") if m.is_encoder else ("q_proj", "k_proj", "v_proj")
        out += [Linear(qn, ("q",), h, q, m.qkv_bias), Linear(kn, ("k",), h, kv, m.qkv_bias),
                Linear(vn, ("v",), h, kv, m.qkv_bias)]
    out.append(Linear(_o_name(m), ("o",), q, h, m.o_bias))
    e = max(1, m.num_experts)
    if m.gated_mlp and m.fused_gate_up:
        out.append(Linear(_gate_up_name(m), ("gate", "up"), h, 2 * f, m.mlp_bias, e))
    elif m.gated_mlp:
        out += [Linear("gate_proj", ("gate",), h, f, m.mlp_bias, e), Linear("up_proj", ("up",), h, f, m.mlp_bias, e)]
    else:
        out.append(Linear(_up_name(m), ("up",), h, f, m.mlp_bias, e))
    out.append(Linear(_down_name(m), ("down",), f, h, m.mlp_bias, e))
    return tuple(out)


def mla_latent_width(m: ModelSpec) -> int:
    """Multi-latent attention's compressed widths one token carries into the up projections: the query latent
    (q_b_proj's input; 0 without a query LoRA) and the key/value latent with its RoPE part (kv_a_proj_with_mqa's
    output: kv_lora_rank + qk_rope_head_dim, 512 + 64 for DeepSeek-V3). 0 for a model without MLA."""
    linears = layer_linears(m)
    if not any("kv_b" in lin.roles for lin in linears):
        return 0
    q = max((lin.in_features for lin in linears if "q_b" in lin.roles), default=0)
    kv = max((lin.out_features for lin in linears if "kv_a" in lin.roles), default=0)
    return q + kv


MLA_ROLES = frozenset({"q_a", "q_b", "kv_a", "kv_b", "o", "q"})


def mla_attention_params(m: ModelSpec) -> float:
    """Multi-latent attention's parameters in one block, from the model's own Linears (their mean over the blocks):
    the down and up projections and the output (DeepSeek-V3: 0.187e9, where h·q + 2·h·kv + q·h with 128 heads of
    192 counts 0.705e9). 0 for a model without MLA (its attention is the formula's)."""
    linears = layer_linears(m)
    if not any("kv_b" in lin.roles for lin in linears):
        return 0.0
    return float(sum(lin.in_features * lin.out_features * lin.share for lin in linears
                     if not lin.kind and set(lin.roles) & MLA_ROLES))


def op_policy_split(m: ModelSpec) -> tuple[tuple[Linear, ...], tuple[Linear, ...]]:
    """torchtitan's per-op selective checkpointing (parallelize_llama.py `_custom_policy`: matmul outputs saved
    "except every second mm", counted per block in execution order): (the Linears whose outputs are kept — the 1st,
    3rd, 5th... —, the Linears run again in backward — the 2nd, 4th, ...). For q, k, v, o, gate, up, down: kept q, v,
    gate, down; recomputed k, o, up."""
    linears = layer_linears(m)
    return linears[0::2], linears[1::2]


def _qkv_name(m: ModelSpec) -> str:
    return {"gpt2": "c_attn", "mpt": "Wqkv", "baichuan": "W_pack", "phi3": "qkv_proj"}.get(
        m.model_type, "query_key_value")


def _o_name(m: ModelSpec) -> str:
    return {"gpt2": "c_proj", "mpt": "out_proj", "gpt_neox": "dense", "falcon": "dense", "chatglm": "dense",
            "phi": "dense", "bert": "attention.output.dense", "roberta": "attention.output.dense"}.get(
        m.model_type, "o_proj")


def _gate_up_name(m: ModelSpec) -> str:
    return {"chatglm": "dense_h_to_4h"}.get(m.model_type, "gate_up_proj")


def _up_name(m: ModelSpec) -> str:
    return {"gpt2": "c_fc", "mpt": "up_proj", "gpt_neox": "dense_h_to_4h", "falcon": "dense_h_to_4h",
            "phi": "fc1", "bert": "intermediate.dense", "roberta": "intermediate.dense"}.get(m.model_type, "up_proj")


def _down_name(m: ModelSpec) -> str:
    return {"gpt2": "mlp.c_proj", "mpt": "down_proj", "gpt_neox": "dense_4h_to_h", "falcon": "dense_4h_to_h",
            "chatglm": "dense_4h_to_h", "phi": "fc2", "bert": "output.dense", "roberta": "output.dense"}.get(
        m.model_type, "down_proj")


@lru_cache(maxsize=512)
def layer_params(m: ModelSpec) -> int:
    if m.structure is not None:  # the mean block (blocks may differ: dense-first MoE, hybrids)
        return m.structure.block_params / m.layers
    return sum(t.numel for t in layer_tensors(m))


@lru_cache(maxsize=512)
def layer_tensors(m: ModelSpec) -> tuple[Tensor, ...]:
    """Parameter tensors of one Transformer block."""
    if m.structure is not None:
        return m.structure.mean_tensors()
    out: list[Tensor] = []
    for lin in layer_linears(m):
        role = "expert" if m.is_moe and lin.roles[0] in ("gate", "up", "down") else "linear"
        out.append(Tensor(f"{lin.module}.weight", lin.out_features, lin.in_features, role, lin.module,
                          count=lin.count))
        if lin.bias:
            out.append(Tensor(f"{lin.module}.bias", lin.out_features, 1, "bias", count=lin.count))
    if m.is_moe:
        out.append(Tensor("router.weight", m.num_experts, m.hidden, "router", "gate"))
    norm_numel = m.hidden * (2 if m.norm_bias else 1)
    out.append(Tensor("norms", norm_numel * m.norms_per_layer, 1, "norm"))
    if m.qk_norm:
        out.append(Tensor("qk_norm", 2 * m.head_dim, 1, "norm"))
    return tuple(out)


@lru_cache(maxsize=512)
def global_tensors(m: ModelSpec, head: str = "lm") -> tuple[Tensor, ...]:
    """Embeddings, final norm and the task head. head: lm | mlm | classification | none (bare model)."""
    if m.structure is not None:
        return _structure_globals(m, head)
    h, v = m.hidden, m.vocab
    out = [Tensor("embed_tokens.weight", v, h, "embedding", per_layer=False)]
    if m.position == "learned":
        out.append(Tensor("embed_positions.weight", m.max_positions, h, "position", per_layer=False))
    if m.type_vocab:
        out.append(Tensor("token_type_embeddings.weight", m.type_vocab, h, "position", per_layer=False))
    norm_numel = h * (2 if m.norm_bias else 1)
    if m.is_encoder:
        out.append(Tensor("embeddings.LayerNorm", norm_numel, 1, "norm", per_layer=False))
    else:
        out.append(Tensor("final_norm", norm_numel, 1, "norm", per_layer=False))
    out += _head_tensors(m, head)
    return tuple(out)


def _head_tensors(m: ModelSpec, head: str) -> list[Tensor]:
    h, v = m.hidden, m.vocab
    if head == "lm" and m.is_encoder:
        head = "mlm"
    if head == "lm":
        out = [] if m.tie_embeddings else [Tensor("lm_head.weight", v, h, "head", "lm_head", per_layer=False)]
        if m.lm_head_bias:
            out.append(Tensor("lm_head.bias", v, 1, "bias", per_layer=False))
        return out
    if head == "mlm":  # BertForMaskedLM / RobertaForMaskedLM: transform + LayerNorm + tied decoder with bias
        return [Tensor("lm_head.dense.weight", h, h, "head", "dense", per_layer=False),
                Tensor("lm_head.dense.bias", h, 1, "bias", per_layer=False),
                Tensor("lm_head.layer_norm", 2 * h, 1, "norm", per_layer=False),
                Tensor("lm_head.decoder.bias", v, 1, "bias", per_layer=False)]
    if head == "classification":
        return _classifier_tensors(m)
    if head == "none":
        return [Tensor("pooler.dense.weight", h, h, "head", per_layer=False),
                Tensor("pooler.dense.bias", h, 1, "bias", per_layer=False)] if m.is_encoder else []
    raise ValueError(f"unknown head {head!r}")


NUM_LABELS = 2  # sequence classification: binary unless the user says otherwise (printed as an assumption)


def _classifier_tensors(m: ModelSpec, labels: int = NUM_LABELS) -> list[Tensor]:
    h = m.hidden
    if m.model_type == "roberta":  # RobertaClassificationHead, no pooler
        return [Tensor("classifier.dense.weight", h, h, "head", "dense", per_layer=False),
                Tensor("classifier.dense.bias", h, 1, "bias", per_layer=False),
                Tensor("classifier.out_proj.weight", labels, h, "head", "out_proj", per_layer=False),
                Tensor("classifier.out_proj.bias", labels, 1, "bias", per_layer=False)]
    if m.is_encoder:  # BERT: pooler + classifier
        return [Tensor("pooler.dense.weight", h, h, "head", "dense", per_layer=False),
                Tensor("pooler.dense.bias", h, 1, "bias", per_layer=False),
                Tensor("classifier.weight", labels, h, "head", "classifier", per_layer=False),
                Tensor("classifier.bias", labels, 1, "bias", per_layer=False)]
    return [Tensor("score.weight", labels, h, "head", "score", per_layer=False)]


def _structure_globals(m: ModelSpec, head: str) -> tuple[Tensor, ...]:
    """A read structure's tensors outside the blocks; its LM head swapped for the task's head."""
    if head not in ("lm", "mlm", "classification", "none"):
        raise ValueError(f"unknown head {head!r}")
    rest = tuple(t for t in m.structure.globals if t.role != "head")
    if head in ("lm", "mlm"):
        return m.structure.globals
    if head == "classification":  # AutoModelForSequenceClassification: score (labels x h), no bias
        return rest + (Tensor("score.weight", NUM_LABELS, m.hidden, "head", "score", per_layer=False),)
    return rest


@lru_cache(maxsize=512)
def count_params(m: ModelSpec, head: str = "lm") -> int:
    """Total parameters (tied weights counted once), as `model.num_parameters()` in transformers."""
    if m.structure is not None:
        return m.structure.block_params + sum(t.numel for t in global_tensors(m, head))
    return m.layers * layer_params(m) + sum(t.numel for t in global_tensors(m, head))


def active_params(m: ModelSpec, head: str = "lm") -> int:
    """Parameters touched per token: for MoE only `experts_per_tok` experts."""
    if not m.is_moe:
        return count_params(m, head)
    per_layer = sum(t.numel if t.role != "expert" else t.numel / t.count * m.experts_per_tok
                    for t in layer_tensors(m))
    return round(m.layers * per_layer) + sum(t.numel for t in global_tensors(m, head))


def matmul_params_per_token(m: ModelSpec, head: str = "lm") -> int:
    """Weights that take part in a matmul per token (linears incl. active experts and the output head).

    Embedding lookups, norms and biases are not matmuls. For tied embeddings the output projection still is.
    """
    per_layer = 0
    for t in layer_tensors(m):
        if t.role == "linear" or t.role == "router":
            per_layer += t.numel
        elif t.role == "expert":
            per_layer += t.numel / t.count * m.experts_per_tok
    head_mm = 0
    if head == "lm" and not m.is_encoder:
        head_mm = m.vocab * m.hidden
    elif head in ("mlm", "lm") and m.is_encoder:
        head_mm = m.vocab * m.hidden + m.hidden * m.hidden
    return round(m.layers * per_layer) + head_mm


def largest_layer_params(m: ModelSpec, head: str = "lm") -> int:
    """Largest unit ZeRO-3 / FSDP gathers at once: a block, or the embedding / output matrix."""
    block = max(g.params for g in m.structure.groups) if m.structure is not None else layer_params(m)
    candidates = [block] + [t.numel for t in global_tensors(m, head)]
    return max(candidates)


@lru_cache(maxsize=512)
def largest_module_params(m: ModelSpec, head: str = "lm") -> int:
    """Largest single module (a Linear, the embedding or the output head), as DeepSpeed's ZeRO-3 estimator counts
    `largest_layer_params`: parameters owned directly by one module."""
    return max([lin.in_features * lin.out_features for lin in layer_linears(m)] +
               [t.numel for t in global_tensors(m, head)])
