"""Where the generated setup runs: one torchrun command per node, wrapped for each scheduler.

`ecs` is launch.sh on machines one logs into; `dlc` (PAI-DLC job, the CreateJob request body), `pytorchjob`
(Kubeflow PyTorchJob for ACK), `skypilot` (a SkyPilot task) and `slurm` (an sbatch script) submit the same train.py
with the same nodes, GPUs per node and arguments. Each scheduler names the node count and the node index its own
way; `node_command` maps them to torchrun's --nnodes / --node_rank (never to process counts). Every value from the
plan or the user that reaches a spec is checked against a pattern first, and shell-quoted where it reaches a shell.
"""

from __future__ import annotations

import copy
import json
import re
import shlex

from ..errors import GenerateError
from .common import Setup
from .stacks import TRAIN_ARGS, is_3d, node_prelude, program  # noqa: F401 - TRAIN_ARGS: tests/test_targets.py

TARGETS = ("ecs", "dlc", "pytorchjob", "skypilot", "slurm")
# Where the shared storage (NAS / CPFS / OSS, a PVC, a cluster file system) is mounted in every container.
SHARED = "/mnt/shared"
DEFAULT_IMAGE = "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-devel"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,254}$")  # images, instance types, accelerators
_URI = re.compile(r"^(oss|nas|cpfs|bmcpfs)://[A-Za-z0-9][A-Za-z0-9._/-]{0,500}$")
_PVC = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # a Kubernetes object name (DNS-1123 label)

# SkyPilot's accelerator names for the catalog's GPU ids (as `sky show-gpus` lists them).
SKY_ACCELERATORS = {"a10": "A10", "a10g": "A10G", "a100-sxm4-40gb": "A100", "a100-pcie-40gb": "A100",
                    "a100-sxm4-80gb": "A100-80GB", "a100-pcie-80gb": "A100-80GB", "h100-sxm": "H100",
                    "h100-pcie": "H100", "l4": "L4", "l40s": "L40S", "t4": "T4", "v100-sxm2-16gb": "V100",
                    "v100-sxm2-32gb": "V100-32GB", "h200": "H200"}
# Clouds SkyPilot reaches for the catalog's providers (SkyPilot has no Alibaba ECS backend; ACK via kubernetes).
SKY_CLOUDS = {"aws": "aws", "gcp": "gcp", "azure": "azure"}


def checked(value: str, what: str, pattern: re.Pattern = _NAME) -> str:
    """`value` if it matches `pattern` (no spaces, quotes, newlines or shell syntax), else a SpecError."""
    if not isinstance(value, str) or not pattern.match(value):
        raise GenerateError("gen_e_bad_name", what=what, value=value)
    return value


def job_name(setup: Setup) -> str:
    """A Kubernetes/DLC/Slurm-safe job name from the model name."""
    base = re.sub(r"[^a-z0-9-]+", "-", str(setup.model["name"]).lower()).strip("-")[:40] or "job"
    return f"trainfit-{base}".rstrip("-")


def node_command(setup: Setup, nnodes: str, node_rank: str, addr: str, port: str, exec_: bool = False) -> str:
    """The command every node runs: torchrun with this node's place in the job (shell expressions built here), the
    engine's program after it (train.py, or Megatron-LM's / torchtitan's: generate/stacks.py), and before it the
    engine's per-node shell lines (bash), joined with &&; `exec_`: torchrun replaces the shell."""
    gpus = int(setup.choice["gpus_per_node"])
    run = ("exec " if exec_ else "") + (
        f'torchrun --nnodes {nnodes} --node_rank {node_rank} --master_addr {addr} --master_port {port} '
        f'--nproc_per_node {gpus} {program(setup)}')
    return " && ".join([*node_prelude(setup), run])


def _prelude(setup: Setup, data: str | None, output_dir: str) -> list[str]:
    from .stacks import data_hint

    return [f"DATA=${{DATA:-{shlex.quote(data) if data else ''}}}",
            f"OUTPUT_DIR=${{OUTPUT_DIR:-{shlex.quote(output_dir)}}}",
            f'if [ -z "$DATA" ]; then echo "{data_hint(setup)}" >&2; exit 2; fi']


def _shared_paths(setup: Setup, data: str | None) -> tuple[str, str, str]:
    """(setup directory, data, output directory) on the shared storage every node mounts."""
    code = f"{SHARED}/{job_name(setup)}"
    return code, data or f"{SHARED}/data", f"{code}/output"


