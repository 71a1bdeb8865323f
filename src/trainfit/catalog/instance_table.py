"""The instance catalog (instances.csv) read into InstanceSpecs: below both instances.py (lookups, prices per
instance) and prices.py (which checks a quote's instance type against this table)."""

from __future__ import annotations

from functools import lru_cache

from ..errors import CatalogError
from ..spec.hardware import InstanceSpec
from ._io import boolean, items, num, read_csv

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
