"""`validate`: predict measured training runs (validation cases, shared/validation/SCHEMA.md) and report the error
of every prediction — throughput, peak memory by the counter the source used, out-of-memory — per case and as
MAPE / worst case per metric, GPU, method and source. A case that cannot be predicted is skipped with a counted
reason, never a crash.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import replace, dataclass, field
from functools import lru_cache
from typing import Any

from .catalog import get_gpu
from .catalog.efficiency import Efficiencies
from .catalog.frameworks import stack_param_dtype
from . import userfiles, userjson
from .errors import SpecError, TrainfitError
from .estimate.core import Estimate, run_estimate
from .i18n import say
from .spec.cluster import cluster_for
from .spec.model import ModelSpec
from .spec.training import Fsdp, GradCkpt, Offload, OptimizerImpl, Strategy, Task, TrainingSpec
from .units import GiB

# The source group of cases made by tracing one training step (trainfit.trace: the real model code under fake tensors,
# every allocation counted; `trainfit trace --case-out`, `benchmarks/conformance.py --cases-out`). Their truth is
# allocated memory only: no allocator cache, no CUDA context. Every other case is a measured run (published or
# our own `bench`).
TRACE_SOURCE = "trace"

# What a null memory_kind is compared with: the PyTorch allocator's reserved memory (between allocated and
# nvidia-smi, which differ by 1-3 GiB); stated in every report.
NULL_MEMORY_KIND = "reserved"


class Skip(Exception):
    """This case cannot be predicted; the message is the counted reason."""

    @property
    def reason(self) -> str:
        """The counted reason as it was given (a sentence of the message table stays one: str() would copy its
        English)."""
        return self.args[0] if self.args and isinstance(self.args[0], str) else str(self)


@dataclass
class Row:
    id: str
    source: str
    gpu: str
    method: str
    framework: str
    predicted: dict[str, Any] = field(default_factory=dict)
    measured: dict[str, Any] = field(default_factory=dict)
    error: dict[str, float] = field(default_factory=dict)  # absolute percentage errors, as fractions
    from_notes: tuple[str, ...] = ()  # NOTE_FEATURES read from the case's notes
    from_source: tuple[str, ...] = ()  # source_setups.yaml entries applied (how the source says it ran)
    # metric -> (its error, why the measurement contradicts the stated setup): left out of the statistics
    excluded: dict[str, tuple[float, str]] = field(default_factory=dict)
    band: dict[str, tuple[float, float]] = field(default_factory=dict)  # metric -> 80% band of the measured field
    truth: str = "measured"  # "measured" (a run on a GPU) or "trace" (TRACE_SOURCE: allocations of the traced step)

    def pair(self, metric: str) -> tuple[float | None, float | None]:
        """(predicted, measured) of the value `metric` is compared on."""
        key = metric_key(self.measured, metric)
        return (self.predicted.get(key), self.measured.get(key)) if key else (None, None)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "source": self.source, "gpu": self.gpu, "method": self.method,
                "framework": self.framework, "truth": self.truth, "predicted": self.predicted,
                "measured": self.measured,
                "error": {k: round(v, 4) for k, v in self.error.items()}, "from_notes": list(self.from_notes),
                "from_source": list(self.from_source),
                "excluded": {k: {"error": round(e, 4), "reason": why} for k, (e, why) in self.excluded.items()},
                "band": {k: {"low": round(lo, 4), "high": round(hi, 4), "covers": self.covers(k)}
                         for k, (lo, hi) in self.band.items()}}

    def covers(self, metric: str) -> bool | None:
        """Whether the measured value lies inside the metric's band (None without a band)."""
        if metric not in self.band or metric not in self.error:
            return None
        lo, hi = self.band[metric]
        meas = self.pair(metric)[1]
        return meas is not None and lo <= meas <= hi


def source_group(case: dict) -> str:
    src = str(case.get("source") or "unknown").split(";")[0].split(" ")[0]
    return src.replace("github.com/", "")


def truth_of(case: dict) -> str:
    """"trace" for a case of the trace source (TRACE_SOURCE), else "measured"."""
    return TRACE_SOURCE if source_group(case) == TRACE_SOURCE else "measured"


def is_model_parallel_case(case: dict) -> bool:
    """A case run with tensor, pipeline, context or expert parallelism (its "parallel" object says so)."""
    par = case.get("parallel") if isinstance(case, dict) else None
    if not isinstance(par, dict):
        return False
    return any(isinstance(par.get(k), int) and not isinstance(par.get(k), bool) and par[k] > 1
               for k in ("tp", "pp", "cp", "ep"))


def load_cases(paths: list[str]) -> list[dict]:
    cases = []
    for path in paths:
        # read line by line: the file's size checked first (64 MB), each line strict UTF-8 without NUL bytes
        for n, line in userfiles.iter_user_lines(path, "JSONL file of cases", userjson.MAX_BYTES):
            if line.strip():
                cases.append(userjson.loads(line, f"{path}:{n}"))
    return cases


# ---- a case -> trainfit's specs ---------------------------------------------------------------------------------

