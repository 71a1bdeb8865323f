"""`generate` for model-parallel plans (issue 34): Megatron-LM's pretrain_gpt.py arguments and torchtitan's TOML job
config, each checked by the stack's own parser, launched with torchrun on every target, and the layouts the stacks
cannot run refused in one line (en / zh).

Megatron-LM's argument parser (megatron/training/arguments.py) is not on PyPI: the megatron-core wheels hold only
megatron/core. FALLBACK: the parser is rebuilt from every option that file declares at tag core_v0.16.1, dumped from
the real parser object into tests/data/megatron_lm_args.json (tests/data/megatron_lm_args_extract.py); the sizes
validate_args asserts are re-checked here. torchtitan's own ConfigManager (0.2.2, requirements/torchtitan.lock) parses the
TOML."""

import argparse
import ast
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from trainfit.errors import GenerateError
from trainfit.generate import render_files
from trainfit.generate.setup import Setup, require_generated_stack

DATA = os.path.join(os.path.dirname(__file__), "data")
TARGETS = ("ecs", "dlc", "pytorchjob", "skypilot", "slurm")


def _setup(model, gpus, nodes, engine, tp=1, pp=1, vpp=1, cp=1, ep=1, schedule="1f1b", mb=1, ga=8, ckpt="full",
           selective_ac="attention", zero=None, fsdp=None, method="full", offload="none", precision="bf16",
           task="sft", sp=True, gpu="h100-sxm", instance="p5.48xlarge", seq=4096, framework=None, etp=None,
           ep_overlap=False, dispatcher="alltoall"):
    from trainfit.catalog import all_models

    preset = all_models()[model]
    dp = gpus * nodes // (tp * pp * cp)
    strategy = {"method": method, "task": task, "precision": precision, "param_dtype": "fp32", "optimizer": "adamw",
                "zero_stage": zero, "fsdp": fsdp, "offload": offload, "grad_ckpt": ckpt, "selective_ac": selective_ac,
                "attention": "flash", "seq_len": seq, "micro_batch": mb, "grad_accum": ga, "global_batch": mb * ga * dp,
                "lora_rank": None, "lora_targets": None, "tp": tp, "pp": pp, "vpp": vpp, "pp_schedule": schedule,
                "cp": cp, "ep": ep, "etp": etp, "sequence_parallel": sp, "ep_overlap": ep_overlap, "moe_dispatcher": dispatcher,
                "engine": engine}
    choice = {"provider": "aws", "instance_type": instance, "gpu": gpu, "gpus_per_node": gpus, "nodes": nodes,
              "strategy": strategy, "memory_gib": 60.0, "gpu_memory_gib": 74.0, "fits": True, "tokens_per_s": 5e4,
              "step_time_s": 4.0, "hours": 10.0, "cost": 1e4, "currency": "USD", "price_date": "2026-09-01",
              "bottleneck": "compute", "interconnect": "nvswitch", "inter_node": "efa" if nodes > 1 else None,
              "framework": framework}
    return Setup(model={"name": model, "hf_id": preset.hf_id, "source": model, "hf_config": preset.hf_config},
                 workload={"task": task, "seq_len": seq, "global_batch": strategy["global_batch"],
                           "processed_tokens": 2e9, "epochs": 1}, choice=choice)


