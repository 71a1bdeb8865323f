"""`compare`: the same job on several GPU types, like for like — per GPU the layout `plan` would choose for the job
as asked (its search restricted to that GPU: GPU count, ZeRO/FSDP, offload, checkpointing, micro-batch, under plan's
out-of-memory policy), with tokens/s, hours and cost per billion tokens on the instance that makes that GPU cheapest
per token (the whole instance paid, priced by search.cost like every plan). A GPU on which the job as asked runs in
no layout gets the least change that fits, marked and left out of the ranking."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from .advise import alternatives_within
from .catalog.efficiency import load_efficiencies
from .catalog.frameworks import with_framework
from .spec.training import job_specs
from .catalog import get_gpu, instances_for_gpu, resolve_model
from .catalog.efficiency import Efficiencies
from .catalog.instances import cheapest_price
from .catalog.prices import provenance
from .errors import SpecError, sentence_of
from .estimate.core import Estimate, adapt_to_gpu, run_estimate
from .report.estimate import config_dict
from .search.cost import cost_per_tokens
from .search.space import Offer
from .spec.cluster import cluster_for
from .spec.hardware import GpuSpec, InstanceSpec
from .spec.training import Strategy, TrainingSpec, stack_refuses
from .units import GiB, HOUR

from .uncertainty import DEFAULT_MAX_OOM_RISK  # noqa: E402 - one out-of-memory policy for every command

DEFAULT_GPUS = ("t4", "v100-sxm2-32gb", "a10", "l20", "a100-sxm4-40gb", "a100-sxm4-80gb", "h20", "h100-sxm", "h200")
BILLION = 1e9


@dataclass(frozen=True)
class Choice:
    """The instance that makes this GPU cheapest per token for the workload, with the GPUs the job uses on it."""

    offer: Offer
    estimate: Estimate
    cost_per_billion: float

    def to_dict(self) -> dict[str, Any]:
        inst, p, s = self.offer.instance, self.offer.price, self.estimate.strategy
        return {"provider": inst.provider, "instance_type": inst.instance_type, "gpus_per_instance": inst.gpu_count,
                "gpus_used": s.gpus_per_node, "nodes": s.nodes, "price_per_hour": round(p.per_hour, 4),
                "price_per_gpu_hour": round(p.per_hour / inst.gpu_count, 4), "currency": p.currency,
                "region": p.region, "billing": p.billing, **provenance(p), "gpu_inferred": inst.gpu_inferred,
                "tokens_per_s": round(self.estimate.tokens_per_s, 1),
                "hours_per_billion_tokens": round(BILLION / self.estimate.tokens_per_s / HOUR, 3),
                "cost_per_billion_tokens": round(self.cost_per_billion, 2)}


@dataclass
class CompareRow:
    gpu: GpuSpec
    estimate: Estimate | None  # the workload as asked (its GPU count), for the fit / speed columns
    changes: list[str] = field(default_factory=list)
    error: str | None = None
    would_fit: Any = None  # advise.Alternative with another method, when none with the requested one fits
    alibaba: Choice | None = None
    other: Choice | None = None
    alibaba_instances: int = 0  # Alibaba instance types with this GPU (priced or not)
    like_for_like: bool = True  # the job as asked (method, optimizer, precision, batch); False: settings had to change
    rank: int | None = None  # among the like-for-like rows (cost per billion tokens, or GPU-hours)
    oom_risk: float | None = None  # the chosen layout's out-of-memory risk (plan's policy)

    @property
    def hours_per_billion(self) -> float | None:
        return BILLION / self.estimate.tokens_per_s / HOUR if self.estimate and self.estimate.fits else None

    @property
    def choice(self) -> Choice | None:
        """The offer the row is read by: Alibaba's when it sells this GPU, else the cheapest elsewhere."""
        return self.alibaba or self.other

    def to_dict(self) -> dict[str, Any]:
        e = self.estimate
        row: dict[str, Any] = {"gpu": self.gpu.id, "name": self.gpu.name, "fits": bool(e and e.fits),
                               "like_for_like": self.like_for_like, "rank": self.rank,
                               "oom_risk": None if self.oom_risk is None else round(self.oom_risk, 4),
                               "changes": self.changes, "error": self.error,
                               "would_fit_with": self.would_fit.to_dict() if self.would_fit else None}
        if e is not None:
            row.update({"config": config_dict(e), "memory_gib_total": round(e.memory.device / GiB, 2),
                        "gpu_memory_gib": round(e.memory.usable / GiB, 2),
                        "tokens_per_s": round(e.tokens_per_s, 1),
                        "tokens_per_s_per_gpu": round(e.tokens_per_s_per_gpu, 1), "mfu": round(e.mfu, 4),
                        "bottleneck": e.bottleneck})
        hours = self.hours_per_billion
        row["hours_per_billion_tokens"] = None if hours is None else round(hours, 3)
        c = self.choice
        row["instance"] = c.offer.instance.instance_type if c else None
        row["gpus_used"] = c.estimate.strategy.gpus_per_node if c else None
        row["price_per_gpu_hour"] = round(c.offer.price.per_hour / c.offer.gpu_count, 4) if c else None
        row["currency"] = c.offer.price.currency if c else None
        row["unpriced"] = None if c else self.unpriced_reason()
        row["alibaba"] = self.alibaba.to_dict() if self.alibaba else None
        row["alibaba_instance_types"] = self.alibaba_instances
        row["cny_per_billion_tokens"] = _round(self.alibaba.cost_per_billion if self.alibaba else None)
        row["cheapest_other"] = self.other.to_dict() if self.other else None
        row["other_cost_per_billion_tokens"] = _round(self.other.cost_per_billion if self.other else None)
        return row

    def unpriced_reason(self) -> str:
        if self.estimate is None or not self.estimate.fits:
            return "does not fit"
        if instances_for_gpu(self.gpu.id):
            return "no public price for the instances with this GPU; give your own quote with --prices FILE"
        return "no instance with this GPU in the catalog"


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def _layouts(gpus: int, count: int) -> tuple[int, ...]:
    """GPUs the job may use on an instance with `count` GPUs: the GPUs asked for, and all of them (data-parallel,
    since the whole instance is paid anyway)."""
    return tuple(sorted({gpus, count})) if count >= gpus else ()


