"""Hypothesis over the hostile categories of issue 32: request files, price files, --data lines, plan.json edits,
calibration files and monitor records, each filled with values drawn from what broke the CLI before (NaN, infinity,
huge and negative numbers, booleans for numbers, nested lists and objects for names, rich markup, bidi and control
characters, very long text, anchors). Whatever is drawn, the CLI answers (exit 0), or refuses in one line with
exit 2 (1 for a failed limit), in English and in Chinese: never an internal error (exit 70) or a traceback.

The examples are derandomized (the same every run, so `main` stays green on what was already found); set
TRAINFIT_FUZZ_RANDOM=1 to explore new ones.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

FUZZ = settings(max_examples=30, deadline=None, derandomize=not os.environ.get("TRAINFIT_FUZZ_RANDOM"),
                database=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

NASTY_TEXT = st.sampled_from([
    "", " ", "[/bold]", "[link=http://e.x]x[/link]", "qwen\u202e2-7b", "a\x00b", "a\x1b[31mred", "é", "模型",
    "x" * 5000, "$(reboot)", "`id`", "'; rm -rf ~", "<script>alert(1)</script>", "a\nb", "\t", "nan", "inf", "-1",
    "1e309", "0x10", "200M", "2亿", "48h", "a10", "qwen2.5-0.5b", "all-linear", "q_proj"])
NUMBERS = st.one_of(st.integers(-10, 10 ** 6), st.sampled_from([0, -1, 10 ** 30, 10 ** 400, 2 ** 63]),
                    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e-300, -0.0, 1e300]))
SCALARS = st.one_of(NUMBERS, st.booleans(), st.none(), NASTY_TEXT)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(NASTY_TEXT, inner, max_size=3)), max_leaves=6)


def _one_line(code: int, out: str, err: str, lang: str = "en") -> None:
    assert code in (0, 1, 2), (code, err[-2000:])
    assert "Traceback" not in err and "internal error" not in err, err[-2000:]
    if code:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("trainfit: "), err[-2000:]


def _both(run_cli, *argv: str) -> int:
    """The command in English and in Chinese: the same exit code, one line each."""
    code, out, err = run_cli(*argv)
    _one_line(code, out, err)
    code_zh, out_zh, err_zh = run_cli(*argv, "--lang", "zh")
    _one_line(code_zh, out_zh, err_zh, "zh")
    assert code_zh == code, (err, err_zh)
    return code


def _yaml(doc) -> str:
    return yaml.safe_dump(doc, allow_unicode=True, default_flow_style=False, sort_keys=False)


REQUEST_KEYS = ["model", "method", "dataset_tokens", "samples", "avg_len", "epochs", "deadline", "budget", "gpu",
                "provider", "region", "seq_len", "micro_batch", "lora_targets", "lora_rank", "zero_stage", "top",
                "max_nodes", "global_batch", "usd_cny", "currency", "grad_ckpt", "task", "nodes"]


@FUZZ
@given(changes=st.dictionaries(st.sampled_from(REQUEST_KEYS), VALUES, min_size=1, max_size=3),
       anchor=st.booleans())
@example(changes={"dataset_tokens": 10 ** 400}, anchor=False)  # found by the corpus: OverflowError, exit 70
@example(changes={"epochs": True}, anchor=False)  # a boolean was taken as 1 epoch
def test_request_files(run_cli, tmp_path_factory, changes, anchor):
    doc = {"model": "qwen2.5-0.5b", "dataset_tokens": "1M", "seq_len": 512, "top": 1, **changes}
    text = _yaml(doc)
    if anchor:
        text = text.replace("model:", "model: &m", 1) + "other: *m\n"
    path = tmp_path_factory.mktemp("req") / "req.yaml"
    path.write_text(text, encoding="utf-8")
    code = _both(run_cli, "plan", str(path), "--json")
    if anchor:
        assert code == 2


PRICE_COLUMNS = ["provider", "instance_type", "region", "billing", "price", "currency", "price_date"]
GOOD_ROW = ["alibaba", "ecs.gn7i-c8g1.2xlarge", "cn-hangzhou", "payg", "10.5", "CNY", "2026-11-01"]


@FUZZ
@given(changes=st.dictionaries(st.integers(0, len(PRICE_COLUMNS) - 1), NASTY_TEXT | NUMBERS.map(str), max_size=3),
       extra=st.lists(NASTY_TEXT, max_size=2))
def test_price_files_never_poison_later_commands(run_cli, tmp_path_factory, monkeypatch, changes, extra):
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.setenv("HOME", str(home))
    row = list(GOOD_ROW)
    for i, value in changes.items():
        row[i] = value
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(PRICE_COLUMNS)
    writer.writerow(row + extra)
    path = home / "quotes.csv"
    path.write_text(buf.getvalue(), encoding="utf-8")
    _both(run_cli, "prices", "set", str(path))
    code, out, err = run_cli("prices", "list", "--gpu", "a10", "--json")  # whatever was accepted is usable after
    assert code == 0, err
    json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in prices list --json"))


LINES = st.one_of(VALUES.map(lambda v: json.dumps(v, allow_nan=True)), NASTY_TEXT,
                  st.binary(max_size=40).map(lambda b: b.decode("latin-1")))


@FUZZ
@given(lines=st.lists(LINES, min_size=0, max_size=6), suffix=st.sampled_from([".jsonl", ".json", ".txt"]))
def test_data_files(run_cli, tmp_path_factory, lines, suffix):
    path = tmp_path_factory.mktemp("data") / f"train{suffix}"
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
    _both(run_cli, "estimate", "--model", "qwen2.5-0.5b", "--gpu", "a10", "--method", "lora", "--seq-len", "512",
          "--data", str(path))


def _plan_doc() -> dict:
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile", "files", "plan_engine.json")
    with open(here, encoding="utf-8") as fh:
        doc = json.load(fh)
    doc["choice"]["strategy"]["engine"] = "single"
    return doc


PLAN_PATHS = [("choice", k) for k in ("gpu", "gpus_per_node", "nodes", "fits", "memory_gib", "hours", "cost")] + \
    [("choice", "strategy", k) for k in ("method", "micro_batch", "grad_accum", "lora_targets", "lora_rank",
                                         "zero_stage", "fsdp", "offload", "precision", "attention", "grad_ckpt",
                                         "global_batch", "seq_len", "modules_to_save", "engine")] + \
    [("workload", k) for k in ("seq_len", "task", "epochs")] + [("model", "hf_config", "hidden_size"),
                                                               ("model", "hf_config", "model_type")]


@FUZZ
@given(edits=st.lists(st.tuples(st.sampled_from(PLAN_PATHS), VALUES | st.just(KeyError)), min_size=1, max_size=3))
def test_hand_edited_plan_files(run_cli, tmp_path_factory, edits):
    doc = _plan_doc()
    for path, value in edits:
        node = doc
        for key in path[:-1]:
            node = node[key] if isinstance(node.get(key), dict) else node.setdefault(key, {})
        if value is KeyError:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = value
    folder = tmp_path_factory.mktemp("plan")
    file = folder / "plan.json"
    file.write_text(json.dumps(doc, allow_nan=True), encoding="utf-8")
    for lang in ("en", "zh"):
        code, out, err = run_cli("generate", "--plan", str(file), "--out", str(folder / f"out-{lang}"), "--lang", lang)
        _one_line(code, out, err, lang)


EFFICIENCY_NAMES = ["matmul_efficiency", "attention_efficiency", "comm_overlap", "step_overhead_s",
                    "memory_bandwidth_efficiency", "allocator_overhead_fraction", "cuda_context_gib", "no_such_name"]


@FUZZ
@given(values=st.dictionaries(st.sampled_from(EFFICIENCY_NAMES), VALUES, max_size=3), wrap=st.booleans())
def test_calibration_files(run_cli, tmp_path_factory, values, wrap):
    path = tmp_path_factory.mktemp("cal") / "cal.yaml"
    path.write_text(_yaml({"values": values} if wrap else values), encoding="utf-8")
    _both(run_cli, "estimate", "--model", "gpt2", "--gpu", "a10", "--calibration", str(path))


SAMPLE_KEYS = ["t", "gpus", "index", "util", "mem_used_mib", "mem_total_mib", "power_w", "sm_clock_mhz", "pcie_rx"]


@FUZZ
@given(samples=VALUES | st.lists(st.dictionaries(st.sampled_from(SAMPLE_KEYS), VALUES, max_size=4), max_size=3))
def test_monitor_records(run_cli, tmp_path_factory, samples):
    path = tmp_path_factory.mktemp("rec") / "samples.json"
    path.write_text(json.dumps({"samples": samples}, allow_nan=True), encoding="utf-8")
    _both(run_cli, "monitor", "--replay", str(path), "--json")


@FUZZ
@given(value=NUMBERS.map(lambda x: repr(x) if not isinstance(x, float) or math.isfinite(x) else str(x)),
       option=st.sampled_from([("serving", "--target-tokens-per-s"), ("serving", "--max-tpot-ms"),
                               ("estimate", "--seq-len"), ("estimate", "--micro-batch"), ("estimate", "--gpus"),
                               ("plan", "--budget"), ("plan", "--deadline"), ("plan", "--epochs")]))
def test_number_options(run_cli, value, option):
    command, flag = option
    extra = ["--dataset-tokens", "1M", "--top", "1", "--gpu", "a10"] if command == "plan" else ["--gpu", "a10"]
    _both(run_cli, command, "--model", "qwen2.5-0.5b", *extra, flag, value)
