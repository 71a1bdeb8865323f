"""What is trained and how: TrainingSpec (the workload) and Strategy (how it is spread over GPUs).

Both dataclasses are made from the one declaration of a job's fields (spec/job.py): their fields, defaults, type and
range checks and hash come from there; this module adds the rules between fields and the derived properties. The
closed choices (enums) live in spec/choices.py and are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from ..errors import SpecError
from ..i18n import say
from .choices import (ALL_LINEAR, SAVED_MODULE_NAMES, Attention, Fsdp, GradCkpt, Method, Offload,  # noqa: F401
                      Optimizer, OptimizerImpl, Precision, Task, _Choice, _Ordered, parse_saved_modules,
                      parse_selective_ac, parse_targets)
from typing import TYPE_CHECKING, Any

from .job import API, fields_of, split_keywords

if TYPE_CHECKING:
    from .model import ModelSpec


def _cached_hash(obj) -> int:
    """Frozen specs are hashed very often as memo keys by the search: hash their declared fields once."""
    value = obj.__dict__.get("_hash")
    if value is None:
        value = hash(tuple(getattr(obj, f.name) for f in fields_of(obj._PART)))
        object.__setattr__(obj, "_hash", value)
    return value


def _declared(base: type, part: str) -> type:
    """`base` with the declared fields of `part` as frozen dataclass fields (defaults from the declaration)."""
    name = base.__name__.lstrip("_")
    ns: dict = {"__annotations__": {}, "__module__": base.__module__, "__qualname__": name, "__doc__": base.__doc__}
    for f in fields_of(part):
        ns["__annotations__"][f.name] = "object"
        ns[f.name] = f.default
    for name, value in getattr(base, "_EXTRA", {}).items():
        ns["__annotations__"][name] = "object"
        ns[name] = value
    ns["__hash__"] = base.__hash__  # kept by dataclass (it adds its own only to a class without one): cached
    cls = type(name, (base,), ns)
    return dataclass(frozen=True, eq=True)(cls)


class _Spec:
    _PART = ""

    def __post_init__(self) -> None:
        for f in fields_of(self._PART):
            f.check(getattr(self, f.name))
        self._rules()

    def _rules(self) -> None:
        pass

    def __hash__(self) -> int:
        return _cached_hash(self)

    def with_(self, **changes):
        return replace(self, **changes)


LOSS_IMPLS = ("hf", "torchtune_chunked", "torchtune_fp32", "logits_dtype", "fused_xentropy", "megatron")


class _TrainingSpec(_Spec):
    """The workload of one optimizer step on one data-parallel rank (fields: spec/job.py)."""

    _PART = "training"
    _EXTRA = {"lengths_from": field(default="", compare=False),  # where avg_len / padded_len came from (said with them)
              # whose loss path runs the step, a property of the stack (frameworks.yaml loss_impl): hf (transformers'
              # whole-logits upcast), torchtune_chunked (CEWithChunkedOutputLoss, the recipes' default) or
              # torchtune_fp32 (torch.nn.CrossEntropyLoss); estimate/memory_loss.py torchtune_logits_items; or
              # logits_dtype (a model code's own loss on its logits' dtype with no autocast around it: Qwen v1's
              # remote code under DeepSpeed; memory_loss.logits_dtype_items) or fused_xentropy (flash-attn's fused
              # cross-entropy on the 16-bit logits: llm-foundry's MPT; memory_loss.fused_xentropy_items)
              "loss_impl": field(default="hf")}

    def _rules(self) -> None:
        if parse_selective_ac(self.selective_ac) != self.selective_ac:
            raise SpecError(say("ei_selective_ac_given", value=self.selective_ac))
        if self.loss_impl not in LOSS_IMPLS:
            # not a user's value (no door takes it): frameworks.yaml's loss_impl names a path the estimate has not
            raise ValueError(f"loss_impl {self.loss_impl!r} (frameworks.yaml): one of {', '.join(LOSS_IMPLS)}")
        if self.optimizer_in_backward and self.grad_accum > 1:
            raise SpecError(say("ei_oib_grad_accum"))
        if self.optimizer_in_backward and self.precision == Precision.FP16:
            raise SpecError(say("ei_oib_fp16"))
        for name in ("avg_len", "padded_len"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or not 1 <= value <= self.seq_len):
                raise SpecError(say("ei_len_in_range", what=name.replace("_", "-"), seq_len=self.seq_len, value=value))
        if (self.avg_len or self.padded_len) and not self.variable_length:
            raise SpecError("avg-len / padded-len describe variable-length data (variable_length)")
        if self.avg_len and self.padded_len and self.padded_len < self.avg_len:
            raise SpecError(f"padded-len {self.padded_len} is below avg-len {self.avg_len}: a micro-batch is padded "
                            "to its longest sample")
        if self.paged_optimizer and self.optimizer not in (Optimizer.ADAMW, Optimizer.ADAMW_8BIT, Optimizer.LAMB):
            raise SpecError(say("ei_paged_optimizer", optimizer=self.optimizer.value))

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

    @cached_property
    def for_memory(self) -> "TrainingSpec":
        """Memory depends on gradient accumulation only through "are gradients held across micro-batches"."""
        return self if self.grad_accum <= 2 else replace(self, grad_accum=2)

    @cached_property
    def per_micro_batch(self) -> "TrainingSpec":
        """The same workload with grad_accum = 1: what one micro-batch's memory and time depend on."""
        return self if self.grad_accum == 1 else replace(self, grad_accum=1)


