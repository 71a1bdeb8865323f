"""transformers' Conv1D (GPT-2's code: GPT-SW3, OpenAI GPT) read as the Linear it is: a config.json of those types
gets its blocks' Linears (LoRA targets, GEMM times, the top block's first gradient) instead of none — a full
fine-tune of gpt-sw3 ended in an IndexError and its LoRA in an error naming no module (found by a fuzz over every
model type, 2026-12-07)."""

import json

import pytest

pytest.importorskip("transformers")

from trainfit.catalog import generic  # noqa: E402
from trainfit.errors import SpecError  # noqa: E402
from trainfit.estimate import trainable  # noqa: E402
from trainfit.estimate.params import layer_linears  # noqa: E402


def _read_fresh(cfg: dict, monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINFIT_CACHE_DIR", str(tmp_path))
    key = json.dumps(cfg, sort_keys=True)
    return generic._read_cached.__wrapped__(key, "x", "", None, "", key)  # the meta-device read, no template


@pytest.mark.parametrize("model_type", ["gpt-sw3", "openai-gpt"])
def test_conv1d_blocks_read_as_linears(model_type, monkeypatch, tmp_path):
    m = _read_fresh({"model_type": model_type}, monkeypatch, tmp_path)
    lins = {x.module: x for x in layer_linears(m)}
    h = m.hidden
    assert set(lins) == {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"}
    assert (lins["attn.c_attn"].in_features, lins["attn.c_attn"].out_features) == (h, 3 * h)  # weight (in, out)
    assert lins["attn.c_attn"].roles == ("q", "k", "v")
    assert (lins["mlp.c_proj"].in_features, lins["mlp.c_proj"].out_features) == (4 * h, h)
    assert lins["mlp.c_proj"].roles == ("down",)


def test_shipped_templates_agree_with_the_read(monkeypatch, tmp_path):
    """The templates of the Conv1D types were regenerated with the reader: a template's answer is the meta read."""
    for model_type in ("gpt-sw3", "openai-gpt", "gpt2"):
        cfg = {"model_type": model_type, "n_embd": 256, "n_head": 4, "n_layer": 3}
        read = _read_fresh(cfg, monkeypatch, tmp_path)
        templ = generic.read_model(cfg, name="x")
        assert [(x.module, x.in_features, x.out_features) for x in layer_linears(templ)] == \
            [(x.module, x.in_features, x.out_features) for x in layer_linears(read)], model_type


@pytest.mark.parametrize("method", ["lora", "full"])
def test_gpt_sw3_config_is_estimated(run_cli, tmp_path, method):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt-sw3"}))
    code, out, err = run_cli("estimate", "--model", str(tmp_path), "--gpu", "h100-sxm", "--method", method,
                             "--seq-len", "128", "--json")
    assert code == 0, err
    model = json.loads(out)["model"]
    if method == "lora":  # adapters on c_attn (the default targets' q and v are in it)
        assert 0 < model["adapter_params"] == model["trainable_params"] < model["params"]
    else:
        assert model["trainable_params"] == model["params"]


def test_no_linear_at_all_is_said_so(monkeypatch, tmp_path):
    m = _read_fresh({"model_type": "gpt-sw3"}, monkeypatch, tmp_path)
    monkeypatch.setattr(trainable, "layer_linears", lambda model: ())
    with pytest.raises(SpecError) as exc:
        trainable._no_lora_match(m)
    assert "has no Linear layer" in str(exc.value) and "e.g." not in str(exc.value)
    assert "线性层" in exc.value.args[0].render("zh")
    monkeypatch.undo()
    with pytest.raises(SpecError) as exc:
        trainable._no_lora_match(m)
    assert "e.g. c_attn, c_fc, c_proj" in str(exc.value)


def test_transformers_log_lines_stay_out_of_the_one_error_line(tmp_path):
    """MusicGen's default config makes transformers log two "[transformers] Model config: pad_token_id must be ..."
    lines before its build fails: the error is still one line on stderr (found by benchmarks/type_fuzz.py). A fresh
    process: transformers' log handler writes to the stderr it found when it was made."""
    import os
    import subprocess
    import sys

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "musicgen"}))
    env = {**os.environ, "TRAINFIT_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "trainfit", "estimate", "--model", str(tmp_path), "--gpu", "a10",
                           "--method", "lora", "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("trainfit: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "error" in json.loads(done.stdout)


@pytest.mark.parametrize("model_type", ["mamba2", "qwen3_next", "falcon_h1"])
def test_a_depthwise_convolution_is_not_a_fused_expert(model_type, monkeypatch, tmp_path):
    """A Mamba mixer's or a gated DeltaNet's depthwise nn.Conv1d (weight channels x 1 x kernel) is a 3-D weight
    like a fused expert set's: until 2026-12-07 it was read as one (a Linear of 1 x kernel, one "expert" per
    channel), so a dense hybrid's blocks read as MoE. Now a tensor of its own, counted, and no Linear."""
    import transformers

    cfg = transformers.AutoConfig.for_model(model_type).to_dict()
    for key in ("num_hidden_layers", "n_layer", "num_layers"):
        if key in cfg:
            cfg[key] = 4
    cfg.pop("layer_types", None)
    m = _read_fresh(cfg, monkeypatch, tmp_path)
    convs = [t for g in m.structure.groups for t in g.tensors if "conv" in t.name and t.name.endswith("weight")]
    assert convs and all(t.role == "other" and t.count == 1 for t in convs)
    assert not any("conv" in lin.module for lin in layer_linears(m))
    if not m.num_experts:
        assert not any(g.moe for g in m.structure.groups)


def test_qwen3_5_27b_ships_a_dense_structure():
    """The shipped Qwen3.5 / Qwen3-Next presets were read again: the dense 27B has no MoE group, and every preset's
    parameter count is unchanged (tests/test_any_architecture.py compares them with a fresh read)."""
    from trainfit.catalog import all_models

    spec = all_models()["qwen3.5-27b"].spec()
    assert not any(g.moe for g in spec.structure.groups)
    assert not any(lin.count > 1 for lin in layer_linears(spec))
    nxt = all_models()["qwen3-next-80b-a3b"].spec()
    assert {lin.module for lin in layer_linears(nxt) if lin.kind == "routed"} == \
        {"mlp.experts.gate_up_proj", "mlp.experts.down_proj"}  # in both block kinds (linear / full attention)
