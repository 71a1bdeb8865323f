"""What is trained and how: TrainingSpec (the workload) and Strategy (how it is spread over GPUs).

Closed choices are enums; ordered ones (ZeRO stage, checkpointing, offload) compare by level so property tests
and the search can reason about "more sharding" or "more recomputation".
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from enum import Enum

from ..errors import SpecError


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
        raise SpecError(f"invalid {what or cls.__name__.lower()} {value!r} (choose from: {choices})")

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
    SGD = "sgd"
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
        raise SpecError(f"invalid fsdp {value!r} (choose from: shard_grad_op, full_shard)")


ALL_LINEAR = ("all-linear",)


def _cached_hash(obj, fields: tuple) -> int:
    """Frozen specs are hashed very often as memo keys by the search: hash their fields once."""
    value = obj.__dict__.get("_hash")
    if value is None:
        value = hash(fields)
        object.__setattr__(obj, "_hash", value)
    return value


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
            raise SpecError(f"unknown module to save {item!r} (choose from: embed_tokens, lm_head)")
        out.add(key)
    return tuple(sorted(out))


def parse_targets(targets: "str | tuple[str, ...] | list[str] | None") -> tuple[str, ...]:
    """'q_proj,v_proj' or a list -> a tuple of LoRA target names; None -> all-linear."""
    if targets is None:
        return ALL_LINEAR
    items = tuple(x.strip() for x in targets.split(",") if x.strip()) if isinstance(targets, str) else tuple(targets)
    if not items:
        raise SpecError("--lora-targets is empty")
    return items


@dataclass(frozen=True)
class TrainingSpec:
    """The workload of one optimizer step on one data-parallel rank."""

    method: Method = Method.FULL
    task: Task = Task.SFT
    seq_len: int = 2048
    micro_batch: int = 1  # sequences per GPU per forward/backward (DPO: preference pairs)
    grad_accum: int = 1
    precision: Precision = Precision.BF16
    param_dtype: str = "fp32"  # storage dtype of trainable weights: fp32 (mixed precision) | bf16 (pure)
    optimizer: Optimizer = Optimizer.ADAMW
    optimizer_impl: OptimizerImpl = OptimizerImpl.FUSED  # torch AdamW / SGD kernel (see OptimizerImpl)
    grad_ckpt: GradCkpt = GradCkpt.NONE
    attention: Attention = Attention.SDPA
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = ALL_LINEAR
    num_labels: int = 2
    modules_to_save: tuple[str, ...] = ()  # LoRA: embed_tokens / lm_head trained in full (PEFT modules_to_save)
    optimizer_in_backward: bool = False  # each parameter steps as soon as its gradient is ready (torchtune)
    paged_optimizer: bool = False  # optimizer states in CUDA managed memory (bitsandbytes Paged*)
    # QLoRA through PEFT's prepare_model_for_kbit_training: every parameter that is not 4-bit (embeddings, norms,
    # the output head) is cast to fp32. Stacks that do not call it (torchtune, LitGPT, Unsloth) and GPTQ bases keep
    # them 16-bit.
    kbit_fp32_upcast: bool = True
    # QLoRA on bitsandbytes before 0.43.2: its 4-bit matmul (MatMul4Bit) kept every Linear's input alive for
    # backward although a frozen weight needs none (fixed by bitsandbytes PR #1270, July 2024). LitGPT pinned
    # bitsandbytes 0.41-0.42 through 2024.
    kbit_keeps_inputs: bool = False
    # Variable-length data (not packed): each micro-batch is padded to its longest sample, so shapes change from
    # step to step. seq_len is then the longest sample (--max-len: memory is taken at the longest batch), avg_len
    # the mean sample length (--avg-len: the tokens that count) and padded_len the expected length a micro-batch is
    # padded to (time is taken there; see spec/lengths.py). avg_len None: lengths unknown, time at seq_len.
    variable_length: bool = False
    avg_len: int | None = None
    padded_len: int | None = None
    expandable_segments: bool = False  # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (less reserve when shapes vary)
    lengths_from: str = field(default="", compare=False)  # where avg_len / padded_len came from (said with them)

    def __post_init__(self) -> None:
        for name, low, high in (("seq_len", 1, 2_097_152), ("micro_batch", 1, 65_536), ("grad_accum", 1, 65_536),
                                ("lora_rank", 1, 65_536), ("num_labels", 1, 1_000_000)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise SpecError(f"{name.replace('_', '-')} must be an integer in [{low}, {high}], got {value!r}")
        if self.param_dtype not in ("fp32", "bf16"):
            raise SpecError(f"param-dtype must be fp32 or bf16, got {self.param_dtype!r}")
        if self.optimizer_in_backward and self.grad_accum > 1:
            raise SpecError("optimizer-in-backward steps every micro-batch: it needs grad-accum 1")
        if self.optimizer_in_backward and self.precision == Precision.FP16:
            raise SpecError("optimizer-in-backward cannot unscale fp16 loss-scaled gradients: use bf16")
        for name in ("avg_len", "padded_len"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or not 1 <= value <= self.seq_len):
                raise SpecError(f"{name.replace('_', '-')} must be an integer in [1, max-len {self.seq_len}], "
                                f"got {value!r}")
        if (self.avg_len or self.padded_len) and not self.variable_length:
            raise SpecError("avg-len / padded-len describe variable-length data (variable_length)")
        if self.avg_len and self.padded_len and self.padded_len < self.avg_len:
            raise SpecError(f"padded-len {self.padded_len} is below avg-len {self.avg_len}: a micro-batch is padded "
                            "to its longest sample")
        if self.paged_optimizer and self.optimizer not in (Optimizer.ADAMW, Optimizer.ADAMW_8BIT, Optimizer.LAMB):
            raise SpecError(f"paged optimizers are AdamW, 8-bit AdamW or LAMB, not {self.optimizer.value}")

    def __hash__(self) -> int:
        return _cached_hash(self, (self.method, self.task, self.seq_len, self.micro_batch, self.grad_accum,
                                   self.precision, self.param_dtype, self.optimizer, self.grad_ckpt, self.attention,
                                   self.lora_rank, self.lora_targets, self.num_labels, self.modules_to_save,
                                   self.optimizer_in_backward, self.paged_optimizer, self.kbit_fp32_upcast,
                                   self.kbit_keeps_inputs, self.optimizer_impl, self.variable_length,
                                   self.avg_len, self.padded_len, self.expandable_segments))

    @property
    def is_peft(self) -> bool:
        return self.method in (Method.LORA, Method.QLORA)

    @property
    def sequences_per_micro_batch(self) -> int:
        """DPO runs each preference pair as two sequences (chosen + rejected)."""
        return self.micro_batch * (2 if self.task == Task.DPO else 1)

    @property
    def tokens_per_micro_batch(self) -> int:
        """Tokens a micro-batch holds (padding included; for variable-length data: at the longest sample)."""
        return self.sequences_per_micro_batch * self.seq_len

    @property
    def useful_tokens_per_micro_batch(self) -> int:
        """The tokens that count (not padding): sequences x the mean sample length for variable-length data."""
        return self.sequences_per_micro_batch * (self.avg_len or self.seq_len)

    @property
    def time_len(self) -> int:
        """The sequence length a micro-batch is computed at: padded to its longest sample for variable-length data
        (padded_len, else derived from avg_len, see spec/lengths.py), else seq_len."""
        if not self.variable_length or not self.avg_len:
            return self.seq_len
        if self.padded_len:
            return self.padded_len
        from .lengths import expected_padded_len

        return expected_padded_len(self.avg_len, self.seq_len, self.sequences_per_micro_batch)

    @cached_property
    def for_time(self) -> "TrainingSpec":
        """The workload as its micro-batches are computed: fixed length time_len (padding included)."""
        if not self.variable_length:
            return self
        return replace(self, seq_len=self.time_len, variable_length=False, avg_len=None, padded_len=None)

    def with_(self, **changes) -> "TrainingSpec":
        return replace(self, **changes)

    @cached_property
    def for_memory(self) -> "TrainingSpec":
        """Memory depends on gradient accumulation only through "are gradients held across micro-batches"."""
        return self if self.grad_accum <= 2 else replace(self, grad_accum=2)

    @cached_property
    def per_micro_batch(self) -> "TrainingSpec":
        """The same workload with grad_accum = 1: what one micro-batch's memory and time depend on."""
        return self if self.grad_accum == 1 else replace(self, grad_accum=1)


