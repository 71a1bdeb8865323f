"""`generate`: a runnable training setup (configs, launch.sh, train.py, requirements, README) from a plan."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
from importlib import resources

from ..errors import GenerateError, SpecError
from .configs import accelerate_fsdp_config, deepspeed_config, model_weights, train_config
from .docs import readme, requirements
from .launch import launch_script
from .setup import Setup, load_plan, require_generated_stack, setup_from_estimate
from .stacks import THREE_D
from .targets import TARGETS, submit_command, target_files

__all__ = ["TARGETS", "submit_command", "generate", "generate_serving", "load_plan", "setup_from_estimate", "Setup", "render_files", "write_files",
           "check_out_dir", "check_not_empty", "read_manifest", "MANIFEST"]


def runner_source() -> str:
    """train.py is trainfit's own runner module, copied verbatim (bench runs the same code)."""
    return resources.files("trainfit.train").joinpath("runner.py").read_text(encoding="utf-8")


def runner_modules() -> dict[str, str]:
    """The runner's modules (train/runner.py JOB_MODULES), copied verbatim beside train.py, which imports them."""
    from ..train.runner import JOB_MODULES  # the runner imports only the standard library at module level

    folder = resources.files("trainfit.train")
    return {name: folder.joinpath(name).read_text(encoding="utf-8") for name in JOB_MODULES}


def render_files(setup: Setup, data: str | None, output_dir: str = "output", lang: str = "en", target: str = "ecs",
                 image: str | None = None, storage: str | None = None, pvc: str | None = None,
                 model_source: str = "hf", model_path: str | None = None) -> dict[str, str]:
    """{file name: content} of the setup; launch.sh always, plus the scheduler spec of `target`. A model-parallel
    plan (engine megatron / torchtitan) gets that stack's launch instead of train.py (stack_files)."""
    engine = setup.strategy["engine"]
    if engine in THREE_D:
        require_generated_stack(setup)  # the stack's numbers, a layout it runs (generate/stacks.py check_3d)
        return stack_files(setup, data, output_dir, lang, target, image, storage, pvc)
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
    files.update(runner_modules())
    files["requirements.txt"] = requirements(setup, model_source)
    files.update(target_files(target, setup, data, output_dir, image, storage, pvc))
    files["README.md"] = readme(setup, lang, target, model_source)
    return files


def stack_files(setup: Setup, data: str | None, output_dir: str, lang: str, target: str, image: str | None,
                storage: str | None, pvc: str | None) -> dict[str, str]:
    """Megatron-LM's arguments (megatron_args.sh) or torchtitan's job config (torchtitan.toml), with launch.sh, the
    target's spec, requirements and README; every node runs the stack's program under torchrun."""
    from . import megatron, torchtitan

    files: dict[str, str] = {}
    if setup.strategy["engine"] == "megatron":
        files["megatron_args.sh"] = megatron.args_file(setup)
    else:
        files[torchtitan.CONFIG_FILE] = torchtitan.toml_text(setup)
    files["launch.sh"] = launch_script(setup, data, output_dir)
    files["requirements.txt"] = requirements(setup)
    files.update(target_files(target, setup, data, output_dir, image, storage, pvc))
    files["README.md"] = readme(setup, lang, target)
    return files


MANIFEST = ".trainfit-manifest.json"  # in --out: the files generate wrote there, with their sha256
_MANIFEST_FORMAT = 1


def generate(setup: Setup, out_dir: str, data: str | None = None, lang: str = "en", force: bool = False,
             output_dir: str = "output", target: str = "ecs", image: str | None = None, storage: str | None = None,
             pvc: str | None = None, model_source: str = "hf", model_path: str | None = None,
             inputs: tuple[tuple[str, str | None], ...] = ()) -> list[str]:
    """Write the setup to `out_dir`: every file rendered first, written to a temporary directory and moved into
    place, never a half-written directory; a user's own files in `out_dir` are never replaced or deleted.
    `inputs` ((flag, path), ...) are further paths the run reads (a plan file, a model directory): an `out_dir` that
    holds one is refused, as one that holds `data` is."""
    if target not in TARGETS:
        raise GenerateError("gen_e_target", target=target, targets=", ".join(TARGETS))
    check_out_dir(out_dir, (("--data", data), *inputs))
    require_generated_stack(setup)  # train.py's run, not another stack's (also checked by the CLI before the fit)
    if data is not None and setup.strategy["engine"] not in THREE_D:  # the stacks' own data formats (README)
        _check_data(data, setup.workload["task"])
    check_not_empty(out_dir, force)
    files = render_files(setup, os.path.abspath(data) if data else None, output_dir, lang, target, image, storage,
                         pvc, model_source, model_path)
    write_files(files, out_dir, executable=("launch.sh", "train.py", "slurm.sbatch"), force=force)
    return sorted(files)