TrainingSpec = _declared(_TrainingSpec, "training")


class _Strategy(_Spec):
    """How the step is spread: data-parallel GPUs, ZeRO stage or FSDP, offload (fields: spec/job.py)."""

    _PART = "strategy"
    # ds_reduce_bucket: DeepSpeed's zero_optimization.reduce_bucket_size in elements where a run's config states a
    # number (0: what trainfit's generated configs and Hugging Face's "auto" set, hidden_size²); not a door's field
    _EXTRA = {"notes": field(default=(), compare=False), "ds_reduce_bucket": field(default=0)}

    def _rules(self) -> None:
        if self.zero_stage and self.fsdp != Fsdp.NONE:
            raise SpecError(say("ei_zero_and_fsdp"))
        if self.offload != Offload.NONE and self.zero_stage == 0 and self.fsdp == Fsdp.NONE:
            raise SpecError(say("ei_offload_needs_sharding"))
        if self.offload == Offload.ALL and not (self.zero_stage == 3 or self.fsdp == Fsdp.FULL_SHARD):
            raise SpecError(say("ei_offload_all"))
        self._parallel_rules()

    def _parallel_rules(self) -> None:
        """The layout rules that do not depend on the model (those that do: estimate/parallel3d.layout_problems)."""
        if self.gpus % self.model_parallel:
            raise SpecError(say("ec_mp_gpus_divide", gpus=self.gpus, tp=self.tp, pp=self.pp, cp=self.cp))
        if self.gpus_per_node % self.tp:
            raise SpecError(say("ec_mp_tp_node", tp=self.tp, per_node=self.gpus_per_node))
        if self.pp_layout is not None:
            self._layout_rules()
        if (self.vpp > 1) != (self.pp_schedule == "interleaved") or (self.vpp > 1 and self.pp == 1):
            raise SpecError(say("ec_mp_vpp_schedule", vpp=self.vpp, schedule=self.pp_schedule))
        if self.ep_overlap and self.ep == 1:
            raise SpecError(say("ec_mp_ep_overlap"))
        if self.is_3d and (self.offload != Offload.NONE or self.zero_stage > 1):
            raise SpecError(say("ec_mp_sharding"))
        if self.precision_aware_optimizer and not (self.is_3d and self.fsdp == Fsdp.NONE and self.zero_stage == 1):
            raise SpecError(say("ec_mp_precision_aware"))
        if self.grad_reduce_bf16 and not (self.is_3d and self.fsdp == Fsdp.NONE):
            raise SpecError(say("ec_mp_grad_reduce_bf16"))
        if (self.pp_split_embedding or self.pp_split_loss) and (self.pp == 1 or self.fsdp != Fsdp.NONE):
            raise SpecError(say("ec_layout_split_accounted"))  # the layers' divisibility: parallel3d.layout_problems

    def _layout_rules(self) -> None:
        """A custom pipeline layout: Megatron-LM sets the virtual stages per rank from it (arguments.py: the
        layout's stages / pp; --num-virtual-stages-per-pipeline-rank may not be given with it), so vpp and the
        interleaved schedule follow from the layout here too; it replaces the pipeline split's own knobs and runs
        on Megatron's layouts only (no FSDP)."""
        from .pp_layout import parse

        stages = parse(self.pp_layout)
        if self.pp == 1 or len(stages) % self.pp:
            raise SpecError(say("ec_pp_layout_stages", stages=len(stages), pp=self.pp))
        vpp = len(stages) // self.pp
        if self.vpp not in (1, vpp):
            raise SpecError(say("ec_pp_layout_vpp", vpp=self.vpp, stages=len(stages), pp=self.pp, derived=vpp))
        if self.pp_split_embedding or self.pp_split_loss or self.fsdp != Fsdp.NONE or self.pp_schedule == "zb":
            raise SpecError(say("ec_layout_pp_layout_split"))
        if vpp > 1:  # frozen: set as the constructor would have been told
            object.__setattr__(self, "vpp", vpp)
            object.__setattr__(self, "pp_schedule", "interleaved")

    @cached_property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @cached_property
    def model_parallel(self) -> int:
        """GPUs that hold one copy of the model between them: tp x pp x cp."""
        return self.tp * self.pp * self.cp

    @property
    def dp(self) -> int:
        """Data-parallel size: the model copies, each fed its own micro-batches."""
        return self.gpus // self.model_parallel

    @cached_property
    def is_3d(self) -> bool:
        """A model-parallel layout (estimate/parallel3d.py), not data parallelism alone."""
        return self.model_parallel > 1 or self.ep > 1

    @cached_property
    def engine(self) -> str:
        if self.is_3d:  # the stacks that run these layouts: Megatron-LM (its own optimizer) or torchtitan (FSDP2)
            return "torchtitan" if self.fsdp != Fsdp.NONE else "megatron"
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
        if self.is_3d:
            parts.append(" ".join(f"{k.upper()} {v}" for k, v in (("tp", self.tp), ("pp", self.pp), ("cp", self.cp),
                                                                  ("ep", self.ep)) if v > 1)
                         + (f" (vpp {self.vpp})" if self.vpp > 1 else ""))
        if self.fsdp != Fsdp.NONE:
            parts.append(f"FSDP {self.fsdp.value}")
        elif self.zero_stage:
            parts.append(f"ZeRO-{self.zero_stage}")
        elif self.gpus > 1:
            parts.append("DDP")
        if self.offload != Offload.NONE:
            parts.append(f"offload {self.offload.value}")
        return ", ".join(parts)