MEGATRON = {
    # Llama 3 70B: TP 8 inside each node, 2 interleaved pipeline stages (vpp 5: 8 layers a chunk), DP 2 with the
    # distributed optimizer, on 4 nodes x 8 H100
    "llama3-70b-tp8-pp2": _setup("llama-3-70b", 8, 4, "megatron", tp=8, pp=2, vpp=5, schedule="interleaved", ga=16,
                                 zero=1, ckpt="selective"),
    # Qwen3-30B-A3B (128 experts): EP 8, PP 2, DP 8 on 2 nodes x 8
    "qwen3-30b-a3b-ep8": _setup("qwen3-30b-a3b", 8, 2, "megatron", pp=2, ep=8, ga=4, zero=1, ckpt="full"),
    # Mixtral 8x7B: TP 2 x CP 2 x EP 8 on one node of 8, fp16, pre-training (no starting checkpoint)
    "mixtral-tp2-cp2-ep4": _setup("mixtral-8x7b", 8, 1, "megatron", tp=2, cp=2, ep=4, ga=8, ckpt="none",
                                  precision="fp16", task="pretrain"),
}
TORCHTITAN = {
    # Llama 3 70B under FSDP2 (dp_shard 2) x TP 8 x PP 2 x CP 2 on 8 nodes x 8, torchtitan's per-op checkpointing
    "llama3-70b-fsdp-tp-pp-cp": _setup("llama-3-70b", 8, 8, "torchtitan", tp=8, pp=2, cp=2, fsdp="full_shard",
                                       ckpt="selective", selective_ac="op", ga=8, seq=8192),
    # Qwen3-30B-A3B: FSDP2 x EP 8 x interleaved PP 2 (vpp 2), 2 nodes x 8
    "qwen3-30b-a3b-fsdp-ep": _setup("qwen3-30b-a3b", 8, 2, "torchtitan", pp=2, vpp=2, schedule="interleaved", ep=8,
                                    fsdp="full_shard", ga=4, ckpt="full"),
}


# ---- Megatron-LM: its declared arguments, rebuilt into a parser (fallback: Megatron-LM is not on PyPI) --------------

def megatron_parser() -> argparse.ArgumentParser:
    """An argparse parser with every option megatron/training/arguments.py declares (names, actions, nargs, types,
    choices) at the commit in the data file; custom type functions take the string."""
    with open(os.path.join(DATA, "megatron_lm_args.json"), encoding="utf-8") as fh:
        doc = json.load(fh)
    assert doc["ref"] == "core_v0.16.1" and len(doc["commit"]) == 40
    parser = argparse.ArgumentParser(prog="pretrain_gpt.py", allow_abbrev=False, exit_on_error=False)
    types_ = {"int": int, "float": float, "str": str}
    for a in doc["arguments"]:
        kw = {"dest": a["dest"]}
        if a["action"] in ("_StoreTrueAction", "_StoreFalseAction"):
            kw["action"] = "store_true" if a["action"] == "_StoreTrueAction" else "store_false"
        elif a["action"] == "BooleanOptionalAction":
            kw["action"] = argparse.BooleanOptionalAction
        else:
            kw.update(nargs=a["nargs"], type=types_.get(a["type"], str))
            if a["choices"] is not None and all(not str(c).startswith("<") for c in a["choices"]):
                kw["choices"] = a["choices"]
        options = [o for o in a["options"] if not (a["action"] == "BooleanOptionalAction" and o.startswith("--no-"))]
        parser.add_argument(*options, **kw)
    return parser


def megatron_argv(setup: Setup) -> list[str]:
    """pretrain_gpt.py's argv as bash expands megatron_args.sh (the array) and the paths after it."""
    files = render_files(setup, data=None, target="ecs")
    script = files["megatron_args.sh"] + 'printf "%s\\0" "${MEGATRON_ARGS[@]}"\n'
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    return out.split("\0")[:-1]


def _validate_sizes(args, world: int, cfg: dict) -> None:
    """The size rules Megatron-LM's validate_args asserts (core_v0.16.1), re-checked on the parsed arguments."""
    tp, pp, cp = args.tensor_model_parallel_size, args.pipeline_model_parallel_size, args.context_parallel_size
    assert world % (tp * pp * cp) == 0
    dp = world // (tp * pp * cp)
    assert args.global_batch_size % (args.micro_batch_size * dp) == 0
    layers_per_rank = args.num_layers // pp
    assert args.num_layers % pp == 0
    if args.num_layers_per_virtual_pipeline_stage:
        assert layers_per_rank % args.num_layers_per_virtual_pipeline_stage == 0 and pp > 1
    assert args.num_attention_heads % tp == 0 and (args.num_query_groups or args.num_attention_heads) % tp == 0
    assert args.seq_length % (2 * cp) == 0 and args.max_position_embeddings >= args.seq_length
    if args.num_experts:
        assert args.num_experts % args.expert_model_parallel_size == 0
        assert world % (args.expert_model_parallel_size * tp * pp) == 0
    assert not (args.bf16 and args.fp16)
    assert (args.num_layers, args.hidden_size) == (cfg["num_hidden_layers"], cfg["hidden_size"])


