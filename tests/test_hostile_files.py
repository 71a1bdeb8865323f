"""Hostile user files (issue 32, rule 2 "Bounded input"): a small file must not cost gigabytes or minutes, and every
refusal is one line with exit 2 (never a MemoryError, a RecursionError or exit 70)."""

from __future__ import annotations

import sys
import time

import pytest

from trainfit import _proc

_BOMB = "".join(
    [f'{c}: &{c} [{",".join([f"*{p}"] * 9)}]\n' for p, c in zip("abcdefgh", "bcdefghi")])
BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + _BOMB  # ~300 bytes, 9^9 strings


def _one_line_error(code, err):
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("trainfit: error: ") and "Traceback" not in err, err
    return lines[0]


def _timed(run_cli, *argv):
    start = time.perf_counter()
    code, _, err = run_cli(*argv)
    took = time.perf_counter() - start
    assert took < 5, f"{took:.1f} s: the file was expanded, not refused"
    return _one_line_error(code, err)


def test_the_bomb_is_small():
    assert len(BOMB) < 400 and BOMB.count("*") == 72


def test_alias_bomb_in_a_request_file(run_cli, tmp_path):
    path = tmp_path / "req.yaml"
    path.write_text(BOMB + "model: qwen2-7b\n")
    line = _timed(run_cli, "plan", str(path))
    assert "aliases" in line and str(path) in line


def test_alias_bomb_in_a_calibration_file(run_cli, tmp_path):
    path = tmp_path / "cal.yaml"
    path.write_text("values:\n" + "".join(f"  {row}\n" for row in BOMB.splitlines()))
    line = _timed(run_cli, "estimate", "--model", "gpt2", "--gpu", "a10", "--calibration", str(path))
    assert "aliases" in line


