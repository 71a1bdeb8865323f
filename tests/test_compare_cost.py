"""compare prices whole instances (the same cost function as plan) and names the instance it priced."""

import json

import pytest

from trainfit.api import load_efficiencies
from trainfit.catalog import resolve_model
from trainfit.compare import cheapest_choice, compare
from trainfit.search.cost import cost_per_tokens, job_cost
from trainfit.search.space import Offer
from trainfit.spec.hardware import InstanceSpec, Price


def test_acceptance_compare_names_instance_gpus_and_price_per_gpu_hour(run_cli):
    code, out, err = run_cli("compare", "--model", "llama-2-7b", "--method", "lora", "--json")
    assert code == 0, err
    rows = {r["gpu"]: r for r in json.loads(out)["rows"]}
    for r in rows.values():
        if not r["fits"]:  # the requested method (LoRA) does not fit: nothing to price; what would fit is named
            assert r["unpriced"] == "does not fit" and r["would_fit_with"]["fits"]
            assert r["config"]["method"] == "lora" and "--method qlora" in r["would_fit_with"]["change"]
            continue
        assert r["config"]["method"] == "lora"  # compare keeps the requested method on every GPU that fits
        if r["instance"] is None:  # unpriced GPUs say why and how to fix it
            assert r["unpriced"] and "--prices" in r["unpriced"]
            continue
        assert r["gpus_used"] >= 1 and r["price_per_gpu_hour"] > 0
        for c in (r["alibaba"], r["cheapest_other"]):
            if c:
                assert c["gpus_used"] <= c["gpus_per_instance"]
                assert c["price_per_gpu_hour"] == pytest.approx(c["price_per_hour"] / c["gpus_per_instance"],
                                                                rel=1e-3)
                assert c["price_date"] and c["price_sources"] and "price_stale" in c
    h100 = rows["h100-sxm"]["other_cost_per_billion_tokens"]
    h200 = rows["h200"]["other_cost_per_billion_tokens"]
    assert h100 and h200 and 0.5 < h200 / h100 < 2.0


def test_an_eight_gpu_instance_is_used_whole():
    # The only H200 type is 8-GPU: paying for eight and using one would cost ~8x per token; compare uses all eight.
    from trainfit import api

    row = compare("llama-2-7b", ["h200"], method="lora")[0]
    c = row.other
    assert c.offer.gpu_count == 8 and c.estimate.strategy.gpus_per_node == 8
    one_gpu = api.estimate("llama-2-7b", "h200", method="lora")  # the job on one of its GPUs
    assert c.cost_per_billion < cost_per_tokens(c.offer, 1, one_gpu.tokens_per_s, 1e9) / 4


def _inst(name, count):
    return InstanceSpec(provider="aws", instance_type=name, family="x", gpu="a10", gpu_inferred=False,
                        gpu_count=count, gpu_memory_gb=24, vcpu=8 * count, ram_gib=64.0 * count, network_gbps=25,
                        interconnect="single" if count == 1 else "pcie", nvlink_gbs=None, rdma="none",
                        rdma_gbps=None, kind="gpu", availability="", unverified=(), sources=("T",),
                        source_date="2026-11-30", note="")


def test_compare_and_plan_price_a_job_the_same_way():
    # One cost function: for a job of exactly N billed hours, plan's cost equals compare's cost for the tokens
    # processed in those hours.
    eff = load_efficiencies()
    offer = Offer(_inst("box", 4), Price("aws", "box", "r", "payg", 8.0, "USD", "2026-11-30", "instance", False,
                                         ("T",), ""))
    tokens_per_s, hours = 5000.0, 10.0
    billed, cost = job_cost(offer, hours, 2, eff)
    assert billed == pytest.approx(hours)
    assert cost == pytest.approx(cost_per_tokens(offer, 2, tokens_per_s, tokens_per_s * hours * 3600))
    assert cost == pytest.approx(8.0 * 2 * hours)  # whole instances, both nodes


def test_unpriced_gpu_has_no_cost(monkeypatch):
    """Without a price anywhere the row still has its layout and speed (ranked by GPU-hours), and no cost."""
    from collections import Counter

    import trainfit.search.space as space

    monkeypatch.setattr(space, "offers", lambda req, *a, **kw: ([], Counter()))
    row = compare("qwen2.5-0.5b", ["a10"], method="lora")[0]
    assert row.estimate is not None and row.estimate.fits and row.rank == 1
    assert row.alibaba is None and row.other is None and "--prices" in row.unpriced_reason()


def test_cheapest_choice_skips_instances_with_too_few_gpus():
    m = resolve_model("qwen2.5-0.5b")
    row = compare("qwen2.5-0.5b", ["a10"], method="lora", gpus=4)[0]
    assert row.alibaba.estimate.strategy.gpus_per_node >= 4 and row.alibaba.offer.gpu_count >= 4
    assert cheapest_choice(m, row.estimate, ("nowhere",), load_efficiencies()) is None


def test_a_stated_stack_gets_only_layouts_its_scripts_run(run_cli):
    """compare --framework litgpt answers as plan --framework litgpt does (spec/training.py stack_refuses): on one
    A10 LitGPT runs no checkpointing, so Qwen2-7B LoRA does not fit there, and what would fit is LitGPT's own
    multi-GPU layout (FSDP full shard, every block checkpointed), never DeepSpeed; the instances priced for an A100
    row use layouts LitGPT runs (one GPU, or several under FSDP full shard with checkpointing)."""
    from trainfit.advise import alternatives
    from trainfit.spec.training import stack_refuses

    code, out, err = run_cli("compare", "--model", "qwen2-7b", "--method", "lora", "--framework", "litgpt",
                             "--gpu", "a10,a100-sxm4-80gb", "--json")
    assert code == 0, err
    rows = {r["gpu"]: r for r in json.loads(out)["rows"]}
    a10 = rows["a10"]  # like for like: the layout LitGPT runs that fits (plan's search, --framework litgpt)
    assert a10["fits"] and a10["like_for_like"]
    assert a10["config"]["fsdp"] == "full_shard" and a10["config"]["grad_ckpt"] == "full"
    change = a10["changes"][0]
    assert "--fsdp full_shard" in change and "--grad-ckpt full" in change and "--zero" not in change
    a100 = rows["a100-sxm4-80gb"]
    assert a100["fits"] and a100["alibaba"]
    # the same job without the stack: one A10 with checkpointing (what LitGPT's scripts do not run)
    code, out, err = run_cli("compare", "--model", "qwen2-7b", "--method", "lora", "--gpu", "a10", "--json")
    plain = json.loads(out)["rows"][0]
    assert plain["fits"] and plain["config"]["grad_ckpt"] == "full"
    # every alternative offered under the stack is a layout it runs
    from trainfit import api
    est = api.estimate("qwen2-7b", "a10", method="lora", framework="litgpt")
    alts = alternatives(est, limit=8)
    assert alts
    for a in alts:
        e = a.estimate
        assert stack_refuses(e.training.model_code, e.training.method, e.training.grad_ckpt, e.strategy,
                             "litgpt") is None, a.change
