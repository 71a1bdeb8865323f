"""Hardware specs: GPUs, cloud instances and their prices. Plain frozen records in SI units."""

from __future__ import annotations

from dataclasses import dataclass

from ..units import GB, GBIT, TFLOPS

# PCIe x16 bandwidth per direction, by generation (PCI-SIG: 8 / 16 / 32 GT/s per lane with 128b/130b encoding).
PCIE_X16_BYTES_PER_S = {3: 15.75 * GB, 4: 31.5 * GB, 5: 63.0 * GB}


@dataclass(frozen=True)
class GpuSpec:
    id: str
    name: str
    architecture: str
    compute_capability: float | None
    memory_bytes: float  # vendor "GB" (see memory_gb) as bytes: GB * 2**30 — NVIDIA's sizes are binary
    memory_gb: float
    memory_type: str
    memory_bandwidth: float  # bytes/s
    peak_flops: dict  # dtype -> dense FLOP/s on tensor cores (fp32 -> CUDA cores); missing = unsupported/unknown
    bf16_supported: bool
    fp8_supported: bool
    nvlink_gbs: float | None  # bidirectional GB/s per GPU; 0 = none; None = unknown
    pcie_gen: int | None
    tdp_w: float | None
    form_factor: str
    unverified: tuple[str, ...]
    sources: tuple[str, ...]
    source_date: str
    note: str
    aliases: tuple[str, ...] = ()

    def __hash__(self) -> int:  # peak_flops is a dict; the catalog id (plus memory) identifies a GPU
        return hash((self.id, self.memory_bytes, self.memory_bandwidth))

    def peak(self, dtype: str) -> float | None:
        """Dense peak FLOP/s for matmuls in `dtype` (bf16, fp16, fp8, fp32 -> tf32 tensor cores when present)."""
        return self.peak_flops.get(dtype)

    @property
    def pcie_bytes_per_s(self) -> float:
        return PCIE_X16_BYTES_PER_S.get(self.pcie_gen or 3, PCIE_X16_BYTES_PER_S[3])

    @property
    def has_nvlink(self) -> bool:
        return bool(self.nvlink_gbs)

    def is_unverified(self, column: str) -> bool:
        return column in self.unverified


@dataclass(frozen=True)
class InstanceSpec:
    provider: str
    instance_type: str
    family: str
    gpu: str | None
    gpu_inferred: bool
    gpu_count: int | None
    gpu_memory_gb: float | None
    vcpu: int | None
    ram_gib: float | None
    network_gbps: float | None
    interconnect: str  # nvswitch | nvlink | pcie | single | unknown
    nvlink_gbs: float | None
    rdma: str  # none | erdma | efa | infiniband | tcpx | unknown
    rdma_gbps: float | None
    kind: str  # gpu | vgpu
    availability: str
    unverified: tuple[str, ...]
    sources: tuple[str, ...]
    source_date: str
    note: str

    @property
    def key(self) -> str:
        return f"{self.provider}/{self.instance_type}"

    @property
    def trainable(self) -> bool:
        """Whole GPUs of a known model: something trainfit can plan on."""
        return self.kind == "gpu" and bool(self.gpu) and bool(self.gpu_count)

    @property
    def inter_node_bytes_per_s(self) -> float | None:
        """Bandwidth between instances: RDMA when present, else the instance network."""
        gbps = self.rdma_gbps if self.rdma not in ("none", "unknown") and self.rdma_gbps else self.network_gbps
        return gbps * GBIT if gbps else None


@dataclass(frozen=True)
class Price:
    provider: str
    instance_type: str
    region: str
    billing: str  # payg | subscription_month | spot
    price: float
    currency: str
    price_date: str
    includes: str
    unverified: bool
    sources: tuple[str, ...]
    note: str
    origin: str = "catalog"  # catalog (shipped snapshot) | live (refreshed through the provider's API) | user
    stock: str = ""  # "" unknown | available | sold_out (from a live availability query)

    @property
    def per_hour(self) -> float:
        """Hourly price; a monthly subscription is spread over 730 hours (365 * 24 / 12)."""
        return self.price / 730.0 if self.billing == "subscription_month" else self.price


def tflops(value: float | None) -> float | None:
    return None if value is None else value * TFLOPS