Strategy = _declared(_Strategy, "strategy")


def combination_problem(t: TrainingSpec, s: Strategy) -> str | None:
    """Why a training setting cannot run under an engine, or None (the rules of one setting alone are checked
    when the TrainingSpec is made)."""
    if t.optimizer_in_backward and s.engine == "deepspeed":
        return say("pl_rule_oib_deepspeed")
    if t.optimizer_in_backward and s.engine == "ddp":
        return say("pl_rule_oib_ddp")
    if t.paged_optimizer and s.engine == "deepspeed":
        return say("pl_rule_paged_deepspeed")
    return None


DEFAULT_SEQ_LEN = 2048


def default_seq_len(max_positions: int | None) -> tuple[int, str | None]:
    """The sequence length when none is given: 2048, capped at the model's positions (BERT: 512), with a note
    when capped. The one place this default lives (CLI, API, plan and generate all come here)."""
    if max_positions and max_positions < DEFAULT_SEQ_LEN:
        from ..i18n import say

        return max_positions, say("es_seq_len_default", n=max_positions, default=DEFAULT_SEQ_LEN)
    return DEFAULT_SEQ_LEN, None


def stack_refuses(model_code: str, method: Method, ckpt: GradCkpt, s: Strategy,
                  framework: str | None = None) -> str | None:
    """Why a training stack's own scripts do not run a layout (plan --framework), or None. LitGPT's finetune scripts
    (litgpt 0.4.13 finetune/full.py, lora.py, adapter.py; lora.py in 0.5.13 likewise) run one device with Fabric's
    strategy "auto" and no activation checkpointing, or several under FSDP (FSDPStrategy, full shard, every Block
    checkpointed, cpu_offload=False; 0.5.13: fully_shard with a checkpoint_wrapper per Block), and refuse --quantize
    (QLoRA) on more than one device; none of them runs DeepSpeed. Megatron-LM (`--framework megatron`) trains full
    models under its own data parallelism, optionally with its distributed optimizer (optimizer states sharded:
    ZeRO-1's layout), not DeepSpeed ZeRO-2/3, FSDP or offload; LoRA is NeMo's, not Megatron-LM's. `plan --framework`
    leaves such layouts out; `estimate` warns (estimate/core.py run_estimate)."""
    if framework == "megatron":
        if method != Method.FULL:
            return say("pl_megatron_full")
        if s.zero_stage > 1 or s.fsdp != Fsdp.NONE or s.offload != Offload.NONE:
            return say("pl_megatron_shards")
        return None
    if model_code != "litgpt":
        return None
    if s.gpus == 1:
        if s.zero_stage or s.fsdp != Fsdp.NONE or s.offload != Offload.NONE:
            return say("pl_litgpt_one_device")
        if ckpt != GradCkpt.NONE:
            return say("pl_litgpt_one_device_ckpt")
        return None
    if method == Method.QLORA:
        return say("pl_litgpt_qlora")
    if s.fsdp != Fsdp.FULL_SHARD or s.zero_stage or s.offload != Offload.NONE:
        return say("pl_litgpt_fsdp")
    if ckpt != GradCkpt.FULL:
        return say("pl_litgpt_fsdp_ckpt")
    return None


