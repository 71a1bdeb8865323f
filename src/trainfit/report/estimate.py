"""An Estimate as a JSON-ready dict and as a rich table (en/zh)."""

from __future__ import annotations

from typing import Any

from ..advise import Alternative, overflow_terms
from ..estimate.core import Estimate
from ..i18n import t as tr
from ..i18n.notes import localize
from ..units import GiB


def _r(x: float, nd: int = 3) -> float:
    return round(float(x), nd)


def config_dict(est: Estimate) -> dict[str, Any]:
    """The job as JSON: every declared field of the workload and the strategy (spec/job.py), and what follows from
    them (GPUs, global batch, engine, instance)."""
    from ..spec.job import API, json_values

    t, s = est.training, est.strategy
    out: dict[str, Any] = {"model": est.model.name, "gpu": est.gpu.id, "gpus": s.gpus,
                           "global_batch": t.micro_batch * t.grad_accum * s.dp}
    out.update(json_values(s, "strategy", API))
    out.update(json_values(t, "training", API))
    out.update({
        "freeze_trainable_layers": int(est.table.shared_view(est.gpu)("freeze_trainable_layers"))
        if t.method.value == "freeze" else None,
        "engine": s.engine, "instance": est.cluster.instance.key if est.cluster.instance else None,
        "framework": est.table.framework,
    })
    if t.variable_length:  # the length micro-batches are padded to (derived from avg_len when the data is not read)
        out["padded_len"] = t.time_len
    return out


def _strategy_fields() -> tuple[str, ...]:
    from ..spec.job import PLAN, through

    return tuple(f.name for f in through(PLAN)) + DERIVED_STRATEGY_FIELDS


# The fields of a job that a plan.json carries in choice.strategy and `generate` turns into train_config.json: the
# declared fields that pass the plan.json door (spec/job.py), and what the estimate derives from them.
DERIVED_STRATEGY_FIELDS = ("global_batch", "engine", "freeze_trainable_layers")
STRATEGY_FIELDS = _strategy_fields()


def strategy_of(est: Estimate) -> dict[str, Any]:
    d = config_dict(est)
    out = {k: d[k] for k in STRATEGY_FIELDS}
    if out["fsdp"] is not None:
        out["zero_stage"] = None
    return out


def uncertainty_of(est: Estimate) -> dict[str, Any] | None:
    """The estimate's error bands and fit probability (trainfit.uncertainty), None without residuals."""
    from ..uncertainty import estimate_uncertainty

    return estimate_uncertainty(est)


def estimate_dict(est: Estimate, alternatives: list[Alternative] | None = None) -> dict[str, Any]:
    mem = est.memory
    unc = uncertainty_of(est)
    out: dict[str, Any] = {
        "config": config_dict(est),
        "model": {"name": est.model.name, "model_type": est.model.model_type, "params": est.split.total,
                  "trainable_params": est.split.trainable, "adapter_params": est.split.adapters,
                  "frozen_params": est.split.frozen, "quantized_params": est.split.quantized,
                  # tanh soft-capping of the attention scores / output logits (Gemma-2), where the model has it
                  **({"attn_logit_softcapping": est.model.attn_softcap} if est.model.attn_softcap else {}),
                  **({"final_logit_softcapping": est.model.final_softcap} if est.model.final_softcap else {})},
        "gpu": {"id": est.gpu.id, "name": est.gpu.name, "memory_gb": est.gpu.memory_gb,
                "unverified": list(est.gpu.unverified)},
        "memory_gib": mem.gib(),
        "memory_detail_gib": {k: _r(v / GiB) for k, v in sorted(mem.detail.items())},
        "memory_kinds_gib": {"allocated": _r(mem.allocated / GiB), "reserved": _r(mem.reserved / GiB),
                             "device": _r(mem.device / GiB)},
        "peak_phase": mem.peak_phase,
        "phases_gib": {p.name: _r(p.total / GiB) for p in mem.phases},
        "gpu_memory_gib": _r(mem.usable / GiB),
        "fits": mem.fits,
        "fit_probability": unc["fit_probability"] if unc else None,
        "uncertainty": ({k: v for k, v in unc.items() if k != "fit_probability"} if unc else None),
        "headroom_gib": _r((mem.usable - mem.device) / GiB),
        "step_time_s": _r(est.step_time_s, 4),
        "tokens_per_step": est.tokens_per_step,
        "tokens_per_s": _r(est.tokens_per_s, 1),
        "tokens_per_s_per_gpu": _r(est.tokens_per_s_per_gpu, 1),
        "mfu": _r(est.mfu, 4),
        "bottleneck": est.bottleneck,
        "time_s": {k: _r(v, 5) for k, v in est.time.parts.items()},
        "time_bound_s": {k: _r(v, 5) for k, v in est.time.bound.items()},
        "flops_per_micro_batch": {k: float(f"{v:.4g}") for k, v in est.flops.as_dict().items()},
        "regime": {"activation_bytes": mem.regime.act, "weight_bytes": mem.regime.weight,
                   "autocast": mem.regime.autocast},
        "efficiencies": est.efficiencies,
        "warnings": list(est.warnings),
        "assumptions": list(est.assumptions),
    }
    if not mem.fits:
        out["does_not_fit"] = {"terms": overflow_terms(est),
                               "alternatives": [a.to_dict() for a in (alternatives or [])]}
    return out


