"""At 80 columns the tables keep every name whole (issue 11): no line wider than the terminal, and every model,
instance type and GPU the JSON output names appears unbroken in the text output."""

from __future__ import annotations

import json

import pytest
from rich.cells import cell_len


def _both(run_cli, monkeypatch, *argv):
    monkeypatch.setenv("COLUMNS", "80")
    code, text, err = run_cli(*argv, "--lang", "en")
    assert code == 0, err
    code, out, err = run_cli(*argv, "--json")
    assert code == 0, err
    return text, json.loads(out)


_BOX = "│┃┏┓┗┛┡┩└┘━─╇╈┳┻"


def _check_width(text: str, width: int = 80):
    """No line wider than the terminal, no cell cut short ("…"), and no table cropped at the edge (each table line
    ends with its right border)."""
    wide = [line for line in text.splitlines() if cell_len(line) > width]
    assert not wide, wide[:3]
    assert "…" not in text
    cropped = [line for line in text.splitlines() if line[:1] in _BOX and line.rstrip()[-1:] not in _BOX]
    assert not cropped, cropped[:3]


def test_models_at_80_columns(run_cli, monkeypatch):
    text, doc = _both(run_cli, monkeypatch, "models")
    _check_width(text)
    for m in doc["models"]:
        assert m["name"] in text, m["name"]


def test_instances_at_80_columns(run_cli, monkeypatch):
    text, doc = _both(run_cli, monkeypatch, "instances", "--gpu", "a10")
    _check_width(text)
    assert doc["instances"]
    for r in doc["instances"]:
        assert r["instance_type"] in text, r["instance_type"]


def test_compare_at_80_columns(run_cli, monkeypatch):
    text, doc = _both(run_cli, monkeypatch, "compare", "--model", "llama-2-7b", "--method", "lora")
    _check_width(text)
    for row in doc["rows"] if "rows" in doc else doc["gpus"]:
        gpu = row.get("gpu") if isinstance(row.get("gpu"), str) else row["gpu"]["id"]
        assert gpu in text, gpu
        for key in ("alibaba", "cheapest_other"):
            offer = row.get(key)
            if offer and offer.get("instance_type"):
                assert offer["instance_type"].removeprefix("ecs.") in text, offer["instance_type"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_plan_at_80_columns(run_cli, monkeypatch, lang):
    monkeypatch.setenv("COLUMNS", "80")
    argv = ("plan", "--model", "qwen2-7b", "--method", "lora", "--dataset-tokens", "200M", "--epochs", "3",
            "--deadline", "48h", "--budget", "3000")
    code, text, err = run_cli(*argv, "--lang", lang)
    assert code == 0, err
    code, out, err = run_cli(*argv, "--json")
    doc = json.loads(out)
    assert doc["recommendations"]
    _check_width("\n".join(line for line in text.splitlines() if line[:1] in _BOX))
    for rec in doc["recommendations"]:
        assert rec["instance_type"].removeprefix("ecs.") in text, rec["instance_type"]
