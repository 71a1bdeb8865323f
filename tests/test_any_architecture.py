"""Oracle over every causal-LM architecture transformers knows: trainfit's parameter count (the hand-written family
where there is one, else the generic structure reader's inventory summed group by group) equals
`model.num_parameters()` of the model transformers builds on the meta device from the type's default config.

Default configs are cut to at most 4 blocks (and their per-layer lists with them) to keep the run short; the
inventory is per block group, so the cut changes nothing the test checks.
"""

import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES  # noqa: E402

from trainfit.catalog.generic import hf_config_object, model_class_for, text_config  # noqa: E402
from trainfit.catalog.models import spec_from_config  # noqa: E402
from trainfit.errors import TrainfitError  # noqa: E402
from trainfit.estimate.params import count_params  # noqa: E402

MAX_LAYERS = 4
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")

# Types whose default config transformers itself cannot build (or that have no text model); not counted.
# Types trainfit counts wrongly are listed in README ("Architectures the generic reader does not match").
KNOWN_MISMATCH: dict[str, str] = {}


def cut(cfg: dict) -> dict:
    cfg = dict(cfg)
    for key in LAYER_KEYS:
        n = cfg.get(key)
        if isinstance(n, int) and n > MAX_LAYERS:
            cfg[key] = MAX_LAYERS
            for k, v in list(cfg.items()):  # per-layer lists (layer_types, mlp_only_layers patterns, ...)
                if isinstance(v, list) and len(v) == n:
                    cfg[k] = v[:MAX_LAYERS]
    if isinstance(cfg.get("text_config"), dict):
        cfg["text_config"] = cut(cfg["text_config"])
    return cfg


def default_config(model_type: str) -> dict | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return cut(transformers.AutoConfig.for_model(model_type).to_dict())
    except Exception:  # noqa: BLE001 - a default config transformers cannot make
        return None


def reference_count(cfg: dict) -> int | None:
    """num_parameters() of the text model transformers builds; None when it cannot build it."""
    text, _ = text_config(cfg)
    try:
        conf = hf_config_object(text)
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            return model_class_for(conf).from_config(conf).num_parameters()
    except Exception:  # noqa: BLE001
        return None


def survey() -> dict[str, tuple[int, int | str]]:
    out = {}
    for model_type in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        cfg = default_config(model_type)
        ref = reference_count(cfg) if cfg is not None else None
        if ref is None:
            continue
        try:
            ours: int | str = count_params(spec_from_config(cfg))
        except TrainfitError as exc:
            ours = f"error: {exc}"
        out[model_type] = (ref, ours)
    return out


@pytest.fixture(scope="module")
def results():
    return survey()


def test_at_least_90_percent_of_buildable_types_are_exact(results):
    exact = [t for t, (ref, ours) in results.items() if isinstance(ours, (int, float)) and abs(ours - ref) <= 1e-4 * ref]
    wrong = {t: v for t, v in results.items() if t not in exact}
    print(f"{len(exact)}/{len(results)} exact; not exact: {wrong}")
    assert len(results) >= 100  # the survey itself ran
    assert len(exact) >= 0.9 * len(results), wrong


def test_mismatches_are_the_documented_ones(results):
    wrong = sorted(t for t, (ref, ours) in results.items()
                   if not (isinstance(ours, (int, float)) and abs(ours - ref) <= 1e-4 * ref))
    assert wrong == sorted(KNOWN_MISMATCH), wrong


def test_shipped_structures_equal_a_fresh_read():
    """Presets outside the fast path ship the generic reader's result (so they need no torch): it must equal what
    the reader gives today, and its count the one written in the preset."""
    from trainfit.catalog import all_models
    from trainfit.catalog.generic import read_model

    shipped = [p for p in all_models().values() if p.structure is not None]
    assert shipped
    for preset in shipped:
        fresh = read_model(preset.hf_config, name=preset.name)
        assert preset.spec().structure.groups == fresh.structure.groups, preset.name
        assert preset.spec().structure.globals == fresh.structure.globals, preset.name
        assert count_params(preset.spec()) == count_params(fresh) == preset.params, preset.name


