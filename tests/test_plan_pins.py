"""plan takes every layout field of the one schema (issue 33 item 5): given = kept on every recommendation, absent =
searched; `--instance` narrows the offers; a request file pins the same fields; the web calculator's Plan sends the
GPU the form shows."""

from __future__ import annotations

import json

import pytest

BASE = ["plan", "--model", "qwen2-7b", "--method", "lora", "--dataset-tokens", "200M", "--json"]


def _recs(plan_json, *extra):
    return plan_json(*BASE[1:-1], *extra)  # BASE without "plan" and "--json", which the fixture adds


def test_without_pins_the_search_chooses_the_layout(run_cli, plan_json):
    doc = _recs(plan_json, "--gpu", "a10", "--top", "10")
    layouts = {(r["gpus_per_node"], r["strategy"]["zero_stage"], r["strategy"]["grad_ckpt"])
               for r in doc["recommendations"]}
    assert len(layouts) > 1  # so the pinned tests below can fail


@pytest.mark.parametrize("flags,check", [
    (["--gpus", "4"], lambda r: r["gpus_per_node"] == 4),
    (["--zero", "3"], lambda r: r["strategy"]["zero_stage"] == 3),
    (["--grad-ckpt", "full"], lambda r: r["strategy"]["grad_ckpt"] == "full"),
    (["--micro-batch", "2"], lambda r: r["strategy"]["micro_batch"] == 2),
    (["--gpus", "4", "--zero", "3", "--grad-ckpt", "full"],
     lambda r: (r["gpus_per_node"], r["strategy"]["zero_stage"], r["strategy"]["grad_ckpt"]) == (4, 3, "full")),
])
def test_a_given_layout_field_is_kept_on_every_recommendation(run_cli, flags, check, plan_json):
    doc = _recs(plan_json, "--gpu", "a10", "--top", "10", *flags)
    assert doc["recommendations"], doc.get("binding_constraint")
    assert all(check(r) for r in doc["recommendations"]), [r["strategy"] for r in doc["recommendations"]]


def test_instance_narrows_the_offers(run_cli, plan_json):
    doc = _recs(plan_json, "--instance", "gn7i-4x.16xlarge", "--top", "10")
    assert doc["recommendations"]
    assert {r["instance_type"] for r in doc["recommendations"]} == {"ecs.gn7i-4x.16xlarge"}


def test_an_unknown_instance_is_one_line(run_cli):
    code, _, err = run_cli(*BASE, "--instance", "gn7i-4x.16xlargee")
    assert code == 2 and err.count("\n") == 1 and "did you mean" in err


def test_a_layout_no_offer_runs_names_the_pin(run_cli, plan_json):
    doc = _recs(plan_json, "--instance", "gn7i-4x.16xlarge", "--gpus", "8")
    assert not doc["recommendations"]
    binding = doc["binding_constraint"]
    assert binding["constraint"] == "given layout" and "--gpus" in binding["explanation"]


def test_a_pinned_layout_that_does_not_fit_says_so(run_cli, plan_json):
    doc = _recs(plan_json, "--gpu", "a10", "--gpus", "2", "--zero", "2", "--grad-ckpt", "none")
    binding = doc["binding_constraint"]
    assert not doc["recommendations"] and binding["constraint"] == "memory"
    assert "layout given" in binding["explanation"]
    assert all(flag in binding["explanation"] for flag in ("--gpus", "--zero", "--grad-ckpt"))


def test_a_request_file_pins_the_same_fields(run_cli, tmp_path):
    path = tmp_path / "req.yaml"
    path.write_text("model: qwen2-7b\nmethod: lora\ndataset_tokens: 200M\ngpu: a10\ngpus: 4\nzero: 3\n"
                    "grad_ckpt: full\ntop: 5\n")
    code, out, err = run_cli("plan", str(path), "--json")
    assert code == 0, err
    recs = json.loads(out)["recommendations"]
    assert recs and all((r["gpus_per_node"], r["strategy"]["zero_stage"], r["strategy"]["grad_ckpt"]) == (4, 3, "full")
                        for r in recs)


def test_the_web_plan_uses_the_forms_gpu_and_its_moved_layout_fields():
    from trainfit.ui.app import do_plan

    form = {"model": "qwen2-7b", "gpu": "a10", "method": "lora", "dataset_tokens": "200M", "epochs": "1",
            "seq_len": "2048", "gpus": "1", "zero": "0", "micro_batch": "1"}
    recs = do_plan(form)["result"]["recommendations"]
    assert recs and {r["gpu"] for r in recs} == {"a10"}
    recs = do_plan({**form, "gpus": "4", "zero": "3"})["result"]["recommendations"]
    assert recs and all((r["gpus_per_node"], r["strategy"]["zero_stage"]) == (4, 3) for r in recs)
    recs = do_plan({**form, "gpu": "", "instance": "ecs.gn7e-c16g1.16xlarge"})["result"]["recommendations"]
    assert recs and {r["instance_type"] for r in recs} == {"ecs.gn7e-c16g1.16xlarge"}
