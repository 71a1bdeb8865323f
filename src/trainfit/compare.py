"""`compare`: the same workload on several GPU types — fits (with which settings), tokens/s, hours and cost per
billion tokens on the cheapest instance carrying that GPU."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .advise import alternatives
from .api import load_efficiencies, strategy_spec, training_spec
from .catalog import get_gpu, instances_for_gpu, resolve_model
from .catalog.efficiency import Efficiencies
from .catalog.instances import all_instances, cheapest_price
from .errors import SpecError
from .estimate.core import Estimate, adapt_to_gpu, run_estimate
from .report.estimate import config_dict
from .spec.cluster import cluster_for
from .spec.hardware import GpuSpec, InstanceSpec, Price
from .spec.training import Strategy, TrainingSpec
from .units import GiB, HOUR

DEFAULT_GPUS = ("t4", "v100-sxm2-32gb", "a10", "l20", "a100-sxm4-40gb", "a100-sxm4-80gb", "h20", "h100-sxm", "h200")
BILLION = 1e9


@dataclass(frozen=True)
class Offer:
    instance: InstanceSpec
    price: Price

    @property
    def per_hour(self) -> float:
        return self.price.per_hour

    def to_dict(self) -> dict[str, Any]:
        p = self.price
        return {"provider": self.instance.provider, "instance_type": self.instance.instance_type,
                "gpu_count": self.instance.gpu_count, "price_per_hour": round(p.per_hour, 4),
                "currency": p.currency, "region": p.region, "price_date": p.price_date,
                "price_unverified": p.unverified, "gpu_inferred": self.instance.gpu_inferred}


@dataclass
class CompareRow:
    gpu: GpuSpec
    estimate: Estimate | None
    changes: list[str] = field(default_factory=list)
    error: str | None = None
    alibaba: Offer | None = None
    other: Offer | None = None
    alibaba_instances: int = 0  # Alibaba instance types with this GPU (priced or not)

    @property
    def hours_per_billion(self) -> float | None:
        return BILLION / self.estimate.tokens_per_s / HOUR if self.estimate and self.estimate.fits else None

    def cost_per_billion(self, offer: Offer | None) -> float | None:
        hours = self.hours_per_billion
        if hours is None or offer is None:
            return None
        return hours * offer.per_hour * self.estimate.strategy.nodes

    def to_dict(self) -> dict[str, Any]:
        e = self.estimate
        row: dict[str, Any] = {"gpu": self.gpu.id, "name": self.gpu.name, "fits": bool(e and e.fits),
                               "changes": self.changes, "error": self.error}
        if e is not None:
            row.update({"config": config_dict(e), "memory_gib_total": round(e.memory.device / GiB, 2),
                        "gpu_memory_gib": round(e.memory.usable / GiB, 2),
                        "tokens_per_s": round(e.tokens_per_s, 1),
                        "tokens_per_s_per_gpu": round(e.tokens_per_s_per_gpu, 1), "mfu": round(e.mfu, 4),
                        "bottleneck": e.bottleneck})
        hours = self.hours_per_billion
        row["hours_per_billion_tokens"] = None if hours is None else round(hours, 3)
        row["alibaba"] = self.alibaba.to_dict() if self.alibaba else None
        row["alibaba_instance_types"] = self.alibaba_instances
        row["cny_per_billion_tokens"] = _round(self.cost_per_billion(self.alibaba))
        row["cheapest_other"] = self.other.to_dict() if self.other else None
        row["other_cost_per_billion_tokens"] = _round(self.cost_per_billion(self.other))
        return row


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def cheapest_offer(gpu_id: str, gpus: int, providers: tuple[str, ...]) -> Offer | None:
    """Cheapest pay-as-you-go instance with at least `gpus` of this GPU (the whole instance is paid)."""
    best: Offer | None = None
    for inst in all_instances().values():
        if inst.provider not in providers or inst.gpu != gpu_id or not inst.trainable or inst.gpu_count < gpus:
            continue
        price = cheapest_price(inst)
        if price is None:
            continue
        offer = Offer(inst, price)
        if best is None or offer.per_hour < best.per_hour:
            best = offer
    return best


def compare_one(model, gpu: GpuSpec, t: TrainingSpec, s: Strategy, eff: Efficiencies) -> CompareRow:
    t2, changes = adapt_to_gpu(t, gpu)
    try:
        cluster = cluster_for(gpu, s.gpus_per_node, s.nodes, None, None,
                              eff.for_gpu(gpu)("default_inter_node_gbps") if s.nodes > 1 else None)
        est = run_estimate(model, t2, s, cluster, eff)
    except SpecError as exc:
        return CompareRow(gpu, None, changes, error=str(exc))
    if not est.fits:
        alts = alternatives(est, eff, limit=1)
        if alts:
            changes.append(alts[0].change)
            est = alts[0].estimate
    return CompareRow(gpu, est, changes)


def compare(model: str, gpus_list: list[str] | None = None, *, gpus: int = 1, nodes: int = 1, zero: int | None = None,
            fsdp: str | None = None, offload: str = "none", overrides: dict | None = None,
            calibration: str | None = None, efficiencies: Efficiencies | None = None,
            **workload: Any) -> list[CompareRow]:
    spec = resolve_model(model)
    t = training_spec(model=spec, **workload)
    s = strategy_spec(gpus, nodes, zero, fsdp, offload)
    eff = efficiencies or load_efficiencies(overrides, calibration)
    rows = []
    for name in gpus_list or DEFAULT_GPUS:
        gpu = get_gpu(name)
        row = compare_one(spec, gpu, t, s, eff)
        n = row.estimate.strategy.gpus_per_node if row.estimate else s.gpus_per_node
        row.alibaba = cheapest_offer(gpu.id, n, ("alibaba",))
        row.other = cheapest_offer(gpu.id, n, ("aws", "gcp", "azure"))
        row.alibaba_instances = len(instances_for_gpu(gpu.id, "alibaba"))
        rows.append(row)
    return rows
