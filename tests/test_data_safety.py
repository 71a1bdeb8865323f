"""Issue 32, rule 1: never delete what we did not write. `generate --force` replaces only the files generate wrote
(its manifest) and never a user's; an --out that is `.`, `..`, or holds the run's inputs is refused with nothing
touched; concurrent `plan --out DIR` runs all succeed; --md / --html are written atomically and never through a
symlink."""

import json
import os
import sys

import pytest

from trainfit import _proc
from trainfit.generate import MANIFEST

PLAN = ("plan", "--model", "qwen2.5-0.5b", "--method", "lora", "--dataset-tokens", "10M", "--epochs", "1",
        "--seq-len", "512")
SERVE = ("generate", "--serving", "--model", "qwen2-7b", "--gpu", "a10")


def _tree(root) -> dict:
    """{relative path: bytes (or 'dir' / 'link -> target')} of everything under `root`."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                out[rel] = "link -> " + os.readlink(path)
            elif os.path.isdir(path):
                out[rel] = "dir"
            else:
                with open(path, "rb") as fh:
                    out[rel] = fh.read()
    return out


@pytest.fixture(scope="module")
def plan_json(tmp_path_factory):
    from trainfit.cli.main import main

    folder = tmp_path_factory.mktemp("plan")
    assert main([*PLAN, "--out", str(folder / "p"), "--json"]) == 0
    return str(folder / "p" / "plan.json")


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "proj" / "train.jsonl"
    path.parent.mkdir()
    path.write_text('{"text": "hello world"}\n')
    return path


def _one_line_error(code, err):
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("out", [".", ".."])
def test_out_dot_and_dotdot_refused_nothing_deleted(run_cli, tmp_path, monkeypatch, plan_json, out):
    work = tmp_path / "work"
    work.mkdir()
    (work / "mine.txt").write_text("keep")
    (tmp_path / "sibling.txt").write_text("keep too")
    monkeypatch.chdir(work)
    before = _tree(tmp_path)
    code, _, err = run_cli("generate", "--plan", plan_json, "--out", out, "--force")
    _one_line_error(code, err)
    assert "current directory" in err
    assert _tree(tmp_path) == before


def test_out_ancestor_of_cwd_refused_in_chinese(run_cli, tmp_path, monkeypatch, plan_json):
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "x.txt").write_text("x")
    monkeypatch.chdir(deep)
    before = _tree(tmp_path)
    code, _, err = run_cli("generate", "--plan", plan_json, "--out", str(tmp_path / "a"), "--force", "--lang", "zh")
    _one_line_error(code, err)
    assert "当前目录" in err and _tree(tmp_path) == before


def test_out_home_refused(run_cli, tmp_path, monkeypatch, plan_json):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("mine")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli("generate", "--plan", plan_json, "--out", str(home), "--force")
    _one_line_error(code, err)
    assert "home directory" in err and _tree(home) == {".bashrc": b"mine"}


def test_out_holding_the_training_data_refused(run_cli, tmp_path, monkeypatch, plan_json, data_file):
    """--out proj --data proj/train.jsonl --force: the data launch.sh points at is not deleted (nor is anything)."""
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    for out in ("proj", str(tmp_path / "proj"), str(tmp_path)):
        code, _, err = run_cli("generate", "--plan", plan_json, "--out", out, "--data", "proj/train.jsonl",
                               "--force")
        _one_line_error(code, err)
        assert "--data" in err or "current directory" in err, err
    assert _tree(tmp_path) == before


def test_out_holding_the_plan_file_refused(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(*PLAN, "--out", "p")
    assert code == 0, err
    before = _tree(tmp_path)
    code, _, err = run_cli("generate", "--plan", "p/plan.json", "--out", "p", "--force")
    _one_line_error(code, err)
    assert "--plan" in err and _tree(tmp_path) == before


def test_serving_out_holding_the_model_refused(run_cli, tmp_path, monkeypatch):
    model = tmp_path / "run" / "output" / "merged"
    model.mkdir(parents=True)
    (model / "model.safetensors").write_text("weights")
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    code, _, err = run_cli(*SERVE, "--model-path", str(model), "--out", "run", "--force")
    _one_line_error(code, err)
    assert "--model-path" in err and _tree(tmp_path) == before
    code, _, err = run_cli(*SERVE, "--out", ".", "--force")
    _one_line_error(code, err)
    assert _tree(tmp_path) == before


def test_force_keeps_foreign_files_and_replaces_ours(run_cli, tmp_path, plan_json):
    out = tmp_path / "run"
    code, _, err = run_cli("generate", "--plan", plan_json, "--out", str(out), "--target", "slurm")
    assert code == 0, err
    manifest = json.loads((out / MANIFEST).read_text())
    assert "slurm.sbatch" in manifest["files"] and "train.py" in manifest["files"]
    (out / "notes.txt").write_text("my notes")
    (out / "train.jsonl").write_text('{"text": "mine"}\n')
    (out / "output").mkdir()
    (out / "output" / "ckpt.bin").write_text("a checkpoint")
    (out / "launch.sh").write_text("stale")  # not how we wrote it: but see below, ours replaced only if unchanged
    code, _, err = run_cli("generate", "--plan", plan_json, "--out", str(out), "--force")
    _one_line_error(code, err)  # an edited file of ours is refused, not overwritten
    assert "launch.sh" in err and (out / "launch.sh").read_text() == "stale"
    (out / "launch.sh").unlink()
    code, _, err = run_cli("generate", "--plan", plan_json, "--out", str(out), "--force", "--json")
    assert code == 0, err
    assert (out / "notes.txt").read_text() == "my notes"
    assert (out / "train.jsonl").read_text() == '{"text": "mine"}\n'
    assert (out / "output" / "ckpt.bin").read_text() == "a checkpoint"
    assert (out / "launch.sh").read_text().startswith("#!") and os.access(out / "launch.sh", os.X_OK)
    assert not (out / "slurm.sbatch").exists()  # ours, unchanged, no longer part of the setup: removed
    new = json.loads((out / MANIFEST).read_text())["files"]
    assert "slurm.sbatch" not in new and "notes.txt" not in new and "launch.sh" in new
    assert not [p for p in os.listdir(out) if p.startswith(".trainfit-generate-")]
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".trainfit-generate-")]


def test_force_refuses_a_foreign_file_with_our_name(run_cli, tmp_path, plan_json):
    out = tmp_path / "run"
    out.mkdir()
    (out / "README.md").write_text("my readme")
    (out / "notes.txt").write_text("n")
    before = _tree(out)
    code, _, err = run_cli("generate", "--plan", plan_json, "--out", str(out), "--force")
    _one_line_error(code, err)
    assert "README.md" in err and "not written by trainfit" in err
    assert _tree(out) == before  # nothing written, nothing removed
    code, _, err = run_cli(*SERVE, "--out", str(out), "--force", "--lang", "zh")
    _one_line_error(code, err)
    assert "README.md" in err and _tree(out) == before


def test_a_forged_manifest_never_touches_files_outside(run_cli, tmp_path, plan_json):
    out = tmp_path / "run"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("v")
    import hashlib

    digest = hashlib.sha256(b"v").hexdigest()
    (out / MANIFEST).write_text(json.dumps({"trainfit_manifest": 1, "files": {"../victim.txt": digest,
                                                                              str(victim): digest}}))
    code, _, err = run_cli("generate", "--plan", plan_json, "--out", str(out), "--force")
    assert code == 0, err
    assert victim.read_text() == "v"


def test_serving_force_keeps_foreign_files(run_cli, tmp_path):
    out = tmp_path / "serve"
    code, _, err = run_cli(*SERVE, "--out", str(out))
    assert code == 0, err
    (out / "notes.txt").write_text("mine")
    code, _, err = run_cli(*SERVE, "--out", str(out), "--force")
    assert code == 0, err
    assert (out / "notes.txt").read_text() == "mine" and (out / "serve.sh").exists()


def test_a_failure_halfway_leaves_the_directory_as_it_was(run_cli, tmp_path, plan_json, monkeypatch):
    out = tmp_path / "run"
    code, _, err = run_cli("generate", "--plan", plan_json, "--out", str(out), "--target", "slurm")
    assert code == 0, err
    (out / "notes.txt").write_text("mine")
    before = _tree(out)
    import trainfit.generate as gen

    real, calls = gen._place, []

    def flaky(src, dst, out_dir, name):  # the third file fails to move into place
        calls.append(name)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(src, dst, out_dir, name)

    monkeypatch.setattr(gen, "_place", flaky)
    with pytest.raises(OSError):
        gen.generate(gen.load_plan(plan_json), str(out), force=True, target="ecs")
    assert len(calls) == 3
    assert _tree(out) == before
    monkeypatch.undo()
    # a failure writing the new directory leaves no directory and no temporary behind
    fresh = tmp_path / "fresh"

    def broken(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(gen, "_write_all", broken)
    with pytest.raises(OSError):
        gen.generate(gen.load_plan(plan_json), str(fresh))
    assert not fresh.exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".trainfit-generate-")]


def test_concurrent_plan_out_all_succeed(tmp_path):
    """8 `plan --out same_dir` at once: every run exits 0, one complete plan.json, no temporary file left."""
    from concurrent.futures import ThreadPoolExecutor

    out = tmp_path / "p"
    cmd = [sys.executable, "-m", "trainfit", *PLAN, "--out", str(out), "--json"]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: _proc.run(cmd, timeout=240), range(8)))
    for r in results:
        assert r.returncode == 0, r.stderr
    assert os.listdir(out) == ["plan.json"]
    doc = json.loads((out / "plan.json").read_text())
    from trainfit.planfile import read_plan

    assert read_plan(str(out / "plan.json"))["trainfit_plan_version"] == doc["trainfit_plan_version"]


def test_concurrent_plan_writes_never_collide(tmp_path):
    """The same race, sharpened: 8 writers x 50 plan.json writes each into one folder; every write succeeds and
    the file is always one writer's complete document (a shared `plan.json.tmp` fails this at once)."""
    from concurrent.futures import ThreadPoolExecutor

    from trainfit.planfile import write_plan_doc

    out = tmp_path / "p"
    big = "x" * 200_000

    def writer(i):
        for j in range(50):
            write_plan_doc({"writer": i, "round": j, "pad": big}, str(out))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(writer, range(8)))  # re-raises any writer's error
    doc = json.loads((out / "plan.json").read_text())
    assert doc["pad"] == big and doc["round"] == 49
    assert os.listdir(out) == ["plan.json"]


