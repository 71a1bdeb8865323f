"""Handing a config to transformers never rewrites the caller's dict: not a preset's hf_config, not a user's config.

transformers 5's config classes standardise the nested rope dict IN PLACE: `convert_rope_params_to_dict` sets
`self.rope_parameters = rope_scaling` (the very dict it was given) and then `setdefault`s `rope_theta`,
`partial_rotary_factor`, `rope_type` and `original_max_position_embeddings` into it (transformers/
modeling_rope_utils.py, RotaryEmbeddingConfigMixin). A caller that hands it a shallow copy (`dict(cfg)`,
`{**cfg}`, a comprehension) shares that nested dict, so the preset or the user's config changes for the rest of the
run (and a script that saves it afterwards writes keys the source file never had). Every trainfit path that builds a
transformers config (catalog.generic.hf_config_object, generic.with_layers -> trace.tracer._build, the training
runner's random-init build) deep-copies first; these tests fail when any of those copies is removed or made shallow
(checked by removing each: the user-config tests fail at once; the preset test fails for each preset whose stored
rope dict lacks a key transformers would add, e.g. llama-3.1-8b's llama3 rope_scaling without rope_theta).
"""

import copy
import json
import types
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from trainfit.catalog import all_models  # noqa: E402
from trainfit.catalog.generic import hf_config_object, text_config, with_layers  # noqa: E402
from trainfit.errors import SpecError  # noqa: E402

# A user's config: a tiny Llama with a yarn rope_scaling as config.json files write it (no rope_theta inside it;
# transformers adds rope_theta to the nested dict when it builds the config object).
USER = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128, "max_position_embeddings": 256,
        "rope_theta": 500000.0, "architectures": ["LlamaForCausalLM"],
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}}


def _frozen(cfg: dict) -> str:
    return json.dumps(cfg, sort_keys=True, default=str)


def _trace_config(hf: dict, layers: int = 1):
    from trainfit.trace.tracer import TraceConfig

    return TraceConfig(hf_config=hf, layers=layers, method="full", task="sft", seq_len=8, micro_batch=1,
                       precision="bf16", param_dtype="fp32", grad_ckpt="none", attention="sdpa", lora_rank=8,
                       lora_targets=("all-linear",), num_labels=2, freeze_trainable_layers=1, optimizer="adamw")


def test_transformers_does_rewrite_a_shared_rope_dict():
    """The premise: without a copy transformers adds keys to the caller's nested rope dict (if a future transformers
    stops doing so, this fails and the copies below are merely harmless)."""
    cfg = {k: v for k, v in copy.deepcopy(USER).items() if k != "architectures"}
    before = copy.deepcopy(cfg["rope_scaling"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        transformers.AutoConfig.for_model(**cfg)
    assert cfg["rope_scaling"] != before
    assert "rope_theta" in set(cfg["rope_scaling"]) - set(before)


def test_hf_config_object_leaves_a_user_config_unchanged():
    user = copy.deepcopy(USER)
    conf = hf_config_object(user)
    assert conf.rope_parameters["rope_theta"] == USER["rope_theta"]  # transformers did standardise its own copy
    assert user == USER


def test_with_layers_shares_no_nested_dict():
    user = copy.deepcopy(USER)
    cut = with_layers(user, 1)
    cut["rope_scaling"]["factor"] = 8.0
    assert user == USER


def test_trace_build_leaves_a_user_config_unchanged():
    from trainfit.trace.tracer import _build

    user = copy.deepcopy(USER)
    _build(_trace_config(user, layers=2))
    assert user == USER


def test_runner_random_init_leaves_the_run_config_unchanged():
    from trainfit.train import runner

    cfg = {"task": "sft", "method": "full", "precision": "fp32", "engine": "single", "attention": "sdpa",
           "grad_ckpt": "none", "model": {"hf_config": copy.deepcopy(USER), "random_init": True}}
    args = types.SimpleNamespace(random_init=True, seed=0)
    dist = types.SimpleNamespace(cuda=False, device=torch.device("cpu"), world=1, rank=0, main=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = runner.build_model(cfg, args, dist)
    assert model.config.rope_parameters["rope_theta"] == USER["rope_theta"]
    assert cfg["model"]["hf_config"] == USER


@pytest.mark.parametrize("name", sorted(all_models()))
def test_building_a_preset_leaves_its_hf_config_unchanged(name):
    """The config object of the whole text model and the traced (cut, meta-device) model, from the preset's own
    hf_config (the cached object every later caller sees)."""
    from trainfit.trace.tracer import _build

    preset = all_models()[name]
    before = _frozen(preset.hf_config)
    try:
        hf_config_object(text_config(preset.hf_config)[0])
    except SpecError:  # remote-code types transformers does not know (chatglm, baichuan): nothing is built
        assert _frozen(preset.hf_config) == before
        return
    _build(_trace_config(preset.hf_config, layers=1))
    assert _frozen(preset.hf_config) == before