def require_runnable_checkpointing(grad_ckpt: Any, selective_ac: Any, what: str) -> None:
    """train.py (and the trace and bench, which run its code) checkpoints the attention core under selective
    checkpointing (train/runner.py selective_attention); torchtitan's per-op and per-layer policies are estimated,
    not run."""
    from ..errors import GenerateError

    ckpt = getattr(grad_ckpt, "value", grad_ckpt)
    if ckpt == "selective" and selective_ac not in (None, "attention"):
        raise GenerateError("gen_e_selective_ac", what=what, policy=selective_ac)


def resolve_job_defaults(values: dict, model=None, inputs: dict | None = None) -> tuple[dict, list[str]]:
    """The defaults of a job that depend on the model, the training stack or the data, resolved in one place (CLI,
    API, plan and generate come here): the stack's defaults (param_dtype, how it prepares a QLoRA model), the task
    (classification for encoders, else sft), the sequence length (--max-len, else 2048 capped at the model's
    positions) and variable-length data (--avg-len or --data: spec/lengths.py). Returns the completed values and
    notes on what was resolved."""
    from ..catalog.frameworks import framework_defaults, stack_param_dtype
    from .lengths import variable_lengths

    out, notes, inputs = dict(values), [], inputs or {}
    stack = framework_defaults().get(inputs.get("framework") or "", {})
    out.setdefault("param_dtype", stack_param_dtype(stack, out.get("method")))
    out.setdefault("kbit_fp32_upcast", bool(stack.get("kbit_fp32_upcast", True)))
    out.setdefault("kbit_keeps_inputs", bool(stack.get("kbit_keeps_inputs", False)))
    out.setdefault("model_code", str(stack.get("model_code", "hf")))
    out.setdefault("loss_impl", str(stack.get("loss_impl", "hf")))  # torchtune: its chunked output and loss
    if out.get("lora_dropout") is None:
        out["lora_dropout"] = float(stack.get("lora_dropout", 0.0))
    if out.get("selective_ac") is None:  # what the stack's selective checkpointing recomputes (torchtitan: op)
        out["selective_ac"] = str(stack.get("selective_ac", "attention"))
    out.setdefault("fused_softmax", bool(stack.get("fused_softmax", False)))  # Megatron-LM's masked-softmax fusion
    if stack.get("offload_checkpoints") and out.get("grad_ckpt") is not None and "offload_activations" not in out:
        # the stack's checkpointing keeps its checkpoints in host memory (Unsloth: frameworks.yaml)
        out["offload_activations"] = GradCkpt.parse(out["grad_ckpt"], "grad_ckpt") == GradCkpt.FULL
    if out.get("task") is None:
        out["task"] = Task.CLASSIFICATION if model is not None and model.is_encoder else Task.SFT
    max_len = inputs.get("max_len")
    if max_len is not None:
        if out.get("seq_len") is not None and out["seq_len"] != max_len:
            raise SpecError(f"--max-len {max_len} and --seq-len {out['seq_len']} name the same length: give one")
        out["seq_len"] = max_len
    if out.get("seq_len") is None:
        out["seq_len"], note = default_seq_len(model.max_sequence if model is not None else None)
        if note:
            notes.append(note)
    resolve_data_layout(out, inputs.get("data"), model)
    return out, notes