def _container_script(setup: Setup, data: str | None, nnodes: str, node_rank: str) -> str:
    """What a DLC / PyTorchJob container runs: install, then torchrun with the scheduler's node variables."""
    code, data_path, out = _shared_paths(setup, data)
    return " && ".join([
        f"cd {shlex.quote(code)}", "pip install -r requirements.txt",
        f"export DATA=${{DATA:-{shlex.quote(data_path)}}} OUTPUT_DIR=${{OUTPUT_DIR:-{shlex.quote(out)}}}",
        node_command(setup, nnodes, node_rank, '"$MASTER_ADDR"', '"${MASTER_PORT:-29500}"').replace(' "$@"', "")])


# ---- PAI-DLC ---------------------------------------------------------------------------------------------------

def dlc_request(setup: Setup, data: str | None, image: str, storage: str | None) -> dict:
    """The CreateJob request body (PAI-DLC API 2020-12-03, POST /api/v1/jobs), built and checked with Alibaba's SDK
    model `alibabacloud_pai_dlc20201203.models.CreateJobRequest`. DLC starts one pod per node and sets WORLD_SIZE
    to the number of nodes and RANK to the pod's index: they become torchrun's --nnodes and --node_rank."""
    from alibabacloud_pai_dlc20201203 import models as dlc

    instance = checked(str(setup.choice.get("instance_type") or ""), "instance type")
    uri = checked(storage or "oss://YOUR-BUCKET/trainfit/", "--storage", _URI)
    request = dlc.CreateJobRequest(
        display_name=job_name(setup), job_type="PyTorchJob",
        job_specs=[dlc.JobSpec(type="Worker", image=checked(image, "--image"), pod_count=int(setup.choice["nodes"]),
                               ecs_spec=instance)],
        user_command=_dlc_command(setup, data),
        data_sources=[dlc.CreateJobRequestDataSources(uri=uri, mount_path=SHARED)],
        envs={"PYTHONUNBUFFERED": "1"})
    request.validate()
    return _no_empty(request.to_map())


def _dlc_command(setup: Setup, data: str | None) -> str:
    """DLC's user command; the model-parallel engines' node lines are bash (an array of arguments): run by bash."""
    script = _container_script(setup, data, '"$WORLD_SIZE"', '"$RANK"')
    return f"bash -c {shlex.quote(script)}" if is_3d(setup) else script


def _no_empty(value):
    """The SDK's map without the empty lists it adds for unset list fields."""
    if isinstance(value, dict):
        return {k: _no_empty(v) for k, v in value.items() if v != []}
    if isinstance(value, list):
        return [_no_empty(v) for v in value]
    return value


def yaml_text(doc: dict) -> str:
    """YAML with multi-line strings (scripts) as literal blocks, no anchors."""
    import yaml

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data):
            return True

    def text(dumper, data):
        style = "|" if "\n" in data else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    Dumper.add_representer(str, text)
    return yaml.dump(doc, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=120)


# ---- Kubeflow PyTorchJob (ACK) -----------------------------------------------------------------------------------

def pytorchjob(setup: Setup, data: str | None, image: str, pvc: str) -> dict:
    """A kubeflow.org/v1 PyTorchJob: one Master and nodes-1 Workers, each a node with `gpus_per_node` GPUs and the
    shared volume claim. The Training Operator gives each pod MASTER_ADDR, MASTER_PORT and RANK (the pod's index:
    Master 0, Worker i is i+1), so the node rank is RANK and the node count is fixed here."""
    gpus, nodes = int(setup.choice["gpus_per_node"]), int(setup.choice["nodes"])
    script = _container_script(setup, data, str(nodes), '"$RANK"')
    container = {"name": "pytorch", "image": checked(image, "--image"), "command": ["bash", "-c", script],
                 "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": "NCCL_DEBUG", "value": "WARN"}],
                 "resources": {"limits": {"nvidia.com/gpu": gpus}},
                 "volumeMounts": [{"name": "shared", "mountPath": SHARED}, {"name": "dshm", "mountPath": "/dev/shm"}]}
    template = {"spec": {"containers": [container], "volumes": [
        {"name": "shared", "persistentVolumeClaim": {"claimName": checked(pvc, "--pvc", _PVC)}},
        {"name": "dshm", "emptyDir": {"medium": "Memory"}}]}}
    replicas = {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template}}
    if nodes > 1:
        replicas["Worker"] = {"replicas": nodes - 1, "restartPolicy": "OnFailure", "template": copy.deepcopy(template)}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": job_name(setup)},
            "spec": {"nprocPerNode": str(gpus), "runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 3},
                     "pytorchReplicaSpecs": replicas}}


# ---- SkyPilot ------------------------------------------------------------------------------------------------------

