"""`generate --target`: each scheduler's spec is accepted offline by that scheduler's own parser or model (Alibaba's
PAI-DLC SDK, the Kubeflow Training Operator's models, SkyPilot's Task, bash -n for Slurm), and describes the same
job as launch.sh: nodes, GPUs per node, the train.py command."""

import json
import os
import re
import subprocess

import pytest
import yaml

from trainfit.errors import SpecError
from trainfit.generate import render_files
from trainfit.generate.targets import TRAIN_ARGS, checked, yaml_text

NODES, GPUS = 2, 1
INSTANCE = "ecs.gn7i-c32g1.8xlarge"  # one A10 per instance


@pytest.fixture(scope="module")
def setups(tmp_path_factory):
    """A 2-node A10 plan written by the CLI for every target."""
    from trainfit.cli.main import main

    out = {}
    for target in ("ecs", "dlc", "pytorchjob", "skypilot", "slurm"):
        run = tmp_path_factory.mktemp(target) / "run"
        code = main(["generate", "--model", "qwen2-7b", "--instance", INSTANCE, "--nodes", str(NODES), "--method",
                     "lora", "--grad-ckpt", "full", "--target", target, "--out", str(run), "--json"])
        assert code == 0
        out[target] = run
    return out


def _launch_args(run):
    """(nodes, GPUs per node, train.py arguments) of launch.sh."""
    text = (run / "launch.sh").read_text()
    nodes = int(re.search(r"^NNODES=(\d+)$", text, re.M).group(1))
    line = [x for x in text.splitlines() if x.startswith("exec torchrun")][0]
    gpus = int(re.search(r"--nproc_per_node (\d+)", line).group(1))
    return nodes, gpus, line.split(f"--nproc_per_node {gpus} ", 1)[1]


def _command_args(command):
    nproc = re.search(r"--nproc_per_node (\S+) (train\.py.*?)(?: \"\$@\")?$", command.strip(), re.S)
    return nproc.group(1), nproc.group(2)


def test_launch_sh_is_the_reference(setups):
    nodes, gpus, args = _launch_args(setups["ecs"])
    assert (nodes, gpus) == (NODES, GPUS) and args == TRAIN_ARGS + ' "$@"'


def test_dlc_job_round_trips_through_the_sdk_model(setups):
    models = pytest.importorskip("alibabacloud_pai_dlc20201203.models")
    body = json.loads((setups["dlc"] / "dlc_job.json").read_text())
    request = models.CreateJobRequest().from_map(body)
    request.validate()
    assert request.job_type == "PyTorchJob"
    (spec,) = request.job_specs
    assert (spec.type, spec.pod_count, spec.ecs_spec) == ("Worker", NODES, INSTANCE)
    assert request.data_sources[0].mount_path == "/mnt/shared"
    # DLC's WORLD_SIZE (nodes) and RANK (node index) are torchrun's node count and node rank
    assert '--nnodes "$WORLD_SIZE" --node_rank "$RANK"' in request.user_command
    nproc, args = _command_args(request.user_command)
    assert (int(nproc), args) == (GPUS, TRAIN_ARGS)
    again = models.CreateJobRequest().from_map(request.to_map()).to_map()
    assert {k: v for k, v in again.items() if v != []}.keys() >= body.keys()


def test_pytorchjob_deserialises_into_the_training_operator_models(setups):
    pytest.importorskip("kubeflow.training")
    from kubeflow.training.api_client import ApiClient

    doc = yaml.safe_load((setups["pytorchjob"] / "pytorchjob.yaml").read_text())
    job = ApiClient()._ApiClient__deserialize(doc, "KubeflowOrgV1PyTorchJob")  # the models check required fields
    specs = job.spec.pytorch_replica_specs
    assert job.kind == "PyTorchJob" and int(job.spec.nproc_per_node) == GPUS
    assert specs["Master"].replicas + specs["Worker"].replicas == NODES
    for replica in doc["spec"]["pytorchReplicaSpecs"].values():
        pod = replica["template"]["spec"]
        (container,) = pod["containers"]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == GPUS
        assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == "trainfit-shared"
        command = container["command"][2]
        assert f"--nnodes {NODES} --node_rank \"$RANK\"" in command
        nproc, args = _command_args(command)
        assert (int(nproc), args) == (GPUS, TRAIN_ARGS)


