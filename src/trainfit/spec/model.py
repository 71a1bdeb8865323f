"""ModelSpec: the architecture of a Transformer, normalised from a Hugging Face config.json.

Only what memory, FLOPs and parameter counts depend on. `ModelSpec.from_hf_config` understands the config.json
field names of each supported `model_type` (and the validation-case schema's `bias` / `position_embedding`
overrides); anything else is rejected with a clear message rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import SpecError
from .structure import Structure

# Per model_type: the layout that config.json does not spell out. Sources: each model's modeling_*.py in
# Hugging Face transformers (module structure), read for transformers 5.x.
#   gated      SwiGLU/GeGLU MLP (gate, up, down) vs two-matrix MLP (up, down)
#   norm       rmsnorm (weight only) or layernorm (weight + bias)
#   bias       which linears carry a bias: all | qkv | none
#   position   rope | learned | alibi
#   tie        default tie_word_embeddings
#   norms      norms per block (2 pre-norm; 1 parallel block with one norm; 4 for Gemma-2's sandwich norms)
#   fused_qkv  q, k, v are one Linear module (LoRA sees one module)
#   fused_gate_up  gate and up are one Linear module
#   lm_head_bias   the output projection has a bias
#   norm_fp32      RMSNorm multiplies by (1 + weight) in fp32 and casts afterwards (Gemma)
_LAYOUTS: dict[str, dict[str, Any]] = {
    "llama": dict(gated=True, norm="rmsnorm", bias="none", position="rope", tie=False, norms=2),
    "mistral": dict(gated=True, norm="rmsnorm", bias="none", position="rope", tie=False, norms=2),
    "mixtral": dict(gated=True, norm="rmsnorm", bias="none", position="rope", tie=False, norms=2),
    "qwen2": dict(gated=True, norm="rmsnorm", bias="qkv", position="rope", tie=False, norms=2),
    "qwen3": dict(gated=True, norm="rmsnorm", bias="none", position="rope", tie=False, norms=2, qk_norm=True),
    "gemma": dict(gated=True, norm="rmsnorm", bias="none", position="rope", tie=True, norms=2, norm_fp32=True),
    "gemma2": dict(gated=True, norm="rmsnorm", bias="none", position="rope", tie=True, norms=4, norm_fp32=True),
    "phi3": dict(gated=True, norm="rmsnorm", bias="none", position="rope", tie=False, norms=2,
                 fused_qkv=True, fused_gate_up=True),
    "phi": dict(gated=False, norm="layernorm", bias="all", position="rope", tie=False, norms=1,
                parallel=True, lm_head_bias=True),
    "gpt_neox": dict(gated=False, norm="layernorm", bias="all", position="rope", tie=False, norms=2,
                     parallel=True, fused_qkv=True),
    "falcon": dict(gated=False, norm="layernorm", bias="none", position="rope", tie=True, norms=1,
                   parallel=True, fused_qkv=True),
    "mpt": dict(gated=False, norm="layernorm", bias="none", position="alibi", tie=True, norms=2,
                fused_qkv=True),
    "gpt2": dict(gated=False, norm="layernorm", bias="all", position="learned", tie=True, norms=2,
                 fused_qkv=True),
    "baichuan": dict(gated=True, norm="rmsnorm", bias="none", position="rope", tie=False, norms=2,
                     fused_qkv=True),
    "chatglm": dict(gated=True, norm="rmsnorm", bias="qkv", position="rope", tie=False, norms=2,
                    fused_qkv=True, fused_gate_up=True),
    "bert": dict(kind="encoder", gated=False, norm="layernorm", bias="all", position="learned", tie=True,
                 norms=2),
    "roberta": dict(kind="encoder", gated=False, norm="layernorm", bias="all", position="learned", tie=True,
                    norms=2),
}

SUPPORTED_MODEL_TYPES = tuple(sorted(_LAYOUTS))


def is_fast_path(cfg: Any) -> bool:
    """Whether a config.json dict is one of the hand-written, torch-free families (else: the generic reader)."""
    return isinstance(cfg, dict) and str(cfg.get("model_type", "")).lower() in _LAYOUTS and \
        not isinstance(cfg.get("text_config"), dict)

# transformers' config defaults for the learned position table (GPT2Config.n_positions, BertConfig, RobertaConfig)
_DEFAULT_POSITIONS = {"gpt2": 1024, "bert": 512, "roberta": 514}


# learned positions offset by the padding index (padding_idx + 1 = 2): RoBERTa and the models built on its embeddings
_PADDING_OFFSET_TYPES = frozenset({"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "roberta-prelayernorm",
                                   "data2vec-text", "longformer", "ibert", "luke", "markuplm", "xmod", "mpnet"})


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of one model. Sizes are per model (not per GPU)."""

    name: str
    model_type: str
    kind: str  # decoder | encoder
    hidden: int  # h
    layers: int  # L
    heads: int  # a
    kv_heads: int  # query groups (= heads for MHA, 1 for MQA)
    head_dim: int  # d
    intermediate: int  # f (per expert for MoE; per branch for gated MLPs)
    vocab: int  # V
    gated_mlp: bool
    activation: str
    norm: str  # rmsnorm | layernorm
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    position: str  # rope | learned | alibi
    max_positions: int
    tie_embeddings: bool
    norms_per_layer: int = 2
    parallel_block: bool = False
    fused_qkv: bool = False
    fused_gate_up: bool = False
    qk_norm: bool = False
    lm_head_bias: bool = False
    norm_bias: bool = False  # LayerNorm with a bias
    norm_fp32: bool = False  # RMSNorm applies its weight in fp32 (Gemma)
    type_vocab: int = 0  # encoder token-type embeddings
    attention_dropout: float = 0.0  # on the attention probabilities, in training
    hidden_dropout: float = 0.0  # on each block's attention and MLP outputs, in training
    # tanh soft-capping, cap * tanh(x / cap) (Gemma-2: attn_logit_softcapping 50 on the attention scores,
    # final_logit_softcapping 30 on the output logits); 0: none
    attn_softcap: float = 0.0
    final_softcap: float = 0.0
    num_experts: int = 0  # 0 = dense
    experts_per_tok: int = 0
    # group-limited routing (DeepSeek-V3's node-limited routing; Megatron-Core's --moe-router-num-groups /
    # --moe-router-group-topk, mapped from config.json's n_group / topk_group by Megatron-Bridge's model_bridge.py):
    # the experts in `expert_groups` equal groups, each token routed inside `group_topk` of them; 0 = no limit
    expert_groups: int = 0
    group_topk: int = 0
    # a model-parallel stage's routed experts per GPU, as a divisor of num_experts in units of the stage's own
    # width (layout.stage_model: ep · etp / tp; 1 = every expert): what its expert GEMMs read and how many rows each
    # gets; the whole model, and every data-parallel estimate, hold all experts
    expert_shards: float = 1.0
    params_reported: int | None = None
    source: str = ""
    # the exact module structure, read from the real HF code by catalog/generic.py (None: a hand-written family)
    structure: Structure | None = field(default=None, repr=False)
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def __hash__(self) -> int:  # hashed often as a memo key: compute once
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.name, self.model_type, self.hidden, self.layers, self.heads, self.kv_heads,
                           self.head_dim, self.intermediate, self.vocab, self.num_experts, self.expert_shards,
                           self.tie_embeddings, self.structure.config_hash if self.structure else None))
            object.__setattr__(self, "_hash", cached)
        return cached

    # ---- derived sizes -------------------------------------------------------------------------------------
    @property
    def max_sequence(self) -> int:
        """The longest sequence the model takes: its position table, less RoBERTa's offset (its positions start
        after the padding index: 514 rows, 512 tokens, as transformers' create_position_ids_from_input_ids)."""
        offset = 2 if self.position == "learned" and self.model_type in _PADDING_OFFSET_TYPES else 0
        return max(0, self.max_positions - offset)

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_encoder(self) -> bool:
        return self.kind == "encoder"

    @property
    def is_generic(self) -> bool:
        """Read by the generic structure reader (any transformers architecture), not a hand-written family."""
        return self.structure is not None


    def with_name(self, name: str) -> "ModelSpec":
        return replace(self, name=name)

    # ---- construction ----------------------------------------------------------------------------------------
    @classmethod
    def from_hf_config(cls, cfg: dict[str, Any], name: str = "", source: str = "",
                       params_reported: int | None = None) -> "ModelSpec":
        """Normalise a config.json dict (or a validation case's hf_config) into a ModelSpec."""
        try:
            return _from_hf_config(cls, cfg, name, source, params_reported)
        except (KeyError, TypeError, ValueError) as exc:
            from ..errors import sentence_of
            from ..i18n import say

            detail = sentence_of(exc)
            raise SpecError(say("ec_malformed_config_for", name=name, detail=detail) if name
                            else say("ec_malformed_config", detail=detail)) from None


