"""CLI smoke tests: every subcommand's --help, the issue's acceptance commands, and bad input (exit 2, one line)."""

import json
import subprocess
import sys

import pytest

SUBCOMMANDS = ["estimate", "compare", "models", "gpus", "instances", "efficiencies", "prices"]


@pytest.mark.parametrize("cmd", SUBCOMMANDS)
def test_help(run_cli, cmd):
    with pytest.raises(SystemExit) as exc:
        run_cli(cmd, "--help")
    assert exc.value.code == 0


def _json(run_cli, *argv):
    code, out, err = run_cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_acceptance_qwen2_7b_lora_fits_on_a10(run_cli):
    d = _json(run_cli, "estimate", "--model", "qwen2-7b", "--gpu", "a10", "--method", "lora", "--seq-len", "2048",
              "--micro-batch", "1", "--grad-ckpt", "full")
    assert d["fits"] is True
    for key in ("weights", "gradients", "optimizer", "activations", "logits", "other", "total"):
        assert key in d["memory_gib"]
    assert d["model"]["params"] == 7_615_616_512 and 0 < d["model"]["trainable_params"] < 1e8
    for key in ("gpu_memory_gib", "step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "mfu", "bottleneck",
                "assumptions"):
        assert key in d


def test_acceptance_qwen2_7b_full_does_not_fit_and_says_what_would(run_cli):
    d = _json(run_cli, "estimate", "--model", "qwen2-7b", "--gpu", "a10", "--method", "full", "--seq-len", "2048",
              "--micro-batch", "1", "--grad-ckpt", "full")
    assert d["fits"] is False
    terms = " ".join(d["does_not_fit"]["terms"])
    assert "model states" in terms
    changes = [a["change"] for a in d["does_not_fit"]["alternatives"]]
    assert any("lora" in c for c in changes) and any("--zero 3" in c for c in changes)
    assert all(a["fits"] for a in d["does_not_fit"]["alternatives"])


def test_acceptance_bert_large_classification_fits(run_cli):
    d = _json(run_cli, "estimate", "--model", "bert-large-uncased", "--gpu", "a10", "--method", "full", "--task",
              "classification", "--seq-len", "512", "--micro-batch", "8")
    assert d["fits"] is True


def test_acceptance_llama_13b_full_does_not_fit_a10(run_cli):
    assert _json(run_cli, "estimate", "--model", "llama-2-13b", "--gpu", "a10", "--method", "full")["fits"] is False


def test_acceptance_compare_orders_by_hardware(run_cli):
    d = _json(run_cli, "compare", "--model", "llama-2-7b", "--method", "lora")
    rows = {r["gpu"]: r for r in d["rows"]}
    for gpu in ("a10", "a100-sxm4-80gb", "h100-sxm"):
        assert rows[gpu]["fits"] and rows[gpu]["tokens_per_s"] > 0
    assert rows["h100-sxm"]["tokens_per_s"] > rows["a100-sxm4-80gb"]["tokens_per_s"] > rows["a10"]["tokens_per_s"]
    h = {g: rows[g]["hours_per_billion_tokens"] for g in ("a10", "a100-sxm4-80gb", "h100-sxm")}
    assert h["h100-sxm"] < h["a100-sxm4-80gb"] < h["a10"]
    assert rows["a10"]["alibaba"]["instance_type"] == "ecs.gn7i-c8g1.2xlarge"
    assert rows["a10"]["cny_per_billion_tokens"] > 0


def test_compare_changes_precision_on_gpus_without_bf16(run_cli):
    d = _json(run_cli, "compare", "--model", "qwen2.5-0.5b", "--gpus-list", "t4,v100")
    assert all(any("fp16" in c for c in r["changes"]) for r in d["rows"])


@pytest.mark.parametrize("cmd", [["models"], ["gpus"], ["instances", "--provider", "alibaba", "--gpu", "a10"],
                                 ["efficiencies", "--gpu", "a10"], ["models", "qwen2-7b"], ["gpus", "h20"]])