def test_pytorchjob_model_refuses_a_broken_spec(setups):
    """The check above can fail: the operator's model rejects a job without its required runPolicy."""
    pytest.importorskip("kubeflow.training")
    from kubeflow.training.api_client import ApiClient

    doc = yaml.safe_load((setups["pytorchjob"] / "pytorchjob.yaml").read_text())
    del doc["spec"]["runPolicy"]
    with pytest.raises(ValueError):
        ApiClient()._ApiClient__deserialize(doc, "KubeflowOrgV1PyTorchJob")


# SkyPilot pins click (and through it an old huggingface-hub, hence transformers 5.17): it lives in a virtual
# environment of its own (`make test` makes .venv/sky), and its parser reads our YAML there.
SKY_PYTHON = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          os.environ.get("TRAINFIT_TEST_VENV", ".venv"), "sky", "bin", "python")  # test-latest: .venv-latest
SKY_PARSE = """import json, sys
import sky
task = sky.Task.from_yaml(sys.argv[1])
(res,) = task.resources
print(json.dumps({"num_nodes": task.num_nodes, "accelerators": res.accelerators,
                  "cloud": None if res.cloud is None else str(res.cloud), "run": task.run}))
"""


def test_skypilot_task_parses_offline(setups, tmp_path):
    if not os.path.exists(SKY_PYTHON):
        print("SKIP: no .venv/sky (make test creates it: SkyPilot in a virtual environment of its own)")
        pytest.skip("no .venv/sky with SkyPilot (make test creates it)")
    from trainfit import _proc

    env = dict(os.environ, HOME=str(tmp_path))  # SkyPilot keeps its state under ~/.sky
    env.pop("PYTHONPATH", None)
    proc = _proc.run([SKY_PYTHON, "-c", SKY_PARSE, str(setups["skypilot"] / "skypilot.yaml")], timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    task = json.loads(proc.stdout.strip().splitlines()[-1])
    assert task["num_nodes"] == NODES
    assert task["accelerators"] == {"A10": GPUS} and task["cloud"] is None  # no Alibaba backend in SkyPilot
    for var in ("SKYPILOT_NODE_RANK", "SKYPILOT_NODE_IPS", "SKYPILOT_NUM_GPUS_PER_NODE"):
        assert var in task["run"]
    nproc, args = _command_args(task["run"])
    assert nproc == '"$SKYPILOT_NUM_GPUS_PER_NODE"' and args == TRAIN_ARGS
    assert "does not reach Alibaba ECS" in (setups["skypilot"] / "README.md").read_text()


def test_slurm_script(setups):
    path = setups["slurm"] / "slurm.sbatch"
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    text = path.read_text()
    assert f"#SBATCH --nodes={NODES}\n" in text and f"#SBATCH --gpus-per-node={GPUS}\n" in text
    line = [x for x in text.splitlines() if x.startswith("srun ")][0]
    assert '--nnodes "$SLURM_NNODES" --node_rank "$SLURM_NODEID"' in line
    nproc, args = _command_args(line.split("'")[1])
    assert (int(nproc), args) == (GPUS, TRAIN_ARGS)


def test_multi_node_readme_names_shared_storage(setups):
    assert "NAS / CPFS / OSS" in (setups["dlc"] / "README.md").read_text()
    assert "PersistentVolumeClaim" in (setups["pytorchjob"] / "README.md").read_text()


@pytest.mark.parametrize("value", ["img\nrm -rf /", "a b", "x;reboot", "$(id)", "'q'", ""])
def test_names_are_checked(value):
    with pytest.raises(SpecError):
        checked(value, "--image")


def test_bad_values_never_reach_a_spec(tmp_path):
    from trainfit.cli.main import main

    for flags in (["--target", "dlc", "--image", "x\n#"], ["--target", "dlc", "--storage", "http://x"],
                  ["--target", "pytorchjob", "--pvc", "Bad_Name"]):
        code = main(["generate", "--model", "qwen2-7b", "--instance", INSTANCE, "--nodes", "2", "--method", "lora",
                     *flags, "--out", str(tmp_path / "run")])
        assert code == 2
        assert not (tmp_path / "run").exists()


def test_model_name_with_a_newline_stays_in_its_comment():
    from test_generate import REFERENCE

    base = REFERENCE["h100-2x8-fsdp"]
    setup = type(base)(model=dict(base.model, name="evil\nrm -rf ~"), workload=base.workload, choice=base.choice)
    for target in ("slurm", "pytorchjob", "dlc"):
        files = render_files(setup, data=None, target=target)
        for name, text in files.items():
            if name == "README.md":
                continue
            assert "\nrm -rf" not in text, (target, name)


def test_yaml_text_has_no_anchors():
    shared = {"a": 1}
    assert "&" not in yaml_text({"x": shared, "y": shared})
