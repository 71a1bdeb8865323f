"""Setup details that the plan and the user decide: save_steps from the plan's checkpoint interval and step time,
where the weights come from (hf / modelscope / local), and the `next:` hint with the real data path."""

import json
import subprocess
from dataclasses import replace

import pytest
from test_generate import _setup

from trainfit.errors import SpecError
from trainfit.generate import render_files
from trainfit.generate.configs import checkpoint_interval_h, save_steps_for


def _with(setup, **choice):
    return replace(setup, choice=dict(setup.choice, **choice))


def test_save_steps_follow_the_plans_checkpoint_interval():
    base = _setup("qwen2-7b", "a10", 1, 1, "single", "lora", instance="ecs.gn7i-c8g1.2xlarge")
    hours = checkpoint_interval_h(base)
    assert save_steps_for(_with(base, step_time_s=2.0)) == int(hours * 3600 / 2.0)
    assert save_steps_for(_with(base, step_time_s=0.5)) == int(hours * 3600 / 0.5)
    spot = _with(base, step_time_s=2.0, spot={"checkpoint_interval_hours": 0.25})
    assert save_steps_for(spot) == 450  # the spot schedule's own interval
    files = render_files(_with(base, step_time_s=4.0), data=None)
    assert json.loads(files["train_config.json"])["save_steps"] == int(hours * 900)


@pytest.mark.parametrize("source", ["hf", "modelscope", "local"])
def test_model_source(source):
    setup = _setup("qwen2-7b", "a10", 1, 1, "single", "lora", instance="ecs.gn7i-c8g1.2xlarge")
    path = "/mnt/nas/Qwen2-7B" if source == "local" else None
    files = render_files(setup, data=None, model_source=source, model_path=path)
    model = json.loads(files["train_config.json"])["model"]
    assert model["source"] == source and model["path"] == path
    assert ("modelscope" in files["requirements.txt"]) == (source == "modelscope")
    assert ("HF_ENDPOINT" in files["launch.sh"]) == (source == "hf")
    readme = files["README.md"]
    assert {"hf": "HF_ENDPOINT", "modelscope": "snapshot_download", "local": "model.path"}[source] in readme
    if source == "modelscope":
        assert model["modelscope_id"] == "Qwen/Qwen2-7B"


def test_local_source_needs_a_path():
    setup = _setup("qwen2-7b", "a10", 1, 1, "single", "lora")
    with pytest.raises(SpecError):
        render_files(setup, data=None, model_source="local")
    with pytest.raises(SpecError):
        render_files(setup, data=None, model_source="local", model_path="/x\nrm")


def test_runner_finds_a_local_model_path():
    from argparse import Namespace

    from trainfit.train.runner import model_location

    cfg = {"model": {"path": "/mnt/nas/m", "hf_id": "Qwen/Qwen2-7B", "source": "local"}}
    assert model_location(cfg, Namespace(model_path=None)) == "/mnt/nas/m"
    cfg = {"model": {"path": None, "hf_id": "Qwen/Qwen2-7B", "source": "hf"}}
    assert model_location(cfg, Namespace(model_path=None)) == "Qwen/Qwen2-7B"


def test_next_hint_shows_the_real_data_path(run_cli, tiny_data, tmp_path):
    data = tiny_data / "text.jsonl"
    code, out, err = run_cli("generate", "--model", "tiny-llama", "--gpu", "a100-sxm4-80gb", "--seq-len", "32", "--data", str(data),
                             "--out", str(tmp_path / "run"))
    assert code == 0, err
    assert f"DATA={data} " in out and "/path/to/data" not in out
    code, out, _ = run_cli("generate", "--model", "tiny-llama", "--gpu", "a100-sxm4-80gb", "--seq-len", "32", "--out",
                           str(tmp_path / "run2"))
    assert code == 0 and "DATA=/path/to/data" in out
    assert subprocess.run(["bash", "-n", str(tmp_path / "run" / "launch.sh")]).returncode == 0