def test_catalog_commands(run_cli, cmd):
    code, out, err = run_cli(*cmd, "--json")
    assert code == 0, err
    json.loads(out)
    code, out, _ = run_cli(*cmd)
    assert code == 0 and out.strip()


def test_instances_filter(run_cli):
    d = _json(run_cli, "instances", "--provider", "alibaba", "--gpu", "a10")
    assert d["instances"] and all(r["gpu"] == "a10" and r["provider"] == "alibaba" for r in d["instances"])


BAD = [
    (["estimate", "--model", "qwen2-7", "--gpu", "a10"], "did you mean"),
    (["estimate", "--model", "qwen2-7b", "--gpu", "a1000"], "did you mean"),
    (["estimate", "--model", "qwen2-7b", "--gpu", "a10", "--seq-len", "-5"], "seq-len"),
    (["estimate", "--model", "qwen2-7b", "--gpu", "a10", "--micro-batch", "0"], "micro-batch"),
    (["estimate", "--model", "qwen2-7b", "--gpu", "a10", "--gpus", "100000"], "gpus"),
    (["estimate", "--model", "qwen2-7b", "--gpu", "a10", "--method", "lorra"], "method"),
    (["estimate", "--model", "qwen2-7b", "--gpu", "v100", "--precision", "bf16"], "bf16"),
    (["estimate", "--model", "qwen2-7b", "--gpu", "a100", "--precision", "fp8"], "FP8"),
    (["estimate", "--model", "qwen2-7b", "--gpu", "t4", "--precision", "fp16", "--attention", "flash"], "Flash"),
    (["estimate", "--model", "qwen2-7b", "--gpu", "a10", "--offload", "all", "--zero", "2"], "offload"),
    (["estimate", "--model", "qwen2-7b", "--gpu", "a10", "--zero", "3", "--fsdp", "full_shard"], "either"),
    (["estimate", "--model", "gpt2", "--gpu", "a10", "--seq-len", "4096"], "positions"),
    (["estimate", "--model", "qwen2-7b", "--gpu", "a10", "--set", "nonsense=1"], "efficiency"),
    (["estimate", "--model", "qwen2-7b", "--gpu", "a10", "--lang", "fr"], "lang"),
    (["instances", "--provider", "tencent"], "provider"),
    (["compare", "--model", "llama-2-7b", "--gpus-list", "a10,h1000"], "did you mean"),
]


@pytest.mark.parametrize("argv,needle", BAD)
def test_bad_input_exits_2_with_one_line(run_cli, argv, needle):
    code, out, err = run_cli(*argv)
    assert code == 2
    lines = [line for line in err.strip().splitlines() if line]
    assert len(lines) == 1 and "Traceback" not in err
    assert needle.lower() in lines[0].lower()


