"""A Plan as JSON, as a rich table (en/zh), and as the plan.json that `trainfit generate` consumes."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..catalog.models import all_models, local_config
from ..catalog.prices import STALE_DAYS, provenance
from ..i18n import say
from ..i18n import t as tr
from ..i18n.efficiencies import EfficiencyText
from ..plan import Plan, host_ram_gib, hours_cost_band
from ..planfile import VERSION as PLAN_VERSION
from ..search.reasons import Reason, Rejection
from ..search.run import Candidate, headroom_gib
from ..units import GiB
from ..i18n.notes import localize
from .estimate import strategy_of

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
        "host_ram_gib": host_ram_gib(c),
        "framework": e.table.framework,  # the training stack the numbers are for (plan --framework), else null
    })
    out["uncertainty"] = hours_cost_band(c)
    if c.spot is not None:
        out["spot"] = {**c.spot.to_dict(), "can_be_reclaimed": True}
    if why is not None:
        out["why"] = why
    return out


def reason_text(r: Rejection, lang: str) -> str:
    """A search's typed reason (search/reasons.py) in words."""
    if r.reason == Reason.NO_PRICE:
        text = tr("rj_no_price", lang)
        if r.get("region"):
            text += tr("rj_no_price_region", lang).format(region=r.get("region"))
        if r.get("pricing"):
            text += tr("rj_no_price_pricing", lang).format(pricing=r.get("pricing"))
        return text + tr("rj_no_price_sold_out", lang)
    values = dict(r.values)
    if r.reason == Reason.INCOMPATIBLE:
        values["rule"] = localize(values.get("rule", ""), lang)  # a Msg renders from the table
    if r.reason == Reason.LAYOUT:  # parallel3d's typed reason, worded where it is declared
        from ..estimate.parallel3d import Reason as LayoutReason

        rule = values.get("rule")
        values["rule"] = LayoutReason(rule).text(lang) if rule in {r.value for r in LayoutReason} else str(rule)
    return tr("rj_" + r.reason.value, lang).format(**values)


def constraint_text(constraint: str | None, lang: str) -> str:
    """The binding constraint's name (plan.binding_constraint) in words."""
    key = "bc_" + str(constraint).replace(" ", "_").replace("-", "_")
    text = tr(key, lang)
    return str(constraint) if text == key else text


def objective_text(objective: str, lang: str) -> str:
    text = tr("objective_" + objective, lang)
    return objective if text == "objective_" + objective else text


def skipped_text(r: Rejection, lang: str) -> str:
    return tr("rj_skipped", lang).format(reason=reason_text(r, lang))


def plan_dict(plan: Plan) -> dict[str, Any]:
    req, w, res = plan.request, plan.workload, plan.result
    eff = plan.efficiencies
    from ..spec.job import JobField

    rejected = {reason_text(r, "en"): n for r, n in plan.rejected.most_common()}
    for r, n in res.skipped_offers.items():
        rejected[skipped_text(r, "en")] = n
    request = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(req).items() if k != "job"}
    request.update({name: JobField.to_json(value) for name, value in req.job})
    return {
        "request": request,
        "model": {"name": plan.model.name, "params": _params(plan)},
        "workload": {"task": w.task.value, "seq_len": w.seq_len, "global_batch": w.global_batch,
                     "processed_tokens": w.processed_tokens},
        "recommendations": [candidate_dict(c, plan, i + 1, plan.why[i]) for i, c in enumerate(plan.recommendations)],
        "pareto": [candidate_dict(c, plan) for c in plan.pareto],
        "rejected": rejected,
        "rejected_reasons": [r.to_dict(n) for r, n in plan.rejected.most_common()]
        + [dict(r.to_dict(n), skipped_instance_types=True) for r, n in res.skipped_offers.most_common()],
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
            say("pl_named_value", name=name, value=eff.describe(name)["default"],
                unit=_unit(eff.describe(name)["unit"]),
                description=EfficiencyText(eff.describe(name)["description"].strip())) for name in PLAN_ASSUMPTIONS
            if not (name == "plan_memory_headroom_fraction" and res.max_oom_risk is not None)] + _risk_assumption(plan)
        + [
            say("pl_billing", basis=EfficiencyText(eff.describe("billing_granularity_s")["basis"].strip())),
            say("pl_cost")]
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
    which = (say("pl_band_known", framework=band["framework"]) if band["framework_known"] else say("pl_band_unseen"))
    return [say("pl_risk_kept", limit=res.max_oom_risk, band=which)]


