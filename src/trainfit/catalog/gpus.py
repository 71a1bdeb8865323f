"""GPU catalog: gpus.csv -> GpuSpec, with name/alias resolution and 'did you mean' errors."""

from __future__ import annotations

from functools import lru_cache

from ..errors import CatalogError, unknown_name
from ..i18n import say
from ..spec.hardware import GpuSpec, tflops
from ..units import GiB
from ._io import boolean, items, norm_name, num, read_csv

ARCHITECTURES = ("pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell")

# dtype used for a matmul -> gpus.csv column with its dense peak
_PEAK_COLUMNS = {
    "fp32": "fp32_tflops",
    "tf32": "tf32_tensor_dense_tflops",
    "fp16": "fp16_tensor_dense_tflops",
    "bf16": "bf16_tensor_dense_tflops",
    "fp8": "fp8_tensor_dense_tflops",
}


def _gpu_from_row(row: dict[str, str]) -> GpuSpec:
    where = f"gpus.csv row {row.get('id')!r}"
    arch = row["architecture"].strip()
    if arch not in ARCHITECTURES:
        raise CatalogError(f"{where}: architecture {arch!r} not in {ARCHITECTURES}")
    memory_gb = num(row, "memory_gb", where)
    bandwidth = num(row, "memory_bandwidth_gbs", where)
    if not memory_gb or not bandwidth:
        raise CatalogError(f"{where}: memory_gb and memory_bandwidth_gbs are required")
    peaks = {dt: tflops(num(row, col, where)) for dt, col in _PEAK_COLUMNS.items()}
    cc = num(row, "compute_capability", where)
    pcie = num(row, "pcie_gen", where)
    return GpuSpec(
        id=row["id"].strip(), name=row["name"].strip(), architecture=arch, compute_capability=cc,
        memory_bytes=memory_gb * GiB, memory_gb=memory_gb, memory_type=row["memory_type"].strip(),
        memory_bandwidth=bandwidth * 1e9, peak_flops={k: v for k, v in peaks.items() if v},
        bf16_supported=boolean(row, "bf16_supported", where), fp8_supported=boolean(row, "fp8_supported", where),
        nvlink_gbs=num(row, "nvlink_gbs", where), pcie_gen=int(pcie) if pcie else None,
        tdp_w=num(row, "tdp_w", where), form_factor=row.get("form_factor", "").strip(),
        unverified=items(row, "unverified"), sources=items(row, "sources"),
        source_date=row.get("source_date", "").strip(), note=row.get("note", "").strip(),
        aliases=items(row, "aliases"),
    )


@lru_cache(maxsize=1)
def all_gpus() -> dict[str, GpuSpec]:
    gpus = [_gpu_from_row(r) for r in read_csv("gpus.csv")]
    return {g.id: g for g in gpus}


@lru_cache(maxsize=1)
def _alias_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for gpu in all_gpus().values():
        for name in (gpu.id, *gpu.aliases):
            key = norm_name(name)
            if index.get(key, gpu.id) != gpu.id:
                raise CatalogError(f"gpus.csv: name {name!r} is used by {index[key]!r} and {gpu.id!r}")
            index[key] = gpu.id
    return index


def get_gpu(name: str) -> GpuSpec:
    """Resolve a GPU by id or alias ('a10', 'A100-80GB', 'H100 SXM5', 'nvidia-a10', ...)."""
    key = norm_name(name)
    if key.startswith("nvidia"):
        key = key[len("nvidia"):]
    gpu_id = _alias_index().get(key)
    if gpu_id is None:
        raise unknown_name(say("ei_kind_gpu"), name, all_gpus(), hint=say("ei_hint_gpus"))
    return all_gpus()[gpu_id]