def cheapest_choice(model, est: Estimate, providers: tuple[str, ...], eff: Efficiencies) -> Choice | None:
    """Over every priced instance carrying this GPU and every layout on it: the lowest cost per billion tokens,
    the whole instance paid (search.cost, as in `plan`)."""
    s = est.strategy
    best: Choice | None = None
    memo: dict[tuple, Estimate | None] = {}
    for inst in instances_for_gpu(est.gpu.id):
        price = cheapest_price(inst, billing="payg", in_stock=True) if inst.provider in providers else None
        if price is None:
            continue
        offer = Offer(inst, price)
        for g in _layouts(s.gpus_per_node, inst.gpu_count):
            t, layout = est.training, s.with_(gpus_per_node=g)
            if stack_refuses(t.model_code, t.method, t.grad_ckpt, layout, eff.framework):
                continue  # a layout the stated stack's scripts do not run (plan --framework leaves it out too)
            e = _estimate_on(model, est, layout, inst, eff, memo)
            if e is None:
                continue
            cost = cost_per_tokens(offer, s.nodes, e.tokens_per_s, BILLION)
            if best is None or cost < best.cost_per_billion:
                best = Choice(offer, e, cost)
    return best


def _estimate_on(model, est: Estimate, s: Strategy, inst: InstanceSpec, eff: Efficiencies, memo: dict):
    key = (s.gpus_per_node, inst.interconnect, inst.nvlink_gbs, inst.rdma, inst.rdma_gbps, inst.network_gbps,
           inst.vcpu if s.offload.value != "none" else None)
    if key not in memo:
        try:
            cluster = cluster_for(est.gpu, s.gpus_per_node, s.nodes, inst, None,
                                  eff.for_gpu(est.gpu)("default_inter_node_gbps") if s.nodes > 1 else None)
            e = run_estimate(model, est.training, s, cluster, eff)
            memo[key] = e if e.fits else None
        except SpecError:
            memo[key] = None
    return memo[key]


