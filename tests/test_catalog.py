"""Catalog integrity over every row, and the facts the brief says are commonly wrong."""

import re

import pytest

from trainfit.catalog import all_gpus, all_instances, all_models, all_sources, get_gpu, get_instance
from trainfit.catalog._io import read_csv
from trainfit.catalog.instances import all_prices
from trainfit.errors import SpecError

CANONICAL = ["a10", "a10g", "t4", "l4", "l20", "l40s", "a30", "v100-sxm2-16gb", "v100-sxm2-32gb", "v100-pcie-16gb",
             "v100-pcie-32gb", "a100-sxm4-40gb", "a100-sxm4-80gb", "a100-pcie-40gb", "a100-pcie-80gb",
             "a800-sxm4-80gb", "h100-sxm", "h100-pcie", "h800-sxm", "h20", "h200", "rtx4090", "rtx-a6000"]


@pytest.mark.parametrize("name", CANONICAL)
def test_every_schema_gpu_name_resolves(name):
    assert get_gpu(name).id == name


@pytest.mark.parametrize("alias,gpu", [("A100-80GB", "a100-sxm4-80gb"), ("a100", "a100-sxm4-80gb"),
                                       ("H100 SXM5", "h100-sxm"), ("NVIDIA A10", "a10"), ("RTX 4090", "rtx4090"),
                                       ("nvidia-h20", "h20"), ("V100-32GB", "v100-sxm2-32gb")])
def test_aliases(alias, gpu):
    assert get_gpu(alias).id == gpu


def test_unknown_gpu_suggests():
    with pytest.raises(SpecError, match="did you mean"):
        get_gpu("a1000")


@pytest.mark.parametrize("gpu", sorted(all_gpus()))
def test_gpu_row_integrity(gpu):
    g = all_gpus()[gpu]
    assert g.sources and all(s in all_sources() for s in g.sources), g.sources
    assert g.source_date
    assert g.memory_gb > 0 and g.memory_bandwidth > 0
    assert g.peak("fp32") or g.peak("fp16")
    # dense tensor peaks are ordered: fp8 >= bf16 >= tf32 where present
    if g.peak("bf16") and g.peak("tf32"):
        assert g.peak("bf16") >= g.peak("tf32")
    if g.peak("fp8") and g.peak("bf16"):
        assert g.peak("fp8") >= g.peak("bf16")
    assert g.fp8_supported == bool(g.peak("fp8"))
    if not g.bf16_supported:
        assert g.peak("bf16") is None
    columns = set(read_csv("gpus.csv")[0])
    assert set(g.unverified) <= columns


def test_facts_the_brief_calls_out():
    a10 = get_gpu("a10")
    assert a10.nvlink_gbs == 0 and a10.peak("bf16") == 125e12 and a10.peak("fp16") == 125e12
    assert a10.memory_bandwidth == 600e9 and a10.pcie_gen == 4
    h100 = get_gpu("h100-sxm")
    assert h100.peak("bf16") == pytest.approx(989.4e12, rel=0.001)  # dense; 1,979 is with sparsity
    assert get_gpu("v100-sxm2-16gb").bf16_supported is False
    assert get_gpu("t4").peak("fp16") == 65e12


def test_no_gn10x_family():
    assert not any("gn10x" in i.instance_type for i in all_instances().values())
    with pytest.raises(SpecError):
        get_instance("ecs.gn10x-c8g1.2xlarge")


@pytest.mark.parametrize("key", sorted(all_instances()))
def test_instance_row_integrity(key):
    inst = all_instances()[key]
    assert inst.sources and all(s in all_sources() for s in inst.sources)
    if inst.gpu:
        assert inst.gpu in all_gpus(), inst.gpu
    if inst.gpu_count == 1:
        assert inst.interconnect == "single"
    if inst.interconnect in ("nvlink", "nvswitch") and inst.gpu:
        assert all_gpus()[inst.gpu].nvlink_gbs, "NVLink instance with a GPU that has no NVLink"
    if inst.gpu in ("a10", "t4", "l20", "l4", "a10g"):
        assert inst.interconnect in ("single", "pcie"), "these GPUs have no NVLink"
    if inst.provider == "alibaba":
        assert inst.instance_type.startswith("ecs.")


def test_alibaba_gpu_families():
    by_family = {i.family: i.gpu for i in all_instances().values() if i.provider == "alibaba"}
    assert by_family["gn7i"] == "a10" and by_family["gn6i"] == "t4" and by_family["gn6v"] == "v100-sxm2-16gb"
    assert by_family["gn7e"] == "a100-sxm4-80gb" and by_family["gn8v"] == "h20"
    gn7e = get_instance("ecs.gn7e-c16g1.4xlarge")
    assert gn7e.gpu_inferred and "gpu" in gn7e.unverified  # Alibaba no longer names the GPU: kept visible


@pytest.mark.parametrize("key", sorted(all_prices()))
def test_price_rows(key):
    assert key in all_instances(), f"price for unknown instance {key}"
    for p in all_prices()[key]:
        assert p.price > 0 and p.price_date and p.sources
        assert all(s in all_sources() for s in p.sources)
        assert p.currency == ("CNY" if p.provider == "alibaba" else "USD")


def test_known_prices():
    """Reference §6: gn7i-c8g1.2xlarge ¥9.53/h and gn7e-c16g1.4xlarge ¥34.742/h (2024-12-30, cn-hangzhou)."""
    from trainfit.catalog.instances import prices_for

    p = prices_for(get_instance("ecs.gn7i-c8g1.2xlarge"), region="cn-hangzhou")[0]
    assert p.price == pytest.approx(9.5326) and p.price_date == "2024-12-30"
    p = prices_for(get_instance("ecs.gn7e-c16g1.4xlarge"), region="cn-hangzhou")[0]
    assert p.price == pytest.approx(34.742)


def test_unpriced_stays_unpriced():
    """No public price was found for gn8v: the catalog must not invent one."""
    assert "alibaba/ecs.gn8v-8x.48xlarge" not in all_prices()


@pytest.mark.parametrize("name", sorted(all_models()))
def test_model_preset_integrity(name):
    p = all_models()[name]
    assert p.source and p.source_date and p.params
    assert p.source_id in all_sources(), p.source_id
    spec = p.spec()
    assert spec.hidden % spec.heads == 0 or spec.head_dim
    assert re.fullmatch(r"[a-z0-9.\-]+", p.name)
