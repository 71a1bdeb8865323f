"""Train → serve, end to end on the CPU: `trainfit plan` → `trainfit generate` → the generated train.py (2 steps) →
the Hugging Face model it writes at the end (train/runner.py save_final_model: adapter/ for LoRA, merged/ always) →
`trainfit generate --serving --from RUN_DIR`, whose launch command must load that merged model.

The base model is a tiny Llama with random weights, saved by the test (bf16, as train.py loads a LoRA base), with
the `tiny_data` tokenizer beside it; it has 2048 positions because the serving estimate's default request (512 in,
256 out) must fit its context. Every subprocess goes through trainfit._proc.run with a timeout."""

import json
import os
import sys

import pytest

from trainfit import _proc

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")
pytest.importorskip("safetensors")
pytestmark = pytest.mark.slow

from test_train_e2e import TIMEOUT_S, _generate  # noqa: E402  (after the importorskips: it needs torch too)

# Two steps at the generated learning rate (LoRA 2e-4) move an adapter less than bf16 weights can show, which would
# let a merge that drops the adapter pass the logits check; at these rates the adapter / the weights move visibly.
LORA_LR, FULL_LR = 1e-2, 1e-3
# The merged weights are bf16: W + s*B@A rounded to bf16 (relative error <= 2^-8 per weight), compared with the
# unmerged base + adapter computed in fp32. Measured: max |difference| ~1e-3 on logits of magnitude ~0.7, while the
# adapter moves the logits by ~0.5; the check also asserts that the merged model is far from the base.
LOGITS_ATOL = 1e-2
PROBE = "the quick brown fox jumps over the lazy dog"


