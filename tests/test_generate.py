"""`trainfit generate`: files checked by the real tools (DeepSpeed's config parser, Accelerate's loader, bash -n),
snapshots of three reference setups, quoting, and bad input."""

import json
import os
import subprocess
from unittest import mock

import pytest

from trainfit.generate import render_files
from trainfit.generate.setup import Setup
from trainfit.train.runner import JOB_MODULES

SNAPSHOTS = os.path.join(os.path.dirname(__file__), "snapshots")


def _setup(model, gpu, gpus, nodes, engine, method, zero=None, fsdp=None, offload="none", mb=1, ga=8,
           precision="bf16", ckpt="full", instance=None, interconnect="single", inter_node=None, model_type=None):
    from trainfit.catalog import all_models

    preset = all_models()[model]
    strategy = {"method": method, "task": "sft", "precision": precision, "param_dtype": "fp32", "optimizer": "adamw",
                "zero_stage": zero, "fsdp": fsdp, "offload": offload, "grad_ckpt": ckpt, "attention": "flash",
                "seq_len": 2048, "micro_batch": mb, "grad_accum": ga, "global_batch": mb * ga * gpus * nodes,
                "lora_rank": 16 if method != "full" else None,
                "lora_targets": ["all-linear"] if method != "full" else None, "engine": engine}
    choice = {"provider": "alibaba", "instance_type": instance, "gpu": gpu, "gpus_per_node": gpus, "nodes": nodes,
              "strategy": strategy, "memory_gib": 20.0, "gpu_memory_gib": 22.5, "fits": True, "tokens_per_s": 1000.0,
              "hours": 10.0, "cost": 100.0, "currency": "CNY", "price_date": "2024-12-30", "bottleneck": "compute",
              "interconnect": interconnect, "inter_node": inter_node}
    return Setup(model={"name": model, "hf_id": preset.hf_id, "source": model, "hf_config": preset.hf_config},
                 workload={"task": "sft", "seq_len": 2048, "global_batch": strategy["global_batch"],
                           "processed_tokens": 1e9, "epochs": 1}, choice=choice)


REFERENCE = {
    # A10 LoRA on one GPU (gn7i): plain PyTorch, no engine config
    "a10-lora-single": _setup("qwen2-7b", "a10", 1, 1, "single", "lora", mb=1, ga=64,
                              instance="ecs.gn7i-c8g1.2xlarge"),
    # 8 x A100 ZeRO-3 full fine-tune on one gn7e box (NVLink)
    "a100x8-zero3": _setup("llama-3-8b", "a100-sxm4-80gb", 8, 1, "deepspeed", "full", zero=3, mb=2, ga=4,
                           instance="ecs.gn7e-c16g1.32xlarge", interconnect="nvlink"),
    # 2 nodes x 8 H100, FSDP full shard over EFA
    "h100-2x8-fsdp": _setup("llama-3-70b", "h100-sxm", 8, 2, "fsdp", "full", fsdp="full_shard", mb=1, ga=4,
                            instance="p5.48xlarge", interconnect="nvswitch", inter_node="efa"),
}


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_snapshots(name):
    files = render_files(REFERENCE[name], data="/data/train.jsonl", output_dir="output", lang="en")
    for module in ("train.py", *JOB_MODULES):  # the runner module and its modules, tested by running them
        files.pop(module)
    folder = os.path.join(SNAPSHOTS, name)
    if os.environ.get("TRAINFIT_UPDATE_SNAPSHOTS"):
        os.makedirs(folder, exist_ok=True)
        for fname, content in files.items():
            with open(os.path.join(folder, fname), "w", encoding="utf-8") as fh:
                fh.write(content)
    assert sorted(os.listdir(folder)) == sorted(files), "files differ from the snapshot"
    for fname, content in files.items():
        with open(os.path.join(folder, fname), encoding="utf-8") as fh:
            assert fh.read() == content, f"{name}/{fname} differs (TRAINFIT_UPDATE_SNAPSHOTS=1 to accept)"


def _ds_parse(config: dict, world: int):
    """DeepSpeed's own parser (batch arithmetic, ZeRO, offload), with its data-parallel world size set."""
    dsc = pytest.importorskip("deepspeed.runtime.config")

    class MPU:
        def get_data_parallel_world_size(self):
            return world

        def get_data_parallel_rank(self):
            return 0

        def get_global_rank(self):
            return 0

    with mock.patch.object(dsc.dist, "get_rank", lambda *a, **k: 0):
        return dsc.DeepSpeedConfig(config, mpu=MPU())


