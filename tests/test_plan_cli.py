"""`trainfit plan` end to end: the issue's acceptance scenarios, request files, output files and bad input."""

import json

import pytest




def test_acceptance_qwen2_7b_lora_200m_tokens(run_cli, plan_json):
    d = plan_json("--model", "qwen2-7b", "--task", "sft", "--method", "lora", "--dataset-tokens", "200M",
              "--epochs", "3", "--seq-len", "2048", "--deadline", "48h", "--budget", "3000")
    recs = d["recommendations"]
    assert recs
    for r in recs:
        assert r["fits"] and r["hours"] <= 48 and r["cost"] <= 3000 and r["currency"] == "CNY"
        for key in ("rank", "provider", "instance_type", "gpu", "gpus_per_node", "nodes", "strategy", "memory_gib",
                    "tokens_per_s", "price_date", "bottleneck", "why"):
            assert key in r
        for key in ("method", "precision", "zero_stage", "fsdp", "grad_ckpt", "offload", "micro_batch", "grad_accum"):
            assert key in r["strategy"]
    assert [r["cost"] for r in recs] == sorted(r["cost"] for r in recs)
    assert d["search"]["candidates"] >= 10_000 and d["search"]["seconds"] > 0
    assert d["pareto"] and d["rejected"] and d["binding_constraint"] is None


def test_acceptance_bert_base_classification_small_gpu(run_cli, plan_json):
    d = plan_json("--model", "bert-base-uncased", "--task", "classification", "--method", "full", "--samples",
              "100k", "--avg-len", "256", "--epochs", "3")
    top = d["recommendations"][0]
    assert top["gpu"] in ("t4", "a10", "a10g", "l4") and top["gpus_per_node"] * top["nodes"] == 1
    assert d["workload"]["seq_len"] == 256


def test_acceptance_llama_13b_full_never_a_single_a10(run_cli, plan_json):
    d = plan_json("--model", "llama-2-13b", "--method", "full", "--dataset-tokens", "1B", "--epochs", "1")
    assert d["recommendations"]
    assert not any(r["gpu"] == "a10" and r["gpus_per_node"] * r["nodes"] == 1 for r in d["recommendations"])
    assert not any(p["gpu"] == "a10" and p["gpus_per_node"] * p["nodes"] == 1 for p in d["pareto"])


def test_acceptance_qwen2_72b_full_multi_node_or_binding(run_cli, plan_json):
    d = plan_json("--model", "qwen2-72b", "--method", "full", "--dataset-tokens", "10B", "--deadline", "7d")
    if d["recommendations"]:
        assert all(r["gpus_per_node"] * r["nodes"] > 1 for r in d["recommendations"])
    else:
        b = d["binding_constraint"]
        assert b["constraint"] in ("deadline", "memory", "budget", "deadline and budget") and b["explanation"]
        assert b["relax"]


def test_an_impossible_request_explains_and_exits_1_with_or_without_out(run_cli, tmp_path):
    """Issue 33: an impossible plan exited 0 without --out and 2 with it; now both print why and exit 1."""
    argv = ("plan", "--model", "qwen2-7b", "--method", "lora", "--dataset-tokens", "10B", "--deadline", "1h",
            "--budget", "10")
    code, out, err = run_cli(*argv, "--json")
    d = json.loads(out)
    assert code == 1 and d["recommendations"] == [] and d["binding_constraint"]["explanation"]
    code, out, err = run_cli(*argv)
    assert code == 1 and "binding" in out and err.count("\n") == 1 and "no configuration meets" in err
    code, out, err = run_cli(*argv, "--out", str(tmp_path / "p"))
    assert code == 1 and "binding" in out and "nothing written" in err and not (tmp_path / "p" / "plan.json").exists()


def test_out_writes_plan_json(run_cli, tmp_path, plan_json):
    code, out, err = run_cli("plan", "--model", "qwen2.5-0.5b", "--method", "lora", "--dataset-tokens", "50M",
                             "--out", str(tmp_path / "p"))
    assert code == 0, err
    doc = json.loads((tmp_path / "p" / "plan.json").read_text())
    assert doc["trainfit_plan_version"] == 1
    assert doc["model"]["hf_id"] == "Qwen/Qwen2.5-0.5B" and doc["model"]["hf_config"]["model_type"] == "qwen2"
    assert doc["choice"]["strategy"]["method"] == "lora" and doc["choice"]["instance_type"]


