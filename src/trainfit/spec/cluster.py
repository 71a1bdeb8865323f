"""Cluster: the GPU model and the links between GPUs (inside a node) and between nodes."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SpecError
from ..i18n import say
from ..units import GB, GBIT
from .hardware import PCIE_X16_BYTES_PER_S, GpuSpec, InstanceSpec


@dataclass(frozen=True)
class Cluster:
    gpu: GpuSpec
    intra_link: str  # nvswitch | nvlink | pcie | single
    intra_bytes_per_s: float  # per GPU, per direction
    inter_link: str  # erdma | efa | infiniband | tcpx | tcp | none
    inter_bytes_per_s: float | None  # per node, per direction
    host_cores: int | None = None
    instance: InstanceSpec | None = None
    assumptions: tuple[str, ...] = ()

    @property
    def pcie_bytes_per_s(self) -> float:
        return self.gpu.pcie_bytes_per_s


def nvlink_per_direction(nvlink_gbs: float) -> float:
    """NVIDIA prints NVLink as total bidirectional GB/s per GPU; one direction is half."""
    return nvlink_gbs * GB / 2


def cluster_for(gpu: GpuSpec, gpus_per_node: int, nodes: int, instance: InstanceSpec | None = None,
                network_gbps: float | None = None, default_network_gbps: float | None = None,
                catalog_network: bool = False) -> Cluster:
    """`catalog_network`: without an instance or --network-gbps, nodes talk over the fastest network the catalog
    rents with this GPU (what a user's job gets); without it, `default_network_gbps` (a published run's own fabric,
    as validation models it)."""
    notes: list[str] = []
    if instance is not None:
        link, intra = _instance_link(gpu, instance, gpus_per_node, notes)
    else:
        link, intra = _bare_link(gpu, gpus_per_node, notes)
    inter_link, inter = "none", None
    if nodes > 1:
        inter_link, inter = _inter_node(instance, network_gbps, default_network_gbps, notes,
                                        gpu if catalog_network else None)
    return Cluster(gpu=gpu, intra_link=link, intra_bytes_per_s=intra, inter_link=inter_link,
                   inter_bytes_per_s=inter, host_cores=instance.vcpu if instance else None,
                   instance=instance, assumptions=tuple(notes))


def _bare_link(gpu: GpuSpec, gpus_per_node: int, notes: list[str]) -> tuple[str, float]:
    if gpus_per_node == 1:
        return "single", gpu.pcie_bytes_per_s
    if gpu.nvlink_gbs and gpu.form_factor.upper().startswith("SXM"):
        notes.append(say("es_sxm_nvswitch", gpu=gpu.id, bw=gpu.nvlink_gbs))
        return ("nvswitch" if gpus_per_node > 2 else "nvlink"), nvlink_per_direction(gpu.nvlink_gbs)
    notes.append(say("es_pcie_gen", gpu=gpu.id, gen=gpu.pcie_gen or 3))
    return "pcie", gpu.pcie_bytes_per_s


def _instance_link(gpu: GpuSpec, inst: InstanceSpec, gpus_per_node: int, notes: list[str]) -> tuple[str, float]:
    if gpus_per_node == 1:
        return "single", gpu.pcie_bytes_per_s
    if inst.gpu_count and gpus_per_node > inst.gpu_count:
        raise SpecError(f"{inst.instance_type} has {inst.gpu_count} GPUs, not {gpus_per_node}")
    link = inst.interconnect
    if link in ("nvlink", "nvswitch"):
        nv = inst.nvlink_gbs or gpu.nvlink_gbs
        if nv:
            return link, nvlink_per_direction(nv)
        notes.append(say("es_nvlink_undocumented", instance=inst.instance_type))
    if link == "unknown":
        notes.append(say("es_link_undocumented", instance=inst.instance_type))
    return "pcie", PCIE_X16_BYTES_PER_S.get(gpu.pcie_gen or 3)


def check_network_gbps(network_gbps: float) -> None:
    if isinstance(network_gbps, bool) or not isinstance(network_gbps, (int, float)) or \
            not 0 < network_gbps <= 100_000:
        raise SpecError(say("ei_network_gbps", high=100000, value=network_gbps))


def _inter_node(inst: InstanceSpec | None, network_gbps: float | None, default_gbps: float | None,
                notes: list[str], gpu: GpuSpec | None = None) -> tuple[str, float]:
    if network_gbps is not None:
        check_network_gbps(network_gbps)
        return "tcp", network_gbps * GBIT
    if inst is not None:
        bw = inst.inter_node_bytes_per_s
        if bw is None:
            raise SpecError(f"{inst.instance_type}: network bandwidth unknown; pass --network-gbps")
        rdma = inst.rdma if inst.rdma not in ("none", "unknown") else "tcp"
        return rdma, bw
    best = _catalog_network(gpu) if gpu is not None else None
    if best is not None:  # the network a multi-node job of this GPU can rent: the catalog's best, not a default
        bw = best.inter_node_bytes_per_s
        rdma = best.rdma if best.rdma not in ("none", "unknown") else "tcp"
        notes.append(say("es_network_catalog", instance=best.instance_type, gbps=bw / GBIT, rdma=rdma, gpu=gpu.id))
        return rdma, bw
    if default_gbps:
        notes.append(say("es_network_default", gbps=default_gbps))
        return "infiniband", default_gbps * GBIT
    raise SpecError("a multi-node estimate needs --instance or --network-gbps")


def _catalog_network(gpu: GpuSpec) -> InstanceSpec | None:
    """The catalog instance of this GPU with the fastest documented network between instances (Alibaba first on a
    tie): an A10 cluster is gn7i's TCP, not an InfiniBand the catalog does not sell; None where none is documented."""
    from ..catalog import instances_for_gpu

    known = [i for i in instances_for_gpu(gpu.id) if i.inter_node_bytes_per_s]
    if not known:
        return None
    return max(known, key=lambda i: (i.inter_node_bytes_per_s, i.provider == "alibaba", i.gpu_count or 0))