def _model(case: dict) -> ModelSpec:
    hf = dict((case.get("model") or {}).get("hf_config") or {})
    # the names transformers' configs give these two (GPT-2: n_embd / n_layer, T5-style: d_model / num_layers)
    if not any(hf.get(k) for k in ("hidden_size", "n_embd", "d_model")) \
            or not any(hf.get(k) for k in ("num_hidden_layers", "n_layer", "num_layers")):
        raise Skip(say("va_skip_arch"))
    hf = {k: v for k, v in hf.items() if v is not None}
    if "max_position_embeddings" not in hf and hf.get("position_embedding") == "learned":
        raise Skip(say("va_skip_arch"))
    name = str(case["model"].get("name", "case"))
    try:
        return ModelSpec.from_hf_config(hf, name=name)
    except SpecError as exc:
        if "is not supported" not in str(exc):
            raise Skip(say("va_skip_config_invalid")) from None
    try:  # a type without a hand-written family (MoE runs: qwen3_moe, deepseek_v3, ...): the generic reader
        from .catalog.models import spec_from_config

        return spec_from_config(hf, name=name)
    except SpecError:
        raise Skip(say("va_skip_type")) from None


def framework_defaults() -> dict[str, dict]:
    from .catalog.frameworks import framework_defaults as defaults

    return defaults()


# the CUDA context a source measured itself, in its case's notes (read by `note_cuda_context_gib`)
CUDA_CONTEXT_NOTE = re.compile(r"includes ~(?P<gib>\d+(?:\.\d+)?) GB CUDA context")

# Settings the schema has no field for, stated in a case's `notes` in fixed words (shared/validation's
# conventions). Each is applied as the trainfit setting it names; a row lists the ones it read.
# "... 500W power limit": the power limit a case's GPUs ran under (`note_power_limit_w`)
POWER_LIMIT_NOTE = re.compile(r"\b(\d{2,4})\s?W power limit", re.I)

NOTE_FEATURES: dict[str, re.Pattern] = {
    # Qwen's "LoRA (emb)": PEFT modules_to_save=["wte", "lm_head"] beside the adapters
    "lora_saves_embeddings": re.compile(r"embedding and output layers are also trained in full", re.I),
    # torchtune's optimizer_in_bwd=True: each parameter steps during backward and frees its gradient
    "optimizer_in_backward": re.compile(r"\boptimizer_in_bwd\b"),
    # bitsandbytes PagedAdamW / PagedAdamW8bit (HF optim="paged_adamw_8bit")
    "paged_optimizer": re.compile(r"\bpaged_?adamw", re.I),
    # saved activations offloaded to host memory: torchtune's enable_activation_offloading, Unsloth's
    # use_gradient_checkpointing='unsloth' (TrainingSpec.offload_activations)
    "activation_offloading": re.compile(r"activation offloading to CPU on|offloaded gradient checkpointing", re.I),
    # a GPTQ int4 base (Qwen *-Int4): PEFT's prepare_model_for_kbit_training leaves GPTQ models' 16-bit parameters
    "gptq_base": re.compile(r"\bGPTQ\b"),
    # Liger kernels on the model (ms-swift --use_liger_kernel, HF use_liger_kernel; TrainingSpec.liger_kernel)
    "liger_kernel": re.compile(r"\bLiger kernel ON\b"),
    # torch.compile on the model (torchtune's compile=True, torchtitan's --training.compile; TrainingSpec.torch_compile)
    "torch_compile": re.compile(r"\btorch\.compile on\b"),
    # transformers' own AdamW (HF Trainer optim="adamw_hf"; transformers 4.x optimization.py `AdamW.step`): a Python
    # loop over the parameters, i.e. optimizer_impl forloop where the case leaves it null
    "forloop_optimizer": re.compile(r"\badamw_hf\b"),
    # HF Trainer optim="adamw_torch" (the default before transformers picked adamw_torch_fused for torch >= 2.8;
    # training_args.py `default_optim`): torch.optim.AdamW without `fused`, i.e. torch's own default on CUDA,
    # foreach (torch/optim/optimizer.py `_default_to_fused_or_foreach`), where the case leaves optimizer_impl null
    "foreach_optimizer": re.compile(r"\boptim(?:izer)?:? ['\"]?adamw_torch\b"),
    # llm-foundry's attn_impl='triton' (its benchmark tables' default, scripts/train/benchmarking/submit_benchmarks.py):
    # FlashAttention in Triton (llmfoundry/models/layers/flash_attn_triton.py, copied from flash-attention's
    # flash_attn_triton.py), not FlashAttention-2 (TrainingSpec.triton_attention)
    "triton_attention": re.compile(r"\btriton flash-attention kernel", re.I),
    # a CUDA context the source measured on its own machine (the Hugging Face docs print what pynvml sees after one
    # tiny tensor: 1343 MB on their V100, from before CUDA's lazy module loading), used for that case instead of
    # efficiency.yaml's cuda_context_gib (`note_cuda_context_gib`)
    "measured_cuda_context": CUDA_CONTEXT_NOTE,
    # Qwen v1 (remote code, HF model_type 'qwen'; the cases describe it as qwen2): its attention projects q, k and v
    # with one Linear, c_attn (modeling_qwen.py QWenAttention: nn.Linear(hidden_size, 3 * projection_size)), so LoRA
    # adapts one module there and ZeRO-3 fetches one (ModelSpec.fused_qkv)
    "fused_qkv": re.compile(r"HF model_type 'qwen'"),
    # torchtitan's "selective layer" activation checkpointing: selective_ac_option an integer, every N-th block
    # checkpointed in full; its config_manager default was '2' ("2 = checkpoint every other layer": 613bfd0,
    # 4d88a8a), which the docs' tables ran (TrainingSpec.selective_ac "2")
    "selective_layer_ac": re.compile(r"grad ckpt 'selective layer'"),
    # the run's GPUs held under a power limit below the catalog GPU's TDP (torchtitan's Grand Teton H100s: "We used
    # the default 500W power limit", benchmarks/llama3_h100_202412_torchtitan.md): `note_power_limit_w`
    "power_limited": POWER_LIMIT_NOTE,
    # torchtune run with torch.nn.CrossEntropyLoss, not its recipes' CEWithChunkedOutputLoss (TrainingSpec.loss_impl
    # torchtune_fp32): the README's 'Optimization flags' rows are cumulative and those above '+ Chunked Cross
    # Entropy' (README.md L120-123 @1814feb) list no chunked cross-entropy among their techniques; the recipe config
    # llama3_1/405B_qlora set `loss: _component_: torch.nn.CrossEntropyLoss` from its first version (27d103bd, PR
    # #1232) through the 'Memory and training speed' table's commit (L59-60 @30b8519)
    "unchunked_loss": re.compile(r"\A(?!.*\bchunked cross-entropy\b).*\bTechniques are cumulative\b"
                                 r"|\brecipe config llama3_1/405B_qlora\b", re.S),
}