@pytest.fixture(scope="module")
def base(tiny_data, tmp_path_factory):
    """A tiny Llama with random weights and the tiny tokenizer, as a local model directory."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig

    root = tmp_path_factory.mktemp("models") / "tiny-base"
    conf = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, vocab_size=256, max_position_embeddings=2048, tie_word_embeddings=False)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(conf).to(torch.bfloat16).save_pretrained(root)
    AutoTokenizer.from_pretrained(tiny_data / "tok").save_pretrained(root)
    return root


def _set_lr(run_dir, lr):
    path = run_dir / "train_config.json"
    cfg = json.loads(path.read_text())
    cfg["optimizer"]["lr"] = lr
    path.write_text(json.dumps(cfg, indent=2))


def _train(run_dir, data, *extra):
    """The generated train.py, one process on the CPU; the model and the tokenizer come from the config's path."""
    argv = [sys.executable, "train.py", "--data", str(data), "--device", "cpu", "--output-dir", str(run_dir / "out"),
            *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    proc = _proc.run(argv, cwd=str(run_dir), env=env, timeout=TIMEOUT_S)
    assert proc.leftovers == [], f"processes outlived the run: {proc.leftovers}"
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _records(out):
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return [x["step"] for x in lines if "step" in x and not x.get("summary")], [x for x in lines if x.get("summary")]


def _artifact(folder):
    return json.loads((folder / "trainfit_artifact.json").read_text())


def _tensors(folder, name="model.safetensors"):
    from safetensors.torch import load_file

    return load_file(str(folder / name))


def _logits(model, tokenizer_dir):
    import torch
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(str(tokenizer_dir))(PROBE, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        return model(input_ids=ids).logits.float()


def _check_merged_is_base_plus_adapter(out, base):
    """merged/ reloaded by transformers gives the logits of the base with the adapter applied by PEFT."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    merged = _logits(AutoModelForCausalLM.from_pretrained(str(out / "merged"), dtype=torch.float32), out / "merged")
    plain = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    before = _logits(plain, base)
    adapted = _logits(PeftModel.from_pretrained(plain, str(out / "adapter")), base)
    assert torch.allclose(merged, adapted, atol=LOGITS_ATOL, rtol=0), (merged - adapted).abs().max()
    assert (merged - before).abs().max() > 10 * LOGITS_ATOL  # the adapter is really in the merged weights


def test_lora_plan_generate_train_serve(run_cli, tiny_data, base, tmp_path):
    plan, run, out = tmp_path / "plan", tmp_path / "run", tmp_path / "run" / "out"
    code, _, err = run_cli("plan", "--model", str(base), "--method", "lora", "--gpu", "a100-sxm4-80gb", "--seq-len",
                           "32", "--global-batch", "4", "--dataset-tokens", "10K", "--max-nodes", "1",
                           "--out", str(plan))
    assert code == 0, err
    choice = json.loads((plan / "plan.json").read_text())["choice"]
    assert choice["nodes"] == 1 and choice["strategy"]["engine"] == "single", choice["strategy"]
    # --plan DIR: the folder `plan --out` wrote
    code, _, err = run_cli("generate", "--plan", str(plan), "--out", str(run), "--model-source", "local",
                           "--model-path", str(base))
    assert code == 0, err
    _set_lr(run, LORA_LR)
    proc = _train(run, tiny_data / "chat.jsonl", "--max-steps", "2")
    assert f"serve it: trainfit generate --serving --from {out}" in proc.stderr

    for name in ("adapter_config.json", "adapter_model.safetensors", "tokenizer_config.json"):
        assert (out / "adapter" / name).is_file(), name
    for name in ("config.json", "model.safetensors", "tokenizer_config.json", "trainfit_artifact.json"):
        assert (out / "merged" / name).is_file(), name
    assert not (out / "adapter" / "trainfit_artifact.json").exists()
    art = _artifact(out / "merged")
    assert (art["method"], art["step"], art["dtype"], art["adapter"], art["merged"]) == \
        ("lora", 2, "bfloat16", "adapter", "merged")
    assert art["base_model"]["location"] == str(base) and art["base_model"]["name"] == "tiny-base"
    assert {str(t.dtype) for t in _tensors(out / "merged").values()} == {"torch.bfloat16"}  # the training dtype
    steps, summaries = _records(out)
    assert steps == [1, 2] and summaries[-1]["final_model"] == {"adapter": str(out / "adapter"),
                                                                "merged": str(out / "merged")}
    _check_merged_is_base_plus_adapter(out, base)

    code, stdout, err = run_cli("generate", "--serving", "--from", str(out), "--gpu", "a10", "--out",
                                str(tmp_path / "serve"), "--json")
    assert code == 0, err
    cmd = json.loads(stdout)["command"]
    assert cmd[:3] == ["vllm", "serve", str(out / "merged")]
    assert cmd[cmd.index("--served-model-name") + 1] == "tiny-base" and "--enable-lora" not in cmd
    assert str(out / "merged") in (tmp_path / "serve" / "serve.sh").read_text()
    assert "step 2" in (tmp_path / "serve" / "README.md").read_text()


def test_full_fine_tune_merged_is_the_trained_weights(run_cli, tiny_data, base, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    run, out = tmp_path / "run", tmp_path / "run" / "out"
    _generate(run_cli, run, str(base), "--method", "full", "--model-source", "local", "--model-path", str(base))
    _set_lr(run, FULL_LR)
    _train(run, tiny_data / "text.jsonl", "--max-steps", "2")
    assert not (out / "adapter").exists()
    art = _artifact(out / "merged")
    assert (art["method"], art["step"], art["dtype"], art["adapter"]) == ("full", 2, "bfloat16", None)
    trained = torch.load(out / "checkpoint" / "step2.pt", weights_only=False)["model"]  # fp32 master weights
    merged, start = _tensors(out / "merged"), _tensors(base)
    assert set(merged) == set(trained)
    for name, tensor in merged.items():
        assert torch.equal(tensor, trained[name].to(torch.bfloat16)), name  # the trained weights, in bf16
    assert any(not torch.equal(merged[k], start[k]) for k in merged)  # and not the base's
    assert torch.isfinite(_logits(AutoModelForCausalLM.from_pretrained(str(out / "merged")), out / "merged")).all()

    code, stdout, err = run_cli("generate", "--serving", "--from", str(out), "--engine", "sglang", "--gpu", "a10",
                                "--out", str(tmp_path / "serve"), "--json")
    assert code == 0, err
    cmd = json.loads(stdout)["command"]
    assert cmd[cmd.index("--model-path") + 1] == str(out / "merged")


def test_resume_continues_and_writes_the_final_model(run_cli, tiny_data, base, tmp_path):
    """2 steps with --no-final-model (checkpoints only), then --resume to 3 steps: the step count continues and the
    final model, written at the end of the resumed run, is step 3's."""
    run, out = tmp_path / "run", tmp_path / "run" / "out"
    _generate(run_cli, run, str(base), "--method", "lora", "--model-source", "local", "--model-path", str(base))
    _set_lr(run, LORA_LR)
    _train(run, tiny_data / "text.jsonl", "--max-steps", "2", "--no-final-model")
    assert (out / "checkpoint" / "step2.pt").is_file()
    assert not (out / "merged").exists() and not (out / "adapter").exists()
    _train(run, tiny_data / "text.jsonl", "--resume", "--max-steps", "3")
    steps, summaries = _records(out)
    assert steps == [1, 2, 3] and "final_model" not in summaries[0] and summaries[-1]["final_model"]["merged"]
    assert _artifact(out / "merged")["step"] == 3
    assert sorted(p.name for p in out.iterdir()) == ["adapter", "checkpoint", "merged", "metrics.jsonl"]
    _check_merged_is_base_plus_adapter(out, base)


def test_qlora_merges_into_the_base_reloaded_in_16_bit(run_cli, base, tmp_path):
    """QLoRA's final model: merging into a 4-bit base would give a 4-bit model, so save_final_model reloads the base
    in 16-bit and applies the saved adapter. bitsandbytes needs CUDA, so this drives that path in-process with a
    plain LoRA model standing in for the quantized one. With a random base (--random-init) there is nothing to
    merge into: only the adapter is written (its artefact file says why), an earlier merged/ is removed, and
    `generate --serving --from` says what to do instead."""
    import types

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainfit.train import runner

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.bfloat16),
                           LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    with torch.no_grad():  # a trained adapter (PEFT starts B at zero, which would make merging a no-op)
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.05)
    cfg = {"method": "qlora", "task": "sft", "precision": "bf16", "engine": "single",
           "model": {"name": "tiny-base", "hf_id": None, "path": str(base)}}
    dist = types.SimpleNamespace(world=1, rank=0, local_rank=0, main=True, cuda=False, device=torch.device("cpu"))
    tok, out = AutoTokenizer.from_pretrained(str(base)), tmp_path / "out"
    args = runner.parse_args(["--device", "cpu"])
    result = runner.save_final_model(cfg, args, str(out), model, None, tok, dist, 7)
    assert result == {"adapter": str(out / "adapter"), "merged": str(out / "merged")}
    art = _artifact(out / "merged")
    assert (art["method"], art["step"], art["dtype"], art["note"]) == ("qlora", 7, "bfloat16", None)
    _check_merged_is_base_plus_adapter(out, base)

    args = runner.parse_args(["--device", "cpu", "--random-init"])
    result = runner.save_final_model(cfg, args, str(out), model, None, tok, dist, 8)
    assert result == {"adapter": str(out / "adapter"), "merged": None} and not (out / "merged").exists()
    art = _artifact(out / "adapter")
    assert art["merged"] is None and art["step"] == 8 and "random" in art["note"]
    code, stdout, _ = run_cli("generate", "--serving", "--from", str(out), "--gpu", "a10", "--out",
                              str(tmp_path / "serve"), "--json")
    assert code == 2 and json.loads(stdout)["error"]["key"] == "gen_e_from_adapter_only"


