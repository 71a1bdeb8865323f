"""Host RAM per node that loading the model needs, as the generated train.py loads it.

With DDP or ZeRO-1/2 every rank (process) loads the whole model in host memory before moving it to its GPU:
Ψ x bytes per rank. Under FSDP only rank 0 reads the checkpoint (node 0 needs Ψ x bytes once), every rank keeps its
shard. Under ZeRO-3 train.py builds the model inside deepspeed.zero.Init, so a rank holds its partition,
Ψ x bytes / world size, plus the checkpoint shard it is reading (loading_checkpoint_shard_bytes). Each process adds
host_process_overhead_gib (both in efficiency.yaml). CPU offload states (`host_offload_bytes`) come on top; so do the
operating system and page cache. Model-parallel stacks (Megatron-LM, torchtitan) load a sharded checkpoint: each rank
reads only its tensor x pipeline shard (torchtitan under FSDP its data-parallel shard of that too).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..units import GiB


@dataclass(frozen=True)
class LoadingRam:
    per_rank_bytes: float
    per_node_bytes: float  # the busiest node (node 0 under FSDP rank-0 loading)
    zero_init: bool
    rank0_load: bool


def load_bytes_per_param(method: str, precision: str, engine: str, param_dtype: str = "fp32") -> float:
    """The dtype train.py loads the weights in (runner.load_dtype): 16-bit unless fp32 masters are kept."""
    if precision == "fp32":
        return 4.0
    if method in ("lora", "qlora") or engine == "deepspeed":
        return 2.0
    return 4.0 if param_dtype == "fp32" else 2.0


def loading_ram(params: float, bytes_per_param: float, engine: str, zero_stage: int, gpus_per_node: int,
                world: int, shard_bytes: float, process_bytes: float, model_parallel: int = 1) -> LoadingRam:
    """Host bytes per rank and per node while the model loads (see the module docstring)."""
    weights = params * bytes_per_param
    zero_init = engine == "deepspeed" and zero_stage == 3
    rank0 = engine == "fsdp" and world > 1
    if engine in ("megatron", "torchtitan"):  # a sharded checkpoint: each rank reads its own shard
        per_rank = weights / (world if engine == "torchtitan" else model_parallel)
        per_node = gpus_per_node * (per_rank + process_bytes)
    elif zero_init:
        per_rank = weights / world + min(shard_bytes, weights)
        per_node = gpus_per_node * (per_rank + process_bytes)
    elif rank0:  # rank 0 reads the whole checkpoint; every rank (rank 0 too) then holds its shard
        per_rank = weights + weights / world
        per_node = weights + gpus_per_node * (weights / world + process_bytes)
    else:
        per_rank = weights
        per_node = gpus_per_node * (per_rank + process_bytes)
    return LoadingRam(per_rank, per_node, zero_init, rank0)


def loading_ram_of(params: float, method: str, precision: str, param_dtype: str, engine: str, zero_stage: int,
                   gpus_per_node: int, world: int, view, model_parallel: int = 1) -> LoadingRam:
    """`loading_ram` with the allowances read from efficiency.yaml through an efficiency view."""
    return loading_ram(params, load_bytes_per_param(method, precision, engine, param_dtype), engine, zero_stage,
                       gpus_per_node, world, view("loading_checkpoint_shard_bytes"),
                       view("host_process_overhead_gib") * GiB, model_parallel)