def note_power_limit_w(case: dict) -> float | None:
    """The power limit (W) a case's notes state its GPUs ran under, or None."""
    notes = case.get("notes")
    found = POWER_LIMIT_NOTE.search(notes) if isinstance(notes, str) else None
    return float(found.group(1)) if found else None


def power_limited(case: dict, est: Estimate) -> str | None:
    """Why a measured speed is not the catalog GPU's, or None: the run's GPUs were held under a power limit below
    the catalog GPU's TDP, at which the catalog's peaks (specified at full boost clock) are not reached, and by how
    much no source says (the clock a power limit leaves depends on the load). Memory is still compared."""
    limit, tdp = note_power_limit_w(case), est.gpu.tdp_w
    if limit is None or not tdp or limit >= tdp:
        return None
    return say("va_power_limited", limit=limit, gpu=est.gpu.name, tdp=tdp)


# What a source_setups.yaml entry may set: the case's "parallel" fields `_strategy` reads, and the training settings
# `_training` takes from it (the schema has no field for them)
SOURCE_SETUP_KEYS = {"parallel": {"zero_stage", "fsdp", "offload", "sequence_parallel", "etp", "pp_microbatches",
                                   "ds_reduce_bucket", "grad_reduce_bf16"},
                     "training": {"lora_dropout"}}


@lru_cache(maxsize=1)
def _source_setup_entries() -> tuple[dict, ...]:
    from .catalog._io import read_yaml
    from .errors import CatalogError

    entries = tuple((read_yaml("source_setups.yaml") or {}).get("sources", []))
    for entry in entries:
        for section, allowed in SOURCE_SETUP_KEYS.items():
            unknown = set(entry.get(section) or {}) - allowed
            if unknown:  # a key nothing reads would be listed under from_source without changing the prediction
                raise CatalogError(f"source_setups.yaml {entry.get('name')}: {section} cannot set "
                                   f"{', '.join(sorted(unknown))} (only {', '.join(sorted(allowed))})")
    return entries


def source_setups(case: dict) -> list[dict]:
    """The entries of source_setups.yaml that apply to a case: how its source says it ran what the case leaves null
    (its README or scripts), for its method and layout."""
    src = str(case.get("source") or "")
    t, hw = case.get("training") or {}, case.get("hardware") or {}
    gpus, per_node = hw.get("num_gpus") or 1, hw.get("gpus_per_node") or hw.get("num_gpus") or 1
    out = []
    for entry in _source_setup_entries():
        when = entry.get("when") or {}
        if not src.startswith(entry["source"]):
            continue
        listed = {"method": t.get("method"), "task": t.get("task"),  # a condition naming the values it takes
                  "model_type": ((case.get("model") or {}).get("hf_config") or {}).get("model_type")}
        if any(k in when and v not in when[k] for k, v in listed.items()):
            continue
        if "multinode" in when and (gpus > per_node) != bool(when["multinode"]):
            continue
        if "model_parallel" in when and is_model_parallel_case(case) != bool(when["model_parallel"]):
            continue
        sets = [(section, key) for section in ("training", "parallel") for key in entry.get(section) or {}]
        if any((case.get(section) or {}).get(key) is None for section, key in sets):  # else it changes nothing
            out.append(entry)
    return out


def _from_source(case: dict, section: str) -> dict:
    """What the applying source_setups entries set in one section of a case ("training" or "parallel")."""
    out: dict = {}
    for entry in source_setups(case):
        out.update(entry.get(section) or {})
    return out


def note_cuda_context_gib(case: dict) -> float | None:
    """The CUDA context a case's notes say its source measured, in GiB (the docs' 'MB' are MiB, so their rounded 'GB'
    is read as GiB), or None."""
    notes = case.get("notes")
    hit = CUDA_CONTEXT_NOTE.search(notes) if isinstance(notes, str) else None
    return float(hit.group("gib")) if hit else None