@pytest.mark.parametrize("model_type,targets", [("deepseek_v3", "all-linear"), ("deepseek_v3", "gate_proj,up_proj,down_proj,o_proj"),
                                                ("qwen3_moe", "all-linear"), ("qwen3_moe", "q_proj,v_proj,down_proj"),
                                                ("gpt_oss", "all-linear"), ("qwen3_next", "all-linear"),
                                                ("glm4_moe", "all-linear"), ("ernie4_5_moe", "q_proj,gate_proj,up_proj")])
def test_lora_counts_equal_peft_for_read_structures(model_type, targets):
    """Adapters PEFT adds (fused experts wrapped with rank r per expert, routers, MLA projections), counted on a cut
    default config built on the meta device."""
    from peft import LoraConfig, get_peft_model

    from trainfit.api import training_spec
    from trainfit.estimate.trainable import split_params

    cfg = cut(transformers.AutoConfig.for_model(model_type).to_dict())
    spec = spec_from_config(cfg)
    conf = hf_config_object(text_config(cfg)[0])
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        model = model_class_for(conf).from_config(conf)
        names = "all-linear" if targets == "all-linear" else targets.split(",")
        peft = get_peft_model(model, LoraConfig(r=8, target_modules=names))
    theirs = sum(p.numel() for n, p in peft.named_parameters() if "lora_" in n)
    ours = split_params(spec, training_spec(method="lora", lora_rank=8, lora_targets=targets)).adapters
    assert ours == theirs


FINE_TUNE_CHANGES = {"eos_token_id": 7, "bos_token_id": 3, "max_position_embeddings": 65536, "rope_theta": 2_000_000.0,
                     "initializer_range": 0.01, "use_cache": False, "_name_or_path": "someone/a-fine-tune"}


@pytest.mark.parametrize("preset", ["qwen3-30b-a3b", "deepseek-v3", "qwen3.5-35b-a3b", "gpt-oss-20b"])
def test_fine_tune_config_reuses_the_shipped_structure_exactly(preset):
    """A config.json with a preset's architecture but other token ids, positions, rope base and name (what a
    fine-tune ships) takes the preset's read structure without building the model; the result equals a fresh read
    of that config by transformers on the meta device."""
    from trainfit.catalog import all_models
    from trainfit.catalog.generic import _read_cached, _shipped_match, read_model, spec_to_dict
    import json

    cfg = json.loads(json.dumps(all_models()[preset].hf_config))
    part = cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg
    part.update({k: v for k, v in FINE_TUNE_CHANGES.items() if k in part or k == "_name_or_path"})
    text = {k: v for k, v in part.items() if k not in ("architectures", "auto_map", "quantization_config",
                                                         "_name_or_path", "transformers_version", "torch_dtype",
                                                         "dtype")}
    assert _shipped_match(part) is not None  # taken from the preset
    ours = read_model(cfg, name="ft")
    note = text_config(cfg)[1]  # a multimodal config's "text model only" note
    fresh = _read_cached(json.dumps(text, sort_keys=True, default=str), "ft", "", None, note, json.dumps(cfg))
    assert spec_to_dict(ours) == spec_to_dict(fresh)
    assert ours.max_positions == part["max_position_embeddings"]


def test_other_architectures_do_not_match_a_shipped_structure():
    from trainfit.catalog import all_models
    from trainfit.catalog.generic import _shipped_match
    import json

    cfg = json.loads(json.dumps(all_models()["qwen3-30b-a3b"].hf_config))
    assert _shipped_match(cfg) is not None
    for key, value in [("num_hidden_layers", 47), ("moe_intermediate_size", 512), ("tie_word_embeddings", True),
                       ("num_experts", 64)]:
        assert _shipped_match({**cfg, key: value}) is None, key
    assert _shipped_match({k: v for k, v in cfg.items() if k != "rope_theta"}) is None  # presence counts


def test_peft_target_mapping_read_without_importing_peft_equals_peft():
    pytest.importorskip("peft")
    from peft.utils.transformers_weight_conversion import _MOE_TARGET_MODULE_MAPPING

    from trainfit.catalog.generic import _peft_moe_target_mapping

    _peft_moe_target_mapping.cache_clear()
    assert _peft_moe_target_mapping() == _MOE_TARGET_MODULE_MAPPING
