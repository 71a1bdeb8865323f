"""Host RAM per node for loading the model: what the generated README states, ZeRO-3 (zero.Init) against every
rank loading the whole model, and the warning when the plan's instance has less."""

import re

from test_generate import _setup

from trainfit.estimate.params import count_params
from trainfit.generate.docs import readme
from trainfit.generate.hostram import GiB, host_ram
from trainfit.spec.model import ModelSpec

SHARD_BYTES, PROCESS_BYTES = 5e9, 2 * GiB  # efficiency.yaml: loading_checkpoint_shard_bytes, host_process_overhead_gib


def _stated_gib(text):
    return float(re.search(r"about ([\d,]+) GiB of host RAM per node", text).group(1).replace(",", ""))


def test_70b_zero3_readme_states_host_ram_per_node():
    setup = _setup("llama-3-70b", "a100-sxm4-80gb", 8, 2, "deepspeed", "full", zero=3,
                   instance="ecs.gn7e-c16g1.32xlarge")
    text = readme(setup, "en")
    psi = count_params(ModelSpec.from_hf_config(setup.model["hf_config"]))
    expected = 8 * (psi * 2 / 16 + SHARD_BYTES + PROCESS_BYTES) / GiB  # bf16 partitions of 16 ranks + one shard
    assert abs(_stated_gib(text) - expected) < 1
    assert "deepspeed.zero.Init" in text
    assert "主机内存" in readme(setup, "zh")


def test_zero3_needs_far_less_host_ram_than_loading_everywhere():
    z3 = host_ram(_setup("llama-3-70b", "a100-sxm4-80gb", 8, 2, "deepspeed", "full", zero=3))
    z2 = host_ram(_setup("llama-3-70b", "a100-sxm4-80gb", 8, 2, "deepspeed", "full", zero=2))
    assert z3.zero_init and not z2.zero_init
    assert z3.per_node_bytes * 5 < z2.per_node_bytes


def test_warns_when_the_instance_has_less_ram():
    small = _setup("qwen2-7b", "a10", 1, 1, "ddp", "full", instance="ecs.gn7i-c8g1.2xlarge", precision="bf16")
    ram = host_ram(small)
    assert ram.instance_ram_gib == 30 and ram.fits is False  # fp32 masters: 7.6 B x 4 bytes > 30 GiB
    assert "Warning: the instance has only 30 GiB" in readme(small, "en")


def test_fsdp_reads_the_checkpoint_once_per_job():
    fsdp = host_ram(_setup("llama-3-70b", "h100-sxm", 8, 2, "fsdp", "full", fsdp="full_shard"))
    ddp = host_ram(_setup("llama-3-70b", "h100-sxm", 8, 2, "ddp", "full"))  # fp32 weights on every rank
    assert fsdp.rank0_load and fsdp.per_node_bytes * 4 < ddp.per_node_bytes
    assert "only rank 0 reads" in readme(_setup("llama-3-70b", "h100-sxm", 8, 2, "fsdp", "full", fsdp="full_shard"),
                                         "en")