def test_plan_file_written_under_a_unique_temporary(tmp_path, monkeypatch):
    """A leftover plan.json.tmp (another run's, or a user's file) is neither used nor removed."""
    from trainfit.planfile import write_plan_doc

    out = tmp_path / "p"
    out.mkdir()
    (out / "plan.json.tmp").write_text("someone else's")
    write_plan_doc({"a": 1}, str(out))
    assert json.loads((out / "plan.json").read_text()) == {"a": 1}
    assert (out / "plan.json.tmp").read_text() == "someone else's"
    assert sorted(os.listdir(out)) == ["plan.json", "plan.json.tmp"]


@pytest.mark.parametrize("flag", ["--md", "--html"])
def test_report_to_a_symlink_replaces_the_link_not_its_target(run_cli, tmp_path, flag):
    target = tmp_path / "precious.txt"
    target.write_text("do not touch")
    link = tmp_path / "report.out"
    link.symlink_to(target)
    code, _, err = run_cli(*PLAN, flag, str(link))
    assert code == 0, err
    assert target.read_text() == "do not touch"
    assert not link.is_symlink() and link.read_text().strip()
    assert sorted(os.listdir(tmp_path)) == ["precious.txt", "report.out"]  # no temporary left


def test_report_replaced_atomically_keeps_mode(run_cli, tmp_path):
    path = tmp_path / "r.md"
    path.write_text("old")
    os.chmod(path, 0o600)
    code, _, err = run_cli(*PLAN, "--md", str(path))
    assert code == 0, err
    assert path.read_text().startswith("#") and (os.stat(path).st_mode & 0o777) == 0o600
    assert sorted(os.listdir(tmp_path)) == ["r.md"]