@pytest.mark.parametrize("name", sorted(MEGATRON))
def test_megatron_arguments_parse(name):
    setup = MEGATRON[name]
    st, cfg = setup.strategy, setup.model["hf_config"]
    argv = megatron_argv(setup) + ["--data-path", "/data/prefix", "--save", "/out"]
    args = megatron_parser().parse_args(argv)
    assert (args.tensor_model_parallel_size, args.pipeline_model_parallel_size, args.context_parallel_size,
            args.expert_model_parallel_size) == (st["tp"], st["pp"], st["cp"], st["ep"])
    assert args.sequence_parallel == (st["tp"] > 1)
    assert args.use_distributed_optimizer == (st["zero_stage"] == 1)
    assert (args.micro_batch_size, args.global_batch_size, args.seq_length) == (1, st["global_batch"], st["seq_len"])
    assert args.swiglu and args.normalization == "RMSNorm" and args.position_embedding_type == "rope"
    assert args.untie_embeddings_and_output_weights and args.group_query_attention
    assert args.num_query_groups == cfg["num_key_value_heads"] and args.ffn_hidden_size == cfg["intermediate_size"]
    assert args.train_iters >= 1 and getattr(args, st["precision"]) is True
    if st["vpp"] > 1:
        assert args.num_layers_per_virtual_pipeline_stage == cfg["num_hidden_layers"] // (st["pp"] * st["vpp"])
    if st["grad_ckpt"] == "selective":
        assert args.recompute_granularity == "selective" and args.recompute_activations
    elif st["grad_ckpt"] == "full":
        assert (args.recompute_granularity, args.recompute_method) == ("full", "uniform")
    else:
        assert args.recompute_granularity is None
    if st["ep"] > 1:
        experts = cfg.get("num_local_experts") or cfg.get("num_experts")
        assert args.num_experts == experts and args.moe_router_topk == cfg["num_experts_per_tok"]
    _validate_sizes(args, setup.world_size, cfg)


def test_rebuilt_megatron_parser_really_checks():
    parser = megatron_parser()
    for bad in (["--tensor-parallel-size", "8"], ["--normalization", "rmsnorm"], ["--recompute-method", "full"],
                ["--micro-batch-size", "one"], ["--tensor-model"]):  # unknown, bad choice, bad type, abbreviation
        with pytest.raises((SystemExit, argparse.ArgumentError)):
            parser.parse_args(bad)


# ---- torchtitan: its own ConfigManager (0.2.2) -------------------------------------------------------------------

# make test installs it in .venv/torchtitan (make test-latest: .venv-latest/torchtitan)
TITAN_DIR = Path(__file__).resolve().parents[1] / os.environ.get("TRAINFIT_TEST_VENV", ".venv") / "torchtitan"


def _torchtitan():
    """torchtitan's config package without torchtitan/__init__.py (which imports its MoE kernels, hence triton, not
    in the CPU torch build): the package object is made here, its modules are torchtitan's own."""
    if "torchtitan" not in sys.modules:
        if TITAN_DIR.is_dir() and str(TITAN_DIR) not in sys.path:  # make test installs it there, without deps
            sys.path.append(str(TITAN_DIR))
        spec = importlib.util.find_spec("torchtitan")
        if spec is None:
            pytest.skip("torchtitan 0.2.2 is not installed in .venv/torchtitan (make test installs it: "
                        "requirements/torchtitan.lock)")
        pkg = types.ModuleType("torchtitan")
        pkg.__path__, pkg.__spec__ = list(spec.submodule_search_locations), spec
        sys.modules["torchtitan"] = pkg
    from torchtitan.config import ConfigManager
    from torchtitan.distributed.parallel_dims import ParallelDims

    return ConfigManager, ParallelDims, sys.modules["torchtitan"].__path__[0]