def test_request_file_yaml_and_toml(run_cli, tmp_path, plan_json):
    y = tmp_path / "req.yaml"
    y.write_text("model: qwen2.5-0.5b\nmethod: lora\ndataset-tokens: 50M\nepochs: 2\ngpu: [a10]\n")
    d = plan_json(str(y))
    assert d["recommendations"] and all(r["gpu"] == "a10" for r in d["recommendations"])
    assert d["request"]["epochs"] == 2
    t = tmp_path / "req.toml"
    t.write_text('model = "qwen2.5-0.5b"\nmethod = "lora"\ndataset_tokens = "50M"\n')
    d = plan_json(str(t), "--epochs", "3")  # flags override the file
    assert d["request"]["epochs"] == 3


@pytest.mark.parametrize("content,needle", [
    ("model: qwen2-7b\ndataset-tokens: 1B\ndeadlin: 48h\n", "did you mean"),
    ("model: qwen2-7b\n", "dataset size"),
    ("- just\n- a list\n", "mapping"),
    ("model: [unclosed\n", "cannot read"),
])
def test_bad_request_files(run_cli, tmp_path, content, needle):
    f = tmp_path / "req.yaml"
    f.write_text(content)
    code, _, err = run_cli("plan", str(f))
    assert code == 2 and needle in err and "Traceback" not in err