def render_estimate(est: Estimate, lang: str, alternatives: list[Alternative] | None = None):
    """A rich renderable group for the terminal."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from .tables import fit

    mem = est.memory
    s = est.strategy
    title = (f"{est.model.name} · {est.training.method.value} · {est.training.task.value} · "
             f"seq {est.training.seq_len} × mb {est.training.micro_batch} · {est.gpu.name} · {s.label()}")
    verdict = Text(f"{tr('fits', lang) if mem.fits else tr('does_not_fit', lang)}: "
                   f"{mem.device / GiB:.1f}{_band_text(uncertainty_of(est), 'memory_gib', '.1f')} / "
                   f"{mem.usable / GiB:.1f} GiB{_likely_text(uncertainty_of(est), lang)}",
                   style="bold green" if mem.fits else "bold red")
    phase = tr("phase_" + mem.peak_phase, lang)
    table = Table(title=tr("memory_per_gpu", lang) + f" ({tr('peak_phase', lang)} {phase})")
    table.add_column(tr("part", lang))
    table.add_column(tr("gib", lang), justify="right")
    for part in ("weights", "gradients", "optimizer", "activations", "logits", "other"):
        table.add_row(tr(part, lang), f"{mem.parts[part] / GiB:.2f}")
    table.add_row(Text(tr("total", lang), style="bold"), Text(f"{mem.device / GiB:.2f}", style="bold"))
    table.add_row(tr("usable", lang), f"{mem.usable / GiB:.2f}")
    speed = Table(title=tr("speed", lang))
    speed.add_column("")
    speed.add_column("", justify="right")
    speed.add_row(tr("step_time", lang), f"{est.step_time_s:.3f} s")
    speed.add_row(tr("tokens_per_s", lang),
                  f"{est.tokens_per_s:,.0f}{_band_text(uncertainty_of(est), 'tokens_per_s', ',.0f')}")
    speed.add_row(tr("tokens_per_s_per_gpu", lang), f"{est.tokens_per_s_per_gpu:,.0f}")
    speed.add_row(tr("mfu", lang), f"{est.mfu:.1%}")
    speed.add_row(tr("bottleneck", lang), tr(est.bottleneck, lang))
    params = Text(f"{tr('params', lang)}: {est.split.total:,} · {tr('trainable', lang)}: {est.split.trainable:,}")
    items: list = [Text(title, style="bold"), params, verdict]
    unc = uncertainty_of(est)
    if unc and unc.get("band"):
        items.append(Text("(" + tr("band_" + unc["band"], lang).format(fw=unc.get("framework")) + ")", style="dim"))
    items += [fit(table), fit(speed)]  # laid out for the width: never a value cut (report/tables.py)
    if not mem.fits:
        items += [Text("· " + localize(line, lang), style="red") for line in overflow_terms(est)]
    if alternatives:  # it does not fit, or fits above the out-of-memory risk plan and compare accept
        alt = Table(title=tr("what_fits", lang))
        alt.add_column(tr("change_col", lang), overflow="fold")  # flags: may wrap at spaces
        alt.add_column("GiB", justify="right")
        alt.add_column("tokens/s", justify="right")
        for a in alternatives:
            alt.add_row(localize(a.change, lang), f"{a.estimate.memory.device / GiB:.1f}", f"{a.estimate.tokens_per_s:,.0f}")
        items.append(fit(alt))
    if est.warnings:
        items.append(Text(tr("warnings", lang) + ":\n" + "\n".join(f"  ! {localize(w, lang)}" for w in est.warnings),
                          style="yellow"))
    items.append(Text(tr("assumptions", lang) + ":\n" + "\n".join(f"  - {localize(a, lang)}" for a in est.assumptions),
                      style="dim"))
    effs = ", ".join(f"{k}={v['value']:g}" for k, v in sorted(est.efficiencies.items()))
    items.append(Text(f"{tr('efficiencies', lang)}: {effs}", style="dim"))
    if est.gpu.unverified:
        items.append(Text(f"{est.gpu.id} {tr('unverified', lang)}: {', '.join(est.gpu.unverified)}", style="yellow"))
    return Group(*items)


def _band_text(unc: dict | None, key: str, fmt: str) -> str:
    """The text " (low–high)" of a band, or "" without one."""
    band = (unc or {}).get(key)
    return f" ({band['low']:{fmt}}–{band['high']:{fmt}})" if band else ""


def _likely_text(unc: dict | None, lang: str) -> str:
    p = (unc or {}).get("fit_probability")
    return "" if p is None else ", " + tr("fit_likely", lang).format(p=f"{p:.0%}")
