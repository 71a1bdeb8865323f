"""`generate`: a runnable training setup (configs, launch.sh, train.py, requirements, README) from a plan."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from importlib import resources

from ..errors import GenerateError
from .configs import accelerate_fsdp_config, deepspeed_config, model_weights, train_config
from .docs import readme, requirements
from .launch import launch_script
from .setup import Setup, load_plan, require_generated_stack, setup_from_estimate
from .targets import TARGETS, submit_command, target_files

__all__ = ["TARGETS", "submit_command", "generate", "generate_serving", "load_plan", "setup_from_estimate", "Setup", "render_files", "write_files"]


def runner_source() -> str:
    """train.py is trainfit's own runner module, copied verbatim (bench runs the same code)."""
    return resources.files("trainfit.train").joinpath("runner.py").read_text(encoding="utf-8")


def render_files(setup: Setup, data: str | None, output_dir: str = "output", lang: str = "en", target: str = "ecs",
                 image: str | None = None, storage: str | None = None, pvc: str | None = None,
                 model_source: str = "hf", model_path: str | None = None) -> dict[str, str]:
    """{file name: content} of the setup; launch.sh always, plus the scheduler spec of `target`."""
    engine = setup.strategy["engine"]
    engine_files: dict[str, str] = {}
    files: dict[str, str] = {}
    if engine == "deepspeed":
        files["ds_config.json"] = json.dumps(deepspeed_config(setup), indent=2) + "\n"
        engine_files["deepspeed_config"] = "ds_config.json"
    elif engine == "fsdp":
        import yaml

        files["accelerate_config.yaml"] = yaml.safe_dump(accelerate_fsdp_config(setup), sort_keys=False)
        engine_files["fsdp_config"] = "accelerate_config.yaml"
    weights = model_weights(setup, model_source, model_path)
    files["train_config.json"] = json.dumps(train_config(setup, data, output_dir, engine_files, weights), indent=2,
                                            ensure_ascii=False) + "\n"
    files["launch.sh"] = launch_script(setup, data, output_dir, model_source)
    files["train.py"] = runner_source()
    files["requirements.txt"] = requirements(setup, model_source)
    files.update(target_files(target, setup, data, output_dir, image, storage, pvc))
    files["README.md"] = readme(setup, lang, target, model_source)
    return files


def generate(setup: Setup, out_dir: str, data: str | None = None, lang: str = "en", force: bool = False,
             output_dir: str = "output", target: str = "ecs", image: str | None = None, storage: str | None = None,
             pvc: str | None = None, model_source: str = "hf", model_path: str | None = None) -> list[str]:
    """Write the setup to `out_dir` atomically: a temporary directory renamed into place, never a half-written one."""
    if target not in TARGETS:
        raise GenerateError("gen_e_target", target=target, targets=", ".join(TARGETS))
    require_generated_stack(setup)  # train.py's run, not another stack's (also checked by the CLI before the fit)
    if data is not None:
        _check_data(data, setup.workload["task"])
    if os.path.exists(out_dir) and os.listdir(out_dir) and not force:
        raise GenerateError("gen_e_out_not_empty", out=out_dir)
    files = render_files(setup, os.path.abspath(data) if data else None, output_dir, lang, target, image, storage,
                         pvc, model_source, model_path)
    write_files(files, out_dir, executable=("launch.sh", "train.py", "slurm.sbatch"))
    return sorted(files)


def write_files(files: dict[str, str], out_dir: str, executable: tuple[str, ...] = ()) -> None:
    """Write {name: content} to `out_dir` atomically (a temporary directory renamed into place)."""
    parent = os.path.dirname(os.path.abspath(out_dir)) or "."
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".trainfit-generate-", dir=parent)
    try:
        for name, content in files.items():
            path = os.path.join(tmp, name)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(content)
            if name in executable:
                os.chmod(path, 0o755)
        os.chmod(tmp, 0o755)
        if os.path.exists(out_dir):
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def generate_serving(files: dict[str, str], out_dir: str, force: bool = False) -> list[str]:
    """Write a serving setup (serve.sh, README.md) from `generate.serving.serving_files`."""
    if os.path.exists(out_dir) and os.listdir(out_dir) and not force:
        raise GenerateError("gen_e_out_not_empty", out=out_dir)
    write_files(files, out_dir, executable=("serve.sh",))
    return sorted(files)


def _check_data(path: str, task: str) -> None:
    """The same checks train.py runs before training: the data exists and has the task's columns."""
    from ..train.runner import SetupError, check_columns, data_files, read_rows

    try:
        files = data_files(path)
        check_columns(read_rows(files, limit=1), task, files[0])
    except SetupError as exc:  # train.py's own wording (it runs where trainfit is not installed), led in in zh
        raise GenerateError("gen_e_data", detail=str(exc)) from None
