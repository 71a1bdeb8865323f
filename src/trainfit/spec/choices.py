"""The closed choices of a training job (enums) and the parsers of its list-valued fields.

Closed choices are enums; ordered ones (ZeRO stage, checkpointing, offload) compare by level so property tests
and the search can reason about "more sharding" or "more recomputation".
"""

from __future__ import annotations

from enum import Enum

from ..errors import SpecError
from ..i18n import say


class _Choice(str, Enum):
    @classmethod
    def parse(cls, value: "str | _Choice", what: str | None = None):
        if isinstance(value, cls):
            return value
        text = str(value).strip().lower().replace("_", "-")
        for member in cls:
            if text in (member.value, member.name.lower().replace("_", "-")):
                return member
        choices = ", ".join(m.value for m in cls)
        raise SpecError(say("ei_invalid_choice", what=what or cls.__name__.lower(), value=value, choices=choices,
                            dym=""))

    def __str__(self) -> str:
        return self.value


class Method(_Choice):
    FULL = "full"
    LORA = "lora"
    QLORA = "qlora"
    FREEZE = "freeze"


class Task(_Choice):
    SFT = "sft"
    PRETRAIN = "pretrain"
    DPO = "dpo"
    CLASSIFICATION = "classification"


class Precision(_Choice):
    BF16 = "bf16"
    FP16 = "fp16"
    FP32 = "fp32"
    FP8 = "fp8"


class Optimizer(_Choice):
    ADAMW = "adamw"
    ADAMW_8BIT = "adamw-8bit"
    ADAFACTOR = "adafactor"
    SGD = "sgd"  # with a momentum buffer (momentum 0.9, as trainfit's runner runs it)
    SGD_NOMOMENTUM = "sgd-nomomentum"  # torch.optim.SGD's default momentum 0: no state
    LAMB = "lamb"


class OptimizerImpl(_Choice):
    """How torch runs AdamW / SGD: one fused kernel (no intermediates), foreach (multi-tensor ops over the whole
    parameter group, with intermediates the size of a whole state: `torch._foreach_sqrt(exp_avg_sqs)` in
    torch/optim/adam.py `_multi_tensor_adam`), or a for-loop over tensors (intermediates of one tensor).
    torch's own default on CUDA is foreach (`_default_to_fused_or_foreach`); Hugging Face Trainer (transformers 5,
    torch >= 2.8: `optim="adamw_torch_fused"`) and trainfit's train.py use fused."""

    FUSED = "fused"
    FOREACH = "foreach"
    FORLOOP = "forloop"


class Attention(_Choice):
    FLASH = "flash"
    SDPA = "sdpa"
    EAGER = "eager"


class _Ordered(_Choice):
    @property
    def level(self) -> int:
        return list(type(self)).index(self)


class GradCkpt(_Ordered):
    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"


class Offload(_Ordered):
    NONE = "none"
    OPTIMIZER = "optimizer"
    ALL = "all"


class Fsdp(_Choice):
    NONE = "none"
    SHARD_GRAD_OP = "shard_grad_op"
    FULL_SHARD = "full_shard"

    @classmethod
    def parse(cls, value, what=None):
        if value is None:
            return cls.NONE
        text = str(value).strip().lower().replace("-", "_")
        for member in cls:
            if text == member.value:
                return member
        raise SpecError(say("ei_invalid_choice", what="fsdp", value=value, choices="shard_grad_op, full_shard", dym=""))


ALL_LINEAR = ("all-linear",)


# Modules PEFT can train in full beside the adapters (LoraConfig.modules_to_save), by canonical name
SAVED_MODULE_NAMES = {"lm_head": "lm_head", "output": "lm_head", "embed_tokens": "embed_tokens",
                      "wte": "embed_tokens", "word_embeddings": "embed_tokens", "embed": "embed_tokens"}


def parse_saved_modules(names: "str | tuple[str, ...] | list[str] | None") -> tuple[str, ...]:
    """'embed_tokens,lm_head' or a list -> canonical names of modules trained in full beside LoRA (sorted)."""
    if not names:
        return ()
    items = [x.strip() for x in names.split(",")] if isinstance(names, str) else [str(x).strip() for x in names]
    out = set()
    for item in (x for x in items if x):
        key = SAVED_MODULE_NAMES.get(item.lower())
        if key is None:
            raise SpecError(say("ei_unknown_saved_module", item=item))
        out.add(key)
    return tuple(sorted(out))


SELECTIVE_AC_POLICIES = ("attention", "op")

