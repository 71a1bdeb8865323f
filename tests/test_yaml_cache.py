"""The packaged YAML files' parses kept as JSON in the user's cache (catalog/_io.read_yaml, issue 36): the same data
as the parse, no YAML parser imported once the cache holds them, and a parse JSON cannot hold exactly never cached."""

import json
import os
import subprocess
import sys

import yaml

from trainfit.catalog import _io


def _cache_files(root) -> list[str]:
    folder = os.path.join(root, "yaml")
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def test_cached_parse_equals_the_yaml(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINFIT_CACHE_DIR", str(tmp_path))
    for name in ("efficiency.yaml", "calibration.yaml", "frameworks.yaml", "serving.yaml"):
        parsed = yaml.safe_load(_io.read_text(name))
        first = _io.read_yaml(name)  # parses and writes the cache
        assert first == parsed
        cache = _io._yaml_cache_file(name, _io.read_text(name))
        assert os.path.isfile(cache)
        assert _io.read_yaml(name) == parsed  # read back from the cache
    assert len(_cache_files(tmp_path)) == 4


def test_a_broken_cache_file_is_parsed_again(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINFIT_CACHE_DIR", str(tmp_path))
    name = "frameworks.yaml"
    cache = _io._yaml_cache_file(name, _io.read_text(name))
    os.makedirs(os.path.dirname(cache))
    with open(cache, "w", encoding="utf-8") as fh:
        fh.write('{"frameworks": ')  # half a file
    assert _io.read_yaml(name) == yaml.safe_load(_io.read_text(name))
    with open(cache, encoding="utf-8") as fh:
        assert json.load(fh) == yaml.safe_load(_io.read_text(name))  # rewritten whole


def test_what_json_cannot_hold_is_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINFIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_io, "read_text", lambda name: "when: 2024-12-30\n1: one\n")
    data = _io.read_yaml("dated.yaml")
    assert str(data["when"]) == "2024-12-30" and data[1] == "one"  # a date and an int key, as YAML gives them
    assert _cache_files(tmp_path) == []


def test_a_changed_file_is_a_new_key(tmp_path):
    assert _io._yaml_cache_file("a.yaml", "x: 1\n") != _io._yaml_cache_file("a.yaml", "x: 2\n")


def test_a_plan_with_the_cache_warm_imports_no_yaml_parser(tmp_path):
    env = {**os.environ, "TRAINFIT_CACHE_DIR": str(tmp_path)}
    code = ("import sys, io, contextlib\n"
            "from trainfit.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n"
            "        main(['plan', '--model', 'qwen2-7b', '--method', 'lora', '--dataset-tokens', '200M', '--json'])\n"
            "    except SystemExit:\n"
            "        pass\n"
            "print('yaml' in sys.modules)\n")
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert first.stdout.strip() == "True"  # the first run parses and fills the cache
    assert second.stdout.strip() == "False", second.stderr


def test_packaged_data_is_found_through_a_symlinked_path(tmp_path):
    """A script that puts `<symlinked folder>/../src` on sys.path (benchmarks/*.py do, run by tools/docs.py from a
    folder where benchmarks/ is a link) imports trainfit by that path: the data folder is found by following the
    link (realpath), not by dropping `folder/..` from the path as text (which named a folder that is not there)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    (tmp_path / "benchmarks").symlink_to(root / "benchmarks")
    code = ("import sys; sys.path.insert(0, 'benchmarks/../src')\n"
            "from trainfit.catalog import get_gpu; from trainfit.catalog._io import read_yaml\n"
            "import trainfit; assert 'benchmarks/../src' in trainfit.__file__, trainfit.__file__\n"
            "print(get_gpu('a10').id, 'values' in read_yaml('efficiency.yaml'))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TRAINFIT_CACHE_DIR"] = str(tmp_path / "cache")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["a10", "True"]