@lru_cache(maxsize=64)
def _with_cuda_context(eff: Efficiencies, gib: float) -> Efficiencies:
    return eff.with_overrides({"cuda_context_gib": gib}, origin="the case's measured CUDA context")


def note_phrases(t: TrainingSpec) -> list[str]:
    """The notes that state `t`'s settings the schema has no field for, in the words NOTE_FEATURES reads (so a
    `trainfit bench` case predicts as it ran)."""
    out = []
    if t.is_peft and set(t.modules_to_save) == {"embed_tokens", "lm_head"}:  # also in training.modules_to_save
        out.append("LoRA (emb) variant: the embedding and output layers are also trained in full")
    if t.optimizer_in_backward:
        out.append("optimizer_in_bwd (each parameter steps during backward)")
    if t.paged_optimizer:
        out.append("paged_adamw states (bitsandbytes managed memory)")
    if t.torch_compile:
        out.append("torch.compile on")
    if t.liger_kernel:
        out.append("Liger kernel ON (fused linear cross-entropy, RMSNorm, SwiGLU, RoPE)")
    if t.offload_activations:
        out.append("Activation offloading to CPU on (saved activations offloaded to host memory)")
    if t.gptq_base:
        out.append("Q-LoRA on a GPTQ int4 base")
    if t.triton_attention:
        out.append("attention 'triton flash-attention kernel' (FlashAttention in Triton)")
    if t.grad_ckpt == GradCkpt.SELECTIVE and t.selective_ac == "2":
        out.append("grad ckpt 'selective layer' (every second block checkpointed)")
    return out


def note_features(case: dict) -> tuple[str, ...]:
    """The NOTE_FEATURES a case's notes state."""
    notes = case.get("notes")
    if not isinstance(notes, str):
        return ()
    return _features_of(notes)


@lru_cache(maxsize=4096)
def _features_of(notes: str) -> tuple[str, ...]:
    """Memoised on the text: calibration validates the same cases thousands of times (its fit's every step)."""
    return tuple(name for name, pattern in NOTE_FEATURES.items() if pattern.search(notes))


def _training(case: dict, m: ModelSpec) -> TrainingSpec:
    """The case's "training" object read through the job declaration (spec/job.py, the case door); what the schema
    has no field for comes from the case's framework (frameworks.yaml) and its notes (NOTE_FEATURES)."""
    from .spec.job import BY_NAME, CASE, fields_of

    t = case.get("training") or {}
    defaults = framework_defaults().get(str(t.get("framework")), {})
    if not t.get("seq_len") or not t.get("micro_batch"):
        raise Skip(say("va_skip_seq"))
    values = {}
    for f in fields_of("training", CASE):
        raw = t.get(f.name)
        if raw is None:
            continue
        try:
            values[f.name] = f.convert(raw)
        except SpecError:
            name = say("va_w_optimizer") if f.name == "optimizer" else f.name.replace("_", "-")  # a word in zh
            raise Skip(say("va_skip_unsupported", name=name)) from None
    values.setdefault("task", Task.CLASSIFICATION if m.is_encoder else Task.PRETRAIN)
    values.setdefault("param_dtype", stack_param_dtype(defaults, values.get("method")))
    # the stack's own default checkpointing (frameworks.yaml), offloaded to host memory where the stack does that
    stack_ckpt = "grad_ckpt" not in values and bool(defaults.get("grad_ckpt"))
    if stack_ckpt:
        values["grad_ckpt"] = BY_NAME["grad_ckpt"].convert(defaults["grad_ckpt"])
    features = note_features(case)
    gptq = "gptq_base" in features
    values.update(modules_to_save=("embed_tokens", "lm_head") if "lora_saves_embeddings" in features
                  else values.get("modules_to_save", ()),
                  optimizer_in_backward="optimizer_in_backward" in features,
                  paged_optimizer="paged_optimizer" in features,
                  torch_compile="torch_compile" in features, liger_kernel="liger_kernel" in features,
                  offload_activations="activation_offloading" in features or (
                      stack_ckpt and bool(defaults.get("offload_checkpoints", False))),
                  kbit_fp32_upcast=bool(defaults.get("kbit_fp32_upcast", True)) and not gptq,
                  kbit_keeps_inputs=bool(defaults.get("kbit_keeps_inputs", False)) and not gptq,
                  model_code=str(defaults.get("model_code", "hf")),
                  loss_impl="torchtune_fp32" if defaults.get("loss_impl") == "torchtune_chunked"
                  and "unchunked_loss" in features else str(defaults.get("loss_impl", "hf")),
                  lora_dropout=float(_from_source(case, "training").get("lora_dropout",
                                                                        defaults.get("lora_dropout", 0.0))),
                  triton_attention="triton_attention" in features, gptq_base=gptq,
                  fused_softmax=bool(defaults.get("fused_softmax", False)),
                  selective_ac=values.get("selective_ac") or ("2" if "selective_layer_ac" in features else str(
                      defaults.get("selective_ac", "attention"))))
    if "forloop_optimizer" in features and t.get("optimizer_impl") is None:
        values["optimizer_impl"] = OptimizerImpl.FORLOOP
    elif "foreach_optimizer" in features and t.get("optimizer_impl") is None:
        values["optimizer_impl"] = OptimizerImpl.FOREACH
    zero = (case.get("parallel") or {}).get("zero_stage") or _from_source(case, "parallel").get("zero_stage")
    if "fused_qkv" in features and values["loss_impl"] == "hf" and zero:
        # Qwen v1's remote code under DeepSpeed: its loss on the 16-bit logits, no autocast (memory_loss.
        # logits_dtype_items)
        values["loss_impl"] = "logits_dtype"
    values.update(_lengths(t))
    return TrainingSpec(**values)