def _flavors(root: str, model: str) -> set[str]:
    """The flavor names torchtitan's model package declares (its `<model>_args` dict), read without importing it."""
    tree = ast.parse(open(os.path.join(root, "models", model, "__init__.py"), encoding="utf-8").read())
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if getattr(target, "id", "") == f"{model}_args":
                return {k.value for k in node.value.keys}
    return set()


def _parse_toml(text: str, tmp_path, *extra):
    ConfigManager, _, _ = _torchtitan()
    path = tmp_path / "torchtitan.toml"
    path.write_text(text, encoding="utf-8")
    return ConfigManager().parse_args(["--job.config_file", str(path), *extra])


@pytest.mark.parametrize("name", sorted(TORCHTITAN))
def test_torchtitan_config_manager_parses_the_toml(name, tmp_path):
    setup = TORCHTITAN[name]
    st, cfg = setup.strategy, setup.model["hf_config"]
    files = render_files(setup, data=None)
    conf = _parse_toml(files["torchtitan.toml"], tmp_path, "--training.dataset_path", "/data/x")
    _, ParallelDims, root = _torchtitan()
    par, tr = conf.parallelism, conf.training
    assert (par.tensor_parallel_degree, par.pipeline_parallel_degree, par.context_parallel_degree,
            par.expert_parallel_degree) == (st["tp"], st["pp"], st["cp"], st["ep"])
    ParallelDims(dp_replicate=par.data_parallel_replicate_degree, dp_shard=par.data_parallel_shard_degree,
                 cp=par.context_parallel_degree, tp=par.tensor_parallel_degree, pp=par.pipeline_parallel_degree,
                 ep=par.expert_parallel_degree, etp=par.expert_tensor_parallel_degree, world_size=setup.world_size)
    dp = par.data_parallel_shard_degree
    assert tr.global_batch_size == st["global_batch"] and tr.seq_len == st["seq_len"] and tr.steps >= 1
    assert tr.dataset_path == "/data/x" and tr.mixed_precision_param == "bfloat16"
    if st["pp"] > 1:  # micro-batches of the pipeline, pp x vpp stages of equal layers
        assert tr.local_batch_size == st["micro_batch"] * st["grad_accum"]
        assert tr.global_batch_size == tr.local_batch_size * dp
        assert par.pipeline_parallel_microbatch_size == st["micro_batch"]
        stages = cfg["num_hidden_layers"] // par.pipeline_parallel_layers_per_stage
        assert stages == st["pp"] * st["vpp"]
        assert par.pipeline_parallel_schedule == ("Interleaved1F1B" if st["vpp"] > 1 else "1F1B")
    assert conf.activation_checkpoint.mode == st["grad_ckpt"]
    if st["grad_ckpt"] == "selective":
        assert conf.activation_checkpoint.selective_ac_option == "op"
    assert conf.model.flavor in _flavors(root, conf.model.name)
    assert conf.checkpoint.initial_load_in_hf and conf.checkpoint.initial_load_path == conf.model.hf_assets_path


def test_torchtitan_config_manager_really_checks(tmp_path):
    text = render_files(TORCHTITAN["llama3-70b-fsdp-tp-pp-cp"], data=None)["torchtitan.toml"]
    with pytest.raises(ValueError):  # a key JobConfig does not have
        _parse_toml(text.replace("tensor_parallel_degree", "tensor_parallel_size"), tmp_path)
    _, ParallelDims, _ = _torchtitan()
    with pytest.raises(AssertionError):  # the degrees must multiply to the world size
        ParallelDims(dp_replicate=1, dp_shard=3, cp=2, tp=8, pp=2, ep=1, etp=1, world_size=64)


# ---- every target runs the stack's command under torchrun, one per node --------------------------------------------

