"""Multi-node, proven on one machine: a generated 2-node setup trains 2 steps as two "nodes" of one process each on
localhost (gloo, CPU, tiny model, static rendezvous on 127.0.0.1): the `ecs` launch.sh started twice with
NODE_RANK 0 and 1 (DDP, ZeRO-2, FSDP2), and the Slurm script run under a stand-in `srun` that starts one task per
node with SLURM_NODEID set, as Slurm does. Every run is bounded and leaves no process behind."""

import copy
import json
import os
import socket
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from trainfit import _proc

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytestmark = pytest.mark.slow

TIMEOUT_S = 120  # a tiny model, two steps, two ranks: seconds; a hang costs this bound
VENV_BIN = os.path.dirname(sys.executable)
TRAIN_EXTRA = ["--random-init", "--max-steps", "2", "--device", "cpu"]

FAKE_SRUN = """#!/usr/bin/env bash
# stand-in for srun in a test: one task per node of the allocation, on this machine, each with its SLURM_NODEID
while [[ "${1:-}" == --* ]]; do shift; done
pids=()
for ((i = 0; i < SLURM_NNODES; i++)); do SLURM_NODEID=$i "$@" & pids+=($!); done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
exit $rc
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp_path, tiny_data, **extra):
    env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ['PATH']}", DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_port()),
               DATA=str(tiny_data / "text.jsonl"), OUTPUT_DIR=str(tmp_path / "shared" / "out"))
    env.update(extra)
    return env


def _generate(run_cli, run, *flags):
    code, _, err = run_cli("generate", "--model", "tiny-llama", "--gpu", "a100-sxm4-80gb", "--gpus", "1", "--nodes",
                           "2", "--seq-len", "32", "--micro-batch", "2", "--grad-accum", "2", *flags, "--out", str(run))
    assert code == 0, err


def _check(procs, out_dir, engine):
    for proc in procs:
        assert proc.leftovers == [], f"processes outlived the run: {proc.leftovers}"
    assert [p.returncode for p in procs] == [0] * len(procs), "\n----\n".join(p.stderr[-2500:] for p in procs)
    lines = [json.loads(x) for x in (out_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [x for x in lines if "step" in x and not x.get("summary")]
    summary = [x for x in lines if x.get("summary")][-1]
    assert [x["step"] for x in steps] == [1, 2]
    assert summary["engine"] == engine and summary["world_size"] == 2
    assert summary["parameters"] == ("dtensor" if engine == "fsdp" else "plain")  # FSDP2 really sharded


# DeepSpeed ZeRO-2 only: launch.sh's two-node start with DDP and with FSDP2 (the default full fine-tune) runs twice
# more in test_fsdp_loads_the_checkpoint_on_rank0_only below, through the same launch.sh and the same _check (engine,
# world size 2, FSDP2 sharded), and those engines' --random-init runs at world size 2 in test_train_e2e.py
# (test_two_processes_gloo): train.py's engine code does not depend on the launcher (LOCAL_RANK only picks a CUDA
# device and the ModelScope download's first rank)
@pytest.mark.parametrize("flags,engine", [(("--zero", "2"), "deepspeed")])
def test_ecs_launch_two_nodes_on_localhost(run_cli, tiny_data, tmp_path, flags, engine):
    run = tmp_path / "run"
    _generate(run_cli, run, *flags)
    env = _env(tmp_path, tiny_data)
    argv = ["bash", str(run / "launch.sh"), "--tokenizer", str(tiny_data / "tok"), *TRAIN_EXTRA]
    with ThreadPoolExecutor(2) as pool:  # node 0 and node 1, started together like two machines
        jobs = [pool.submit(_proc.run, argv, timeout=TIMEOUT_S, env=dict(env, NODE_RANK=str(rank)), cwd=str(run))
                for rank in (0, 1)]
        procs = [job.result() for job in jobs]
    _check(procs, tmp_path / "shared" / "out", engine)


def test_slurm_script_two_nodes_on_localhost(run_cli, tiny_data, tmp_path):
    run = tmp_path / "run"
    _generate(run_cli, run, "--target", "slurm")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "srun").write_text(FAKE_SRUN)
    (fake / "srun").chmod(0o755)
    env = _env(tmp_path, tiny_data, SLURM_NNODES="2", SLURM_JOB_NODELIST="localhost", SLURM_SUBMIT_DIR=str(run))
    env["PATH"] = f"{fake}:{env['PATH']}"
    argv = ["bash", str(run / "slurm.sbatch"), "--tokenizer", str(tiny_data / "tok"), *TRAIN_EXTRA]
    _check([_proc.run(argv, timeout=TIMEOUT_S, env=env, cwd=str(tmp_path))], tmp_path / "shared" / "out", "ddp")


def test_zero3_builds_the_model_partitioned(run_cli, tiny_data, tmp_path):
    """ZeRO-3: the DeepSpeed config is active before the model is built (zero.Init), so right after the build each
    of the 2 ranks holds about half of the parameters' elements, never the whole model."""
    run = tmp_path / "run"
    _generate(run_cli, run, "--zero", "3")
    assert json.loads((run / "train_config.json").read_text())["zero_stage"] == 3
    env = _env(tmp_path, tiny_data)
    argv = ["bash", str(run / "launch.sh"), "--tokenizer", str(tiny_data / "tok"), *TRAIN_EXTRA]
    with ThreadPoolExecutor(2) as pool:
        jobs = [pool.submit(_proc.run, argv, timeout=TIMEOUT_S, env=dict(env, NODE_RANK=str(rank)), cwd=str(run))
                for rank in (0, 1)]
        procs = [job.result() for job in jobs]
    _check(procs, tmp_path / "shared" / "out", "deepspeed")
    lines = [json.loads(x) for x in (tmp_path / "shared" / "out" / "metrics.jsonl").read_text().splitlines()]
    summary = [x for x in lines if x.get("summary")][-1]
    local, total = summary["loaded_local_params"], summary["loaded_total_params"]
    assert total == summary["trainable_params"]  # full fine-tuning: every element counted once
    # each rank's partition is ceil(numel / 2) per parameter: half the model, plus at most one element each
    assert total / 2 <= local < total / 2 + 1000, (local, total)