def _lengths(t: dict) -> dict:
    """seq_len and the variable-length fields of a case: with fixed_length false, seq_len is the cap, max_len (when
    stated) the longest sample the data held (memory is taken there) and avg_len (when stated) the mean (time)."""
    cap = int(t["seq_len"])
    if t.get("fixed_length", True) is not False:
        return {"seq_len": cap}
    longest = int(t.get("max_len") or cap)
    avg = int(t["avg_len"]) if t.get("avg_len") else None
    if not 1 <= longest <= cap or (avg is not None and not 1 <= avg <= longest):
        raise Skip(say("va_skip_varlen_range"))
    return {"seq_len": longest, "variable_length": True, "avg_len": avg,
            "lengths_from": "the case's avg_len / max_len" if avg else ""}


def _strategy(case: dict) -> Strategy:
    hw, par = case.get("hardware") or {}, dict(case.get("parallel") or {})
    for key, value in _from_source(case, "parallel").items():
        if par.get(key) is None:  # only where the case leaves the field null
            par[key] = value
    if par.get("tp") is None and par.get("dp") is None:
        raise Skip(say("va_skip_layout"))
    gpus = hw.get("num_gpus")
    if not gpus:
        raise Skip(say("va_skip_gpus"))
    per_node = min(int(hw.get("gpus_per_node") or min(gpus, 8)), int(gpus))
    if gpus % per_node:
        raise Skip(say("va_skip_nodes"))
    fsdp = par.get("fsdp") or None
    if fsdp in ("no_shard",):
        fsdp = None
    if fsdp == "hybrid_shard":
        fsdp = "full_shard"
    layout = {axis: int(par.get(axis) or 1) for axis in ("tp", "pp", "cp", "ep", "vpp")}
    if layout["vpp"] > 1:
        layout["pp_schedule"] = "interleaved"
    if par.get("sequence_parallel") is not None:
        layout["sequence_parallel"] = bool(par["sequence_parallel"])
    if par.get("etp"):
        layout["etp"] = int(par["etp"])
    if isinstance(par.get("ep_overlap"), bool):
        layout["ep_overlap"] = par["ep_overlap"]
    for key in ("precision_aware_optimizer", "pp_split_embedding", "pp_split_loss", "grad_reduce_bf16"):
        if isinstance(par.get(key), bool):
            layout[key] = par[key]
    if par.get("moe_dispatcher") in ("alltoall", "deepep", "hybridep"):
        layout["moe_dispatcher"] = par["moe_dispatcher"]
    if isinstance(par.get("pp_layout"), str):  # the layout sets the virtual stages (vpp, when given, must agree)
        layout["pp_layout"] = par["pp_layout"]
    return Strategy(gpus_per_node=per_node, nodes=int(gpus) // per_node,
                    ds_reduce_bucket=int(par.get("ds_reduce_bucket") or 0),
                    zero_stage=int(par.get("zero_stage") or 0) if not fsdp else 0,
                    fsdp=Fsdp.parse(fsdp) if fsdp else Fsdp.NONE, offload=Offload.parse(par.get("offload") or "none"),
                    **layout)


def _stage(fn, case: dict, section: str, *args):
    """One part of turning a case into specs; malformed field values become a counted reason."""
    try:
        return fn(case, *args)
    except Skip:
        raise
    except SpecError:
        raise Skip(say("va_skip_unsupported_settings", section=section)) from None
    except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError):
        raise Skip(say("va_skip_malformed", section=section)) from None


# torchtitan under pipeline parallelism splits each rank's local batch into micro-batches of this many sequences
# (JobConfig parallelism.pipeline_parallel_microbatch_size, default 1): the cases state the local batch.
TORCHTITAN_PP_MICROBATCH = 1


