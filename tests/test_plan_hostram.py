"""`plan` checks the host RAM that loading the model (and CPU offload) needs per node against the instance's RAM:
a 70B LoRA ZeRO-3 plan on an instance with too little RAM is rejected with a counted reason and a binding constraint, in
en and zh; with the catalog's RAM it passes and plan.json / the table show RAM needed vs available."""

from dataclasses import replace

import pytest

from trainfit.catalog import get_gpu
from trainfit.catalog.efficiency import Efficiencies
from trainfit.catalog.instances import get_instance
from trainfit.estimate.hostram import loading_ram
from trainfit.i18n.notes import localize
from trainfit.plan import make_plan
from trainfit.report.plan import plan_dict, render_plan
from trainfit.report.plan import reason_text
from trainfit.search.reasons import Reason, Rejection
from trainfit.search.space import offers
from trainfit.spec.request import PlanRequest
from trainfit.units import GiB

HOST_RAM = Rejection.of(Reason.HOST_RAM)

INSTANCE = "ecs.gn7e-c16g1.32xlarge"  # 8 x A100 80 GB


def _plan(ram_gib):
    inst = get_instance(INSTANCE)
    req = PlanRequest(model="llama-3-70b", method="lora", dataset_tokens=1e8, max_nodes=2, gpu=("a100-sxm4-80gb",))
    offer_list, skipped = offers(req, {inst.key: replace(inst, ram_gib=ram_gib)})
    return make_plan(req, offer_list=offer_list, skipped=skipped)


def test_too_little_host_ram_rejects_the_70b_zero3_plan_with_the_reason():
    plan = _plan(64)  # LoRA ZeRO-3 on 2 x 8 GPUs loads 8 x (70.6e9 x 2 / 16 + 5 GB shard + 2 GiB) = ~118 GiB per node
    assert not plan.recommendations
    assert plan.rejected[HOST_RAM] > 0
    assert plan.binding["constraint"] == "host memory"
    assert "GiB available" in plan.binding["explanation"]
    zh = localize(plan.binding["explanation"], "zh")
    assert "主机内存" in zh and "GiB available" not in zh
    assert "主机内存" in reason_text(HOST_RAM, "zh")
    assert reason_text(HOST_RAM, "en") in plan_dict(plan)["rejected"]


def test_enough_host_ram_passes_and_plan_shows_need_vs_available():
    ram = get_instance(INSTANCE).ram_gib
    plan = _plan(ram)
    assert plan.recommendations and HOST_RAM not in plan.rejected
    best = plan_dict(plan)["recommendations"][0]
    need = best["host_ram_gib"]
    assert need["instance"] == ram and 0 < need["loading"] + need["offload"] <= ram
    assert any(line.startswith("host RAM: ") for line in best["why"])
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(render_plan(plan, "en"))
    assert f"/{ram:,.0f}" in console.export_text()


def test_loading_need_is_the_zero3_formula_with_the_catalog_allowances():
    view = Efficiencies.default().for_gpu(get_gpu("a100-sxm4-80gb"))
    shard, proc = view("loading_checkpoint_shard_bytes"), view("host_process_overhead_gib") * GiB
    assert shard == 5e9 and proc == 2 * GiB  # efficiency.yaml, with their basis there
    r = loading_ram(70e9, 2.0, "deepspeed", 3, 8, 16, shard, proc)
    assert r.zero_init and r.per_node_bytes == pytest.approx(8 * (70e9 * 2 / 16 + 5e9 + 2 * GiB))
    assert loading_ram(70e9, 2.0, "deepspeed", 2, 8, 16, shard, proc).per_node_bytes > 5 * r.per_node_bytes


def test_the_allowances_are_overridable_and_range_checked():
    from trainfit.errors import SpecError

    eff = Efficiencies.default().with_overrides({"host_process_overhead_gib": 8})
    assert eff.describe("host_process_overhead_gib")["default"] == 8
    with pytest.raises(SpecError, match="valid range"):
        Efficiencies.default().with_overrides({"loading_checkpoint_shard_bytes": -1})


def test_between_the_two_the_plan_moves_to_more_nodes():
    """150 GiB: one node of 8 ZeRO-3 ranks loads ~185 GiB (too much), two nodes ~119 GiB each (fits)."""
    plan = _plan(150)
    assert plan.recommendations and plan.rejected[HOST_RAM] > 0
    assert {c.nodes for c in plan.recommendations} == {2}
    assert all(c.loading.zero_init and c.loading.per_node_bytes <= 150 * GiB for c in plan.recommendations)
