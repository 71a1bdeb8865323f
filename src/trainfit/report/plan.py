"""A Plan as JSON, as a rich table (en/zh), and as the plan.json that `trainfit generate` consumes."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from typing import Any

from ..catalog.models import all_models, local_config
from ..catalog.prices import STALE_DAYS, provenance
from ..i18n import t as tr
from ..plan import Plan, hours_cost_band
from ..search.run import Candidate, headroom_gib
from ..units import GiB
from ..i18n.notes import localize
from .estimate import strategy_of

PLAN_FORMAT_VERSION = 1
PLAN_ASSUMPTIONS = ("plan_memory_headroom_fraction", "startup_hours", "checkpoint_interval_hours",
                    "checkpoint_write_gbytes_per_s")


def strategy_dict(c: Candidate) -> dict[str, Any]:
    return strategy_of(c.estimate)


def candidate_dict(c: Candidate, plan: Plan, rank: int | None = None, why: list[str] | None = None) -> dict[str, Any]:
    e, o = c.estimate, c.offer
    out: dict[str, Any] = {}
    if rank is not None:
        out["rank"] = rank
    out.update({
        "provider": o.instance.provider, "instance_type": o.instance.instance_type, "gpu": e.gpu.id,
        "gpus_per_node": e.strategy.gpus_per_node, "gpus_per_instance": o.gpu_count, "nodes": e.strategy.nodes,
        "strategy": strategy_dict(c), "memory_gib": round(e.memory.device / GiB, 2),
        "gpu_memory_gib": round(e.memory.usable / GiB, 2), "headroom_gib": round(headroom_gib(c), 2),
        "fits": e.fits, "oom_risk": None if c.oom_risk is None else round(c.oom_risk, 3),
        "tokens_per_s": round(e.tokens_per_s, 1),
        "tokens_per_s_per_gpu": round(e.tokens_per_s_per_gpu, 1), "mfu": round(e.mfu, 4),
        "step_time_s": round(e.step_time_s, 4), "hours": round(c.hours, 3), "train_hours": round(c.train_hours, 3),
        "overhead_hours": round(c.overhead_hours, 3), "billed_hours": round(c.billed_hours, 3),
        "cost": round(c.cost, 2), "currency": plan.currency, "price_per_hour": round(o.price.per_hour, 4),
        "price_currency": o.price.currency, "price_billing": o.price.billing, "region": o.price.region,
        **provenance(o.price), "stock": o.price.stock or None,
        "gpu_inferred": o.instance.gpu_inferred, "interconnect": e.cluster.intra_link,
        "inter_node": e.cluster.inter_link if e.strategy.nodes > 1 else None, "bottleneck": e.bottleneck,
    })
    out["uncertainty"] = hours_cost_band(c)
    if c.spot is not None:
        out["spot"] = {**c.spot.to_dict(), "can_be_reclaimed": True}
    if why is not None:
        out["why"] = why
    return out


def plan_dict(plan: Plan) -> dict[str, Any]:
    req, w, res = plan.request, plan.workload, plan.result
    eff = plan.efficiencies
    rejected = dict(plan.rejected.most_common())
    for reason, count in res.skipped_offers.items():
        rejected[f"instance types skipped: {reason}"] = count
    return {
        "request": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(req).items()},
        "model": {"name": plan.model.name, "params": _params(plan)},
        "workload": {"task": w.task.value, "seq_len": w.seq_len, "global_batch": w.global_batch,
                     "processed_tokens": w.processed_tokens},
        "recommendations": [candidate_dict(c, plan, i + 1, plan.why[i]) for i, c in enumerate(plan.recommendations)],
        "pareto": [candidate_dict(c, plan) for c in plan.pareto],
        "rejected": rejected,
        "binding_constraint": plan.binding,
        "excluded_gpus": plan.excluded,
        "max_oom_risk": res.max_oom_risk,
        "band": _band(plan),
        "rejected_for_risk": [{"gpu": r.gpu, "gpus": r.gpus * r.nodes, "nodes": r.nodes, "method": r.method,
                               "strategy": r.strategy, "micro_batch": r.micro_batch,
                               "memory_gib": round(r.need / GiB, 2), "gpu_memory_gib": round(r.usable / GiB, 2),
                               "oom_risk": round(r.risk, 3),
                               "safe_memory_gib": None if r.safe_need is None else round(r.safe_need / GiB, 2)}
                              for r in plan.too_risky],
        "search": {"candidates": res.candidates, "seconds": round(res.seconds, 4), "estimates": res.estimates,
                   "offers": len(res.offers)},
        "assumptions": list(plan.assumptions) + [
            f"{name} = {eff.describe(name)['default']:g} {eff.describe(name)['unit']}: "
            f"{eff.describe(name)['description'].strip()}" for name in PLAN_ASSUMPTIONS
            if not (name == "plan_memory_headroom_fraction" and res.max_oom_risk is not None)] + _risk_assumption(plan)
        + [
            "billing: " + eff.describe("billing_granularity_s")["basis"].strip(),
            "cost = price per hour x instances x billed hours; prices are catalog snapshots (see price_date)"]
        + _spot_assumptions(plan),
    }


def _band(plan: Plan) -> dict[str, Any]:
    """Which error band the risks and the hours/cost bands were read from (plan --framework)."""
    from ..uncertainty import band_name, framework_known

    fw = plan.efficiencies.framework
    return {"framework": fw, "framework_known": framework_known(fw), "name": band_name(fw, framework_known(fw))}


def _risk_assumption(plan: Plan) -> list[str]:
    res = plan.result
    if res.max_oom_risk is None:
        return []
    band = _band(plan)
    which = (f"the band of {band['framework']} (--framework)" if band["framework_known"] else
             "the wider band of a training stack the calibration has not seen (--framework NAME narrows it)")
    return [f"memory: an option is kept when its out-of-memory risk is at most {res.max_oom_risk:.0%} (--max-oom-risk), "
            "the risk read from leave-one-source-out residuals of peak memory (trainfit calibrate --cv source), "
            + which]


def _spot_assumptions(plan: Plan) -> list[str]:
    if plan.request.pricing != "spot":
        return []
    eff = plan.efficiencies
    return [f"{name} = {eff.describe(name)['default']:g} {eff.describe(name)['unit']} ({eff.describe(name)['basis']})"
            .replace("\n", " ") for name in ("spot_mtbi_hours", "spot_restart_hours")] + [
        "spot instances can be reclaimed at any time; checkpoint interval sqrt(2 x checkpoint time x MTBI) "
        "(Young 1974), each interruption costs the work since the last checkpoint plus a restart"]


def _params(plan: Plan) -> int:
    from ..estimate.params import count_params

    return count_params(plan.model, "none" if plan.model.is_encoder else "lm")


def plan_file(plan: Plan) -> dict[str, Any]:
    """plan.json: everything `trainfit generate` needs to write a runnable setup, without further flags."""
    if not plan.recommendations:
        raise ValueError("no recommendation to write")
    best = plan.recommendations[0]
    preset = all_models().get(plan.model.name)
    return {
        "trainfit_plan_version": PLAN_FORMAT_VERSION,
        "model": {"name": plan.model.name, "hf_id": preset.hf_id if preset else None,
                  "source": plan.request.model,
                  "hf_config": preset.hf_config if preset else local_config(plan.request.model)},
        "workload": {"task": plan.workload.task.value, "seq_len": plan.workload.seq_len,
                     "global_batch": plan.workload.global_batch, "processed_tokens": plan.workload.processed_tokens,
                     "epochs": plan.request.epochs},
        "choice": candidate_dict(best, plan, 1, plan.why[0]),
        "alternatives": [candidate_dict(c, plan, i + 2) for i, c in enumerate(plan.recommendations[1:])],
    }




def write_plan(plan: Plan, out_dir: str) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "plan.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(plan_file(plan), fh, ensure_ascii=False, indent=2)
        fh.write("\n")
    os.replace(tmp, path)
    return path


def _money(x: float, currency: str) -> str:
    return f"¥{x:,.0f}" if currency == "CNY" else f"${x:,.0f}"


def _where(c: Candidate) -> str:
    """'2 x gn7e-c16g1.4xlarge* (a100-sxm4-80gb x2) cn-beijing 2024-12-30†'; * = GPU inferred or price unverified,
    † = price older than STALE_DAYS."""
    e, p = c.estimate, c.offer.price
    nodes = f"{e.strategy.nodes} x " if e.strategy.nodes > 1 else ""
    flag = "*" if p.unverified or c.offer.instance.gpu_inferred else ""
    stale = "†" if provenance(p)["price_stale"] else ""
    billing = {"payg": "", "spot": " spot", "subscription_month": " monthly"}[p.billing]
    return (f"{nodes}{c.offer.instance.instance_type.removeprefix('ecs.')}{flag} ({e.gpu.id} x{e.strategy.gpus})"
            f"{billing} · {p.region} {p.price_date}{stale}")


def _settings(c: Candidate) -> str:
    d = strategy_dict(c)
    engine = {"single": "1 GPU", "ddp": "DDP"}.get(d["engine"], c.estimate.strategy.label().split(", ", 1)[-1])
    ckpt = "" if d["grad_ckpt"] == "none" else f", ckpt {d['grad_ckpt']}"
    return f"{d['method']}, {engine}{ckpt}, {d['precision']}, mb {d['micro_batch']}x{d['grad_accum']}"


def render_plan(plan: Plan, lang: str):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    req, w = plan.request, plan.workload
    head = (f"{plan.model.name} · {w.task.value} · {w.processed_tokens / 1e9:,.2f}B tokens processed · "
            f"seq {w.seq_len} · global batch {w.global_batch}"
            + (f" · deadline {req.deadline / 3600:,.0f} h" if req.deadline else "")
            + (f" · budget {_money(req.budget, plan.currency)}" if req.budget else "")
            + f" · objective {req.objective}")
    items: list = [Text(head, style="bold")]
    if plan.recommendations:
        table = Table(title=tr("recommendations", lang))
        for col in ("#", tr("instance_col", lang), tr("settings", lang), "GiB", "tok/s", tr("hours", lang),
                    tr("cost", lang)):
            table.add_column(col, overflow="fold", justify="right" if col in ("GiB", "tok/s") else "left")
        for i, c in enumerate(plan.recommendations):
            band = hours_cost_band(c)
            hours = f"{c.hours:,.1f}" + (f" ({band['hours']['low']:,.1f}–{band['hours']['high']:,.1f})" if band else "")
            cost = _money(c.cost, plan.currency) + (f" ({_money(band['cost']['low'], plan.currency)}–"
                                                    f"{_money(band['cost']['high'], plan.currency)})" if band else "")
            table.add_row(str(i + 1), _where(c), _settings(c), f"{c.estimate.memory.device / GiB:,.1f}",
                          f"{c.estimate.tokens_per_s:,.0f}", hours, cost)
        items.append(table)
        # (the sentences below are written in English by the search; localize() gives their Chinese form)
        if req.pricing == "spot":
            items.append(Text(tr("spot_warning", lang), style="bold yellow"))
            for i, c in enumerate(plan.recommendations[:3]):
                if c.spot is not None:
                    items.append(Text(f"#{i + 1} " + tr("spot_line", lang).format(**c.spot.to_dict()), style="yellow"))
        for i, lines in enumerate(plan.why[:3]):
            items.append(Text(f"#{i + 1} " + tr("why", lang) + ":\n"
                              + "\n".join(f"   - {localize(x, lang)}" for x in lines)))
    else:
        b = plan.binding or {}
        items.append(Text(f"{tr('no_plan', lang)} ({tr('binding', lang)}: {b.get('constraint')})", style="bold red"))
        items.append(Text(b.get("explanation", ""), style="red"))
        if b.get("relax"):
            items.append(Text(tr("relax", lang) + ": " + "; ".join(b["relax"]), style="yellow"))
    if plan.pareto:
        pareto = Table(title=tr("pareto", lang))
        for col in (tr("instance_col", lang), tr("settings", lang), tr("hours", lang), tr("cost", lang)):
            pareto.add_column(col)
        for c in plan.pareto[:8]:
            pareto.add_row(_where(c), _settings(c), f"{c.hours:,.1f}", _money(c.cost, plan.currency))
        items.append(pareto)
    if plan.too_risky:
        from ..plan import risky_text

        items.append(Text(tr("too_risky", lang).format(risk=f"{plan.result.max_oom_risk:.0%}") + ":\n"
                          + "\n".join(f"   {risky_text(r)}" for r in plan.too_risky), style="yellow"))
    if plan.excluded:
        items.append(Text(tr("excluded", lang) + ":\n" + "\n".join(f"   {g}: {r}" for g, r in plan.excluded.items()),
                          style="dim"))
    rej = ", ".join(f"{localize(k, lang)}: {v:,}" for k, v in plan.rejected.most_common(5))
    items.append(Text(tr("searched_line", lang).format(n=f"{plan.result.candidates:,}", s=f"{plan.result.seconds:.2f}",
                                                       reasons=rej), style="dim"))
    items.append(Text(tr("assumptions", lang) + ":\n"
                      + "\n".join(f"   - {localize(a, lang)}" for a in plan_dict(plan)["assumptions"]), style="dim"))
    items.append(Text("* " + tr("flag_note", lang), style="dim"))
    items.append(Text(tr("compare_note_stale", lang).format(days=STALE_DAYS), style="dim"))
    return Group(*items)