def pipeline_micro_batches(case: dict, t: TrainingSpec, s: Strategy) -> TrainingSpec:
    """The micro-batches a pipeline runs per step as the case's stack forms them (torchtitan: the local batch in
    micro-batches of TORCHTITAN_PP_MICROBATCH, or in the count its source's version split it into, source_setups
    `pp_microbatches`: a number, or "pp" for the pipeline degree; Megatron: micro_batch x grad_accum as stated)."""
    framework = (case.get("training") or {}).get("framework")
    if s.pp == 1 or framework != "torchtitan":
        return t
    local = t.micro_batch * t.grad_accum
    count = _from_source(case, "parallel").get("pp_microbatches")
    count = s.pp if count == "pp" else count
    if isinstance(count, int) and not isinstance(count, bool) and 1 <= count <= local and local % count == 0:
        return t.with_(micro_batch=local // count, grad_accum=count)
    if t.micro_batch <= TORCHTITAN_PP_MICROBATCH:
        return t
    return t.with_(micro_batch=TORCHTITAN_PP_MICROBATCH, grad_accum=local // TORCHTITAN_PP_MICROBATCH)


def predict_case(case: dict, eff: Efficiencies) -> Estimate:
    if not isinstance(case, dict):
        raise Skip(say("va_skip_not_object"))
    m = _stage(_model, case, "model")
    if "fused_qkv" in note_features(case) and not m.fused_qkv and m.structure is None:
        m = replace(m, fused_qkv=True)
    t = _stage(_training, case, "training", m)
    s = _stage(_strategy, case, "parallel/hardware")
    t = pipeline_micro_batches(case, t, s)
    try:
        gpu = get_gpu(str((case.get("hardware") or {}).get("gpu")))
    except SpecError:
        raise Skip(say("va_skip_gpu")) from None
    framework = (case.get("training") or {}).get("framework")
    context = note_cuda_context_gib(case)
    if context is not None:
        eff = _with_cuda_context(eff, context)
    if framework and isinstance(framework, str):
        eff = eff.for_framework(framework)
    try:
        view = eff.for_gpu(gpu)
        cluster = cluster_for(gpu, s.gpus_per_node, s.nodes, case_instance(case, gpu), None,
                              view("default_inter_node_gbps") if s.nodes > 1 else None)
        return run_estimate(m, t, s, cluster, eff)
    except SpecError as exc:
        raise Skip(say("va_skip_incompatible", rule=str(exc).split(";")[0][:60])) from None


def case_instance(case: dict, gpu):
    """The catalog instance a case ran on (`hardware.instance`, e.g. "g5.xlarge", with `hardware.provider` where
    two clouds share a name): its links between GPUs and its network between nodes instead of the published runs'
    default fabric. None when the case names none; a name the catalog lacks, or one with another GPU, is a skip."""
    hw = case.get("hardware") or {}
    name = hw.get("instance")
    if not name:
        return None
    from .catalog.instances import get_instance

    try:
        inst = get_instance(str(name), hw.get("provider"))
    except SpecError:
        raise Skip(say("va_skip_instance", instance=str(name)[:60])) from None
    if inst.gpu != gpu.id:
        raise Skip(say("va_skip_instance", instance=str(name)[:60]))
    return inst


# ---- errors -----------------------------------------------------------------------------------------------------

def _ape(pred: float, meas: float) -> float:
    return abs(pred - meas) / meas


def memory_of_kind(est: Estimate, kind: str | None) -> float:
    mem = est.memory
    kind = kind or NULL_MEMORY_KIND
    return {"allocated": mem.allocated, "reserved": mem.reserved, "nvidia-smi": mem.device}.get(kind, mem.reserved)


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or math.isinf(value):
        return None
    return float(value)


def measured_values(case: dict) -> dict[str, Any]:
    """The case's measured values that can be compared (positive numbers, a known memory counter), else None."""
    raw = case.get("measured") or {}
    if not isinstance(raw, dict):
        raw = {}
    meas: dict[str, Any] = {k: _positive(raw.get(k))
                            for k in ("tokens_per_s_per_gpu", "step_time_s", "mfu", "peak_memory_gib")}
    meas["memory_kind"] = raw.get("memory_kind") if raw.get("memory_kind") in ("allocated", "reserved",
                                                                              "nvidia-smi") else None
    meas["oom"] = True if raw.get("oom") is True else None
    return meas


# What no training run measures: a value outside these is a typo or a broken file, and would dominate every error.
_PLAUSIBLE = {"tokens_per_s_per_gpu": (1e-3, 1e8), "step_time_s": (1e-6, 1e6), "mfu": (1e-6, 1.0),
              "peak_memory_gib": (1e-3, 1e4)}


def implausible_measurement(measured: dict) -> str | None:
    """Why a measured value cannot be a real run's (an MFU of 5, 1e-300 tokens/s), or None."""
    for key, (low, high) in _PLAUSIBLE.items():
        value = measured.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value and not low <= value <= high:
            return say("va_skip_implausible", field=key)
    return None


def metric_key(measured: dict, metric: str) -> str | None:
    """The measured field a metric is compared on: peak memory; throughput as tokens/s per GPU where measured,
    else step time; mfu."""
    if metric == "throughput":
        return next((k for k in ("tokens_per_s_per_gpu", "step_time_s") if measured.get(k)), None)
    key = {"memory": "peak_memory_gib", "mfu": "mfu"}[metric]
    return key if measured.get(key) else None


def comparable(case: dict, metric: str) -> bool:
    """Whether `metric` of this case is compared. Variable-length runs process fewer tokens than seq_len x batch:
    their throughput and MFU are compared only when the case states its mean sample length (training.avg_len)."""
    t = case.get("training") or {}
    if metric != "memory" and t.get("fixed_length", True) is False and not t.get("avg_len"):
        return False
    return metric_key(measured_values(case), metric) is not None


# A measured peak is read as inconsistent with its case only when it is below the weights and optimizer states
# the stated setup must keep on the GPU by more than a GB/GiB mix-up could explain (2^30 / 1e9 = 1.074).
GB_GIB_SLACK = GiB / 1e9


def inconsistent_memory(measured_gib: float, est: Estimate) -> str | None:
    """Why a measured peak cannot belong to the stated setup, or None. Every memory counter (allocated, reserved,
    nvidia-smi) holds at least the weights and optimizer states that stay resident through the step."""
    floor = est.memory.resident_states / GiB
    if measured_gib * GB_GIB_SLACK >= floor:
        return None
    return say("va_below_resident", measured=measured_gib, floor=floor)


def _ceiling_peak(est: Estimate) -> tuple[float | None, str]:
    """The fastest dense matmul rate the stated precision can reach on the GPU, and its name: fp8 recipes at the fp8
    peak, fp32 at TF32 where the GPU has it (else its CUDA cores), 16-bit at its own (FP32 accumulate, as PyTorch's
    matmuls run)."""
    p = est.training.precision.value
    dtypes = {"fp8": ("fp8", "bf16"), "fp32": ("tf32", "fp32")}.get(p, (p,))
    peaks = [(est.gpu.peak(d), d) for d in dtypes if est.gpu.peak(d)]
    return max(peaks) if peaks else (None, p)


def inconsistent_throughput(measured: dict, est: Estimate) -> str | None:
    """Why a measured speed cannot belong to the stated setup on one GPU, or None: the matmuls the step must run
    (`StepFlops.matmul_floor`: a causal model's attention at half its full s² work, no elementwise work) would need
    more than the GPU's dense peak of the stated precision. The throughput counterpart of `inconsistent_memory`; a
    figure that is a total over several GPUs, or a run with fewer FLOPs than stated (shorter samples, another
    recipe), shows up here."""
    key = metric_key(measured, "throughput")
    peak, dtype = _ceiling_peak(est)
    if key is None or not peak:
        return None
    if key == "tokens_per_s_per_gpu":
        faster = measured[key] / est.tokens_per_s_per_gpu
    else:
        faster = est.step_time_s / measured[key]
    # a model-parallel layout shares each data-parallel rank's FLOPs among its tp x pp x cp GPUs
    needed = est.flops.matmul_floor * est.training.grad_accum / est.step_time_s * faster / est.strategy.model_parallel
    if needed <= peak:
        return None
    what = say("va_what_tokens" if key == "tokens_per_s_per_gpu" else "va_what_step", v=measured[key])
    return say("va_above_peak", what=what, needed=needed / 1e12, gpu=est.gpu.name, dtype=dtype, peak=peak / 1e12)


def compare(case: dict, est: Estimate, keep_inconsistent: bool = False) -> Row:
    meas = measured_values(case)
    t = case.get("training") or {}
    row = Row(id=str(case.get("id")), source=source_group(case), gpu=est.gpu.id, method=est.training.method.value,
              framework=str(t.get("framework")), from_notes=note_features(case), truth=truth_of(case),
              from_source=tuple(e["name"] for e in source_setups(case)))
    row.predicted = {"tokens_per_s_per_gpu": round(est.tokens_per_s_per_gpu, 2),
                     "step_time_s": round(est.step_time_s, 5), "mfu": round(est.mfu, 4),
                     "peak_memory_gib": round(memory_of_kind(est, meas.get("memory_kind")) / GiB, 3),
                     "memory_kind": meas.get("memory_kind") or NULL_MEMORY_KIND, "fits": est.fits}
    row.measured = {k: meas.get(k) for k in ("tokens_per_s_per_gpu", "step_time_s", "mfu", "peak_memory_gib",
                                              "memory_kind", "oom")}
    exact = {"tokens_per_s_per_gpu": est.tokens_per_s_per_gpu, "step_time_s": est.step_time_s, "mfu": est.mfu,
             "peak_memory_gib": memory_of_kind(est, meas["memory_kind"]) / GiB}  # errors from unrounded values
    for metric in ("throughput", "mfu", "memory"):
        if comparable(case, metric):
            key = metric_key(meas, metric)
            error = _ape(exact[key], meas[key])
            why = None
            if metric != "memory":
                why = power_limited(case, est)
            if not keep_inconsistent and not why:
                why = (inconsistent_memory(meas[key], est) if metric == "memory"
                       else inconsistent_throughput(meas, est))
            if why:
                row.excluded[metric] = (error, why)
            else:
                row.error[metric] = error
    if meas.get("oom"):
        row.error["oom_correct"] = 0.0 if not est.fits else 1.0
    elif meas.get("tokens_per_s_per_gpu") or meas.get("step_time_s"):  # it trained: it fitted
        row.error["ran_fits"] = 0.0 if est.fits else 1.0
    return row


def _stats(values: list[tuple[Row, float]]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "mape": None, "max_ape": None}
    errs = [e for _, e in values]
    worst = max(values, key=lambda x: x[1])
    return {"n": len(errs), "mape": round(sum(errs) / len(errs), 4), "max_ape": round(worst[1], 4),
            "worst_case": worst[0].id}


def _metric(rows: list[Row], key: str) -> dict[str, Any]:
    values = [(r, r.error[key]) for r in rows if key in r.error]
    out = _stats(values)
    out["band_coverage"] = band_coverage(rows, key) if key in ("throughput", "memory") else None
    for attr in ("gpu", "method", "source", "framework"):
        groups: dict[str, list] = defaultdict(list)
        for r, e in values:
            groups[getattr(r, attr)].append((r, e))
        out[f"by_{attr}"] = {g: {k: v for k, v in _stats(vs).items() if k != "worst_case"}
                             for g, vs in sorted(groups.items())}
    return out


def counter_of(row: Row) -> str:
    """The memory counter a row's source measured (memory_kind), or what an unstated one is compared with."""
    return row.measured.get("memory_kind") or f"unstated ({NULL_MEMORY_KIND})"


def by_source_kind(rows: list[Row]) -> dict[str, dict[str, dict[str, Any]]]:
    """Peak-memory errors per source and the counter it measured, each with its truth (measured or trace): the
    trace source beside the published ones."""
    nested: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if "memory" in r.error:
            nested[r.source][counter_of(r)].append((r, r.error["memory"]))
    return {src: {kind: {**_stats(vs), "truth": vs[0][0].truth} for kind, vs in sorted(kinds.items())}
            for src, kinds in sorted(nested.items())}


@dataclass
class Report:
    rows: list[Row]
    skipped: Counter
    cases: int

    def to_dict(self) -> dict[str, Any]:
        """The statistics per metric are of the measured runs; trace cases (an exact count of allocated bytes, not a
        run) have theirs under "trace", and both are side by side in "memory_by_source_kind"."""
        measured = [r for r in self.rows if r.truth != TRACE_SOURCE]
        traced = [r for r in self.rows if r.truth == TRACE_SOURCE]
        oom_rows = [r for r in measured if "oom_correct" in r.error]
        ran_rows = [r for r in measured if "ran_fits" in r.error]
        return {"cases": self.cases, "predicted": len(self.rows), "skipped": dict(self.skipped.most_common()),
                "throughput": _metric(measured, "throughput"), "memory": _metric(measured, "memory"),
                "mfu": _metric(measured, "mfu"),
                "trace": {"predicted": len(traced), "memory": _metric(traced, "memory")} if traced else None,
                "memory_by_source_kind": by_source_kind(self.rows),
                "oom": {"n": len(oom_rows), "correct": sum(1 for r in oom_rows if r.error["oom_correct"] == 0.0)},
                # runs that trained (a measured speed): predicted to fit, or out of memory though they ran
                "ran": {"n": len(ran_rows), "fit": sum(1 for r in ran_rows if r.error["ran_fits"] == 0.0),
                        "predicted_oom": [r.id for r in ran_rows if r.error["ran_fits"] == 1.0]},
                "excluded": [{"id": r.id, "metric": k, "error": round(e, 4), "reason": why}
                             for r in self.rows for k, (e, why) in r.excluded.items()],
                "notes": [say("va_note_null_kind", kind=NULL_MEMORY_KIND),
                          *([say("va_note_trace")] if traced else []),
                          say("va_note_resident"), say("va_note_peak"), say("va_note_power"),
                          say("va_note_throughput"), say("va_note_errors")],
                "rows": [r.to_dict() for r in self.rows]}


def add_bands(row: Row, bands) -> None:
    """The uncertainty bands (trainfit.uncertainty) of a row's compared metrics."""
    from .uncertainty import framework_known, measured_band

    for metric in ("throughput", "memory"):
        key = metric_key(row.measured, metric)
        if metric in row.error and key:
            kind = row.predicted["memory_kind"] if metric == "memory" else None
            b = measured_band(bands, metric, key, row.predicted[key], row.method, kind,
                              framework_known(row.framework))
            if b:
                row.band[metric] = b


def band_coverage(rows: list[Row], metric: str) -> dict[str, Any]:
    """Share of measured values inside their 80% band."""
    hits = [r.covers(metric) for r in rows if r.covers(metric) is not None]
    return {"n": len(hits), "coverage": round(sum(hits) / len(hits), 4) if hits else None, "level": 0.8}


def validate(cases: list[dict], eff: Efficiencies, keep_inconsistent: bool = False, bands=None) -> Report:
    """Every case predicted and compared; with `bands` (trainfit.uncertainty.Bands), each compared value's band."""
    rows: list[Row] = []
    skipped: Counter = Counter()
    seen: set[str] = set()
    for case in cases:
        try:
            case_id = case.get("id") if isinstance(case, dict) else None
            if isinstance(case_id, str) and case_id:
                if case_id in seen:  # the same run twice would weigh twice in every error
                    raise Skip(say("va_skip_duplicate"))
                seen.add(case_id)
            meas = case.get("measured") or {}
            if not any(meas.get(k) for k in ("tokens_per_s_per_gpu", "step_time_s", "peak_memory_gib", "oom")):
                raise Skip(say("va_skip_nothing_measured"))
            why = implausible_measurement(meas)
            if why:
                raise Skip(why)
            if ((case.get("hardware") or {}).get("gpu") or "") == "cpu":
                raise Skip(say("va_skip_cpu"))
            if truth_of(case) == TRACE_SOURCE and meas.get("memory_kind") != "allocated":
                raise Skip(say("va_skip_trace_kind"))
            row = compare(case, predict_case(case, eff), keep_inconsistent)
            if not row.error and not row.excluded:
                raise Skip(say("va_skip_nothing_comparable"))
            if bands is not None and row.truth != TRACE_SOURCE:  # the bands are of runs, not of traced steps
                add_bands(row, bands)
            rows.append(row)
        except Skip as exc:
            skipped[exc.reason] += 1
        except (TrainfitError, KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            skipped[say("va_skip_could_not", error=type(exc).__name__)] += 1
        except Exception as exc:  # noqa: BLE001 - one odd case must never end the run; counted, visible
            skipped[say("va_skip_unexpected", error=type(exc).__name__)] += 1
    return Report(rows, skipped, len(cases))


def mape(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan
