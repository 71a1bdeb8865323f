"""`trace`: exact allocations of one training step of the real model code, on the CPU, with no weights.

Traces a model cut to 2 and 3 blocks and extrapolates each moment of the step linearly to the full depth
(`extrapolate`); `tests/test_trace.py` checks the extrapolation against a full trace and the analytic estimate
against the trace.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import SpecError
from ..i18n import say
from ..spec.model import ModelSpec, is_fast_path
from ..units import GiB
from .tracer import CATEGORIES, Moment, TraceConfig, trace_step

class TraceUnsupported(SpecError):
    """The model's code cannot run under FakeTensorMode."""


# MemTracker category -> the parts of trainfit's memory breakdown
PART_OF = {"Parameter": "weights", "Buffer": "weights", "Gradient": "gradients", "Optstate": "optimizer",
           "Activation": "activations", "Temp": "other", "Other": "other"}


@dataclass
class TraceResult:
    layers: int
    traced_layers: tuple[int, ...]
    moments: dict[str, dict[str, float]]  # moment -> category -> bytes (extrapolated to `layers`)
    peak_moment: str
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def peak(self) -> dict[str, float]:
        return self.moments[self.peak_moment]

    @property
    def total(self) -> float:
        return sum(v for k, v in self.peak.items() if k in CATEGORIES)

    def parts(self) -> dict[str, float]:
        out = {p: 0.0 for p in ("weights", "gradients", "optimizer", "activations", "logits", "other")}
        for cat, value in self.peak.items():
            if cat in PART_OF:
                out[PART_OF[cat]] += value
        return out

    def memory_gib(self) -> dict[str, float]:
        out = {k: round(v / GiB, 3) for k, v in self.parts().items()}
        out["total"] = round(self.total / GiB, 3)
        return out


def _moment_key(name: str, layers: int) -> str:
    """Blocks are named by position from the top of the stack: the first block to run backward is `top`."""
    if not name.startswith("backward:block"):
        return name
    idx = int(name[len("backward:block"):])
    if idx == layers - 1:
        return "backward:top_block"
    if idx == 0:
        return "backward:bottom_block"
    return "backward:middle_block"


def _by_key(moments: dict[str, Moment], layers: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for name, m in moments.items():
        key = _moment_key(name, layers)
        if key == "backward:middle_block":
            continue
        out[key] = {k: float(v) for k, v in m.snapshot.items() if k in CATEGORIES}
    return out


def extrapolate(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]], la: int, lb: int,
                layers: int) -> dict[str, dict[str, float]]:
    """Each moment's bytes are linear in the number of blocks: from traces at la and lb blocks to `layers`."""
    out: dict[str, dict[str, float]] = {}
    for key in a.keys() & b.keys():
        out[key] = {cat: a[key].get(cat, 0.0) + (b[key].get(cat, 0.0) - a[key].get(cat, 0.0)) * (layers - la)
                    / (lb - la) for cat in CATEGORIES}
    return out


def _peak_of(moments: dict[str, dict[str, float]]) -> str:
    return max(moments, key=lambda k: sum(moments[k].values()))


def run_trace(cfg: TraceConfig, layers: int, full: bool = False) -> TraceResult:
    """Trace the step; `full` traces all `layers` blocks (slow for big models), else 2 and 3 blocks."""
    start = time.perf_counter()
    notes = [say("va_tr_unsharded")]
    if cfg.method == "qlora":
        notes.append(say("va_tr_qlora"))
    if cfg.attention == "flash":
        notes.append(say("va_tr_flash"))
    if _has_dropout(cfg.hf_config):
        notes.append(say("va_tr_dropout"))
    la, lb = cfg.depths or (2, 3)
    if full or layers <= lb or la == lb:
        moments = _by_key(_traced(_with_layers(cfg, layers)), layers)
        traced: tuple[int, ...] = (layers,)
    else:
        a = _by_key(_traced(_with_layers(cfg, la)), la)
        b = _by_key(_traced(_with_layers(cfg, lb)), lb)
        moments = extrapolate(a, b, la, lb, layers)
        traced = (la, lb)
    notes += _moe_notes(cfg)
    if cfg.attention != "eager" and _mla(cfg.hf_config):
        from .tracer import SDPA_NOTE

        notes.append(SDPA_NOTE)
    return TraceResult(layers, traced, moments, _peak_of(moments), time.perf_counter() - start, notes)


