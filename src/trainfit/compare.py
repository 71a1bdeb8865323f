"""`compare`: the same workload on several GPU types — fits (with which settings), tokens/s, hours, and cost per
billion tokens on the instance (and the number of its GPUs, data-parallel) that makes that GPU cheapest per token.
The whole instance is paid, priced by search.cost like every plan."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .advise import alternatives
from .catalog.efficiency import load_efficiencies
from .catalog.frameworks import with_framework
from .spec.training import job_specs
from .catalog import get_gpu, instances_for_gpu, resolve_model
from .catalog.efficiency import Efficiencies
from .catalog.instances import cheapest_price
from .catalog.prices import provenance
from .errors import SpecError
from .estimate.core import Estimate, adapt_to_gpu, run_estimate
from .report.estimate import config_dict
from .search.cost import cost_per_tokens
from .search.space import Offer
from .spec.cluster import cluster_for
from .spec.hardware import GpuSpec, InstanceSpec
from .spec.training import Strategy, TrainingSpec, stack_refuses
from .units import GiB, HOUR

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
                              eff.for_gpu(gpu)("default_inter_node_gbps") if s.nodes > 1 else None)
        est = run_estimate(model, t2, s, cluster, eff)
    except SpecError as exc:
        return CompareRow(gpu, None, changes, error=str(exc))
    would = None
    if not est.fits:  # a change that keeps the requested method and GPU count, else say what other method would fit
        alts = alternatives(est, eff, limit=8)
        same = [a for a in alts if a.estimate.training.method == t2.method
                and a.estimate.strategy.gpus_per_node == s.gpus_per_node]
        if same:
            changes.append(same[0].change)
            est = same[0].estimate
        elif alts:
            would = alts[0]
    return CompareRow(gpu, est, changes, would_fit=would)


def compare(model: str, gpus_list: list[str] | None = None, *, overrides: dict | None = None,
            calibration: str | None = None, efficiencies: Efficiencies | None = None, **job: Any) -> list[CompareRow]:
    """One job on several GPUs; `job` holds the declared job fields as keywords (spec/job.py)."""
    spec = resolve_model(model)
    t, s, inputs = job_specs(spec, **job)
    eff = with_framework(efficiencies or load_efficiencies(overrides, calibration), inputs.get("framework"))
    rows, seen = [], set()
    for name in gpus_list or DEFAULT_GPUS:
        gpu = get_gpu(name)
        if gpu.id in seen:  # "a10,A10,a10,..." is one comparison row (a list of 5,000 names took 30 s)
            continue
        seen.add(gpu.id)
        row = compare_one(spec, gpu, t, s, eff)
        if row.estimate is not None and row.estimate.fits:
            row.alibaba = cheapest_choice(spec, row.estimate, ("alibaba",), eff)
            row.other = cheapest_choice(spec, row.estimate, ("aws", "gcp", "azure"), eff)
        row.alibaba_instances = len(instances_for_gpu(gpu.id, "alibaba"))
        rows.append(row)
    return rows


# `trainfit.compare(...)` is this module's compare() (trainfit/__init__.py says why the module is callable).
from . import callable_module  # noqa: E402

callable_module(__name__, lambda: compare)