@dataclass(frozen=True)
class Strategy:
    """How the step is spread: data-parallel GPUs, ZeRO stage or FSDP, offload."""

    gpus_per_node: int = 1
    nodes: int = 1
    zero_stage: int = 0  # DeepSpeed ZeRO 0-3 (0 with one GPU = plain PyTorch, with several = DDP)
    fsdp: Fsdp = Fsdp.NONE
    offload: Offload = Offload.NONE
    notes: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        for name, high in (("gpus_per_node", 64), ("nodes", 4096)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise SpecError(f"{name.replace('_', '-')} must be an integer in [1, {high}], got {value!r}")
        if self.zero_stage not in (0, 1, 2, 3):
            raise SpecError(f"zero stage must be 0, 1, 2 or 3, got {self.zero_stage!r}")
        if self.zero_stage and self.fsdp != Fsdp.NONE:
            raise SpecError("choose either --zero or --fsdp, not both")
        if self.offload != Offload.NONE and self.zero_stage == 0 and self.fsdp == Fsdp.NONE:
            raise SpecError("offload needs DeepSpeed ZeRO (--zero 1/2/3) or FSDP")
        if self.offload == Offload.ALL and not (self.zero_stage == 3 or self.fsdp == Fsdp.FULL_SHARD):
            raise SpecError("--offload all (parameters too) needs --zero 3 or --fsdp full_shard; "
                            "use --offload optimizer with ZeRO-1/2")

    def __hash__(self) -> int:
        return _cached_hash(self, (self.gpus_per_node, self.nodes, self.zero_stage, self.fsdp, self.offload))

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def engine(self) -> str:
        if self.fsdp != Fsdp.NONE:
            return "fsdp"
        if self.zero_stage > 0:
            return "deepspeed"
        return "ddp" if self.gpus > 1 else "single"

    @property
    def shards_params(self) -> bool:
        return self.zero_stage == 3 or self.fsdp == Fsdp.FULL_SHARD

    @property
    def shards_grads(self) -> bool:
        return self.zero_stage >= 2 or self.fsdp != Fsdp.NONE

    @property
    def shards_optimizer(self) -> bool:
        return self.zero_stage >= 1 or self.fsdp != Fsdp.NONE

    def label(self) -> str:
        parts = [f"{self.nodes}x{self.gpus_per_node} GPU" if self.nodes > 1 else f"{self.gpus} GPU"]
        if self.fsdp != Fsdp.NONE:
            parts.append(f"FSDP {self.fsdp.value}")
        elif self.zero_stage:
            parts.append(f"ZeRO-{self.zero_stage}")
        elif self.gpus > 1:
            parts.append("DDP")
        if self.offload != Offload.NONE:
            parts.append(f"offload {self.offload.value}")
        return ", ".join(parts)

    def with_(self, **changes) -> "Strategy":
        return replace(self, **changes)


def combination_problem(t: TrainingSpec, s: Strategy) -> str | None:
    """Why a training setting cannot run under an engine, or None (the rules of one setting alone are checked
    when the TrainingSpec is made)."""
    if t.optimizer_in_backward and s.engine == "deepspeed":
        return "optimizer-in-backward is a PyTorch/torchtune feature: not with DeepSpeed ZeRO"
    if t.optimizer_in_backward and s.engine == "ddp":
        return "optimizer-in-backward steps each gradient before DDP could all-reduce it: use one GPU or FSDP"
    if t.paged_optimizer and s.engine == "deepspeed":
        return "paged optimizers are bitsandbytes optimizers: DeepSpeed ZeRO runs its own"
    return None


DEFAULT_SEQ_LEN = 2048


def default_seq_len(max_positions: int | None) -> tuple[int, str | None]:
    """The sequence length when none is given: 2048, capped at the model's positions (BERT: 512), with a note
    when capped. The one place this default lives (CLI, API, plan and generate all come here)."""
    if max_positions and max_positions < DEFAULT_SEQ_LEN:
        return max_positions, f"sequence length {max_positions} (the model's positions; default {DEFAULT_SEQ_LEN})"
    return DEFAULT_SEQ_LEN, None
