"""Output readable at every width and when piped (issues 11 and 33): every command that prints a table, at 60 to 200
columns and piped (no terminal, no COLUMNS: 120 columns), in English and Chinese. No line is wider than the width,
no cell is cut short ("…") or cropped at the edge, and the values the --json output gives (names of models, GPUs and
instances, hours, costs, MFU, tokens/s) appear whole in the text: a value split over two lines counts as cut.

Each command runs once per language, piped (its real output is checked at 120 columns); what it printed is then
printed again by the CLI's console at each width (COLUMNS=w), as `trainfit ... ` in such a terminal would."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.cells import cell_len

WIDTHS = (60, 80, 100, 130, 160, 200)
PIPED = 120  # the width output is laid out for when piped and COLUMNS is unset (report/tables.py PIPED_WIDTH)

_BOX = "│┃┏┓┗┛┡┩└┘━─╇╈┳┻"


def _check_width(text: str, width: int = 80):
    """No line wider than the terminal, no cell cut short (a cell that ends in "…": texts may use it in words), and
    no table cropped at the edge (each table line ends with its right border)."""
    wide = [line for line in text.splitlines() if cell_len(line) > width]
    assert not wide, wide[:3]
    short = [line for line in text.splitlines() if re.search(r"…\s*[│┃]", line)]
    assert not short, short[:3]
    cropped = [line for line in text.splitlines() if line[:1] in _BOX and line.rstrip()[-1:] not in _BOX]
    assert not cropped, cropped[:3]


def _forms(x: float, spec: str, step: float, before: str = "", after: str = "") -> tuple[str, ...]:
    """The ways a number the JSON gives rounded to `step` may read in the table (formatted with `spec` from the
    unrounded value): one value, any of these forms."""
    return tuple(dict.fromkeys(f"{before}{x + d:{spec}}{after}" for d in (-step / 2, 0, step / 2)))


def _whole(text: str, value: str) -> bool:
    """`value` on one line, not part of a longer name or number (not after a letter, digit, '.', '-' or '_'; not
    before a letter, digit, '-', '_', or '.'/',' and a digit)."""
    at = text.find(value)
    while at >= 0:
        before, after = text[at - 1:at] if at else " ", text[at + len(value):at + len(value) + 2]
        if not (before.isalnum() or before in "_.-") and not (
                after[:1].isalnum() or after[:1] in ("_", "-") or (after[:1] in (".", ",") and after[1:2].isdigit())):
            return True
        at = text.find(value, at + 1)
    return False


def _name(s: str) -> tuple[str, ...]:
    return (s,)


def _estimate(doc):
    out = [_forms(doc["tokens_per_s"], ",.0f", 0.1), _forms(doc["mfu"] * 100, ".1f", 0.01, after="%"),
           _forms(doc["step_time_s"], ".3f", 0.0001)]
    out += [_forms(doc["memory_gib"][k], ".2f", 0.001) for k in ("weights", "optimizer", "activations", "total")]
    for alt in (doc.get("does_not_fit") or {}).get("alternatives", []):
        out += [_forms(alt["memory_gib_total"], ".1f", 0.01), _forms(alt["tokens_per_s"], ",.0f", 0.1)]
    return out


def _compare(doc):
    out = []
    for row in doc["rows"]:
        out.append(_name(row["gpu"]))
        if row.get("fits") and row.get("tokens_per_s"):
            out += [_forms(row["tokens_per_s"], ",.0f", 0.1), _forms(row["mfu"] * 100, ".0f", 0.01, after="%")]
        if row.get("hours_per_billion_tokens"):
            out.append(_forms(row["hours_per_billion_tokens"], ",.1f", 0.001))
        for key in ("alibaba", "cheapest_other"):
            offer = row.get(key)
            if offer and offer.get("instance_type"):
                out.append(_name(offer["instance_type"].removeprefix("ecs.")))
                out.append(_forms(offer["cost_per_billion_tokens"], ",.0f", 0.01))
    return out


def _plan(doc):
    assert doc["recommendations"]
    out = []
    for rec in doc["recommendations"]:
        cur = "¥" if rec["currency"] == "CNY" else "$"
        out += [_name(rec["instance_type"].removeprefix("ecs.")), _name(rec["region"]),
                _forms(rec["hours"], ",.1f", 0.001), _forms(rec["cost"], ",.0f", 0.01, before=cur),
                _forms(rec["tokens_per_s"], ",.0f", 0.1)]
    return out


def _prices(doc):
    assert doc["prices"]
    out = []
    for r in doc["prices"]:
        out += [_name(r["instance_type"]), _name(r["region"]), _name(r["price_date"])]
        if r["price_per_gpu_hour"] is not None:
            out.append(_forms(r["price_per_gpu_hour"], ",.3f", 0.0001))
    return out


def _gpus(doc):
    return [_name(g["id"]) for g in doc["gpus"]] + [_name(s) for g in doc["gpus"] for s in g["sources"]]


def _instances(doc):
    assert doc["instances"]
    return [_name(r["instance_type"]) for r in doc["instances"]] + \
        [_name(r["price_date"]) for r in doc["instances"] if r["price_date"]]


def _models(doc):
    return [_name(m["name"]) for m in doc["models"]] + [(f"{m['params'] / 1e9:.2f}B",) for m in doc["models"]]


def _efficiencies(doc):
    return [_name(name) for name in doc["efficiencies"]] + \
        [_name(str(e["default"])) for e in doc["efficiencies"].values() if "default" in e]


def _serving(doc):
    mem, speed = doc["memory"], doc["speed"]
    return [(f"{mem['kv_cache_tokens']:,}",), (f"{mem['kv_bytes_per_token']:,}",),
            _forms(speed["ttft_ms"], ",.1f", 0.01), _forms(speed["output_tokens_per_s"], ",.1f", 0.1)]


def _serving_compare(doc):
    out = []
    for r in doc["rows"]:
        out += [_name(r["gpu"]), (f"{r['kv_cache_tokens']:,}",), _forms(r["output_tokens_per_s"], ",.0f", 0.1)]
        if r["instance"]:
            out.append(_name(r["instance"].split("/", 1)[-1]))
    return out


def _validate(doc):
    # (the case ids: cli/validate.py itself shortens them to 48 characters)
    return [_forms(doc["throughput"]["mape"] * 100, ".1f", 0.01, after="%")]


COMMANDS = {
    "estimate": (("estimate", "--model", "qwen2-7b", "--method", "lora", "--gpu", "a10"), _estimate),
    "estimate-oom": (("estimate", "--model", "qwen2-7b", "--method", "full", "--gpu", "a10"), _estimate),
    "compare": (("compare", "--model", "qwen2-7b", "--method", "lora"), _compare),
    "compare-4": (("compare", "--model", "qwen2-7b", "--method", "lora", "--gpu", "a10,a100-sxm4-80gb,h100-sxm,h20"),
                  _compare),
    "plan": (("plan", "--model", "qwen2-7b", "--method", "lora", "--dataset-tokens", "200M"), _plan),
    "prices": (("prices", "list", "--gpu", "a10"), _prices),
    "gpus": (("gpus",), _gpus),
    "instances": (("instances", "--gpu", "a10"), _instances),
    "models": (("models",), _models),
    "efficiencies": (("efficiencies",), _efficiencies),
    "serving": (("serving", "--model", "qwen2-7b", "--gpu", "a10"), _serving),
    "serving-compare": (("serving", "--model", "qwen2-7b", "--compare", "a10,l20,a100-sxm4-80gb,h20",
                         "--concurrency", "32"), _serving_compare),
    "validate": (("validate", "{cases}"), _validate),
}
_JSON: dict[str, dict] = {}  # a command's --json output, the same in every language


def _cases(tmp_path) -> str:
    from pathlib import Path

    published = Path(__file__).resolve().parents[1] / "data" / "validation" / "published_dev.jsonl"
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(published.read_text(encoding="utf-8").splitlines(True)[:3]), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_width_and_piped(run_cli, monkeypatch, tmp_path, name, lang):
    from rich.console import Console

    from trainfit.cli.common import console

    argv, values = COMMANDS[name]
    if "{cases}" in argv:
        argv = tuple(_cases(tmp_path) if a == "{cases}" else a for a in argv)
    if name not in _JSON:
        code, out, err = run_cli(*argv, "--json")
        assert code == 0, err
        _JSON[name] = json.loads(out)
    expected = values(_JSON[name])
    assert expected

    # piped: no terminal (capsys), no COLUMNS; what the console prints is recorded, to be printed again below
    printed: list = []
    recording = [True]
    real_print = Console.print

    def record(self, *objects, **kwargs):
        if recording[0]:
            printed.append((objects, kwargs))
        return real_print(self, *objects, **kwargs)

    monkeypatch.setattr(Console, "print", record)
    monkeypatch.delenv("COLUMNS", raising=False)
    code, text, err = run_cli(*argv, "--lang", lang)
    assert code == 0, err
    recording[0] = False
    assert printed
    texts = {"piped": (PIPED, text)}
    for width in WIDTHS:
        monkeypatch.setenv("COLUMNS", str(width))
        c = console()
        c.file = io.StringIO()
        for objects, kwargs in printed:
            c.print(*objects, **kwargs)
        texts[width] = (width, c.file.getvalue())
    for where, (width, out) in texts.items():
        try:
            _check_width(out, width)
        except AssertionError as exc:
            raise AssertionError(f"{name} {lang} at {where}: {exc}") from None
        cut = [forms[0] for forms in expected if not any(_whole(out, f) for f in forms)]
        assert not cut, f"{name} {lang} at {where}: not whole in the text: {cut[:5]}\n{out[:3000]}"
