"""Host RAM per node that loading the model needs in a generated setup: `estimate.hostram` (the formula `plan` checks
against the instance's RAM) applied to the setup, with the instance's RAM from the catalog."""

from __future__ import annotations

from dataclasses import dataclass

from .common import Setup

GiB = 2**30


@dataclass(frozen=True)
class HostRam:
    per_rank_bytes: float
    per_node_bytes: float
    zero_init: bool
    instance_ram_gib: float | None
    rank0_load: bool = False
    process_gib: float = 2.0  # host_process_overhead_gib used

    @property
    def per_node_gib(self) -> float:
        return self.per_node_bytes / GiB

    @property
    def fits(self) -> bool | None:
        return None if not self.instance_ram_gib else self.per_node_gib <= self.instance_ram_gib


def host_ram(setup: Setup) -> HostRam:
    from ..catalog import get_gpu
    from ..catalog.efficiency import Efficiencies
    from ..catalog.instances import all_instances
    from ..estimate.hostram import loading_ram_of
    from ..estimate.params import count_params
    from ..spec.model import ModelSpec

    psi = count_params(ModelSpec.from_hf_config(setup.model["hf_config"], name=str(setup.model["name"])))
    st = setup.strategy
    view = Efficiencies.default().for_gpu(get_gpu(str(setup.choice["gpu"])))
    ram = loading_ram_of(psi, st["method"], st["precision"], st.get("param_dtype", "fp32"), st["engine"],
                         int(st.get("zero_stage") or 0), int(setup.choice["gpus_per_node"]), setup.world_size, view)
    inst = all_instances().get(f"{setup.choice.get('provider')}/{setup.choice.get('instance_type')}")
    return HostRam(ram.per_rank_bytes, ram.per_node_bytes, ram.zero_init, inst.ram_gib if inst else None,
                   ram.rank0_load, view("host_process_overhead_gib"))