def _unit(unit: str) -> str:
    """A unit of efficiency.yaml as a plan's assumption writes it: hours and fractions are words of the table."""
    return say(f"pl_unit_{unit}") if unit in ("h", "fraction") else unit


def _spot_assumptions(plan: Plan) -> list[str]:
    if plan.request.pricing != "spot":
        return []
    eff = plan.efficiencies
    return [say("pl_spot_value", name=name, value=eff.describe(name)["default"], unit=_unit(eff.describe(name)["unit"]),
                basis=EfficiencyText(eff.describe(name)["basis"].replace("\n", " ")))
            for name in ("spot_mtbi_hours", "spot_restart_hours")] + [say("pl_spot_assumption")]


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
        "trainfit_plan_version": PLAN_VERSION,
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
    from ..planfile import write_plan_doc

    return write_plan_doc(plan_file(plan), out_dir)


def _money(x: float, currency: str) -> str:
    return f"¥{x:,.0f}" if currency == "CNY" else f"${x:,.0f}"


def _where_parts(c: Candidate) -> tuple[str, str, str, str]:
    """(instance, GPUs, region, price date) of a candidate; * = GPU inferred or price unverified, † = price older
    than STALE_DAYS."""
    e, p = c.estimate, c.offer.price
    nodes = f"{e.strategy.nodes} x " if e.strategy.nodes > 1 else ""
    flag = "*" if p.unverified or c.offer.instance.gpu_inferred else ""
    stale = "†" if provenance(p)["price_stale"] else ""
    billing = {"payg": "", "spot": " spot", "subscription_month": " monthly"}[p.billing]
    return (f"{nodes}{c.offer.instance.instance_type.removeprefix('ecs.')}{flag}", f"{e.gpu.id} x{e.strategy.gpus}"
            f"{billing}", p.region, f"{p.price_date}{stale}")


def _where(c: Candidate) -> str:
    """'2 x gn7e-c16g1.4xlarge* (a100-sxm4-80gb x2) · cn-beijing 2024-12-30†'."""
    inst, gpus, region, date = _where_parts(c)
    return f"{inst} ({gpus}) · {region} {date}"


def _where_cell(c: Candidate) -> str:
    """_where on four lines: the instance (whole), its GPUs, the price's region and its date."""
    return "\n".join(_where_parts(c))


def _settings(c: Candidate) -> str:
    d = strategy_dict(c)
    engine = {"single": "1 GPU", "ddp": "DDP"}.get(d["engine"], c.estimate.strategy.label().split(", ", 1)[-1])
    ckpt = "" if d["grad_ckpt"] == "none" else f", ckpt {d['grad_ckpt']}"
    return f"{d['method']}, {engine}{ckpt}, {d['precision']}, mb {d['micro_batch']}x{d['grad_accum']}"


def _ram_cell(c: Candidate) -> str:
    """Host RAM per node that loading (plus CPU offload) needs / the instance's RAM, GiB."""
    ram = host_ram_gib(c)
    need = (ram["loading"] or 0) + (ram["offload"] or 0)
    return f"{need:,.0f}/{ram['instance']:,.0f}" if ram["instance"] else f"{need:,.0f}/?"