def test_alias_bomb_in_the_auto_loaded_calibration(run_cli, tmp_path, monkeypatch):
    (tmp_path / "trainfit").mkdir()
    (tmp_path / "trainfit" / "calibration.yaml").write_text("values:\n  x: &x [1, 2]\n  y: *x\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    line = _timed(run_cli, "estimate", "--model", "gpt2", "--gpu", "a10")
    assert "aliases" in line and "calibration.yaml" in line


def test_a_single_anchor_is_refused_too(run_cli, tmp_path):
    path = tmp_path / "req.yaml"
    path.write_text("model: &m qwen2-7b\n")
    assert "aliases" in _timed(run_cli, "plan", str(path))


def test_alias_bomb_under_a_memory_limit(tmp_path):
    """The CLI under a 1.5 GB address-space limit: exit 2 with the alias error, not a MemoryError."""
    path = tmp_path / "req.yaml"
    path.write_text(BOMB + "model: qwen2-7b\n")
    wrapper = ("import resource, sys, runpy; lim = 1536 * 2**20; "
               "resource.setrlimit(resource.RLIMIT_AS, (lim, lim)); "
               "sys.argv = ['trainfit', 'plan', sys.argv[1]]; runpy.run_module('trainfit', run_name='__main__')")
    done = _proc.run([sys.executable, "-c", wrapper, str(path)], timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "MemoryError" not in done.stderr and "aliases" in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("doc", ["model: qwen2-7b\nmodel: gpt2\n", "model: qwen2-7b\njob:\n  epochs: 1\n  epochs: 2\n"])
def test_duplicate_keys_in_a_request_file(run_cli, tmp_path, doc):
    path = tmp_path / "req.yaml"
    path.write_text(doc)
    assert "duplicate key" in _timed(run_cli, "plan", str(path))


def test_duplicate_keys_in_a_calibration_file(run_cli, tmp_path):
    path = tmp_path / "cal.yaml"
    path.write_text("values:\n  matmul_efficiency: {default: 0.5}\n  matmul_efficiency: {default: 0.6}\n")
    assert "duplicate key 'matmul_efficiency'" in _timed(run_cli, "estimate", "--model", "gpt2", "--gpu", "a10",
                                                         "--calibration", str(path))


def test_duplicate_keys_in_a_config_json(run_cli, tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama", "hidden_size": 64, "hidden_size": 128}')
    assert "duplicate key 'hidden_size'" in _timed(run_cli, "estimate", "--model", str(path), "--gpu", "a10")


def test_deeply_nested_request_file(run_cli, tmp_path):
    path = tmp_path / "req.yaml"
    path.write_text("model: qwen2-7b\nx: " + "[" * 200 + "]" * 200 + "\n")
    assert "nested more than" in _timed(run_cli, "plan", str(path))


def _sparse(path, size):
    with open(path, "wb") as fh:
        fh.truncate(size)


@pytest.mark.parametrize("argv,name", [
    (["plan", "{f}"], "req.yaml"),
    (["estimate", "--model", "gpt2", "--gpu", "a10", "--calibration", "{f}"], "cal.yaml"),
    (["estimate", "--model", "{f}", "--gpu", "a10"], "config.json"),
    (["validate", "{f}"], "cases.jsonl"),
    (["monitor", "--replay", "{f}"], "samples.json"),
])
def test_oversize_files_are_refused_without_reading(run_cli, tmp_path, argv, name):
    path = tmp_path / name
    _sparse(path, 200 * 2**20)  # 200 MB of NULs, no disk used; reading it would take time and memory
    line = _timed(run_cli, *[a.format(f=path) for a in argv])
    assert "200 MB" in line and "MB" in line.replace("200 MB", "") and str(path) in line, line


def test_a_request_file_just_over_the_cap(run_cli, tmp_path):
    path = tmp_path / "req.yaml"
    path.write_text("model: qwen2-7b\n# " + "x" * (2**20) + "\n")
    assert "1 MB" in _timed(run_cli, "plan", str(path))


def test_bad_encoding_names_the_byte_offset(run_cli, tmp_path):
    path = tmp_path / "req.yaml"
    path.write_bytes("model: caf\xe9\n".encode("latin-1"))
    line = _timed(run_cli, "plan", str(path))
    assert "UTF-8" in line and "offset 10" in line


def test_nul_in_a_request_file(run_cli, tmp_path):
    path = tmp_path / "req.yaml"
    path.write_bytes(b"model: qwen2-7b\n\x00\n")
    assert "NUL" in _timed(run_cli, "plan", str(path))


def test_validation_cases_read_line_by_line_and_strictly(run_cli, tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text('{"id": "a", "id": "b"}\n')
    assert "duplicate key" in _timed(run_cli, "validate", str(path))
    path.write_text('{"id": ' + "[" * 100 + "]" * 100 + "}\n")
    assert "nested more than" in _timed(run_cli, "validate", str(path))


@pytest.mark.parametrize("doc,needle", [("[1, 2]", "cannot read samples"), ('{"samples": [{"t": "x"}]}', "sample 1"),
                                        ('{"samples": [1]}', "sample 1"), ('{"samples": 5}', "list")])
def test_monitor_replay_of_malformed_records(run_cli, tmp_path, doc, needle):
    path = tmp_path / "samples.json"
    path.write_text(doc)
    assert needle in _timed(run_cli, "monitor", "--replay", str(path))


# ---- --data: the dataset may be large; what we read of it is bounded --------------------------------------------

def _generate(run_cli, tmp_path, data):
    return run_cli("generate", "--model", "qwen2.5-0.5b", "--gpu", "a10", "--method", "lora", "--dataset-tokens",
                   "1M", "--data", str(data), "--out", str(tmp_path / "run"))


def test_a_file_of_nul_bytes_as_data(run_cli, tmp_path):
    data = tmp_path / "data.jsonl"
    _sparse(data, 2**30)  # 1 GB of NULs
    start = time.perf_counter()
    line = _one_line_error(*_generate(run_cli, tmp_path, data)[::2])
    assert time.perf_counter() - start < 5 and "NUL" in line and not (tmp_path / "run").exists()
    line = _timed(run_cli, "estimate", "--model", "qwen2.5-0.5b", "--gpu", "a10", "--data", str(data))
    assert "NUL" in line  # the lengths reader too: not "1 sample"


@pytest.mark.parametrize("name,content,needle", [
    ("deep.jsonl", ('{"text": ' + "[" * 990 + "]" * 990 + "}\n").encode(), "nested more than"),
    ("deep.json", ('[{"text": ' + "[" * 990 + "]" * 990 + "}]").encode(), "nested more than"),
    ("latin1.jsonl", '{"text": "café"}\n'.encode("latin-1"), "UTF-8"),
    ("list.json", b"[1,2]", "JSON object"),
    ("strings.jsonl", b'"a"\n"b"\n', "JSON object"),
    ("huge-line.jsonl", b'{"text": "' + b"a" * (9 * 2**20), "MB"),
])
def test_hostile_data_files(run_cli, tmp_path, name, content, needle):
    data = tmp_path / name
    data.write_bytes(content)
    code, _, err = _generate(run_cli, tmp_path, data)
    assert needle in _one_line_error(code, err) and not (tmp_path / "run").exists()


def test_only_the_head_of_a_big_json_array_is_read(run_cli, tmp_path):
    """A 20 MB .json array is checked from its first record, not parsed whole: its broken tail (past the head that
    is read) goes unseen, as it would in a 20 GB file."""
    data = tmp_path / "data.json"
    row = b'{"text": "' + b"word " * 200 + b'"}'
    data.write_bytes(b"[" + b",\n".join([row] * 21000) + b", {broken")
    assert data.stat().st_size > 20 * 2**20
    from trainfit.train import runner

    assert runner.read_rows([str(data)], limit=1)[0]["text"].startswith("word")
    code, out, err = _generate(run_cli, tmp_path, data)
    assert code == 0, err


def test_deeply_nested_yaml_in_train_py_fsdp_config(tmp_path):
    from trainfit.train import runner

    (tmp_path / "accelerate_config.yaml").write_text("distributed_type: &d FSDP\nfsdp_config: {x: *d}\n")
    args = type("A", (), {"config": str(tmp_path / "train_config.json")})()
    with pytest.raises(runner.SetupError, match="aliases"):
        runner.fsdp_settings({}, args)
