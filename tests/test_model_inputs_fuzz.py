"""No model input ends in a traceback: any --model string, config.json content or directory gives an answer or one
clear line with exit code 2 (and a JSON error with --json)."""

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytest.importorskip("transformers")

TYPES = ["llama", "qwen3", "qwen3_moe", "deepseek_v3", "gemma3_text", "gpt_oss", "opt", "bloom", "t5", "bert",
         "no_such_type", "", "mamba", "qwen3_next"]
KEYS = ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
        "vocab_size", "n_routed_experts", "num_experts", "head_dim", "layer_types", "tie_word_embeddings",
        "sliding_window", "moe_intermediate_size", "text_config"]
VALUES = st.one_of(st.integers(-3, 70), st.sampled_from([0, 1, 2, 64, 10**12]), st.none(), st.booleans(),
                   st.text(max_size=5), st.floats(allow_nan=True), st.lists(st.integers(0, 3), max_size=3),
                   st.just({"model_type": "llama"}))
CONFIGS = st.one_of(
    st.fixed_dictionaries({"model_type": st.sampled_from(TYPES)}, optional={k: VALUES for k in KEYS}),
    st.dictionaries(st.text(max_size=6), VALUES, max_size=4),
    st.lists(st.integers(), max_size=2), st.text(max_size=10), st.integers())


def _check(run_cli, model, extra=()):
    code, out, err = run_cli("estimate", "--model", model, "--gpu", "a10", "--method", "lora", "--seq-len", "64",
                             "--json", *extra)
    assert code in (0, 2), err
    if code == 2:
        assert err.startswith("trainfit: error: ") and err.count("\n") == 1, err
        assert "Traceback" not in err and "error" in json.loads(out)
    return code


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cfg=CONFIGS, as_dir=st.booleans())
@example(cfg={"model_type": "mamba"}, as_dir=False)  # its depthwise conv read as routed, with no router: no work
def test_any_config_json_gives_an_answer_or_one_line(run_cli, tmp_path_factory, cfg, as_dir):
    folder = tmp_path_factory.mktemp("cfg")
    file = folder / "config.json"
    file.write_text(json.dumps(cfg))
    _check(run_cli, str(folder if as_dir else file))


SHIPPED = ["qwen3-30b-a3b", "deepseek-v3", "qwen3.5-35b-a3b", "gpt-oss-20b", "llama-4-scout", "gemma-3-1b-it"]
FINE_TUNE_KEYS = ["eos_token_id", "bos_token_id", "max_position_embeddings", "rope_theta", "rope_scaling",
                  "rope_parameters", "initializer_range", "use_cache", "_name_or_path", "torch_dtype",
                  "num_hidden_layers", "vocab_size"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(preset=st.sampled_from(SHIPPED), changes=st.dictionaries(st.sampled_from(FINE_TUNE_KEYS), VALUES, max_size=3),
       drop=st.lists(st.sampled_from(FINE_TUNE_KEYS), max_size=2))
@example(preset="qwen3-30b-a3b", changes={"vocab_size": 0}, drop=[])  # found by this test: a template read it
def test_a_presets_config_with_changed_keys_gives_an_answer_or_one_line(run_cli, tmp_path_factory, preset, changes,
                                                                         drop):
    """A shipped preset's config.json edited as a fine-tune would (or broken): the shipped-structure match, the
    generic reader or one line."""
    from trainfit.catalog import all_models

    cfg = json.loads(json.dumps(all_models()[preset].hf_config))
    part = cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg
    part.update(changes)
    for key in drop:
        part.pop(key, None)
    file = tmp_path_factory.mktemp("ft") / "config.json"
    file.write_text(json.dumps(cfg))
    _check(run_cli, str(file))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.one_of(st.text(max_size=20), st.sampled_from(["./nope", "/nonexistent/config.json", "a/b", ".json",
                                                             "qwen3-0.6b", "deepseek-v2-lite", "/"])))
def test_any_model_string_gives_an_answer_or_one_line(run_cli, monkeypatch, name):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    if name.startswith("-") or "\x00" in name:
        return  # argparse reads these as flags / the OS refuses them
    _check(run_cli, name)


def test_trace_on_a_config_file_and_a_directory(run_cli, tmp_path):
    cfg = {"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
           "num_experts": 8, "num_experts_per_tok": 2, "vocab_size": 512}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    for model in (str(tmp_path), str(tmp_path / "config.json")):
        code, out, err = run_cli("trace", "--model", model, "--method", "lora", "--seq-len", "32", "--json")
        assert code == 0, err
        doc = json.loads(out)
        assert doc["memory_gib"]["total"] > 0 and any("balanced routing" in n for n in doc["notes"])