def render_plan(plan: Plan, lang: str, width: int | None = None):
    """The plan as text: names (instance types) are never cut; at narrow widths the recommendation table becomes
    two (report/tables.py)."""
    from rich.console import Group
    from rich.text import Text

    from .tables import Col, fit_tables

    req, w = plan.request, plan.workload
    head = (f"{plan.model.name} · {w.task.value} · "
            + tr("plan_head_tokens", lang).format(b=f"{w.processed_tokens / 1e9:,.2f}")
            + f" · seq {w.seq_len} · " + tr("plan_head_batch", lang).format(n=w.global_batch)
            + (" · " + tr("plan_head_deadline", lang).format(h=f"{req.deadline / 3600:,.3g}") if req.deadline else "")
            + (" · " + tr("plan_head_budget", lang).format(b=_money(req.budget, plan.currency)) if req.budget else "")
            + " · " + tr("plan_head_objective", lang).format(o=objective_text(req.objective, lang)))
    items: list = [Text(head, style="bold")]
    if plan.recommendations:
        rows = []
        for i, c in enumerate(plan.recommendations):
            band = hours_cost_band(c)
            hours = f"{c.hours:,.1f}" + (f"\n({band['hours']['low']:,.1f}–{band['hours']['high']:,.1f})" if band else "")
            cost = _money(c.cost, plan.currency) + (f"\n({_money(band['cost']['low'], plan.currency)}–"
                                                    f"{_money(band['cost']['high'], plan.currency)})" if band else "")
            rows.append((str(i + 1), _where_cell(c), _settings(c).replace(", bf16", "\nbf16").replace(", fp", "\nfp"),
                         f"{c.estimate.memory.device / GiB:,.1f}", _ram_cell(c), f"{c.estimate.tokens_per_s:,.0f}", hours,
                         cost))
        cols = [Col("#"), Col(tr("instance_col", lang)), Col(tr("settings", lang)), Col("GiB", "right"),
                Col(tr("host_ram_col", lang), "right"), Col("tok/s", "right"), Col(tr("hours", lang)),
                Col(tr("cost", lang))]
        items.extend(fit_tables(tr("recommendations", lang), cols, rows, width))
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
        items.append(Text(f"{tr('no_plan', lang)} ({tr('binding', lang)}: {constraint_text(b.get('constraint'), lang)})",
                          style="bold red"))
        items.append(Text(localize(b.get("explanation", ""), lang), style="red"))
        if b.get("relax"):
            items.append(Text(tr("relax", lang) + ": " + "; ".join(localize(x, lang) for x in b["relax"]),
                              style="yellow"))
    if plan.pareto:
        rows = [(_where_cell(c), _settings(c), f"{c.hours:,.1f}", _money(c.cost, plan.currency))
                for c in plan.pareto[:8]]
        cols = [Col(tr("instance_col", lang)), Col(tr("settings", lang), fold=True), Col(tr("hours", lang), "right"),
                Col(tr("cost", lang), "right")]
        items.extend(fit_tables(tr("pareto", lang), cols, rows, width))
    if plan.too_risky:
        from ..plan import risky_text

        items.append(Text(tr("too_risky", lang).format(risk=f"{plan.result.max_oom_risk:.0%}") + ":\n"
                          + "\n".join(f"   {localize(risky_text(r), lang)}" for r in plan.too_risky), style="yellow"))
    if plan.excluded:
        items.append(Text(tr("excluded", lang) + ":\n" + "\n".join(f"   {g}: {localize(r, lang)}" for g, r in plan.excluded.items()),
                          style="dim"))
    rej = ", ".join([f"{reason_text(k, lang)}: {v:,}" for k, v in plan.rejected.most_common(5)]
                    + [f"{skipped_text(k, lang)}: {v:,}" for k, v in plan.result.skipped_offers.most_common(3)])
    items.append(Text(tr("searched_line", lang).format(n=f"{plan.result.candidates:,}", s=f"{plan.result.seconds:.2f}",
                                                       reasons=rej), style="dim"))
    items.append(Text(tr("assumptions", lang) + ":\n"
                      + "\n".join(f"   - {localize(a, lang)}" for a in plan_dict(plan)["assumptions"]), style="dim"))
    items.append(Text("* " + tr("flag_note", lang), style="dim"))
    items.append(Text(tr("compare_note_stale", lang).format(days=STALE_DAYS), style="dim"))
    return Group(*items)