def test_a_final_model_replaces_the_previous_one_whole(tmp_path):
    """runner._publish: written under a temporary name, then put in place; an earlier model's files do not stay."""
    from trainfit.train import runner

    target = tmp_path / "merged"

    def writer(*names):
        def write(path):
            os.makedirs(path)
            for name in names:
                with open(os.path.join(path, name), "w") as fh:
                    fh.write(name)
        return write

    runner._publish(str(target), writer("model-00001-of-00002.safetensors", "config.json"))
    runner._publish(str(target), writer("model.safetensors", "config.json"))
    assert sorted(os.listdir(target)) == ["config.json", "model.safetensors"]
    assert sorted(os.listdir(tmp_path)) == ["merged"]


def test_default_model_path_is_where_train_py_writes():
    from trainfit.generate.serving import DEFAULT_MODEL_PATH
    from trainfit.train import runner

    assert DEFAULT_MODEL_PATH == f"{runner.DEFAULT_OUTPUT_DIR}/{runner.MERGED_DIR}" == "output/merged"


@pytest.mark.parametrize("lang,word", [("en", "no trained model"), ("zh", "没有训练好的模型")])
def test_serving_from_a_folder_without_a_model(run_cli, tmp_path, lang, word):
    (tmp_path / "run").mkdir()
    code, out, err = run_cli("generate", "--serving", "--from", str(tmp_path / "run"), "--gpu", "a10",
                             "--out", str(tmp_path / "serve"), "--lang", lang)
    assert code == 2 and word in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "serve").exists()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_serving_from_a_run_that_left_only_an_adapter(run_cli, tmp_path, lang):
    (tmp_path / "out" / "adapter").mkdir(parents=True)
    (tmp_path / "out" / "adapter" / "adapter_config.json").write_text("{}")
    code, out, err = run_cli("generate", "--serving", "--from", str(tmp_path / "out"), "--gpu", "a10",
                             "--out", str(tmp_path / "serve"), "--lang", lang, "--json")
    error = json.loads(out)["error"]
    assert code == 2 and error["key"] == "gen_e_from_adapter_only" and "--adapter" in error["message"]