def _saved_tiny_model(path):
    """A tiny Llama with random weights saved as a checkpoint (what from_pretrained reads)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from trainfit.catalog import all_models

    hf = copy.deepcopy(all_models()["tiny-llama"].hf_config)  # transformers rewrites nested dicts in place
    hf.pop("architectures", None)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.for_model(**hf)).save_pretrained(path)
    return path


def _two_nodes(run, env, argv):
    with ThreadPoolExecutor(2) as pool:
        jobs = [pool.submit(_proc.run, argv, timeout=TIMEOUT_S, env=dict(env, NODE_RANK=str(rank)), cwd=str(run))
                for rank in (0, 1)]
        return [job.result() for job in jobs]


def test_fsdp_loads_the_checkpoint_on_rank0_only(run_cli, tiny_data, tmp_path):
    """FSDP: rank 0 reads the checkpoint, the other rank builds on the meta device and receives its shards; the first
    loss equals DDP's on the same weights and batches (a rank with wrong shards would change it)."""
    weights = _saved_tiny_model(tmp_path / "weights")
    first = {}
    for engine, flags in (("fsdp", ("--fsdp", "full_shard")), ("ddp", ())):
        run = tmp_path / engine
        _generate(run_cli, run, *flags)
        env = _env(tmp_path, tiny_data, OUTPUT_DIR=str(tmp_path / engine / "out"))
        argv = ["bash", str(run / "launch.sh"), "--tokenizer", str(tiny_data / "tok"), "--model-path", str(weights),
                "--max-steps", "2", "--device", "cpu"]
        _check(_two_nodes(run, env, argv), run / "out", engine)
        lines = [json.loads(x) for x in (run / "out" / "metrics.jsonl").read_text().splitlines()]
        first[engine] = [x["loss"] for x in lines if x.get("step") == 1][0]
    assert abs(first["fsdp"] - first["ddp"]) < 1e-4 * abs(first["ddp"]), first