def compare_one(model, gpu: GpuSpec, t: TrainingSpec, s: Strategy, eff: Efficiencies) -> CompareRow:
    t2, changes = adapt_to_gpu(t, gpu)
    try:
        cluster = cluster_for(gpu, s.gpus_per_node, s.nodes, None, None,
                              eff.for_gpu(gpu)("default_inter_node_gbps") if s.nodes > 1 else None,
                              catalog_network=True)
        est = run_estimate(model, t2, s, cluster, eff)
    except SpecError as exc:  # an incompatible setting: its sentence of the table (a str, any language)
        return CompareRow(gpu, None, changes, error=sentence_of(exc))
    would = None
    if not est.fits:  # a change that keeps the requested method and GPU count, else say what other method would fit
        alts = alternatives_within(est, eff, limit=8)
        same = [a for a in alts if a.estimate.training.method == t2.method
                and a.estimate.strategy.gpus_per_node == s.gpus_per_node]
        if same:
            changes.append(same[0].change)
            est = same[0].estimate
        elif alts:
            would = alts[0]
    return CompareRow(gpu, est, changes, would_fit=would)


def compare(model: str, gpus_list: list[str] | None = None, *, overrides: dict | None = None,
            calibration: str | None = None, efficiencies: Efficiencies | None = None,
            max_oom_risk: float = DEFAULT_MAX_OOM_RISK, **job: Any) -> list[CompareRow]:
    """One job on several GPUs, like for like: the same method, optimizer, precision, global batch and stack on every
    row, and per GPU the layout `plan` would choose for it (GPU count, ZeRO/FSDP, offload, checkpointing,
    micro-batch; each one the job gives is kept), under plan's out-of-memory policy (`max_oom_risk`). A GPU on which
    no layout runs the job as asked gets the least change that fits, and is marked (`like_for_like` false) and left
    out of the ranking. `job` holds the declared job fields as keywords (spec/job.py)."""
    spec = resolve_model(model)
    # a layout given without a GPU count: the fewest GPUs it runs on, to check it (the search picks the count)
    least = {"gpus": _layout_gpus(job)} if job.get("gpus") is None and _layout_gpus(job) > 1 else {}
    t, s, inputs = job_specs(spec, **{**job, **least})
    eff = with_framework(efficiencies or load_efficiencies(overrides, calibration), inputs.get("framework"))
    base = _request_base(model, t, s, job)
    rows, seen = [], set()
    for name in gpus_list or DEFAULT_GPUS:
        gpu = get_gpu(name)
        if gpu.id in seen:  # "a10,A10,a10,..." is one comparison row (a list of 5,000 names took 30 s)
            continue
        seen.add(gpu.id)
        row = _planned_row(spec, gpu, t, s, base, eff, max_oom_risk)
        if row is None:  # nothing runs the job as asked: the least change that fits, marked
            row = compare_one(spec, gpu, t, s, eff)
            row.like_for_like = False
            if row.estimate is not None and row.estimate.fits:
                row.alibaba = cheapest_choice(spec, row.estimate, ("alibaba",), eff)
                row.other = cheapest_choice(spec, row.estimate, ("aws", "gcp", "azure"), eff)
        row.alibaba_instances = len(instances_for_gpu(gpu.id, "alibaba"))
        rows.append(row)
    _rank(rows)
    return rows


def _layout_gpus(job: dict) -> int:
    """tp x pp x cp as given (text or numbers), 1 where absent or not yet a number (job_specs says why)."""
    out = 1
    for axis in ("tp", "pp", "cp"):
        try:
            out *= max(1, int(job.get(axis) or 1))
        except (TypeError, ValueError):
            pass
    return out


# Layouts compare searches span at most this many instances (plan: --max-nodes, default 8): per GPU type the answer
# is almost always one instance, and each more node multiplies the search (compare took ~2 s for nine GPUs at 2).
COMPARE_MAX_NODES = 2

# the job fields a comparison keeps on every row, as `plan` request keys (the rest is searched per GPU)
_LAYOUT_KEYWORDS = ("gpus", "nodes", "zero", "fsdp", "offload", "micro_batch", "grad_ckpt")


def _request_base(model: str, t: TrainingSpec, s: Strategy, job: dict) -> dict[str, Any]:
    """The plan request behind every row: the job as given (its method and settings; its layout fields only where
    given), one billion tokens, and the global batch the job states (micro-batch x accumulation x GPUs) or plan's."""
    from .spec.job import BY_NAME, REQUEST

    base: dict[str, Any] = {"model": model, "method": t.method.value, "dataset_tokens": BILLION, "top": 1,
                            "max_nodes": COMPARE_MAX_NODES}
    by_keyword = {f.keyword: f for f in BY_NAME.values()}
    for key, value in job.items():
        f = by_keyword.get(key)
        if value is None or f is None or REQUEST not in f.doors:
            continue
        base[f.name] = value
    if any(job.get(k) is not None for k in ("micro_batch", "grad_accum", "gpus", "nodes")):
        base["global_batch"] = t.micro_batch * t.grad_accum * s.dp
    return base