FAKES = {  # programs the specs call, recorded instead of run: torchrun writes its argv as JSON
    "torchrun": 'import json, os, sys\nopen(os.environ["TORCHRUN_LOG"], "a").write(json.dumps({"argv": '
                'sys.argv[1:], "cwd": os.getcwd(), "env": {k: os.environ.get(k) for k in ("DATA", "OUTPUT_DIR", '
                '"CUDA_DEVICE_MAX_CONNECTIONS", "MEGATRON_LM")}}) + "\\n")\n',
    "git": "import sys\n", "pip": "import sys\n",
    "srun": "import os, sys\nargs = sys.argv[1:]\nwhile args[0].startswith('--'):\n    args.pop(0)\n"
            "os.environ['SLURM_NODEID'] = '0'\nos.execvp(args[0], args)\n",
    "scontrol": "print('node0')\n",
}


def _fake_bin(tmp_path) -> str:
    folder = tmp_path / "bin"
    folder.mkdir()
    for name, body in FAKES.items():
        (folder / name).write_text(f"#!{sys.executable}\n{body}")
        (folder / name).chmod(0o755)
    return str(folder)


def _node_run(target: str, run_dir, files: dict) -> tuple[list[str], dict]:
    """The command node 0 of `target` runs, as the target's spec says it (read with its own parser where one is
    installed), run in bash with torchrun recorded; returns (what torchrun ran, the environment it saw)."""
    env = {"SLURM_NNODES": "2", "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "node0", "SLURM_SUBMIT_DIR": str(run_dir),
           "WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "NODE_RANK": "0",
           "SKYPILOT_NUM_NODES": "2", "SKYPILOT_NODE_RANK": "0", "SKYPILOT_NODE_IPS": "10.0.0.1\n10.0.0.2",
           "SKYPILOT_NUM_GPUS_PER_NODE": "8", "DATA": "/data/prefix", "CHECKPOINT": "/ckpt",
           "MEGATRON_LM": str(run_dir)}
    shared = str(run_dir.parent)
    if target == "ecs":
        command = ["bash", str(run_dir / "launch.sh")]
    elif target == "slurm":
        assert subprocess.run(["bash", "-n", str(run_dir / "slurm.sbatch")]).returncode == 0
        command = ["bash", str(run_dir / "slurm.sbatch")]
    elif target == "dlc":
        command = ["bash", "-c", _dlc_command(files["dlc_job.json"]).replace("/mnt/shared", shared)]
    elif target == "pytorchjob":
        command = _pytorchjob_command(files["pytorchjob.yaml"])
        command[-1] = command[-1].replace("/mnt/shared", shared)
    else:
        command = ["bash", "-c", yaml.safe_load(files["skypilot.yaml"])["run"]]
    return command, env


def _dlc_command(text: str) -> str:
    body = json.loads(text)
    models = pytest.importorskip("alibabacloud_pai_dlc20201203.models")
    request = models.CreateJobRequest().from_map(body)
    request.validate()
    return request.user_command


def _pytorchjob_command(text: str) -> list[str]:
    doc = yaml.safe_load(text)
    pytest.importorskip("kubeflow.training")
    from kubeflow.training.api_client import ApiClient

    job = ApiClient()._ApiClient__deserialize(doc, "KubeflowOrgV1PyTorchJob")
    return list(job.spec.pytorch_replica_specs["Master"].template.spec.containers[0].command)