def _traced(cfg: TraceConfig) -> dict[str, Moment]:
    """trace_step, with any failure of the model's own code under fake tensors turned into one clear line."""
    from ..errors import TrainfitError

    try:
        return trace_step(cfg)
    except TrainfitError:
        raise
    except Exception as exc:  # noqa: BLE001 - third-party model code: custom kernels, data-dependent shapes
        model_type = (cfg.hf_config.get("text_config") or cfg.hf_config).get("model_type", "this model") \
            if isinstance(cfg.hf_config, dict) else "this model"
        text = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
        raise TraceUnsupported(
            f"the trace cannot run {model_type}'s code on fake tensors ({type(exc).__name__}: {text}); this "
            "usually means a custom kernel or a data-dependent shape; the analytic estimate (trainfit estimate) "
            "still applies, without this check") from None


def _has_dropout(hf: dict) -> bool:
    if is_fast_path(hf):
        spec = ModelSpec.from_hf_config({**hf, "num_hidden_layers": 1})
        return spec.attention_dropout > 0 or spec.hidden_dropout > 0
    text = hf.get("text_config") if isinstance(hf.get("text_config"), dict) else hf
    return any(isinstance(text.get(k), (int, float)) and text.get(k) > 0
               for k in ("attention_dropout", "hidden_dropout", "attn_pdrop", "resid_pdrop"))


def _mla(hf: dict) -> bool:
    """Attention whose value head dim differs from the query's (MLA: qk_nope + qk_rope vs v_head_dim)."""
    text = hf.get("text_config") if isinstance(hf.get("text_config"), dict) else hf
    v = text.get("v_head_dim")
    return v is not None and text.get("qk_nope_head_dim") is not None and \
        int(text["qk_nope_head_dim"]) + int(text.get("qk_rope_head_dim") or 0) != int(v)


def _moe_notes(cfg: TraceConfig) -> list[str]:
    from .tracer import ROUTING_NOTE

    return [ROUTING_NOTE] if cfg.balanced_routing else []


def _with_layers(cfg: TraceConfig, layers: int) -> TraceConfig:
    from dataclasses import replace

    return replace(cfg, layers=layers)


def trace_config(est: Any) -> TraceConfig:
    """The TraceConfig matching an Estimate's workload (one GPU's view)."""
    from ..catalog.models import all_models

    m, t = est.model, est.training
    from ..spec.training import require_runnable_checkpointing

    require_runnable_checkpointing(t.grad_ckpt, t.selective_ac, "trace")
    preset = all_models().get(m.name)
    hf = m.extra.get("hf_config") or (preset.hf_config if preset else None)  # the spec's own config first
    if hf is None:
        from ..errors import SpecError

        raise SpecError(f"trace needs the config.json of {m.name}: pass a preset, a config.json or a model directory")
    depths = m.structure.trace_depths() if m.structure is not None else None
    return TraceConfig(hf_config=hf, depths=depths, balanced_routing=m.is_moe, layers=m.layers, method=t.method.value, task=t.task.value, seq_len=t.seq_len,
                       micro_batch=t.micro_batch, precision=t.precision.value if t.precision.value != "fp8" else "bf16",
                       param_dtype=t.param_dtype, grad_ckpt=t.grad_ckpt.value, attention=t.attention.value,
                       lora_rank=t.lora_rank, lora_targets=t.lora_targets, num_labels=t.num_labels,
                       freeze_trainable_layers=2, optimizer=t.optimizer.value, modules_to_save=t.modules_to_save,
                       optimizer_impl=t.optimizer_impl.value, optimizer_in_backward=t.optimizer_in_backward,
                       lora_dropout=t.lora_dropout if t.is_peft else 0.0)


def one_gpu(est: Any) -> Any:
    """The estimate of the same workload on one GPU, unsharded: the view a trace sees."""
    from ..estimate.core import run_estimate
    from ..spec.cluster import cluster_for
    from ..spec.training import Strategy

    if est.strategy.gpus == 1 and est.strategy.engine == "single":
        return est
    return run_estimate(est.model, est.training, Strategy(), cluster_for(est.gpu, 1, 1), est.table)