def _first(cfg: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


def _require(cfg: dict[str, Any], *keys: str) -> Any:
    value = _first(cfg, *keys)
    if value is None:
        raise KeyError(f"missing field {' / '.join(keys)}")
    return value


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value or value <= 0:
        raise ValueError(f"{what} must be a positive integer, got {value!r}")
    return int(value)


def _from_hf_config(cls, cfg, name, source, params_reported) -> ModelSpec:
    if not isinstance(cfg, dict):
        raise TypeError("config must be a JSON object")
    model_type = str(_require(cfg, "model_type")).lower()
    if model_type not in _LAYOUTS:
        raise ValueError(f"model_type {model_type!r} is not supported (supported: {', '.join(SUPPORTED_MODEL_TYPES)})")
    lay = _LAYOUTS[model_type]
    get = lambda *k, default=None: _first(cfg, *k, default=default)  # noqa: E731

    hidden = _positive_int(_require(cfg, "hidden_size", "n_embd", "d_model"), "hidden_size")
    layers = _positive_int(_require(cfg, "num_hidden_layers", "n_layer", "num_layers", "n_layers"), "num_hidden_layers")
    heads = _positive_int(_require(cfg, "num_attention_heads", "n_head", "n_heads"), "num_attention_heads")
    kv_heads = _kv_heads(cfg, model_type, heads)
    head_dim = _positive_int(get("head_dim", "kv_channels", default=hidden // heads), "head_dim")
    intermediate = _intermediate(cfg, model_type, hidden)
    vocab = _positive_int(_require(cfg, "padded_vocab_size", "vocab_size"), "vocab_size")
    if heads % kv_heads:
        from ..i18n import say

        raise ValueError(say("ei_not_multiple", a="num_attention_heads", x=heads, b="num_key_value_heads", y=kv_heads))

    qkv_bias, o_bias, mlp_bias, norm_bias = _biases(cfg, model_type, lay)
    position = (get("position_embedding") or lay["position"]).lower()
    max_pos = int(get("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", default=0) or 0)
    if position == "learned" and max_pos <= 0:
        max_pos = _DEFAULT_POSITIONS.get(model_type, 0)
    if position == "learned" and max_pos <= 0:
        raise ValueError("learned position embeddings need max_position_embeddings")
    tie = get("tie_word_embeddings", default=lay["tie"])
    act = str(get("hidden_act", "activation_function", "hidden_activation",
                  default="gelu_new" if model_type == "gpt2" else "gelu"))  # GPT2Config's default is gelu_new
    gated = lay["gated"]
    if model_type == "mpt" and (cfg.get("ffn_config") or {}).get("ffn_type") == "mptglu":
        gated = True

    experts = int(get("num_local_experts", "num_experts", default=0) or 0)
    # Hugging Face's config defaults where config.json is silent: 0.1 for BERT/RoBERTa/GPT-2, 0.0 for Llama-family
    drop = 0.1 if model_type in _DROPOUT_01 else 0.0
    attn_drop = _probability(get("attention_probs_dropout_prob", "attn_pdrop", "attention_dropout", default=drop))
    hidden_drop = _probability(get("hidden_dropout_prob", "resid_pdrop", "hidden_dropout", default=drop))
    return cls(
        name=name or str(cfg.get("_name_or_path") or model_type), model_type=model_type,
        kind=lay.get("kind", "decoder"), hidden=hidden, layers=layers, heads=heads, kv_heads=kv_heads,
        head_dim=head_dim, intermediate=intermediate, vocab=vocab, gated_mlp=gated, activation=act,
        norm=lay["norm"], qkv_bias=qkv_bias, o_bias=o_bias, mlp_bias=mlp_bias, norm_bias=norm_bias,
        position=position, max_positions=max_pos, tie_embeddings=bool(tie),
        norms_per_layer=_norms_per_layer(cfg, model_type, lay), parallel_block=_parallel(cfg, model_type, lay),
        fused_qkv=lay.get("fused_qkv", False), fused_gate_up=lay.get("fused_gate_up", False),
        qk_norm=lay.get("qk_norm", False), lm_head_bias=lay.get("lm_head_bias", False),
        norm_fp32=lay.get("norm_fp32", False),
        type_vocab=int(get("type_vocab_size", default=0) or 0) if lay.get("kind") == "encoder" else 0,
        attention_dropout=attn_drop, hidden_dropout=hidden_drop,
        attn_softcap=_softcap(cfg, "attn_logit_softcapping", model_type),
        final_softcap=_softcap(cfg, "final_logit_softcapping", model_type),
        num_experts=experts, experts_per_tok=int(get("num_experts_per_tok", default=0) or 0) if experts else 0,
        **expert_groups_of(cfg, experts),
        params_reported=params_reported, source=source,
        extra={k: cfg[k] for k in ("rope_theta", "sliding_window", "torch_dtype", "pad_token_id", "layer_types")
               if k in cfg},
    )


def expert_groups_of(cfg: dict, experts: int) -> dict:
    """n_group / topk_group of a group-limited router (DeepSeek-V2/V3), kept when they limit anything: more than
    one group, fewer groups per token than groups, and the experts split evenly."""
    groups, topk = cfg.get("n_group"), cfg.get("topk_group")
    ok = all(isinstance(v, int) and not isinstance(v, bool) for v in (groups, topk))
    if not experts or not ok or not 1 < groups <= experts or experts % groups or not 0 < topk < groups:
        return {}
    return {"expert_groups": groups, "group_topk": topk}


_DROPOUT_01 = frozenset({"bert", "roberta", "gpt2"})
# transformers' config defaults where config.json is silent (Gemma2Config: final_logit_softcapping 30.0,
# attn_logit_softcapping 50.0); an explicit null turns soft-capping off
_SOFTCAP_DEFAULTS = {"gemma2": {"attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0}}


def softcap_value(value: Any, what: str) -> float:
    """A soft-capping value of a config (None / absent: 0.0, none)."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{what} must be a positive number or null, got {value!r}")
    return float(value)


def _softcap(cfg: dict, key: str, model_type: str) -> float:
    value = cfg[key] if key in cfg else _SOFTCAP_DEFAULTS.get(model_type, {}).get(key)
    return softcap_value(value, key)


def _probability(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"dropout must be a probability in [0, 1), got {value!r}")
    return float(value)


def _kv_heads(cfg: dict, model_type: str, heads: int) -> int:
    if model_type == "chatglm":
        return int(cfg["multi_query_group_num"]) if cfg.get("multi_query_attention") else heads
    if model_type == "falcon" and not cfg.get("new_decoder_architecture"):
        return 1 if cfg.get("multi_query", True) else heads
    if model_type == "falcon":
        return int(_first(cfg, "num_kv_heads", default=heads))
    value = _first(cfg, "num_key_value_heads", "num_kv_heads", "n_head_kv", default=heads)
    return _positive_int(value, "num_key_value_heads")


def _intermediate(cfg: dict, model_type: str, hidden: int) -> int:
    value = _first(cfg, "ffn_hidden_size", "intermediate_size", "n_inner")
    if model_type == "mpt" and value is None:
        value = hidden * int((cfg.get("expansion_ratio") or 4))
    if value is None and model_type in ("gpt2", "falcon", "gpt_neox", "phi", "bert", "roberta"):
        value = 4 * hidden
    return _positive_int(value, "intermediate_size")


def _biases(cfg: dict, model_type: str, lay: dict) -> tuple[bool, bool, bool, bool]:
    """(qkv, o, mlp, norm) bias flags. The schema's explicit `bias` (all | qkv | none) wins over the defaults."""
    layernorm = lay["norm"] == "layernorm"
    bias = cfg.get("bias") if cfg.get("bias") in ("all", "qkv", "none") else None
    if bias is None:
        bias = lay["bias"]
        if model_type in ("llama", "mistral", "qwen3") and cfg.get("attention_bias"):
            return True, True, bool(cfg.get("mlp_bias")), False
        if model_type in ("llama", "mistral") and cfg.get("mlp_bias"):
            return False, False, True, False
        if model_type == "falcon" and cfg.get("bias"):
            bias = "all"
        if model_type == "mpt":
            bias = "none" if cfg.get("no_bias", True) else "all"
        if model_type == "chatglm":
            bias = "all" if cfg.get("add_bias_linear") else ("qkv" if cfg.get("add_qkv_bias") else "none")
    # LayerNorm carries a bias except in MPT without biases (HF's MptBlock drops it).
    norm_bias = layernorm and not (model_type == "mpt" and bias != "all")
    return bias in ("all", "qkv"), bias == "all", bias == "all", norm_bias


def _norms_per_layer(cfg: dict, model_type: str, lay: dict) -> int:
    if model_type == "falcon" and cfg.get("new_decoder_architecture"):
        return 2
    return lay["norms"]


def _parallel(cfg: dict, model_type: str, lay: dict) -> bool:
    if model_type == "gpt_neox":
        return bool(cfg.get("use_parallel_residual", True))
    if model_type == "falcon":
        return bool(cfg.get("parallel_attn", True))
    return lay.get("parallel", False)