def test_malformed_config_json(run_cli, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    code, _, err = run_cli("estimate", "--model", str(bad), "--gpu", "a10")
    assert code == 2 and "not valid JSON" in err and err.count("\n") == 1
    bad.write_text(json.dumps({"model_type": "llama", "hidden_size": -4}))
    code, _, err = run_cli("estimate", "--model", str(bad), "--gpu", "a10")
    assert code == 2 and "malformed" in err
    bad.write_text(json.dumps({"model_type": "t5", "d_model": 512}))
    code, _, err = run_cli("estimate", "--model", str(bad), "--gpu", "a10")
    assert code == 2 and "not supported" in err


def test_local_model_directory(run_cli, tmp_path):
    from trainfit.catalog import all_models

    (tmp_path / "config.json").write_text(json.dumps(all_models()["qwen2.5-0.5b"].hf_config))
    d = _json(run_cli, "estimate", "--model", str(tmp_path), "--gpu", "a10")
    assert d["model"]["params"] == all_models()["qwen2.5-0.5b"].params


def test_argparse_type_errors_exit_2():
    proc = subprocess.run([sys.executable, "-m", "trainfit", "estimate", "--model", "gpt2", "--gpu", "a10",
                           "--seq-len", "abc"], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_multi_node_without_network_states_its_assumption(run_cli):
    d = _json(run_cli, "estimate", "--model", "llama-2-7b", "--gpu", "h100-sxm", "--gpus", "8", "--nodes", "2",
              "--zero", "3")
    # the network between nodes is the fastest the catalog rents with this GPU (issue 33), and it says which
    assert any("between nodes the network of" in a and "h100-sxm" in a for a in d["assumptions"])
    d2 = _json(run_cli, "estimate", "--model", "llama-2-7b", "--gpu", "h100-sxm", "--gpus", "8", "--nodes", "2",
               "--zero", "3", "--network-gbps", "25")
    assert d2["step_time_s"] > d["step_time_s"]  # a slower network costs time


def test_chinese_output(run_cli):
    code, out, _ = run_cli("estimate", "--model", "qwen2-7b", "--gpu", "a10", "--method", "lora", "--grad-ckpt",
                           "full", "--lang", "zh")
    assert code == 0 and "显存" in out


def test_hub_id_without_network_is_a_clear_error(run_cli, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")  # .invalid never resolves (RFC 2606)
    code, _, err = run_cli("estimate", "--model", "some-org/some-model-that-is-not-cached", "--gpu", "a10")
    assert code == 2 and "Hugging Face Hub" in err and "Traceback" not in err


def test_instance_sets_gpu_and_links(run_cli):
    d = _json(run_cli, "estimate", "--model", "qwen2.5-7b", "--instance", "ecs.gn7i-c32g1.32xlarge", "--gpus", "4",
              "--zero", "2", "--method", "lora")
    assert d["config"]["gpu"] == "a10" and d["config"]["instance"] == "alibaba/ecs.gn7i-c32g1.32xlarge"
    comm = {}
    for inst in ("ecs.gn7i-c32g1.32xlarge", "ecs.gn7e-c16g1.16xlarge"):
        e = _json(run_cli, "estimate", "--model", "qwen2.5-1.5b", "--instance", inst, "--gpus", "4", "--zero", "2")
        comm[inst] = sum(v for k, v in e["time_s"].items() if k.startswith("communication"))
    # the A10 box (gn7i) talks over PCIe, the gn7e box over NVLink
    assert comm["ecs.gn7i-c32g1.32xlarge"] > 5 * comm["ecs.gn7e-c16g1.16xlarge"] > 0
    code, _, err = run_cli("estimate", "--model", "qwen2.5-7b", "--instance", "ecs.gn7i-c8g1.2xlarge", "--gpus", "2")
    assert code == 2 and "has 1 GPUs" in err


def test_a_named_command_builds_its_own_parser_alone_and_parses_the_same():
    """Issue 36: `trainfit plan ...` builds only plan's subparser (the other commands' modules are not imported for
    it); what it parses equals the whole parser's result, and an unknown or missing command gets the whole parser
    (its "did you mean" needs every name)."""
    from trainfit.cli.main import COMMANDS, build_parser

    def choices(argv):
        return set(build_parser(argv)._subparsers._group_actions[0].choices)

    assert choices(["plan", "--model", "qwen2-7b"]) == {"plan"}
    assert choices(["--lang", "zh", "estimate"]) == {"estimate"}
    assert choices(["gpus"]) == {"models", "gpus", "instances", "efficiencies"}
    assert choices(["plna"]) == choices(None) == choices(["--version"]) == set(COMMANDS)
    argv = ["--lang", "zh", "plan", "--model", "qwen2-7b", "--method", "lora", "--dataset-tokens", "200M", "--json"]
    assert vars(build_parser(argv).parse_args(argv)) == vars(build_parser().parse_args(argv))
