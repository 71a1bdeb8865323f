"""request -> search -> Plan: ranked recommendations, the cost-time Pareto front, and the reasons behind them."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from .catalog.efficiency import load_efficiencies
from .catalog import resolve_model
from .catalog.efficiency import Efficiencies
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
    kept = [c for c in best.values() if not _dominated_on_its_instance(c, best.values())]
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
        raise unknown_name("region", region, sorted(known), hint="`trainfit instances` lists regions with prices")


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
                efficiencies=eff, assumptions=list(w.assumptions))
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
    used = "" if s.gpus_per_node == c.offer.gpu_count else f" ({s.gpus_per_node} of {c.offer.gpu_count} GPUs)"
    return f"{count}{used}, {c.estimate.training.method.value}, {s.label()}: {c.hours:,.1f} h, {_money(c.cost, currency)}"


def _money(x: float, currency: str) -> str:
    return f"¥{x:,.0f}" if currency == "CNY" else f"${x:,.0f}"


# the layout fields a request may pin (spec/job.py: given = kept, absent = searched) and their flags
_LAYOUT_PINS = {"gpus_per_node": "--gpus", "nodes": "--nodes", "zero_stage": "--zero", "fsdp": "--fsdp",
                "offload": "--offload", "micro_batch": "--micro-batch", "grad_ckpt": "--grad-ckpt"}


def _lighter(req: PlanRequest) -> list[str]:
    """The lighter training methods than the one asked (none below QLoRA; `auto` already searches them all)."""
    return {"full": ["--method lora or qlora"], "freeze": ["--method lora or qlora"],
            "lora": ["--method qlora"]}.get(req.method, [])


def binding_constraint(plan: Plan) -> dict[str, Any]:
    """Which constraint binds when nothing satisfies the request, and what would relax it."""
    req, cur = plan.request, plan.currency
    fitting = best_per_layout(plan.result.fitting, "cheapest")
    if not plan.result.offers:
        return {"constraint": "catalog", "explanation": "no priced instance matches the request's provider, GPU, "
                "region and pricing filters", "relax": ["--provider all", "drop --gpu / --region filters"]}
    if not fitting and plan.too_risky:
        least = min(plan.too_risky, key=lambda r: r.risk)
        return {"constraint": "out-of-memory risk",
                "explanation": f"options fit by the estimate but each runs out of memory with more than "
                               f"{plan.result.max_oom_risk:.0%} probability; least risky: {risky_text(least)}",
                "relax": [f"--max-oom-risk {math.ceil(least.risk * 100) / 100:.2f}", "a shorter --seq-len",
                          *_lighter(req), "--provider all for larger GPUs"]}
    if not fitting and plan.result.host_ram_short:
        need, have = _closest_ram(plan.result.host_ram_short.values())
        return {"constraint": "host memory",
                "explanation": f"options fit in GPU memory, but loading the model (and CPU offload) needs more host RAM "
                               f"than their instances have (closest: {need / GiB:,.0f} GiB per node needed, {have / GiB:,.0f} "
                               f"GiB available)",
                "relax": ["more nodes (--max-nodes): ZeRO-3 partitions shrink with the GPU count",
                          *_lighter(req), "--provider all for instances with more RAM"]}
    pinned = [name for name, _ in req.job if name in _LAYOUT_PINS]
    if not fitting and pinned and not plan.result.no_fit_by_gpu and not plan.result.host_ram_short:
        flags = " ".join(_LAYOUT_PINS[name] for name in pinned)
        return {"constraint": "given layout",
                "explanation": f"no offered instance runs the layout given ({flags})",
                "relax": [f"leave out {flags} (the search then chooses)", "other --gpu / --instance filters"]}
    if not fitting:
        need = min((n for n, _ in plan.result.no_fit_by_gpu.values()), default=0.0)
        if pinned:
            flags = " ".join(_LAYOUT_PINS[name] for name in pinned)
            return {"constraint": "memory",
                    "explanation": f"does not fit on any offered GPU with the layout given ({flags}; smallest need "
                                   f"{need / GiB:,.1f} GiB per GPU)",
                    "relax": [f"leave out {flags} (the search then chooses)", *_lighter(req), "a shorter --seq-len"]}
        return {"constraint": "memory",
                "explanation": f"does not fit on any offered GPU even with ZeRO-3 + CPU offload on up to "
                               f"{req.max_nodes} nodes (smallest need {need / GiB:,.1f} GiB per GPU)",
                "relax": _lighter(req) + ["a shorter --seq-len", "more nodes (--max-nodes)",
                                          "--provider all for larger GPUs"]}
    fastest = min(fitting, key=lambda c: (c.hours, c.cost))
    cheapest = min(fitting, key=lambda c: (c.cost, c.hours))
    if fastest.hours > TOO_LONG_HOURS:
        return {"constraint": "duration",
                "explanation": f"the fastest option takes {fastest.hours / 8766:,.0f} years ({fastest.hours:,.0f} h), "
                               f"more than ten: {_describe(fastest, cur)}",
                "relax": ["fewer --dataset-tokens or --epochs", "more nodes (--max-nodes)", *_lighter(req),
                          "--provider all"],
                "fastest": {"description": _describe(fastest, cur), "hours": round(fastest.hours, 2),
                            "cost": round(fastest.cost, 2)}}
    in_time = [c for c in fitting if _meets(c, req)[0]]
    in_budget = [c for c in fitting if _meets(c, req)[1]]
    if req.deadline is not None and not in_time:
        out = {"constraint": "deadline",
               "explanation": f"no plan finishes within {req.deadline / 3600:,.1f} h; fastest: {_describe(fastest, cur)}",
               "relax": [f"a deadline of at least {fastest.hours:,.1f} h", "more nodes (--max-nodes)",
                         *_lighter(req), "--provider all"]}
    elif req.budget is not None and not in_budget:
        out = {"constraint": "budget",
               "explanation": f"no plan costs {_money(req.budget, cur)} or less; cheapest: {_describe(cheapest, cur)}",
               "relax": [f"a budget of at least {_money(cheapest.cost, cur)}"]}
    else:  # each constraint alone can be met, not both together
        best = min(in_time, key=lambda c: (c.cost, c.hours))
        out = {"constraint": "deadline and budget",
               "explanation": f"meets the deadline with {_describe(best, cur)}: over budget by "
                              f"{_money(best.cost - req.budget, cur)}",
               "relax": [f"a budget of {_money(best.cost, cur)}",
                         f"a deadline of {min(in_budget, key=lambda c: c.hours).hours:,.1f} h"]}
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
            out[gpu] = "rejected for out-of-memory risk: " + risky_text(min(risky, key=lambda r: r.risk))
            continue
        short = plan.result.host_ram_short.get(gpu)
        if not cands and short:
            out[gpu] = (f"loading the model (and CPU offload) needs {short[0] / GiB:,.0f} GiB of host RAM per node, "
                        f"the instance has "
                        f"{short[1] / GiB:,.0f} GiB")
            continue
        if not cands and gpu not in plan.result.no_fit_by_gpu and any(n in _LAYOUT_PINS for n, _ in req.job):
            out[gpu] = "no option with the layout given (" + " ".join(
                _LAYOUT_PINS[n] for n, _ in req.job if n in _LAYOUT_PINS) + ")"
            continue
        if not cands:
            miss = plan.result.no_fit_by_gpu.get(gpu)
            need = f" (needs {miss[0] / GiB:,.1f} of {miss[1] / GiB:,.1f} GiB)" if miss else ""
            out[gpu] = f"does not fit even with ZeRO-3 + CPU offload on the offered GPU counts{need}"
            continue
        in_time = [c for c in cands if _meets(c, req)[0]]
        if not in_time:
            f = min(cands, key=lambda c: c.hours)
            out[gpu] = f"too slow for the deadline (fastest {f.hours:,.1f} h with {_describe(f, cur)})"
            continue
        ok = [c for c in in_time if _meets(c, req)[1]]
        if not ok:
            f = min(in_time, key=lambda c: c.cost)
            out[gpu] = f"over budget (cheapest meeting the deadline: {_describe(f, cur)})"
            continue
        best = min(ok, key=_order_key(req.objective))
        if winner is not None:
            versus = (f"{_money(best.cost, cur)} vs {_money(winner.cost, cur)}" if req.objective == "cheapest"
                      else f"{best.hours:,.1f} h vs {winner.hours:,.1f} h")
            out[gpu] = f"meets the constraints but loses on {req.objective} ({versus}): {_describe(best, cur)}"
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
    where = f"{r.gpus * r.nodes} x {r.gpu}" + (f" on {r.nodes} nodes" if r.nodes > 1 else "")
    text = (f"{where}, {r.method}, {r.strategy}, micro-batch {r.micro_batch}: {r.need / GiB:,.1f} of "
            f"{r.usable / GiB:,.1f} GiB predicted, {r.risk:.0%} out-of-memory risk")
    if r.safe_need is not None and r.safe_need < r.need:
        text += (f"; safe with {(r.need - r.safe_need) / GiB:,.1f} GiB less peak memory (a shorter --seq-len, "
                 f"qlora) or with --max-oom-risk {math.ceil(r.risk * 100) / 100:.2f}")
    return text


def _layout_why(e) -> str:
    """A model-parallel layout in words: what each axis splits, and what the pipeline and the tensor split cost."""
    s, parts = e.strategy, e.time.parts
    bubble = parts.get("pipeline/bubble", 0.0) / e.step_time_s
    tp = parts.get("communication/tp", 0.0) / e.step_time_s
    return (f"layout: tensor parallel {s.tp} inside a node x {s.pp} pipeline stage(s) x context parallel {s.cp} x "
            f"{s.dp} data-parallel copies; pipeline bubble {bubble:.0%}, exposed tensor-parallel communication "
            f"{tp:.0%} of each step")


def why(plan: Plan, c: Candidate, ranked: list[Candidate]) -> list[str]:
    e, cur = c.estimate, plan.currency
    risk = "" if c.oom_risk is None else f", {c.oom_risk:.0%} out-of-memory risk"
    lines = [f"bottleneck: {e.bottleneck}; {e.tokens_per_s:,.0f} tokens/s ({e.tokens_per_s_per_gpu:,.0f} per GPU), "
             f"MFU {e.mfu:.0%}",
             f"memory: {e.memory.device / GiB:,.1f} of {e.memory.usable / GiB:,.1f} GiB per GPU "
             f"({headroom_gib(c):,.1f} GiB headroom{risk}), micro-batch {e.training.micro_batch} x "
             f"grad-accum {e.training.grad_accum}"]
    ram = host_ram_gib(c)
    if ram["loading"] is not None and ram["instance"]:
        lines.append(f"host RAM: {ram['loading']:,.0f} of {ram['instance']:,.0f} GiB per node to load the model"
                     + (f" ({ram['offload']:,.0f} GiB more for CPU offload)" if ram["offload"] else ""))
    comm = sum(v for k, v in e.time.parts.items() if k.startswith("communication"))
    if e.strategy.is_3d:
        lines.append(_layout_why(e))
    if e.strategy.nodes > 1:
        lines.append(f"multi-node: {e.strategy.nodes} nodes over {e.cluster.inter_link} "
                     f"({(e.cluster.inter_bytes_per_s or 0) * 8 / 1e9:,.0f} Gbit/s); exposed communication "
                     f"{comm / e.step_time_s:.0%} of each step")
        single = [x for x in plan.result.fitting if x.offer.instance.key == c.offer.instance.key and x.nodes == 1
                  and x.estimate.training.method == e.training.method]
        if not single:
            lines.append("the job outgrows one machine: it does not fit on a single node of this type")
        else:
            best_single = min(single, key=lambda x: x.hours)
            lines.append(f"one node would take {best_single.hours:,.1f} h")
    elif comm > 0:
        lines.append(f"communication: {comm / e.step_time_s:.0%} of each step exposed")
    idx = ranked.index(c)
    if idx + 1 < len(ranked):
        nxt = ranked[idx + 1]
        lines.append(f"runner-up: {_describe(nxt, cur)} ({_money(nxt.cost - c.cost, cur)} more)")
    if c.spot is not None:
        sp = c.spot
        lines.append(f"spot: can be reclaimed; expected {sp.interruptions:,.1f} interruptions (MTBI {sp.mtbi_h:,.1f} h), "
                     f"checkpoint every {sp.interval_h * 60:,.0f} min (Young/Daly sqrt(2 C M), C = "
                     f"{sp.checkpoint_write_h * 3600:,.1f} s): {sp.overhead_h:,.2f} h of lost work, restarts and "
                     f"checkpoints")
    if c.offer.price.billing == "subscription_month":
        lines.append(f"monthly subscription: {c.billed_hours / 730:,.0f} month(s) cost less than pay-as-you-go for "
                     f"{c.hours:,.0f} h")
    if c.offer.price.unverified or c.offer.instance.gpu_inferred:
        flags = [x for x, on in (("price unverified", c.offer.price.unverified),
                                 ("GPU model inferred by third parties", c.offer.instance.gpu_inferred)) if on]
        lines.append("caution: " + ", ".join(flags))
    return lines


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