def generate_serving(files: dict[str, str], out_dir: str, force: bool = False,
                     inputs: tuple[tuple[str, str | None], ...] = ()) -> list[str]:
    """Write a serving setup (serve.sh, README.md) from `generate.serving.serving_files`, as `generate` writes."""
    check_out_dir(out_dir, inputs)
    check_not_empty(out_dir, force)
    write_files(files, out_dir, executable=("serve.sh",), force=force)
    return sorted(files)


def _inside(folder: str, path: str) -> bool:
    """`path` is `folder` or somewhere under it (both resolved)."""
    try:
        return os.path.commonpath([folder, path]) == folder
    except ValueError:  # pragma: no cover - different drives
        return False


def check_out_dir(out_dir: str, inputs=()) -> None:
    """Refuse an --out that is the file system root, the home directory, the current directory or one of its
    parents (`.`, `..`), or a directory that holds one of the run's inputs ((flag, path), ...): generate writes only
    into a directory of its own."""
    out = os.path.realpath(out_dir)
    if out == os.path.dirname(out):
        raise GenerateError("gen_e_out_root", out=out_dir)
    if out == os.path.realpath(os.path.expanduser("~")):
        raise GenerateError("gen_e_out_home", out=out_dir)
    if _inside(out, os.path.realpath(os.getcwd())):
        raise GenerateError("gen_e_out_cwd", out=out_dir)
    for flag, path in inputs:
        if path and os.path.exists(path) and _inside(out, os.path.realpath(path)):
            raise GenerateError("gen_e_out_holds_input", out=out_dir, flag=flag, path=path)


def check_not_empty(out_dir: str, force: bool) -> None:
    """A non-empty `out_dir` needs --force (which then replaces only what generate wrote there before)."""
    if os.path.islink(out_dir) and not os.path.exists(out_dir):
        from ..i18n import say

        raise SpecError(say("ei_out_not_dir", path=out_dir))
    if os.path.isdir(out_dir) and os.listdir(out_dir) and not force:
        raise GenerateError("gen_e_out_not_empty", out=out_dir)


def _sha256(path: str) -> str | None:
    """The file's sha256, or None when it is not a regular file (a directory, a link, missing)."""
    try:
        if os.path.islink(path) or not os.path.isfile(path):
            return None
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    except OSError:
        return None


def read_manifest(out_dir: str) -> dict[str, str]:
    """{file name: sha256} of what generate wrote in `out_dir` ({} without a manifest); a manifest that is not ours
    (unreadable, another shape) is refused: its name is taken by a file we did not write."""
    path = os.path.join(out_dir, MANIFEST)
    if not os.path.lexists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        files = doc["files"]
        if (os.path.islink(path) or doc.get("trainfit_manifest") != _MANIFEST_FORMAT or not isinstance(files, dict)
                or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())):
            raise ValueError
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise GenerateError("gen_e_out_foreign", out=out_dir, name=MANIFEST, manifest=MANIFEST) from None
    return {k: v for k, v in files.items() if _plain_name(k) and k != MANIFEST}


def _plain_name(name: str) -> bool:
    """A file name directly in the folder: a manifest edited to name ../x or /etc/x never makes us touch it."""
    return bool(name) and name not in (".", "..") and os.sep not in name and "\0" not in name and \
        (os.altsep is None or os.altsep not in name)


def _manifest_text(files: dict[str, bytes]) -> str:
    doc = {"trainfit_manifest": _MANIFEST_FORMAT,
           "note": "files `trainfit generate` wrote in this directory; --force replaces only these, and only while "
                   "they are unchanged",
           "files": {name: hashlib.sha256(data).hexdigest() for name, data in sorted(files.items())}}
    return json.dumps(doc, indent=2) + "\n"


