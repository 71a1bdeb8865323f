"""Host RAM per node that loading the model needs, as the generated train.py loads it.

With DDP or ZeRO-1/2 every rank (process) loads the whole model in host memory before moving it to its GPU:
Ψ x bytes per rank. Under FSDP only rank 0 reads the checkpoint (node 0 needs Ψ x bytes once), every rank keeps its
shard. Under ZeRO-3 train.py builds the model inside deepspeed.zero.Init, so a rank holds its
partition, Ψ x bytes / world size, plus the checkpoint file it is reading. CPU offload states (the plan's own
estimate, `host_offload_bytes`) come on top; so does the operating system and page cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from .setup import Setup

GiB = 2**30
# One checkpoint shard read at a time while loading into the partitions. 5 GB is transformers' classic
# `save_pretrained(max_shard_size="5GB")` default, which most published checkpoints were written with (an assumption
# about the checkpoint, not a measurement).
SHARD_BYTES = 5e9
# Per training process: the Python interpreter, torch/CUDA host-side libraries and the data loader (a rough allowance,
# not measured here).
PROCESS_BYTES = 2 * GiB


@dataclass(frozen=True)
class HostRam:
    per_rank_bytes: float
    per_node_bytes: float
    zero_init: bool
    instance_ram_gib: float | None
    rank0_load: bool = False

    @property
    def per_node_gib(self) -> float:
        return self.per_node_bytes / GiB

    @property
    def fits(self) -> bool | None:
        return None if not self.instance_ram_gib else self.per_node_gib <= self.instance_ram_gib


def _load_bytes_per_param(setup: Setup) -> float:
    """The dtype train.py loads the weights in (runner.load_dtype): 16-bit unless fp32 masters are kept."""
    st = setup.strategy
    if st["precision"] == "fp32":
        return 4.0
    if st["method"] in ("lora", "qlora") or st["engine"] == "deepspeed":
        return 2.0
    return 4.0 if st.get("param_dtype", "fp32") == "fp32" else 2.0


def host_ram(setup: Setup) -> HostRam:
    from ..catalog.instances import all_instances
    from ..estimate.params import count_params
    from ..spec.model import ModelSpec

    psi = count_params(ModelSpec.from_hf_config(setup.model["hf_config"], name=str(setup.model["name"])))
    weights = psi * _load_bytes_per_param(setup)
    zero_init = setup.strategy["engine"] == "deepspeed" and int(setup.strategy.get("zero_stage") or 0) == 3
    gpus, world = int(setup.choice["gpus_per_node"]), setup.world_size
    rank0 = setup.strategy["engine"] == "fsdp" and world > 1
    if zero_init:
        per_rank = weights / world + min(SHARD_BYTES, weights)
        per_node = gpus * (per_rank + PROCESS_BYTES)
    elif rank0:  # rank 0 reads the whole checkpoint; every rank (rank 0 too) then holds its shard
        per_rank = weights + weights / world
        per_node = weights + gpus * (weights / world + PROCESS_BYTES)
    else:
        per_rank = weights
        per_node = gpus * (per_rank + PROCESS_BYTES)
    inst = all_instances().get(f"{setup.choice.get('provider')}/{setup.choice.get('instance_type')}")
    return HostRam(per_rank, per_node, zero_init, inst.ram_gib if inst else None, rank0)