def _planned_row(model, gpu: GpuSpec, t: TrainingSpec, s: Strategy, base: dict, eff: Efficiencies,
                 max_oom_risk: float) -> "CompareRow | None":
    """`plan`'s search restricted to this GPU over every provider's offers (unpriced instances too, ranked by
    GPU-hours), for the job as asked: the cheapest layout per price list, or None when no layout fits."""
    from collections import Counter

    from .search.run import search
    from .search.space import offers
    from .search.workload import resolve_workload
    from .spec.request import request_from_mapping

    req = request_from_mapping({**base, "gpu": gpu.id})
    try:
        w = resolve_workload(req, model)
    except SpecError as exc:
        return CompareRow(gpu, None, [], error=str(exc))
    offer_list: list[Offer] = []
    for provider in ("alibaba", "aws", "gcp", "azure"):
        offer_list += offers(replace(req, provider=provider))[0]
    priced = {o.instance.key for o in offer_list}
    offer_list += [Offer(inst, _gpu_hours_price(inst)) for inst in instances_for_gpu(gpu.id)
                   if inst.trainable and inst.key not in priced]
    result = search(model, w, eff, offer_list, Counter(), max_oom_risk)
    if not result.fitting:
        return None
    by_group: dict[str, Choice] = {}
    for c in result.fitting:
        currency = c.offer.price.currency
        group = "unpriced" if currency == GPU_HOURS else ("alibaba" if c.offer.instance.provider == "alibaba"
                                                          else "other")
        cost = cost_per_tokens(c.offer, c.nodes, c.estimate.tokens_per_s, BILLION)
        if group not in by_group or cost < by_group[group].cost_per_billion:
            by_group[group] = Choice(c.offer, c.estimate, cost)
    main = by_group.get("alibaba") or by_group.get("other") or by_group["unpriced"]
    t2, legal = adapt_to_gpu(t, gpu)
    row = CompareRow(gpu, main.estimate, legal + _layout_changes(t2, s, main.estimate))
    row.alibaba, row.other = by_group.get("alibaba"), by_group.get("other")
    row.like_for_like = not legal
    row.oom_risk = next((c.oom_risk for c in result.fitting if c.estimate is main.estimate), None)
    return row


GPU_HOURS = "GPU-h"  # the "currency" of an instance without a public price: its GPUs, so the search ranks GPU-hours


def _gpu_hours_price(inst: InstanceSpec):
    from .spec.hardware import Price

    return Price(provider=inst.provider, instance_type=inst.instance_type, region="", billing="payg",
                 price=float(inst.gpu_count or 1), currency=GPU_HOURS, price_date="", includes="", unverified=True,
                 sources=(), note="no public price: ranked by GPU-hours")


def _layout_changes(t: TrainingSpec, s: Strategy, e: Estimate) -> list[str]:
    """The layout the search chose for this GPU, as the flags that set it (shown, not hidden)."""
    from .advise import change_flags

    flags = change_flags(t, s, e.training, e.strategy)
    return [flags] if flags else []


def _rank(rows: list[CompareRow]) -> None:
    """Rank the like-for-like rows by what renting them costs per billion tokens: Alibaba's CNY price where any row
    has one (the rows without it get no rank), else the cheapest USD offer elsewhere, else GPU-hours. Rows whose
    settings had to differ get no rank."""
    ranked = [r for r in rows if r.like_for_like and r.estimate is not None and r.estimate.fits]
    if any(r.alibaba for r in ranked):
        ranked, key = [r for r in ranked if r.alibaba], (lambda r: r.alibaba.cost_per_billion)
    elif any(r.other for r in ranked):
        ranked, key = [r for r in ranked if r.other], (lambda r: r.other.cost_per_billion)
    else:
        key = lambda r: r.estimate.strategy.gpus * BILLION / r.estimate.tokens_per_s  # noqa: E731
    for n, r in enumerate(sorted(ranked, key=key), 1):
        r.rank = n


# `trainfit.compare(...)` is this module's compare() (trainfit/__init__.py says why the module is callable).
from . import callable_module  # noqa: E402

callable_module(__name__, lambda: compare)