def write_files(files: dict[str, str], out_dir: str, executable: tuple[str, ...] = (), force: bool = False) -> None:
    """Write {name: content} to `out_dir` with a manifest of what was written (MANIFEST).

    A new `out_dir`: the files go to a temporary sibling directory renamed into place in one step. An existing one
    (empty, or with force): every file is written to a temporary directory inside it first, then each is moved into
    place; only files named in our manifest and unchanged since we wrote them are replaced (or, when this setup no
    longer has them, removed); a user's file of the same name, or one of ours the user has edited, is refused before
    anything is written, and every other file is left alone. Any failure leaves `out_dir` as it was."""
    for name in files:
        if not _plain_name(name) or name == MANIFEST:  # pragma: no cover - our own renderers' names
            raise ValueError(f"not a plain file name: {name!r}")
    data = {name: content.encode("utf-8") for name, content in files.items()}
    manifest = _manifest_text(data).encode("utf-8")
    if os.path.isdir(out_dir):
        if os.listdir(out_dir) and not force:
            raise GenerateError("gen_e_out_not_empty", out=out_dir)
        _merge(data, manifest, out_dir, executable)
        return
    parent = os.path.dirname(os.path.abspath(out_dir)) or "."
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".trainfit-generate-", dir=parent)
    try:
        _write_all(tmp, data, manifest, executable)
        os.chmod(tmp, 0o755)
        try:  # rename(2) onto what appeared meanwhile (a non-empty directory, a file) fails: nothing is replaced
            os.rename(tmp, out_dir)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise GenerateError("gen_e_out_not_empty", out=out_dir) from None
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _place(src: str, dst: str, out_dir: str, name: str) -> None:
    """Move `src` to `dst`, never over a file: link(2) fails when `dst` exists (a user's file that appeared since
    the check); where hard links are not supported, a check and a rename."""
    try:
        os.link(src, dst)
    except FileExistsError:
        raise GenerateError("gen_e_out_foreign", out=out_dir, name=name, manifest=MANIFEST) from None
    except OSError:
        if os.path.lexists(dst):
            raise GenerateError("gen_e_out_foreign", out=out_dir, name=name, manifest=MANIFEST) from None
        os.rename(src, dst)
        return
    os.remove(src)


def _write_all(folder: str, data: dict[str, bytes], manifest: bytes, executable: tuple[str, ...]) -> None:
    for name, content in data.items():
        path = os.path.join(folder, name)
        with open(path, "xb") as fh:
            fh.write(content)
        os.chmod(path, 0o755 if name in executable else 0o644)
    with open(os.path.join(folder, MANIFEST), "xb") as fh:
        fh.write(manifest)


def _merge(data: dict[str, bytes], manifest: bytes, out_dir: str, executable: tuple[str, ...]) -> None:
    """Write into an existing directory, replacing only our own unchanged files (see write_files)."""
    ours = read_manifest(out_dir)
    for name in sorted(data):  # a file we would write whose name a user's file (or folder, or link) holds
        path = os.path.join(out_dir, name)
        if os.path.lexists(path) and name not in ours:
            raise GenerateError("gen_e_out_foreign", out=out_dir, name=name, manifest=MANIFEST)
    replace = []  # ours, still there: replaced or removed only when unchanged since we wrote them
    for name in sorted(ours):
        path = os.path.join(out_dir, name)
        if not os.path.lexists(path):
            continue
        if _sha256(path) != ours[name]:
            if name in data:
                raise GenerateError("gen_e_out_modified", out=out_dir, name=name)
            continue  # an old file of ours the user has edited and this setup does not write: it is theirs now
        replace.append(name)
    tmp = tempfile.mkdtemp(prefix=".trainfit-generate-", dir=out_dir)
    new_dir, old_dir = os.path.join(tmp, "new"), os.path.join(tmp, "old")
    moved_old: list[str] = []
    placed: list[str] = []
    try:
        os.mkdir(new_dir)
        os.mkdir(old_dir)
        _write_all(new_dir, data, manifest, executable)
        # the old files (ours, unchanged) and the old manifest step aside first, so that a failure can put them back
        for name in replace + ([MANIFEST] if os.path.lexists(os.path.join(out_dir, MANIFEST)) else []):
            os.rename(os.path.join(out_dir, name), os.path.join(old_dir, name))
            moved_old.append(name)
        for name in [*sorted(data), MANIFEST]:  # the manifest last: it names only files that are in place
            _place(os.path.join(new_dir, name), os.path.join(out_dir, name), out_dir, name)
            placed.append(name)
    except BaseException:
        for name in placed:  # undo: our new files out, the old ones back
            try:
                os.remove(os.path.join(out_dir, name))
            except OSError:
                pass
        for name in moved_old:
            try:
                os.rename(os.path.join(old_dir, name), os.path.join(out_dir, name))
            except OSError:
                pass
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _check_data(path: str, task: str) -> None:
    """The same checks train.py runs before training: the data exists and has the task's columns."""
    from ..train.runner import SetupError, check_columns, data_files, read_rows

    try:
        files = data_files(path)
        check_columns(read_rows(files, limit=1), task, files[0])
    except SetupError as exc:  # train.py's own wording (it runs where trainfit is not installed), led in in zh
        raise GenerateError("gen_e_data", detail=str(exc)) from None
