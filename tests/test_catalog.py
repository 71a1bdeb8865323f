"""Catalog integrity over every row, and the facts the brief says are commonly wrong."""

import copy
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


# Rope-dict keys a preset's source file does have although transformers' standardisation would also write them: the
# source is itself a transformers-5-era file. Each checked against the source on 2026-12-01 (the preset's hf_config
# equals aiconfigurator's copy at commit 095f58a key for key, values and types).
ROPE_KEYS_IN_SOURCE = {
    "glm-5": {"rope_parameters.rope_type"},
    "gemma-4-26b-a4b": {"rope_parameters.sliding_attention.rope_type"},
    **{name: {"rope_parameters.rope_type", "rope_parameters.partial_rotary_factor"}
       for name in ("qwen3.5-27b", "qwen3.5-35b-a3b", "qwen3.5-122b-a10b", "qwen3.5-397b-a17b")},
}
STANDARDISED_KEYS = ("rope_theta", "rope_type", "partial_rotary_factor", "original_max_position_embeddings")


def _rope_dicts(text):
    """(path, dict) of each rope dict of a text config: rope_scaling / rope_parameters, or each per-layer-type one."""
    for field in ("rope_scaling", "rope_parameters"):
        d = text.get(field)
        if isinstance(d, dict):
            nested = [k for k, v in d.items() if isinstance(v, dict)]
            yield from (((field, k), d[k]) for k in nested) if nested else [((field,), d)]


def _written_by_standardisation(text):
    """Keys of the stored rope dicts that transformers writes itself: the key is removed from a deep copy of the
    config, the config object built, and its standardised rope_parameters hold the stored value again."""
    from trainfit.catalog.generic import hf_config_object

    out = set()
    for path, stored in _rope_dicts(text):
        for key in STANDARDISED_KEYS:
            if key not in stored:
                continue
            cut = copy.deepcopy(text)
            target = cut
            for part in path:
                target = target[part]
            del target[key]
            try:
                got = hf_config_object(cut).rope_parameters
            except SpecError:  # transformers refuses the config without it: it does not write that key itself
                continue
            for part in path[1:]:
                got = got[part]
            if key in got and got[key] == stored[key] and type(got[key]) is type(stored[key]):
                out.add(".".join((*path, key)))
    return out


@pytest.mark.parametrize("name", sorted(all_models()))
def test_models_rope_dicts_are_the_source_files_not_transformers_standardisation(name):
    """A preset's hf_config is its source file as published; transformers 5 standardises a nested rope dict IN PLACE
    (setdefault rope_theta, rope_type, partial_rotary_factor, original_max_position_embeddings), so a preset written
    from a dict that went through a config class carries keys the file never had (gpt-oss-20b's yarn rope_scaling
    gained rope_theta 150000, DeepSeek-V3's rope_theta + rope_type, Phi-4-mini's four). This fails for any rope-dict
    key transformers would write with the same value by itself unless the source is known to have it
    (ROPE_KEYS_IN_SOURCE); it failed for the nine presets above before their hf_config was restored (e2fe7d2)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from trainfit.catalog.generic import hf_config_object, text_config

    text = text_config(all_models()[name].hf_config)[0]
    if not any(True for _ in _rope_dicts(text)):
        return
    try:
        hf_config_object(text)
    except SpecError:  # a remote-code type transformers does not know: nothing standardises it
        return
    assert _written_by_standardisation(text) == ROPE_KEYS_IN_SOURCE.get(name, set())