def skypilot_task(setup: Setup, data: str | None) -> dict:
    """A SkyPilot task: `num_nodes` nodes with the plan's accelerators; the run step maps SKYPILOT_NODE_RANK,
    SKYPILOT_NODE_IPS (node 0 first) and SKYPILOT_NUM_GPUS_PER_NODE to torchrun."""
    gpu = setup.choice["gpu"]
    accel = checked(SKY_ACCELERATORS.get(gpu, str(gpu).upper()), "accelerator")
    resources: dict = {"accelerators": f"{accel}:{int(setup.choice['gpus_per_node'])}"}
    cloud = SKY_CLOUDS.get(str(setup.choice.get("provider") or ""))
    if cloud:
        resources["cloud"] = cloud
    code, data_path, out = _shared_paths(setup, data)
    run = "\n".join([
        "set -euo pipefail",
        'MASTER_ADDR=$(echo "$SKYPILOT_NODE_IPS" | head -n 1)',
        f"export DATA=${{DATA:-{shlex.quote(data_path)}}} OUTPUT_DIR=${{OUTPUT_DIR:-output}}",
        node_command(setup, '"$SKYPILOT_NUM_NODES"', '"$SKYPILOT_NODE_RANK"', '"$MASTER_ADDR"', "29500")
        .replace("--nproc_per_node " + str(setup.choice["gpus_per_node"]),
                 '--nproc_per_node "$SKYPILOT_NUM_GPUS_PER_NODE"').replace(' "$@"', "")])
    return {"name": job_name(setup), "num_nodes": int(setup.choice["nodes"]), "resources": resources,
            "workdir": ".", "setup": "pip install -r requirements.txt\n", "run": run + "\n"}


# ---- Slurm -----------------------------------------------------------------------------------------------------

def slurm_script(setup: Setup, data: str | None, output_dir: str) -> str:
    """An sbatch script: one task per node, each running torchrun with SLURM_NNODES / SLURM_NODEID and node 0 of
    the allocation as the rendezvous host."""
    gpus, nodes = int(setup.choice["gpus_per_node"]), int(setup.choice["nodes"])
    node = node_command(setup, '"$SLURM_NNODES"', '"$SLURM_NODEID"', '"$MASTER_ADDR"', '"$MASTER_PORT"', exec_=True)
    lines = ["#!/usr/bin/env bash", f"#SBATCH --job-name={job_name(setup)}", f"#SBATCH --nodes={nodes}",
             "#SBATCH --ntasks-per-node=1", f"#SBATCH --gpus-per-node={gpus}", "#SBATCH --output=slurm-%j.out",
             "# Generated by `trainfit generate --target slurm`; submit from this directory: sbatch slurm.sbatch",
             "# The setup directory and OUTPUT_DIR must be on storage every node sees (a cluster file system).",
             "set -euo pipefail", 'cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")}"', *_prelude(setup, data, output_dir),
             'MASTER_ADDR=${MASTER_ADDR:-$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)}',
             "MASTER_PORT=${MASTER_PORT:-29500}", "export DATA OUTPUT_DIR MASTER_ADDR MASTER_PORT",
             '# one task per node; each expands SLURM_NODEID itself (single quotes: not this shell)',
             f"srun --kill-on-bad-exit=1 bash -c {shlex.quote(node)} bash \"$@\""]
    return "\n".join(lines) + "\n"


# ---- the files per target -------------------------------------------------------------------------------------------

SUBMIT = {
    "ecs": "./launch.sh",
    "dlc": 'aliyun pai-dlc POST /api/v1/jobs --header "Content-Type=application/json" --body "$(cat dlc_job.json)"',
    "pytorchjob": "kubectl apply -f pytorchjob.yaml",
    "skypilot": "sky launch -c {name} skypilot.yaml",
    "slurm": "sbatch slurm.sbatch",
}


def storage(target: str, lang: str = "en") -> str:
    """What the shared storage is for `target` (i18n gen_storage_*): multi-node checkpoints must land where every
    node (and a restart) sees them."""
    from ..i18n import t

    return t(f"gen_storage_{target}", lang).format(shared=SHARED)


def submit_command(target: str, setup: Setup) -> str:
    return SUBMIT[target].format(name=job_name(setup))


def target_files(target: str, setup: Setup, data: str | None, output_dir: str, image: str | None = None,
                 storage: str | None = None, pvc: str | None = None) -> dict[str, str]:
    """{file name: content} of a scheduler target (none for ecs: launch.sh is always written)."""
    image = image or DEFAULT_IMAGE
    if target == "ecs":
        return {}
    if target == "dlc":
        return {"dlc_job.json": json.dumps(dlc_request(setup, data, image, storage), indent=2) + "\n"}
    if target == "pytorchjob":
        return {"pytorchjob.yaml": yaml_text(pytorchjob(setup, data, image, pvc or "trainfit-shared"))}
    if target == "skypilot":
        return {"skypilot.yaml": yaml_text(skypilot_task(setup, data))}
    if target == "slurm":
        return {"slurm.sbatch": slurm_script(setup, data, output_dir)}
    raise GenerateError("gen_e_target", target=target, targets=", ".join(TARGETS))
