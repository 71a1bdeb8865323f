"""The one declaration of a job's fields (spec/job.py) is the only place a field is written: a dummy field added to
it, in a copy of the package, appears in the CLI, the Python API, a plan request, plan.json and train_config.json
with no other edit; and the real fields pass every door they declare."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from trainfit import _proc
from trainfit.spec import job

SRC = os.path.join(os.path.dirname(__file__), "..", "src")
DUMMY = ('FIELDS = FIELDS + (JobField("dummy_option", _T, int, 3, "a dummy option", "虚拟选项", low=1, high=9, '
         'config="extra.dummy"),)\n')


@pytest.fixture(scope="module")
def dummy_src(tmp_path_factory):
    """A copy of the package whose declaration has one more field; nothing else edited."""
    root = tmp_path_factory.mktemp("dummy") / "src"
    shutil.copytree(os.path.join(SRC, "trainfit"), root / "trainfit",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    path = root / "trainfit" / "spec" / "job.py"
    text = path.read_text(encoding="utf-8")
    anchor = "BY_NAME = {f.name: f for f in FIELDS}"
    assert anchor in text
    path.write_text(text.replace(anchor, DUMMY + anchor), encoding="utf-8")
    return str(root)


def _run(src: str, *argv: str, code: str | None = None):
    env = dict(os.environ, PYTHONPATH=src, TRAINFIT_LANG="en")
    args = [sys.executable, "-c", code] if code else [sys.executable, "-m", "trainfit", *argv]
    return _proc.run(args, env=env, timeout=300)


def test_a_dummy_field_reaches_every_door(dummy_src, tmp_path):
    # CLI: the flag exists, its value lands in the estimate's config, its range is checked
    r = _run(dummy_src, "estimate", "--model", "qwen2.5-0.5b", "--gpu", "a10", "--method", "lora",
             "--dummy-option", "5", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["config"]["dummy_option"] == 5
    r = _run(dummy_src, "estimate", "--model", "qwen2.5-0.5b", "--gpu", "a10", "--dummy-option", "12")
    assert r.returncode == 2 and "dummy-option must be an integer in [1, 9]" in r.stderr
    r = _run(dummy_src, "estimate", "--help")
    assert "--dummy-option" in r.stdout and "a dummy option" in r.stdout
    # API: a keyword of trainfit.estimate, on the TrainingSpec, in the signature
    code = ("import inspect, trainfit as t; e = t.estimate('qwen2.5-0.5b', 'a10', method='lora', dummy_option=4); "
            "print(e.training.dummy_option, 'dummy_option' in inspect.signature(t.api.estimate).parameters)")
    r = _run(dummy_src, code=code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["4", "True"]
    # validation cases: `validate` reads it from a case's "training" object, `bench` writes it there
    code = ("import trainfit; from trainfit import validate; from trainfit.spec.job import CASE, json_values; "
            "case = {'training': {'seq_len': 512, 'micro_batch': 1, 'dummy_option': 8}}; "
            "t = validate._training(case, trainfit.resolve_model('qwen2.5-0.5b')); "
            "print(t.dummy_option, json_values(t, 'training', CASE)['dummy_option'])")
    r = _run(dummy_src, code=code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["8", "8"]
    # plan: a flag and a request key, carried in plan.json's choice.strategy
    out = tmp_path / "plan"
    r = _run(dummy_src, "plan", "--model", "qwen2.5-0.5b", "--method", "lora", "--dataset-tokens", "1M", "--gpu",
             "a10", "--dummy-option", "6", "--out", str(out))
    assert r.returncode == 0, r.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["choice"]["strategy"]["dummy_option"] == 6
    request = tmp_path / "request.yaml"
    request.write_text("model: qwen2.5-0.5b\nmethod: lora\ndataset-tokens: 1M\ngpu: a10\ndummy-option: 7\n")
    r = _run(dummy_src, "plan", str(request), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["recommendations"][0]["strategy"]["dummy_option"] == 7
    # generate: from the plan into train_config.json, at the declared path
    gen = tmp_path / "setup"
    r = _run(dummy_src, "generate", "--plan", str(out / "plan.json"), "--out", str(gen))
    assert r.returncode == 0, r.stderr
    assert json.loads((gen / "train_config.json").read_text())["extra"]["dummy"] == 6
    # and a plan.json whose value is out of the declared range is refused
    plan["choice"]["strategy"]["dummy_option"] = 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(plan))
    r = _run(dummy_src, "generate", "--plan", str(bad), "--out", str(tmp_path / "never"))
    assert r.returncode == 2 and "dummy_option" in r.stderr
    assert not (tmp_path / "never").exists()


def test_the_real_package_has_no_dummy():
    assert "dummy_option" not in job.BY_NAME


@pytest.mark.parametrize("f", job.FIELDS, ids=lambda f: f.name)
def test_every_field_is_declared_whole(f):
    assert f.help and f.help_zh and f.help != f.help_zh
    assert f.part in ("training", "strategy", "input")
    assert f.default is not None or f.optional
    if f.kind in (int, float):
        assert f.low is not None and f.high is not None
        assert f.default is None or f.low <= f.default <= f.high
        with pytest.raises(Exception):
            f.convert(f.high + 1)
    f.check(f.default)  # the default passes its own checks


def test_doors_follow_the_declaration(run_cli):
    """Each field passes the doors it declares: CLI flags of estimate, plan.json strategy keys, train_config keys."""
    from trainfit.cli.main import build_parser
    from trainfit.report.estimate import STRATEGY_FIELDS

    estimate = build_parser()._subparsers._group_actions[0].choices["estimate"]
    flags = {o for a in estimate._actions for o in a.option_strings}
    plan = build_parser()._subparsers._group_actions[0].choices["plan"]
    plan_flags = {o for a in plan._actions for o in a.option_strings}
    for f in job.FIELDS:
        assert (f.cli_flag in flags) == (job.CLI in f.doors), f.name
        if f.part == "input":
            continue
        assert (f.name in STRATEGY_FIELDS) == (job.PLAN in f.doors), f.name
        if job.REQUEST in f.doors:
            assert f.cli_flag in plan_flags, f.name


def test_api_rejects_an_unknown_keyword_with_a_suggestion():
    import trainfit
    from trainfit.errors import SpecError

    with pytest.raises(SpecError, match="did you mean: grad_accum"):
        trainfit.estimate("qwen2.5-0.5b", "a10", grad_acum=2)