def data_layout_for(task: "Task", given: str | None, lengths_given: bool) -> str:
    """The data layout given, checked against the task, or the default (see resolve_data_layout)."""
    from .job import PACKED, PADDED_BATCH

    if given == PACKED and task in (Task.DPO, Task.CLASSIFICATION):
        raise SpecError(say("ei_packed_task", task=task.value))
    return given or (PADDED_BATCH if lengths_given or task in (Task.DPO, Task.CLASSIFICATION) else PACKED)


def resolve_data_layout(out: dict, data: str | None, model=None) -> None:
    """The data layout (spec/job.py data_layout) and what it makes of the lengths, in place.

    Not given: padded-batch when the lengths are given (--avg-len / --data: the training stacks pad each micro-batch
    unless told to pack) and for DPO and classification (pairs and labelled samples are not packed), else packed.
    packed: the lengths are read for what they say, the sequences are seq-len blocks (no padding, fixed length);
    padded-batch: each micro-batch at its longest sample (spec/lengths.py), memory at the longest (--data: the
    longest the file holds); padded-max: every sample at seq-len, the mean counting as the tokens that count."""
    from .job import PACKED, PADDED_MAX
    from .lengths import variable_lengths

    task = Task.parse(out["task"], "task")
    given_lengths = out.get("avg_len") is not None or data is not None
    out["data_layout"] = layout = data_layout_for(task, out.get("data_layout"), given_lengths)
    if not given_lengths:
        return
    sequences = out.get("micro_batch", 1) * (2 if task == Task.DPO else 1)
    lengths = variable_lengths(out["seq_len"], out.pop("avg_len", None), data, sequences, model)
    if layout == PACKED:  # said with the packed sequences (estimate/core.py _length_assumption)
        from ..i18n import say

        out["lengths_from"] = say("es_len_mean_from", avg=lengths["avg_len"],
                                  src=lengths["lengths_from"] if data else say("es_src_avg_len"))
        return
    if layout == PADDED_MAX:
        lengths.pop("longest", None)
        lengths["padded_len"] = out["seq_len"]
    out["seq_len"] = lengths.pop("longest", out["seq_len"])  # --data: memory at the longest sample it holds
    out.update(lengths)


def training_spec(method: Any = None, task: Any = None, *, model: "ModelSpec | None" = None,
                  **job: Any) -> "TrainingSpec":
    """A TrainingSpec from the declared job fields (spec/job.py) given as keywords (method and task also by
    position), text or values; defaults that depend on the model, the stack or the data resolved in one place."""
    parts = split_keywords(dict(job, method=method, task=task), API)
    if parts["strategy"]:
        raise SpecError(f"training_spec: {', '.join(parts['strategy'])} describe the strategy, not the workload")
    return TrainingSpec(**resolve_job_defaults(parts["training"], model, parts["input"])[0])


def strategy_spec(**job: Any) -> "Strategy":
    """A Strategy from the declared strategy fields as keywords (gpus, nodes, zero, fsdp, offload)."""
    parts = split_keywords(job, API)
    if parts["training"] or parts["input"]:
        raise SpecError(f"strategy_spec: {', '.join(parts['training'] | parts['input'])} describe the workload, "
                        "not the strategy")
    return Strategy(**parts["strategy"])


def job_specs(model: "ModelSpec | None", **job: Any) -> "tuple[TrainingSpec, Strategy, dict]":
    """Both specs from one set of job keywords (the CLI's and the API's), and the inputs they were resolved from
    (framework, max_len, data)."""
    parts = split_keywords(job, API)
    training = TrainingSpec(**resolve_job_defaults(parts["training"], model, parts["input"])[0])
    return training, Strategy(**parts["strategy"]), parts["input"]