@pytest.mark.parametrize("argv,needle", [
    (["--model", "qwen2-7b", "--dataset-tokens", "lots"], "not a count"),
    (["--model", "qwen2-7b", "--dataset-tokens", "1B", "--deadline", "soon"], "duration"),
    (["--model", "qwen2-7b", "--dataset-tokens", "1B", "--budget", "-5"], "positive"),
    (["--model", "qwen2-7b", "--dataset-tokens", "1B", "--provider", "tencent"], "provider"),
    (["--model", "qwen2-7b", "--dataset-tokens", "1B", "--gpu", "a1000"], "did you mean"),
    (["--model", "qwen2-7b", "--dataset-tokens", "1B", "--method", "dora"], "method"),
    (["--dataset-tokens", "1B"], "model"),
])
def test_bad_plan_flags(run_cli, argv, needle):
    code, _, err = run_cli("plan", *argv)
    assert code == 2 and needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_objective_fastest_and_subscription(run_cli, plan_json):
    d = plan_json("--model", "qwen2.5-0.5b", "--method", "lora", "--dataset-tokens", "50M", "--objective",
              "fastest", "--budget", "500")
    hours = [r["hours"] for r in d["recommendations"]]
    assert hours == sorted(hours) and all(r["cost"] <= 500 for r in d["recommendations"])
    # a subscription pays off only for long jobs: a 1.4-hour job stays pay-as-you-go, a 350-hour one takes the month
    d = plan_json("--model", "qwen2.5-0.5b", "--method", "lora", "--dataset-tokens", "50M", "--pricing",
              "subscription")
    assert all(r["price_billing"] == "payg" for r in d["recommendations"])
    d = plan_json("--model", "qwen2.5-0.5b", "--method", "lora", "--dataset-tokens", "10B", "--pricing",
              "subscription", "--gpu", "t4")
    best = d["recommendations"][0]
    assert best["price_billing"] == "subscription_month" and best["billed_hours"] == 730 * -(-best["hours"] // 730)


def test_other_providers_need_an_exchange_rate(run_cli, plan_json):
    """--provider all without a rate is an error (it used to drop AWS/GCP/Azure silently); with one, every provider
    competes in the budget's currency."""
    code, out, err = run_cli("plan", "--model", "qwen2.5-0.5b", "--method", "lora", "--dataset-tokens", "50M",
                             "--provider", "all")
    assert code == 2 and "--usd-cny" in err and len(err.strip().splitlines()) == 1
    d = plan_json("--model", "qwen2.5-0.5b", "--method", "lora", "--dataset-tokens", "50M", "--provider", "all",
              "--usd-cny", "7.1", "--top", "20")
    assert all(r["currency"] == "CNY" for r in d["recommendations"])
    assert {r["provider"] for r in d["recommendations"]} - {"alibaba"}  # others compete, converted at the rate
    d = plan_json("--model", "qwen2.5-0.5b", "--method", "lora", "--dataset-tokens", "50M", "--provider",
              "aws")
    assert d["recommendations"] and all(r["currency"] == "USD" for r in d["recommendations"])


def test_a_gpu_only_other_providers_rent_takes_the_search_to_them(plan_json):
    """Issue 34's acceptance run, as written (no provider): Alibaba Cloud rents no H100, so the search goes to the
    providers that do (AWS, GCP, Azure: all in USD, no exchange rate needed), says so, and proposes TP x PP. A
    provider given keeps the request; a GPU Alibaba rents keeps the default provider."""
    d = plan_json("--model", "llama-3-70b", "--method", "full", "--dataset-tokens", "20B", "--gpu", "h100-sxm",
                  "--deadline", "7d")
    assert d["request"]["provider"] == "usd"
    assert any("Alibaba Cloud" in a and "aws, azure, gcp" in a for a in d["assumptions"])
    best = d["recommendations"][0]
    assert best["currency"] == "USD" and best["provider"] in ("aws", "gcp", "azure")
    assert best["strategy"]["tp"] > 1 and best["strategy"]["pp"] > 1 and best["hours"] <= 168
    d = plan_json("--model", "qwen2.5-0.5b", "--method", "lora", "--dataset-tokens", "50M", "--gpu", "a10")
    assert d["request"]["provider"] == "alibaba" and not any("Alibaba Cloud" in a for a in d["assumptions"])


def test_usd_providers_together_in_usd(run_cli, plan_json):
    """--provider usd: AWS, GCP and Azure compete in USD without a rate; a budget named in CNY needs the rate, as
    with any one of them (the same refusal, not an empty catalog)."""
    d = plan_json("--model", "qwen2.5-0.5b", "--method", "lora", "--dataset-tokens", "50M", "--provider", "usd",
                  "--top", "20")
    assert d["recommendations"] and all(r["currency"] == "USD" for r in d["recommendations"])
    assert {r["provider"] for r in d["recommendations"]} <= {"aws", "gcp", "azure"}
    code, out, err = run_cli("plan", "--model", "qwen2.5-0.5b", "--method", "lora", "--dataset-tokens", "50M",
                             "--provider", "usd", "--budget", "3000元")
    assert code == 2 and "--usd-cny" in err and len(err.strip().splitlines()) == 1


def test_the_advice_to_widen_the_providers_runs_as_given(run_cli, plan_json):
    """When no Alibaba offer has the GPU (the provider given), plan suggests every provider: with the rate that flag
    needs (without it the suggested command stopped with the exchange-rate error), and plainly once the rate is
    given."""
    job = ("--model", "qwen3-30b-a3b", "--method", "full", "--dataset-tokens", "5B", "--gpu", "h100-sxm",
           "--provider", "alibaba")
    relax = plan_json(*job)["binding_constraint"]["relax"]
    assert "--provider all --usd-cny RATE" in relax
    relax = plan_json(*job, "--usd-cny", "7.1")["binding_constraint"]["relax"]
    assert "--provider all" in relax
    code, out, err = run_cli("plan", *job[:-2], "--provider", "all", "--usd-cny", "7.1", "--top", "1")
    assert code == 0, err


def test_plan_text_output_in_chinese(run_cli):
    code, out, _ = run_cli("plan", "--model", "qwen2.5-0.5b", "--method", "lora", "--dataset-tokens", "50M",
                           "--lang", "zh")
    assert code == 0 and "推荐方案" in out


def test_plan_takes_the_stated_stack_from_flag_or_request_file(run_cli, tmp_path):
    """--framework is a declared job input that passes the request door: a request file may state it, and the plan
    uses the stack's defaults (torchtune trains pure bf16) and its error band."""
    request = tmp_path / "r.yaml"
    request.write_text("model: qwen2-7b\nmethod: lora\ndataset-tokens: 200M\ngpu: a100-sxm4-80gb\nframework: torchtune\n")
    for argv in ([str(request)], ["--model", "qwen2-7b", "--method", "lora", "--dataset-tokens", "200M", "--gpu",
                                  "a100-sxm4-80gb", "--framework", "torchtune"]):
        code, out, err = run_cli("plan", *argv, "--json")
        assert code == 0, err
        d = json.loads(out)
        assert d["request"]["framework"] == "torchtune" and d["band"]["framework"] == "torchtune"
        assert d["recommendations"][0]["strategy"]["param_dtype"] == "bf16"
    code, out, err = run_cli("plan", "--model", "qwen2-7b", "--dataset-tokens", "1M", "--framework", "torchtun")
    assert code == 2 and "did you mean: torchtune" in err


def test_litgpt_plans_only_layouts_its_scripts_run(run_cli, plan_json):
    """plan --framework litgpt offers what LitGPT's finetune scripts run (litgpt 0.4.13 finetune/*.py): one device
    with no DeepSpeed, FSDP, offload or checkpointing, or FSDP full shard with every block checkpointed; QLoRA on one
    device only. What they do not run is rejected with the reason."""
    d = plan_json("--model", "qwen2-7b", "--method", "auto", "--dataset-tokens", "200M", "--framework",
              "litgpt", "--gpu", "a100-sxm4-80gb,a10")
    rows = d["recommendations"] + d["pareto"]
    assert rows
    for r in rows:
        st = r["strategy"]
        assert not st["zero_stage"] and st["offload"] in (None, "none"), st
        if r["gpus_per_node"] * r["nodes"] == 1:
            assert st["engine"] == "single" and st["grad_ckpt"] == "none", st
        else:
            assert st["fsdp"] == "full_shard" and st["grad_ckpt"] == "full" and st["method"] != "qlora", st
    reasons = " ".join(d["rejected"])
    assert "LitGPT's finetune scripts refuse --quantize" in reasons and "under FSDP full shard" in reasons
    # without the stack the same search offers DeepSpeed layouts
    other = plan_json("--model", "qwen2-7b", "--method", "auto", "--dataset-tokens", "200M",
                  "--gpu", "a100-sxm4-80gb,a10")
    assert "LitGPT" not in " ".join(other["rejected"])


def test_megatron_plans_full_training_without_deepspeed_sharding(run_cli, plan_json):
    """plan --framework megatron: full training only, at most the optimizer states sharded (Megatron-LM's
    distributed optimizer, ZeRO-1's layout), no FSDP or offload; LoRA and the rest rejected with the reason."""
    d = plan_json("--model", "llama-2-7b", "--method", "auto", "--dataset-tokens", "1B", "--framework",
              "megatron", "--gpu", "a100-sxm4-80gb")
    assert d["recommendations"]
    for r in d["recommendations"] + d["pareto"]:
        st = r["strategy"]
        assert st["method"] == "full" and (st["zero_stage"] or 0) <= 1 and not st["fsdp"], st
        assert st["offload"] in (None, "none"), st
    reasons = " ".join(d["rejected"])
    assert "LoRA and QLoRA are not in Megatron-LM" in reasons and "distributed optimizer" in reasons


@pytest.mark.parametrize("framework,argv,needle,zh", [
    ("litgpt", ["--grad-ckpt", "full"], "do not checkpoint activations on one device", "单卡运行时不做激活检查点"),
    ("megatron", ["--method", "lora"], "LoRA and QLoRA are not in Megatron-LM", "没有 LoRA 与 QLoRA"),
])
def test_estimate_warns_on_a_layout_the_stated_stack_does_not_run(run_cli, framework, argv, needle, zh):
    """One job, one answer: a layout `plan --framework` rejects for the stack (spec/training.py stack_refuses) gets
    the same reason as a warning from `estimate`, in English and Chinese; a layout the stack runs gets none."""
    base = ["estimate", "--model", "qwen2-7b", "--gpu", "a100-sxm4-80gb", "--framework", framework]
    code, out, err = run_cli(*base, *argv, "--json")
    assert code == 0, err
    warned = [w for w in json.loads(out)["warnings"] if f"`plan --framework {framework}` does not offer" in w]
    assert len(warned) == 1 and needle in warned[0]
    code, out, err = run_cli(*base, *argv, "--lang", "zh")
    assert code == 0 and zh in out.replace("\n", "") and "不提供此布局" in out.replace("\n", "")
    runs = ["--grad-ckpt", "none", "--method", "lora"] if framework == "litgpt" else ["--method", "full"]
    code, out, err = run_cli(*base, *runs, "--json")
    assert code == 0 and not [w for w in json.loads(out)["warnings"] if "does not offer" in w]