def test_deepspeed_accepts_the_zero3_config():
    files = render_files(REFERENCE["a100x8-zero3"], data=None)
    cfg = json.loads(files["ds_config.json"])
    parsed = _ds_parse(cfg, 8)
    assert parsed.zero_optimization_stage == 3 and parsed.train_batch_size == 2 * 4 * 8
    assert cfg["bf16"] == {"enabled": True}
    cfg["train_batch_size"] += 1  # the parser really checks
    with pytest.raises(AssertionError):
        _ds_parse(cfg, 8)


@pytest.mark.parametrize("offload", ["optimizer", "all"])
def test_deepspeed_offload_configs_parse(offload):
    setup = _setup("llama-2-13b", "a10", 4, 1, "deepspeed", "full", zero=3, offload=offload,
                   instance="ecs.gn7i-c32g1.32xlarge", interconnect="pcie")
    cfg = json.loads(render_files(setup, data=None)["ds_config.json"])
    parsed = _ds_parse(cfg, 4)
    assert parsed.zero_config.offload_optimizer is not None
    assert (parsed.zero_config.offload_param is not None) == (offload == "all")


def test_accelerate_loads_the_fsdp_config(tmp_path):
    loader = pytest.importorskip("accelerate.commands.config.config_args")
    files = render_files(REFERENCE["h100-2x8-fsdp"], data=None)
    path = tmp_path / "accelerate_config.yaml"
    path.write_text(files["accelerate_config.yaml"])
    cfg = loader.load_config_from_file(str(path))
    assert str(cfg.distributed_type).endswith("FSDP") and cfg.num_processes == 16 and cfg.num_machines == 2
    assert cfg.fsdp_config["fsdp_transformer_layer_cls_to_wrap"] == "LlamaDecoderLayer"
    assert cfg.fsdp_config["fsdp_activation_checkpointing"] is True
    assert cfg.mixed_precision == "bf16"


@pytest.mark.parametrize("ckpt", ["none", "selective", "full"])
def test_selective_checkpointing_is_train_py_s_own_and_said_so(ckpt):
    """Selective checkpointing (the attention core only) is done by train.py itself: train_config.json carries it,
    Accelerate's whole-layer activation checkpointing stays off for it, and the README says so in either language."""
    import yaml

    setup = _setup("llama-3-8b", "h100-sxm", 8, 1, "fsdp", "full", fsdp="full_shard", ckpt=ckpt,
                   instance="p5.48xlarge", interconnect="nvswitch")
    en, zh = (render_files(setup, data=None, lang=lang) for lang in ("en", "zh"))
    assert json.loads(en["train_config.json"])["grad_ckpt"] == ckpt
    assert yaml.safe_load(en["accelerate_config.yaml"])["fsdp_config"]["fsdp_activation_checkpointing"] is (
        ckpt == "full")
    assert ("## Activation checkpointing" in en["README.md"]) is (ckpt == "selective")
    assert ("## 激活检查点" in zh["README.md"]) is (ckpt == "selective")
    if ckpt == "selective":
        assert "fsdp_activation_checkpointing" in en["README.md"] and "fsdp_activation_checkpointing" in zh["README.md"]


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_launch_scripts_pass_bash_n(name, tmp_path):
    path = tmp_path / "launch.sh"
    path.write_text(render_files(REFERENCE[name], data="/data/x.jsonl")["launch.sh"])
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0


def test_multi_node_launch_has_rendezvous_and_nccl_settings():
    launch = render_files(REFERENCE["h100-2x8-fsdp"], data=None)["launch.sh"]
    assert "--nnodes" in launch and "NODE_RANK" in launch and "MASTER_ADDR" in launch
    assert "aws-ofi-nccl" in launch  # EFA note
    assert "hostfile" not in launch  # the DeepSpeed launcher is offered for DeepSpeed plans only
    erdma = _setup("qwen2-72b", "h20", 8, 2, "deepspeed", "full", zero=3, instance="ecs.ebmgn8v.48xlarge",
                   interconnect="nvlink", inter_node="erdma")
    text = render_files(erdma, data=None)["launch.sh"]
    assert "NCCL_IB_HCA=${NCCL_IB_HCA:-erdma}" in text and "alibabacloud.com" in text
    a10 = _setup("qwen2-7b", "a10", 4, 1, "ddp", "lora", instance="ecs.gn7i-c32g1.32xlarge", interconnect="pcie")
    assert "no NVLink" in render_files(a10, data=None)["launch.sh"]