def test_serving_from_a_model_without_weights(run_cli, base, tmp_path):
    (tmp_path / "out" / "merged").mkdir(parents=True)
    (tmp_path / "out" / "merged" / "config.json").write_text((base / "config.json").read_text())
    code, out, err = run_cli("generate", "--serving", "--from", str(tmp_path / "out"), "--gpu", "a10",
                             "--out", str(tmp_path / "serve"), "--json")
    assert code == 2 and json.loads(out)["error"]["key"] == "gen_e_from_no_weights"


@pytest.mark.parametrize("flags,key", [
    (("--model", "qwen2-7b"), "gen_e_from_and"), (("--model-path", "/m"), "gen_e_from_and"),
    (("--adapter", "/a"), "gen_e_from_and"), ((), "gen_e_from_missing")])
def test_serving_from_refuses_conflicting_flags(run_cli, tmp_path, flags, key):
    code, out, _ = run_cli("generate", "--serving", "--from", str(tmp_path / "nope"), *flags, "--gpu", "a10",
                           "--out", str(tmp_path / "serve"), "--json")
    assert code == 2 and json.loads(out)["error"]["key"] == key


def test_from_without_serving_and_serving_without_a_model(run_cli, tmp_path):
    code, out, _ = run_cli("generate", "--from", str(tmp_path), "--model", "qwen2-7b", "--gpu", "a10",
                           "--out", str(tmp_path / "run"), "--json")
    assert code == 2 and json.loads(out)["error"]["key"] == "gen_e_from_needs_serving"
    code, out, _ = run_cli("generate", "--serving", "--gpu", "a10", "--out", str(tmp_path / "serve"), "--json")
    assert code == 2 and json.loads(out)["error"]["key"] == "gen_e_serving_no_model"


def test_plan_dir_without_a_plan(run_cli, tmp_path):
    (tmp_path / "p").mkdir()
    code, out, _ = run_cli("generate", "--plan", str(tmp_path / "p"), "--out", str(tmp_path / "run"), "--json")
    error = json.loads(out)["error"]
    assert code == 2 and error["key"] == "gen_e_plan_missing" and "plan.json" in error["message"]