def compare_with_estimate(est: Any, full: bool = False) -> dict[str, Any]:
    """Trace the workload of `est` (one GPU's view) and put it beside the analytic estimate of the same view."""
    from ..estimate.trainable import NF4_BYTES_PER_PARAM

    single = one_gpu(est)
    cfg = trace_config(est)
    result = run_trace(cfg, est.model.layers, full=full)
    parts = result.parts()
    total = result.total
    saved = 0.0
    if cfg.method == "qlora":  # traced as LoRA on a 16-bit base: put the NF4 storage back
        saved = est.split.quantized * (2.0 - NF4_BYTES_PER_PARAM)
        if est.training.kbit_fp32_upcast and est.training.precision.value != "fp32":
            saved -= (est.split.total - est.split.quantized) * 2.0  # PEFT casts the rest to fp32
        parts["weights"] -= saved
        total -= saved
    analytic = single.memory.allocated
    mem = {k: round(v / GiB, 3) for k, v in parts.items()}
    mem["total"] = round(total / GiB, 3)
    return {
        "memory_gib": mem,
        "traced_bytes": round(total),
        "peak_moment": result.peak_moment,
        "moments_gib": {k: round((sum(v.values()) - saved) / GiB, 3) for k, v in sorted(result.moments.items())},
        "moments": paired_moments({k: sum(v.values()) - saved for k, v in result.moments.items()}, total,
                                  result.peak_moment, single.memory),
        "categories_gib": {k: round(v / GiB, 3) for k, v in result.peak.items()},
        "traced_layers": list(result.traced_layers), "layers": result.layers,
        "extrapolated": result.traced_layers != (result.layers,),
        "seconds": round(result.seconds, 2),
        "estimate": {"memory_gib": _allocated_parts(single.memory),
                     "allocated_gib": round(analytic / GiB, 3), "peak_phase": single.memory.peak_phase,
                     "strategy": "one GPU (the traced view)"},
        "difference": {"allocated_gib": round((analytic - total) / GiB, 3),
                       "percent": round(100.0 * (analytic - total) / total, 2) if total else None},
        "requested_strategy": None if single is est else {
            "label": est.strategy.label(), "memory_gib": est.memory.gib(),
            "note": say("va_tr_no_shard")},
        "notes": result.notes + list(est.model.structure.notes if est.model.structure is not None else ()) + (
            [say("va_tr_paged")] if est.training.paged_optimizer else []) + [say("va_tr_allocated"),
                                                                            say("va_tr_logits")],
    }


# The moments of one step, each as the trace names it (trace_step's phases; a block's backward runs from its backward
# pre-hook until the next block's, so the bottom block's moment also holds the embedding's backward) and as the
# analytic model names it (estimate.memory's phases); where the analytic model splits a traced moment in two, the
# moment's peak is the larger of the two.
MOMENTS = (
    ("forward_end", "forward", ("forward_end",)),
    ("backward_start", "backward:head", ("backward_start", "backward_head")),
    ("backward_top_block", "backward:top_block", ("backward_top_block",)),
    ("backward_end", "backward:bottom_block", ("backward_end", "backward_embedding")),
    ("optimizer_step", "optimizer", ("optimizer",)),
)


def paired_moments(traced: dict[str, float], traced_peak: float, peak_moment: str,
                   memory: Any) -> list[dict[str, Any]]:
    """Trace vs analytic per moment (bytes in, GiB out): forward end, backward start, the top block's backward,
    backward end, the optimizer step, and the peak of each (which may be at different moments)."""
    phases = {p.name: p.total for p in memory.phases}
    out = []
    for moment, trace_name, analytic_names in MOMENTS:
        have = [phases[n] for n in analytic_names if n in phases]
        if trace_name not in traced or not have:
            continue
        analytic = max(have)
        out.append({"moment": moment, "trace": trace_name, "analytic": list(analytic_names),
                    "trace_gib": round(traced[trace_name] / GiB, 3), "analytic_gib": round(analytic / GiB, 3)})
    peak = max(memory.phases, key=lambda p: p.total)
    out.append({"moment": "peak", "trace": peak_moment, "analytic": [peak.name],
                "trace_gib": round(traced_peak / GiB, 3), "analytic_gib": round(peak.total / GiB, 3)})
    return out


def _allocated_parts(memory: Any) -> dict[str, float]:
    """The analytic peak phase by part, without the allocator overhead and CUDA context (what a trace sees)."""
    peak = next(p for p in memory.phases if p.name == memory.peak_phase)
    out = {k: round(v / GiB, 3) for k, v in peak.parts().items()}
    out["total"] = round(peak.total / GiB, 3)
    return out
