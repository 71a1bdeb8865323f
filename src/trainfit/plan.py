"""request -> search -> Plan: ranked recommendations, the cost-time Pareto front, and the reasons behind them."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from .catalog.efficiency import load_efficiencies
from .catalog import resolve_model
from .catalog.efficiency import Efficiencies
from .i18n import say
from .search.run import Candidate, RiskyOption, SearchResult, headroom_gib, search
from .search.reasons import Reason, Rejection
from .search.space import Offer, offers
from .search.workload import Workload, resolve_workload
from .spec.model import ModelSpec
from .spec.request import PlanRequest
from .units import GiB


@dataclass
class Plan:
    request: PlanRequest
    model: ModelSpec
    workload: Workload
    result: SearchResult
    recommendations: list[Candidate]
    pareto: list[Candidate]
    rejected: Counter
    binding: dict[str, Any] | None
    excluded: dict[str, str]
    why: list[list[str]]
    efficiencies: Efficiencies
    assumptions: list[str] = field(default_factory=list)
    too_risky: list[RiskyOption] = field(default_factory=list)  # layouts with no option inside --max-oom-risk

    @property
    def currency(self) -> str:
        return self.request.budget_currency


def _order_key(objective: str):
    if objective == "fastest":
        return lambda c: (c.hours, c.cost)
    return lambda c: (c.cost, c.hours)


def best_per_layout(cands: list[Candidate], objective: str) -> list[Candidate]:
    """The best configuration for each (instance, GPUs, nodes, method), ranked by the objective; a layout that uses
    part of an instance's GPUs is left out when using more of the same (paid-for) GPUs is neither slower nor
    dearer (dominated)."""
    best: dict[tuple, Candidate] = {}
    key = _order_key(objective)
    for c in cands:
        if c.key not in best or key(c) < key(best[c.key]):
            best[c.key] = c
    same: dict[tuple, list[Candidate]] = defaultdict(list)  # the others a layout can be dominated by
    for c in best.values():
        same[(id(c.offer), c.estimate.strategy.nodes, c.estimate.training.method)].append(c)
    kept = [c for c in best.values() if not _dominated_on_its_instance(
        c, same[(id(c.offer), c.estimate.strategy.nodes, c.estimate.training.method)])]
    return sorted(kept, key=key)


def _dominated_on_its_instance(c: Candidate, others) -> bool:
    e = c.estimate
    for o in others:
        oe = o.estimate
        if (o is not c and o.offer is c.offer and oe.strategy.nodes == e.strategy.nodes
                and oe.training.method == e.training.method
                and oe.strategy.gpus_per_node > e.strategy.gpus_per_node
                and o.hours <= c.hours + 1e-12 and o.cost <= c.cost + 1e-9):
            return True
    return False


def undominated(ranked: list[Candidate]) -> list[Candidate]:
    """The ranked options without those another ranked option beats on both time and cost (slower and dearer than
    #1 is no recommendation); equal ones are kept."""
    kept: list[Candidate] = []
    for c in ranked:
        if not any(k.hours <= c.hours + 1e-12 and k.cost <= c.cost + 1e-9
                   and (k.hours < c.hours - 1e-12 or k.cost < c.cost - 1e-9) for k in ranked):
            kept.append(c)
    return kept


def pareto_front(cands: list[Candidate]) -> list[Candidate]:
    """Candidates no other candidate beats on both cost and hours (sorted by cost)."""
    front: list[Candidate] = []
    for c in sorted(cands, key=lambda c: (c.cost, c.hours)):
        if not front or c.hours < front[-1].hours - 1e-12:
            front.append(c)
    return front


TOO_LONG_HOURS = 10 * 8766  # ten years: an option that takes longer is no plan, whatever the deadline says


def _meets(c: Candidate, req: PlanRequest) -> tuple[bool, bool]:
    deadline_ok = (req.deadline is None or c.hours * 3600 <= req.deadline) and c.hours <= TOO_LONG_HOURS
    budget_ok = req.budget is None or c.cost <= req.budget
    return deadline_ok, budget_ok


def check_region(region: str) -> None:
    """A region no price row names is a typo, not a region without offers."""
    from .catalog.instances import all_prices
    from .errors import unknown_name

    known = {p.region for prices in all_prices().values() for p in prices}
    if region not in known:
        raise unknown_name(say("ei_kind_region"), region, sorted(known), hint=say("ei_hint_regions"))


def make_plan(req: PlanRequest, efficiencies: Efficiencies | None = None, offer_list: list[Offer] | None = None,
              skipped: Counter | None = None, max_oom_risk: float | None = None) -> Plan:
    """The plan. `max_oom_risk`: accepted probability of running out of memory per option (from cross-validated
    error bands); None keeps the flat plan_memory_headroom_fraction."""
    model = resolve_model(req.model)
    if req.region and offer_list is None:
        check_region(req.region)
    eff = efficiencies or load_efficiencies()
    w = resolve_workload(req, model)
    if offer_list is None:
        offer_list, skipped = offers(req)
    result = search(model, w, eff, offer_list, skipped, max_oom_risk)
    rejected = Counter(result.rejected)
    feasible = []
    for c in result.fitting:
        deadline_ok, budget_ok = _meets(c, req)
        if not deadline_ok:
            rejected[Rejection.of(Reason.TOO_SLOW)] += 1
        elif not budget_ok:
            rejected[Rejection.of(Reason.OVER_BUDGET)] += 1
        else:
            feasible.append(c)
    ranked = best_per_layout(feasible, req.objective)
    recs = undominated(ranked)[:req.top]
    layouts = best_per_layout(result.fitting, "cheapest")
    plan = Plan(request=req, model=model, workload=w, result=result, recommendations=recs,
                pareto=pareto_front(layouts), rejected=rejected, binding=None, excluded={}, why=[],
                efficiencies=eff, assumptions=[*req.notes, *w.assumptions])
    laid_out = {(c.estimate.gpu.id, c.estimate.strategy.gpus_per_node, c.nodes, c.estimate.training.method.value)
                for c in result.fitting}
    plan.too_risky = sorted((r for k, r in result.too_risky.items() if k not in laid_out),
                            key=lambda r: (r.gpu, r.gpus * r.nodes, r.method))
    plan.binding = None if recs else binding_constraint(plan)
    plan.excluded = excluded_gpus(plan, ranked)
    plan.why = [why(plan, c, ranked) for c in recs]
    return plan


def _describe(c: Candidate, currency: str) -> str:
    s = c.estimate.strategy
    inst = c.offer.instance.instance_type
    count = f"{s.nodes} x {inst}" if s.nodes > 1 else inst
    used = "" if s.gpus_per_node == c.offer.gpu_count else say("pl_gpus_used", n=s.gpus_per_node, of=c.offer.gpu_count)
    return say("pl_describe", count=count, used=used, method=c.estimate.training.method.value, layout=s.label(),
               hours=c.hours, cost=_money(c.cost, currency))


def _money(x: float, currency: str) -> str:
    return f"¥{x:,.0f}" if currency == "CNY" else f"${x:,.0f}"


# the layout fields a request may pin (spec/job.py: given = kept, absent = searched) and their flags
_LAYOUT_PINS = {"gpus_per_node": "--gpus", "nodes": "--nodes", "zero_stage": "--zero", "fsdp": "--fsdp",
                "offload": "--offload", "micro_batch": "--micro-batch", "grad_ckpt": "--grad-ckpt"}


def _lighter(req: PlanRequest) -> list[str]:
    """The lighter training methods than the one asked (none below QLoRA; `auto` already searches them all)."""
    return {"full": [say("pl_relax_lora_or_qlora")], "freeze": [say("pl_relax_lora_or_qlora")],
            "lora": ["--method qlora"]}.get(req.method, [])


def _all_providers(req: PlanRequest) -> str:
    """The flag that widens the search to every provider; offers in CNY and USD need the exchange rate with it."""
    return "--provider all" if req.usd_cny is not None else "--provider all --usd-cny RATE"


def binding_constraint(plan: Plan) -> dict[str, Any]:
    """Which constraint binds when nothing satisfies the request, and what would relax it."""
    req, cur = plan.request, plan.currency
    fitting = best_per_layout(plan.result.fitting, "cheapest")
    if not plan.result.offers:
        return {"constraint": "catalog", "explanation": say("pl_bc_catalog"),
                "relax": [_all_providers(req), say("pl_relax_drop_filters")]}
    if not fitting and plan.too_risky:
        least = min(plan.too_risky, key=lambda r: r.risk)
        return {"constraint": "out-of-memory risk",
                "explanation": say("pl_bc_risk", limit=plan.result.max_oom_risk, risky=risky_text(least)),
                "relax": [f"--max-oom-risk {math.ceil(least.risk * 100) / 100:.2f}", say("pl_relax_shorter_seq"),
                          *_lighter(req), say("pl_relax_larger_gpus", flag=_all_providers(req))]}
    if not fitting and plan.result.host_ram_short:
        need, have = _closest_ram(plan.result.host_ram_short.values())
        return {"constraint": "host memory",
                "explanation": say("pl_bc_host_ram", need=need / GiB, have=have / GiB),
                "relax": [say("pl_relax_more_nodes_zero3"), *_lighter(req), say("pl_relax_more_ram", flag=_all_providers(req))]}
    pinned = [name for name, _ in req.job if name in _LAYOUT_PINS]
    if not fitting and pinned and not plan.result.no_fit_by_gpu and not plan.result.host_ram_short:
        flags = " ".join(_LAYOUT_PINS[name] for name in pinned)
        return {"constraint": "given layout",
                "explanation": say("pl_bc_given_layout", flags=flags),
                "relax": [say("pl_relax_leave_out", flags=flags), say("pl_relax_other_filters")]}
    if not fitting:
        need = min((n for n, _ in plan.result.no_fit_by_gpu.values()), default=0.0)
        if pinned:
            flags = " ".join(_LAYOUT_PINS[name] for name in pinned)
            return {"constraint": "memory",
                    "explanation": say("pl_bc_memory_given", flags=flags, need=need / GiB),
                    "relax": [say("pl_relax_leave_out", flags=flags), *_lighter(req), say("pl_relax_shorter_seq")]}
        return {"constraint": "memory",
                "explanation": say("pl_bc_memory", nodes=req.max_nodes, need=need / GiB),
                "relax": _lighter(req) + [say("pl_relax_shorter_seq"), say("pl_relax_more_nodes"),
                                          say("pl_relax_larger_gpus", flag=_all_providers(req))]}
    fastest = min(fitting, key=lambda c: (c.hours, c.cost))
    cheapest = min(fitting, key=lambda c: (c.cost, c.hours))
    if fastest.hours > TOO_LONG_HOURS:
        return {"constraint": "duration",
                "explanation": say("pl_bc_duration", years=fastest.hours / 8766, hours=fastest.hours,
                                   desc=_describe(fastest, cur)),
                "relax": [say("pl_relax_fewer_tokens"), say("pl_relax_more_nodes"), *_lighter(req), _all_providers(req)],
                "fastest": {"description": _describe(fastest, cur), "hours": round(fastest.hours, 2),
                            "cost": round(fastest.cost, 2)}}
    in_time = [c for c in fitting if _meets(c, req)[0]]
    in_budget = [c for c in fitting if _meets(c, req)[1]]
    if req.deadline is not None and not in_time:
        out = {"constraint": "deadline",
               "explanation": say("pl_bc_deadline", hours=req.deadline / 3600, desc=_describe(fastest, cur)),
               "relax": [say("pl_relax_deadline_at_least", hours=fastest.hours), say("pl_relax_more_nodes"),
                         *_lighter(req), _all_providers(req)]}
    elif req.budget is not None and not in_budget:
        out = {"constraint": "budget",
               "explanation": say("pl_bc_budget", budget=_money(req.budget, cur), desc=_describe(cheapest, cur)),
               "relax": [say("pl_relax_budget_at_least", cost=_money(cheapest.cost, cur))]}
    else:  # each constraint alone can be met, not both together
        best = min(in_time, key=lambda c: (c.cost, c.hours))
        out = {"constraint": "deadline and budget",
               "explanation": say("pl_bc_both", desc=_describe(best, cur), over=_money(best.cost - req.budget, cur)),
               "relax": [say("pl_relax_budget", cost=_money(best.cost, cur)),
                         say("pl_relax_deadline", hours=min(in_budget, key=lambda c: c.hours).hours)]}
    out["fastest"] = {"description": _describe(fastest, cur), "hours": round(fastest.hours, 2),
                      "cost": round(fastest.cost, 2)}
    out["cheapest"] = {"description": _describe(cheapest, cur), "hours": round(cheapest.hours, 2),
                       "cost": round(cheapest.cost, 2)}
    return out


def excluded_gpus(plan: Plan, ranked: list[Candidate]) -> dict[str, str]:
    """Why each GPU class offered did not win."""
    req, cur = plan.request, plan.currency
    winner = ranked[0] if ranked else None
    by_gpu: dict[str, list[Candidate]] = defaultdict(list)
    for c in plan.result.fitting:
        by_gpu[c.estimate.gpu.id].append(c)
    out: dict[str, str] = {}
    for gpu in sorted({o.instance.gpu for o in plan.result.offers}):
        if winner is not None and gpu == winner.estimate.gpu.id:
            continue
        cands = by_gpu.get(gpu, [])
        risky = [r for r in plan.too_risky if r.gpu == gpu]
        if not cands and risky:
            out[gpu] = say("pl_ex_risky", risky=risky_text(min(risky, key=lambda r: r.risk)))
            continue
        short = plan.result.host_ram_short.get(gpu)
        if not cands and short:
            out[gpu] = say("pl_ex_host_ram", need=short[0] / GiB, have=short[1] / GiB)
            continue
        if not cands and gpu not in plan.result.no_fit_by_gpu and any(n in _LAYOUT_PINS for n, _ in req.job):
            out[gpu] = say("pl_ex_layout", flags=" ".join(_LAYOUT_PINS[n] for n, _ in req.job if n in _LAYOUT_PINS))
            continue
        if not cands:
            miss = plan.result.no_fit_by_gpu.get(gpu)
            out[gpu] = (say("pl_ex_no_fit_need", need=miss[0] / GiB, usable=miss[1] / GiB) if miss
                        else say("pl_ex_no_fit"))
            continue
        in_time = [c for c in cands if _meets(c, req)[0]]
        if not in_time:
            f = min(cands, key=lambda c: c.hours)
            out[gpu] = say("pl_ex_too_slow", hours=f.hours, desc=_describe(f, cur))
            continue
        ok = [c for c in in_time if _meets(c, req)[1]]
        if not ok:
            f = min(in_time, key=lambda c: c.cost)
            out[gpu] = say("pl_ex_over_budget", desc=_describe(f, cur))
            continue
        best = min(ok, key=_order_key(req.objective))
        if winner is not None:
            versus = (f"{_money(best.cost, cur)} vs {_money(winner.cost, cur)}" if req.objective == "cheapest"
                      else f"{best.hours:,.1f} h vs {winner.hours:,.1f} h")
            objective = say("pl_w_" + req.objective) if req.objective in ("cheapest", "fastest") else req.objective
            out[gpu] = say("pl_ex_loses", objective=objective, versus=versus, desc=_describe(best, cur))
    return out


def _closest_ram(shorts) -> tuple[float, float]:
    """(need, available) of the option that misses its instance's RAM by the least."""
    return min(shorts, key=lambda x: x[0] - x[1])


def host_ram_gib(c: Candidate) -> dict[str, float | None]:
    """Host RAM per node: what loading the model needs, what CPU offload keeps, what the instance has (GiB)."""
    return {"loading": round(c.loading.per_node_bytes / GiB, 1) if c.loading else None,
            "offload": round(c.estimate.host_memory_bytes / GiB, 1), "instance": c.offer.instance.ram_gib}


def hours_cost_band(c: Candidate) -> dict[str, Any] | None:
    """80% bands of hours and cost from the throughput band (the stated stack's; any stack's without --framework): training hours scale
    with 1 / throughput, start-up and checkpoints do not; cost scales with hours (billing steps not re-applied)."""
    from .uncertainty import LEVEL, framework_known, shipped_bands

    bands = shipped_bands()
    known = framework_known(getattr(c.estimate.table, "framework", None))  # plan --framework
    f = bands.interval("throughput", c.estimate.training.method.value, None, known) if bands else None
    if f is None or c.hours <= 0:
        return None
    low_h, high_h = c.train_hours / f[1] + c.overhead_hours, c.train_hours / f[0] + c.overhead_hours
    return {"level": LEVEL, "hours": {"low": round(low_h, 3), "high": round(high_h, 3)},
            "cost": {"low": round(c.cost * low_h / c.hours, 2), "high": round(c.cost * high_h / c.hours, 2)}}


def risky_text(r: RiskyOption) -> str:
    """One rejected-for-risk option and what would make it safe."""
    where = (say("pl_risky_nodes", gpus=r.gpus * r.nodes, gpu=r.gpu, nodes=r.nodes) if r.nodes > 1
             else f"{r.gpus * r.nodes} x {r.gpu}")
    safe = (say("pl_risky_safe", less=(r.need - r.safe_need) / GiB, limit=math.ceil(r.risk * 100) / 100)
            if r.safe_need is not None and r.safe_need < r.need else "")
    return say("pl_risky", where=where, method=r.method, strategy=r.strategy, mb=r.micro_batch, need=r.need / GiB,
               usable=r.usable / GiB, risk=r.risk, safe=safe)


def _layout_why(e) -> str:
    """A model-parallel layout in words: what each axis splits, and what the pipeline and the tensor split cost."""
    s, parts = e.strategy, e.time.parts
    bubble = parts.get("pipeline/bubble", 0.0) / e.step_time_s
    tp = parts.get("communication/tp", 0.0) / e.step_time_s
    return say("pl_why_layout", tp=s.tp, pp=s.pp, cp=s.cp, dp=s.dp, bubble=bubble, tp_comm=tp)


def why(plan: Plan, c: Candidate, ranked: list[Candidate]) -> list[str]:
    e, cur = c.estimate, plan.currency
    bottleneck = say(_WORDS[e.bottleneck]) if e.bottleneck in _WORDS else e.bottleneck
    memory = dict(used=e.memory.device / GiB, usable=e.memory.usable / GiB, headroom=headroom_gib(c),
                  mb=e.training.micro_batch, ga=e.training.grad_accum)
    lines = [say("pl_why_bottleneck", bottleneck=bottleneck, tps=e.tokens_per_s, tps_gpu=e.tokens_per_s_per_gpu,
                 mfu=e.mfu),
             say("pl_why_memory", **memory) if c.oom_risk is None
             else say("pl_why_memory_risk", risk=c.oom_risk, **memory)]
    ram = host_ram_gib(c)
    if ram["loading"] is not None and ram["instance"]:
        lines.append(say("pl_why_host_ram_offload", loading=ram["loading"], instance=ram["instance"],
                         offload=ram["offload"]) if ram["offload"]
                     else say("pl_why_host_ram", loading=ram["loading"], instance=ram["instance"]))
    comm = sum(v for k, v in e.time.parts.items() if k.startswith("communication"))
    if e.strategy.is_3d:
        lines.append(_layout_why(e))
    if e.strategy.nodes > 1:
        lines.append(say("pl_why_multi_node", nodes=e.strategy.nodes, link=e.cluster.inter_link,
                         gbps=(e.cluster.inter_bytes_per_s or 0) * 8 / 1e9, comm=comm / e.step_time_s))
        single = [x for x in plan.result.fitting if x.offer.instance.key == c.offer.instance.key and x.nodes == 1
                  and x.estimate.training.method == e.training.method]
        if not single:
            lines.append(say("pl_why_outgrows"))
        else:
            best_single = min(single, key=lambda x: x.hours)
            lines.append(say("pl_why_one_node", hours=best_single.hours))
    elif comm > 0:
        lines.append(say("pl_why_comm", comm=comm / e.step_time_s))
    idx = ranked.index(c)
    if idx + 1 < len(ranked):
        nxt = ranked[idx + 1]
        lines.append(say("pl_why_runner_up", desc=_describe(nxt, cur), more=_money(nxt.cost - c.cost, cur)))
    if c.spot is not None:
        sp = c.spot
        lines.append(say("pl_why_spot", n=sp.interruptions, mtbi=sp.mtbi_h, every=sp.interval_h * 60,
                         write=sp.checkpoint_write_h * 3600, lost=sp.overhead_h))
    if c.offer.price.billing == "subscription_month":
        lines.append(say("pl_why_monthly", months=c.billed_hours / 730, hours=c.hours))
    if c.offer.price.unverified or c.offer.instance.gpu_inferred:
        flags = [say(x) for x, on in (("pl_caution_price", c.offer.price.unverified),
                                      ("pl_caution_gpu", c.offer.instance.gpu_inferred)) if on]
        lines.append(say("pl_why_caution", flags=flags[0] if len(flags) == 1
                         else say("pl_caution_two", first=flags[0], second=flags[1])))
    return lines


# the bottleneck's name (estimate.bottleneck) as a word of the message table
_WORDS = {w: "pl_w_" + w for w in ("compute", "memory", "communication", "offload", "overhead", "pipeline",
                                    "optimizer")}


def plan(model: str, *, max_oom_risk: float | None = None, efficiencies: Efficiencies | None = None,
         **request: Any) -> Plan:
    """The Python API of `trainfit plan`: `request` holds the plan request's keys as keywords (dataset_tokens="200M",
    deadline="48h", budget=3000, gpu="a10", method="lora", and any job field it pins: gpus=4, zero=3, ...), the same
    names a request file uses."""
    from .spec.request import request_from_mapping
    from .uncertainty import DEFAULT_MAX_OOM_RISK

    req = request_from_mapping({"model": model, **request}, where="trainfit.plan")
    return make_plan(req, efficiencies, max_oom_risk=DEFAULT_MAX_OOM_RISK if max_oom_risk is None else max_oom_risk)


# `trainfit.plan(...)` is this module's plan() (trainfit/__init__.py says why the module is callable).
from . import callable_module  # noqa: E402

callable_module(__name__, lambda: plan)