def _run_node(setup: Setup, target: str, tmp_path) -> dict:
    from trainfit.generate.targets import job_name

    run_dir = tmp_path / job_name(setup)  # the dlc / pytorchjob scripts cd to <shared>/<job name>
    files = render_files(setup, data=None, target=target)
    run_dir.mkdir()
    for name, text in files.items():
        (run_dir / name).write_text(text, encoding="utf-8")
    (run_dir / "pretrain_gpt.py").write_text("")  # a Megatron-LM checkout: nothing is cloned
    command, env = _node_run(target, run_dir, files)
    log = tmp_path / "torchrun.jsonl"
    env.update(PATH=_fake_bin(tmp_path) + os.pathsep + os.environ["PATH"], TORCHRUN_LOG=str(log), HOME=str(tmp_path))
    proc = subprocess.run(command, cwd=run_dir, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (record,) = [json.loads(line) for line in log.read_text().splitlines()]
    return record


def _torchrun_split(argv: list[str]) -> tuple[dict, list[str]]:
    opts, i = {}, 0
    while argv[i].startswith("--"):
        opts[argv[i]] = argv[i + 1]
        i += 2
    return opts, argv[i:]


@pytest.mark.parametrize("target", TARGETS)
def test_every_target_runs_megatron_under_torchrun(target, tmp_path):
    setup = MEGATRON["llama3-70b-tp8-pp2"]
    record = _run_node(setup, target, tmp_path)
    opts, program = _torchrun_split(record["argv"])
    assert opts["--nproc_per_node"] == "8" and opts["--node_rank"] == "0"
    assert opts["--nnodes"] in ("4", "2")  # the plan's 4 (fixed in the spec) or the scheduler's variable (set to 2)
    assert program[0].endswith("/pretrain_gpt.py") and record["env"]["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    args = megatron_parser().parse_args(program[1:])
    assert args.tensor_model_parallel_size == 8 and args.pipeline_model_parallel_size == 2
    assert args.data_path == ["/data/prefix"] and args.load == "/ckpt" and args.finetune
    _validate_sizes(args, setup.world_size, setup.model["hf_config"])


@pytest.mark.parametrize("target", TARGETS)
def test_every_target_runs_torchtitan_under_torchrun(target, tmp_path):
    setup = TORCHTITAN["llama3-70b-fsdp-tp-pp-cp"]
    record = _run_node(setup, target, tmp_path)
    opts, program = _torchrun_split(record["argv"])
    assert opts["--nproc_per_node"] == "8" and program[:2] == ["-m", "torchtitan.train"]
    toml = os.path.join(record["cwd"], program[program.index("--job.config_file") + 1])
    conf = _parse_toml(open(toml, encoding="utf-8").read(), tmp_path, *program[2:])
    assert conf.training.dataset_path == "/data/prefix" and conf.parallelism.context_parallel_degree == 2


def test_skypilot_parses_the_3d_task(tmp_path):
    from test_targets import SKY_PARSE, SKY_PYTHON

    if not os.path.exists(SKY_PYTHON):
        pytest.skip("no .venv/sky with SkyPilot (make test creates it)")
    from trainfit import _proc

    for setup in (MEGATRON["llama3-70b-tp8-pp2"], TORCHTITAN["llama3-70b-fsdp-tp-pp-cp"]):
        path = tmp_path / "skypilot.yaml"
        path.write_text(render_files(setup, data=None, target="skypilot")["skypilot.yaml"])
        env = dict(os.environ, HOME=str(tmp_path))
        env.pop("PYTHONPATH", None)
        proc = _proc.run([SKY_PYTHON, "-c", SKY_PARSE, str(path)], timeout=120, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        task = json.loads(proc.stdout.strip().splitlines()[-1])
        assert task["num_nodes"] == setup.choice["nodes"] and task["accelerators"] == {"H100": 8}


def test_files_of_a_3d_setup():
    files = render_files(MEGATRON["qwen3-30b-a3b-ep8"], data=None, target="slurm", lang="zh")
    assert "train.py" not in files and "train_config.json" not in files
    assert {"megatron_args.sh", "launch.sh", "requirements.txt", "README.md", "slurm.sbatch"} <= set(files)
    assert "megatron-core==0.16.1" in files["requirements.txt"] and "pretrain_gpt.py" in files["README.md"]
    files = render_files(TORCHTITAN["qwen3-30b-a3b-fsdp-ep"], data=None)
    assert "torchtitan==0.2.2" in files["requirements.txt"] and "torchtitan.toml" in files
    for text in (files["launch.sh"],):
        assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


# ---- layouts the stacks cannot run: one line, English and Chinese --------------------------------------------------

REFUSED = {
    "megatron-lora": (dict(engine="megatron", tp=8, pp=2, method="lora"), "gen_e_3d_method"),
    "megatron-qlora": (dict(engine="megatron", tp=8, pp=2, method="qlora"), "gen_e_3d_method"),
    "torchtitan-lora": (dict(engine="torchtitan", tp=8, fsdp="full_shard", method="lora"), "gen_e_3d_method"),
    "megatron-offload": (dict(engine="megatron", tp=8, pp=2, offload="optimizer"), "gen_e_3d_offload"),
    "torchtitan-offload": (dict(engine="torchtitan", tp=8, fsdp="full_shard", offload="all"), "gen_e_3d_offload"),
    "megatron-zero3": (dict(engine="megatron", tp=8, pp=2, zero=3), "gen_e_3d_zero"),
    "megatron-dpo": (dict(engine="megatron", tp=8, pp=2, task="dpo"), "gen_e_3d_task"),
    "megatron-zb": (dict(engine="megatron", tp=8, pp=2, schedule="zb"), "gen_e_3d_zb"),
    "megatron-op-policy": (dict(engine="megatron", tp=8, pp=2, ckpt="selective", selective_ac="op"),
                           "gen_e_3d_selective"),
    "torchtitan-attention-policy": (dict(engine="torchtitan", tp=8, fsdp="full_shard", ckpt="selective"),
                                    "gen_e_3d_selective"),
    "torchtitan-fp16": (dict(engine="torchtitan", tp=8, fsdp="full_shard", precision="fp16"), "gen_e_3d_precision"),
    "torchtitan-no-sp": (dict(engine="torchtitan", tp=8, fsdp="full_shard", sp=False), "gen_e_3d_no_sp"),
    "megatron-pp3": (dict(engine="megatron", tp=8, pp=3, nodes=3), "gen_e_3d_split"),
    "megatron-litgpt-numbers": (dict(engine="megatron", tp=8, pp=2, framework="litgpt"), "gen_e_3d_framework"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_layouts_the_stacks_cannot_run_are_refused(case):
    from trainfit.errors import LocalizedError  # noqa: F401 - GenerateError is one

    kw, key = REFUSED[case]
    nodes = kw.pop("nodes", 2)
    setup = _setup("llama-3-70b", 8, nodes, **kw)
    for call in (lambda: render_files(setup, data=None), lambda: require_generated_stack(setup)):
        with pytest.raises(GenerateError) as info:
            call()
        assert info.value.key == key
        en, zh = info.value.message("en"), info.value.message("zh")
        assert "\n" not in en and "\n" not in zh and en != zh
        assert re.search(r"[\u4e00-\u9fff]", zh) and not re.search(r"[\u4e00-\u9fff]", en)


def test_models_without_a_stack_mapping_are_refused():
    with pytest.raises(GenerateError) as info:  # torchtitan trains its own flavors only
        render_files(_setup("qwen2-7b", 8, 1, "torchtitan", tp=4, fsdp="full_shard", ckpt="full"), data=None)
    assert info.value.key == "gen_e_3d_model" and "flavor" in info.value.message("en")
    with pytest.raises(GenerateError) as info:  # sliding-window attention is not in the arguments written
        render_files(_setup("mistral-7b", 8, 1, "megatron", tp=4), data=None)
    assert info.value.key == "gen_e_3d_model"


def test_the_old_engines_are_unchanged():
    """A data-parallel plan still gets train.py (the snapshots in test_generate.py pin the files themselves)."""
    files = render_files(_setup("llama-3-8b", 8, 1, "fsdp", fsdp="full_shard"), data=None)
    assert "train.py" in files and 'train.py --config train_config.json' in files["launch.sh"]
    assert shlex.split(files["launch.sh"].splitlines()[-1])[0] == "exec"


def test_expert_tensor_parallelism_reaches_both_stacks():
    """--etp (issue 34): Megatron-LM's --expert-tensor-parallel-size when given (its default is the TP size);
    torchtitan's expert_tensor_parallel_degree, which it runs only as 1 or tp (one line otherwise, en and zh)."""
    from trainfit.errors import GenerateError

    setup = _setup("qwen3-30b-a3b", 8, 2, "megatron", tp=2, ep=8, etp=1, zero=1)
    argv = megatron_argv(setup)
    assert argv[argv.index("--expert-tensor-parallel-size") + 1] == "1"
    assert "--expert-tensor-parallel-size" not in megatron_argv(MEGATRON["qwen3-30b-a3b-ep8"])
    titan = _setup("qwen3-30b-a3b", 8, 2, "torchtitan", tp=2, ep=8, etp=2, fsdp="full_shard")
    assert "expert_tensor_parallel_degree = 2" in render_files(titan, data=None)["torchtitan.toml"]
    with pytest.raises(GenerateError) as err:
        render_files(_setup("qwen3-30b-a3b", 8, 2, "torchtitan", tp=4, ep=8, etp=2, fsdp="full_shard"), data=None)
    assert err.value.key == "gen_e_3d_etp" and "--etp 1" in err.value.message("en")
    assert "专家张量并行" in err.value.message("zh")


def test_expert_all_to_all_overlap_reaches_megatron():
    """--ep-overlap (issue 34): Megatron-LM's --overlap-moe-expert-parallel-comm with --delay-wgrad-compute, parsed
    by its parser; CUDA_DEVICE_MAX_CONNECTIONS above 1 for it (32 without TP / CP, 8 with TP, as Megatron-Bridge's
    Qwen3-235B recipe), 1 otherwise; layouts Megatron-Core refuses it on are refused by the estimate, en and zh."""
    from trainfit.generate.megatron import prelude

    setup = _setup("qwen3-30b-a3b", 8, 2, "megatron", ep=16, ga=4, zero=1, ckpt="none", ep_overlap=True)
    args = megatron_parser().parse_args(megatron_argv(setup) + ["--data-path", "/d", "--save", "/o"])
    assert args.overlap_moe_expert_parallel_comm and args.delay_wgrad_compute
    assert args.moe_token_dispatcher_type == "alltoall"
    for backend in ("deepep", "hybridep"):  # --moe-dispatcher: Megatron-Core's flex dispatcher over that backend
        flex = _setup("qwen3-30b-a3b", 8, 2, "megatron", ep=16, ga=4, zero=1, ckpt="none", dispatcher=backend)
        parsed = megatron_parser().parse_args(megatron_argv(flex) + ["--data-path", "/d"])
        assert (parsed.moe_token_dispatcher_type, parsed.moe_flex_dispatcher_backend) == ("flex", backend)
    assert "export CUDA_DEVICE_MAX_CONNECTIONS=32" in prelude(setup)
    with_tp = _setup("qwen3-30b-a3b", 8, 2, "megatron", tp=2, ep=8, ga=4, zero=1, ckpt="none", ep_overlap=True)
    assert "export CUDA_DEVICE_MAX_CONNECTIONS=8" in prelude(with_tp)
    plain = megatron_parser().parse_args(megatron_argv(MEGATRON["qwen3-30b-a3b-ep8"]) + ["--data-path", "/d"])
    assert not plain.overlap_moe_expert_parallel_comm and "export CUDA_DEVICE_MAX_CONNECTIONS=1" in \
        prelude(MEGATRON["qwen3-30b-a3b-ep8"])
    import trainfit
    from trainfit.errors import SpecError

    job = dict(method="full", seq_len=4096, micro_batch=1, grad_accum=8, zero=1, ep_overlap=True)
    for layout, says in ((dict(ep=8, pp=2, grad_ckpt="none"), "virtual stages"),
                         (dict(ep=16, grad_ckpt="full"), "full recomputation"),
                         (dict(ep=1, pp=2, vpp=2, pp_schedule="interleaved", grad_ckpt="none"), "--ep above 1")):
        with pytest.raises(SpecError, match=says) as err:
            trainfit.estimate("qwen3-30b-a3b", "h100-sxm", gpus=8, nodes=2, **{**job, **layout})
        from trainfit.errors import sentence_of
        from trainfit.i18n.errors import localize_error

        zh = localize_error(sentence_of(err.value), "zh")  # the sentence of the message table, not its English
        assert "重" in zh or "大于 1" in zh