def test_user_values_are_quoted(tmp_path):
    weird = "/data/my \"odd\" $(rm -rf) dir/train.jsonl"
    launch = render_files(REFERENCE["a10-lora-single"], data=weird)["launch.sh"]
    path = tmp_path / "launch.sh"
    path.write_text(launch)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    line = next(x for x in launch.splitlines() if x.startswith("DATA="))
    out = subprocess.run(["bash", "-c", f"unset DATA; {line}; printf %s \"$DATA\""], capture_output=True, text=True)
    assert out.stdout == weird


def test_plan_then_generate_acceptance(run_cli, tmp_path):
    code, _, err = run_cli("plan", "--model", "qwen2-7b", "--method", "lora", "--dataset-tokens", "200M",
                           "--epochs", "3", "--deadline", "48h", "--budget", "3000", "--out", str(tmp_path / "p"))
    assert code == 0, err
    code, _, err = run_cli("generate", "--plan", str(tmp_path / "p" / "plan.json"), "--out", str(tmp_path / "run"))
    assert code == 0, err
    run = tmp_path / "run"
    assert subprocess.run(["bash", "-n", str(run / "launch.sh")]).returncode == 0
    cfg = json.loads((run / "train_config.json").read_text())
    plan = json.loads((tmp_path / "p" / "plan.json").read_text())["choice"]
    assert cfg["micro_batch"] == plan["strategy"]["micro_batch"] and cfg["grad_accum"] == plan["strategy"]["grad_accum"]
    assert cfg["engine"] == plan["strategy"]["engine"]
    if (run / "ds_config.json").exists():
        _ds_parse(json.loads((run / "ds_config.json").read_text()), plan["gpus_per_node"] * plan["nodes"])


def test_train_py_is_the_runner_module():
    from importlib import resources

    files = render_files(REFERENCE["a10-lora-single"], data=None)
    assert files["train.py"] == resources.files("trainfit.train").joinpath("runner.py").read_text()


def test_readme_in_chinese():
    files = render_files(REFERENCE["a10-lora-single"], data=None, lang="zh")
    assert "计划的数字" in files["README.md"] and "launch.sh" in files["README.md"]


@pytest.fixture
def plan_file(tmp_path, run_cli):
    code, _, err = run_cli("plan", "--model", "qwen2.5-0.5b", "--method", "lora", "--dataset-tokens", "10M",
                           "--out", str(tmp_path / "p"))
    assert code == 0, err
    return tmp_path / "p" / "plan.json"


def _bad_generate(run_cli, tmp_path, *argv):
    out = tmp_path / "run"
    code, _, err = run_cli("generate", *argv, "--out", str(out))
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists(), "a half-written output directory"
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".trainfit-generate-")]
    return err


def test_plan_from_another_version(run_cli, tmp_path, plan_file):
    doc = json.loads(plan_file.read_text())
    doc["trainfit_plan_version"] = 99
    plan_file.write_text(json.dumps(doc))
    assert "version" in _bad_generate(run_cli, tmp_path, "--plan", str(plan_file))


def test_plan_with_unknown_keys(run_cli, tmp_path, plan_file):
    doc = json.loads(plan_file.read_text())
    doc["choice"]["strategy"]["zero_stag"] = 3
    plan_file.write_text(json.dumps(doc))
    assert "did you mean" in _bad_generate(run_cli, tmp_path, "--plan", str(plan_file))


def test_missing_dataset(run_cli, tmp_path, plan_file):
    assert "not found" in _bad_generate(run_cli, tmp_path, "--plan", str(plan_file), "--data",
                                        str(tmp_path / "nope.jsonl"))


def test_dataset_without_expected_columns(run_cli, tmp_path, plan_file):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "a", "answer": "b"}\n')
    assert "needs columns" in _bad_generate(run_cli, tmp_path, "--plan", str(plan_file), "--data", str(bad))


def test_existing_output_needs_force(run_cli, tmp_path, plan_file):
    out = tmp_path / "run"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code, _, err = run_cli("generate", "--plan", str(plan_file), "--out", str(out))
    assert code == 2 and "--force" in err and (out / "keep.txt").exists()
    code, _, _ = run_cli("generate", "--plan", str(plan_file), "--out", str(out), "--force")
    # --force writes into the directory; a file generate did not write is kept (issue 32)
    assert code == 0 and (out / "keep.txt").read_text() == "mine" and (out / "train.py").exists()