# Megatron-Core's selective recompute modules (TransformerConfig.recompute_modules, read at Megatron-LM d98e8a64
# megatron/core/transformer/transformer_config.py L560-580 and L1940-1972) that trainfit models: a comma-separated
# list of them is a policy of its own (--recompute-granularity selective --recompute-modules ...). Megatron's default
# list is core_attn alone, which is the 'attention' policy.
MEGATRON_RECOMPUTE_MODULES = ("core_attn", "layernorm", "mla_up_proj", "mlp", "moe", "moe_act", "shared_experts")


def parse_selective_ac(value: "str | int | None") -> str:
    """What selective checkpointing recomputes: 'attention' (the attention core: Megatron-LM's recompute-granularity
    selective, train.py's), 'op' (torchtitan's per-op policy: every matmul's output kept except every second one's,
    all other ops recomputed), a number N (every N-th block checkpointed in full, the others kept: torchtitan's
    and torchtune's selective layer option) or Megatron-Core's recompute modules, comma-separated ('moe_act,
    layernorm': MEGATRON_RECOMPUTE_MODULES; canonical form sorted, 'core_attn' alone is 'attention'). None ->
    'attention'."""
    if value is None:
        return "attention"
    if isinstance(value, bool):
        raise SpecError(say("ei_selective_ac", value=value, hint=""))
    text = str(value).strip().lower()
    if text in SELECTIVE_AC_POLICIES:
        return text
    if "," in text or text in MEGATRON_RECOMPUTE_MODULES:
        return _megatron_modules(value, text)
    try:
        every = int(text)
    except ValueError:
        from difflib import get_close_matches

        close = get_close_matches(text, SELECTIVE_AC_POLICIES + MEGATRON_RECOMPUTE_MODULES, n=1)
        hint = say("ei_dym_one", close=close[0]) if close else ""
        raise SpecError(say("ei_selective_ac", value=value, hint=hint)) \
            from None
    if not 1 <= every <= 1024:
        raise SpecError(say("ei_selective_ac_interval", value=value))
    return str(every)


def _megatron_modules(value, text: str) -> str:
    from difflib import get_close_matches

    names = set()
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        if item not in MEGATRON_RECOMPUTE_MODULES:
            close = get_close_matches(item, MEGATRON_RECOMPUTE_MODULES, n=1)
            hint = say("ei_dym_one", close=close[0]) if close else ""
            raise SpecError(say("ei_recompute_module", item=item, value=value,
                                modules=", ".join(MEGATRON_RECOMPUTE_MODULES), hint=hint))
        names.add(item)
    if not names:
        raise SpecError(say("ei_selective_ac", value=value, hint=""))
    if names == {"core_attn"}:
        return "attention"
    return ",".join(sorted(names))


def recompute_modules(policy: "str | None") -> frozenset[str]:
    """Megatron-Core's recompute modules a selective policy names (empty for 'op' and block intervals; 'attention'
    is core_attn)."""
    if policy == "attention" or policy is None:
        return frozenset({"core_attn"})
    if policy == "op" or policy.isdigit():
        return frozenset()
    return frozenset(policy.split(","))


def is_module_list(policy: "str | None") -> bool:
    """A policy of Megatron-Core's recompute modules beyond the attention core alone (it needs Megatron's layout)."""
    return bool(policy) and policy not in SELECTIVE_AC_POLICIES and not policy.isdigit()


def selective_every(policy: str) -> int | None:
    """The block interval of a layer-selective policy ('2' -> 2), None for 'attention' and 'op'."""
    return int(policy) if policy.isdigit() else None


def parse_targets(targets: "str | tuple[str, ...] | list[str] | None") -> tuple[str, ...]:
    """'q_proj,v_proj' or a list -> a tuple of LoRA target names; None -> all-linear."""
    if targets is None:
        return ALL_LINEAR
    if not isinstance(targets, (str, list, tuple)):
        raise SpecError(say("ei_text", what="lora-targets", type=type(targets).__name__, value=targets))
    odd = [x for x in ([] if isinstance(targets, str) else targets) if not isinstance(x, str) or not x.strip()]
    if odd:  # [[q_proj]] or [1] in a request file: each target is a module name
        raise SpecError(say("ei_text", what="lora-targets", type=type(odd[0]).__name__, value=odd[0]))
    items = tuple(x.strip() for x in targets.split(",") if x.strip()) if isinstance(targets, str) else \
        tuple(x.strip() for x in targets)
    if not items:
        raise SpecError(say("ei_lora_targets_empty"))
    return items
