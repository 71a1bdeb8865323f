"""Cloud instance catalog (instances.csv) and prices (prices.csv)."""

from __future__ import annotations

from functools import lru_cache

from ..errors import CatalogError, unknown_name
from ..spec.hardware import InstanceSpec, Price
from ._io import boolean, items, norm_name, num, read_csv
from .prices import BILLINGS, CURRENCIES, all_prices  # noqa: F401 - re-exported: prices used to live here

PROVIDERS = ("alibaba", "aws", "gcp", "azure")
INTERCONNECTS = ("nvswitch", "nvlink", "pcie", "single", "unknown")
RDMA_KINDS = ("none", "erdma", "efa", "infiniband", "tcpx", "unknown")


def _enum(row: dict[str, str], col: str, allowed: tuple[str, ...], where: str) -> str:
    value = (row.get(col) or "").strip()
    if value not in allowed:
        raise CatalogError(f"{where}: {col}={value!r} not in {allowed}")
    return value


def _int(row: dict[str, str], col: str, where: str) -> int | None:
    value = num(row, col, where)
    return None if value is None else int(value)


def _instance_from_row(row: dict[str, str]) -> InstanceSpec:
    where = f"instances.csv row {row.get('instance_type')!r}"
    return InstanceSpec(
        provider=_enum(row, "provider", PROVIDERS, where), instance_type=row["instance_type"].strip(),
        family=row.get("family", "").strip(), gpu=(row.get("gpu") or "").strip() or None,
        gpu_inferred=boolean(row, "gpu_inferred", where), gpu_count=_int(row, "gpu_count", where),
        gpu_memory_gb=num(row, "gpu_memory_gb", where), vcpu=_int(row, "vcpu", where),
        ram_gib=num(row, "ram_gib", where), network_gbps=num(row, "network_gbps", where),
        interconnect=_enum(row, "interconnect", INTERCONNECTS, where), nvlink_gbs=num(row, "nvlink_gbs", where),
        rdma=_enum(row, "rdma", RDMA_KINDS, where), rdma_gbps=num(row, "rdma_gbps", where),
        kind=_enum(row, "kind", ("gpu", "vgpu"), where), availability=row.get("availability", "").strip(),
        unverified=items(row, "unverified"), sources=items(row, "sources"),
        source_date=row.get("source_date", "").strip(), note=row.get("note", "").strip(),
    )


@lru_cache(maxsize=1)
def all_instances() -> dict[str, InstanceSpec]:
    out: dict[str, InstanceSpec] = {}
    for row in read_csv("instances.csv"):
        inst = _instance_from_row(row)
        if inst.key in out:
            raise CatalogError(f"instances.csv: duplicate {inst.key}")
        out[inst.key] = inst
    return out


def get_instance(name: str, provider: str | None = None) -> InstanceSpec:
    """By 'provider/type' or just the type ('ecs.gn7i-c8g1.2xlarge', 'gn7i-c8g1.2xlarge', 'p4d.24xlarge')."""
    wanted = norm_name(name.split("/", 1)[-1])
    for inst in all_instances().values():
        if provider and inst.provider != provider:
            continue
        if norm_name(inst.instance_type) in (wanted, "ecs" + wanted, norm_name("ecs." + name)):
            return inst
    raise unknown_name("instance type", name, [i.instance_type for i in all_instances().values()],
                       hint="`trainfit instances` lists the catalog")


def instances_for_gpu(gpu_id: str, provider: str | None = None) -> list[InstanceSpec]:
    return [i for i in all_instances().values()
            if i.gpu == gpu_id and i.trainable and (provider is None or i.provider == provider)]


def prices_for(inst: InstanceSpec, region: str | None = None, billing: str = "payg",
               in_stock: bool = False) -> list[Price]:
    """Prices of an instance, cheapest first; region None = any region; in_stock drops regions a live query found
    sold out."""
    prices = [p for p in all_prices().get(inst.key, ()) if p.billing == billing
              and (region is None or p.region == region) and not (in_stock and p.stock == "sold_out")]
    return sorted(prices, key=lambda p: p.per_hour)


def cheapest_price(inst: InstanceSpec, region: str | None = None, billing: str = "payg",
                   in_stock: bool = False) -> Price | None:
    prices = prices_for(inst, region, billing, in_stock)
    return prices[0] if prices else None
