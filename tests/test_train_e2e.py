"""End to end: a generated setup trains 2 optimizer steps on the CPU, in one process and under
`torchrun --nproc_per_node 2` with the gloo backend (DDP, FSDP2, DeepSpeed), for full fine-tuning and LoRA.
Tiny models are built from the shipped tiny presets with random weights; the data and tokenizer come from the
`tiny_data` fixture. QLoRA and FlashAttention need a CUDA GPU: train.py refuses QLoRA on the CPU with one line."""

import json
import math
import os
import sys

import pytest

from trainfit import _proc

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytestmark = pytest.mark.slow

TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")
TIMEOUT_S = 120


def _generate(run_cli, out, model, *flags):
    code, _, err = run_cli("generate", "--model", model, "--gpu", "a100-sxm4-80gb", "--seq-len", "32",
                           "--micro-batch", "2", "--grad-accum", "2", *flags, "--out", str(out))
    assert code == 0, err


def _train(run_dir, data, tok, procs=1, *extra, expect_ok=True):
    cmd = ["train.py", "--data", str(data), "--tokenizer", str(tok), "--random-init", "--max-steps", "2",
           "--device", "cpu", "--output-dir", str(run_dir / "out"), *extra]
    argv = [sys.executable, *cmd] if procs == 1 else [TORCHRUN, "--standalone", "--nproc_per_node", str(procs), *cmd]
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    # a tiny model, two steps: seconds of work. A hang costs this bound, and leaves no process behind.
    proc = _proc.run(argv, cwd=str(run_dir), env=env, timeout=TIMEOUT_S)
    assert proc.leftovers == [], f"processes outlived the run: {proc.leftovers}"
    if expect_ok:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _summary(run_dir):
    lines = [json.loads(x) for x in (run_dir / "out" / "metrics.jsonl").read_text().splitlines()]
    steps = [x for x in lines if "step" in x and not x.get("summary")]
    summary = [x for x in lines if x.get("summary")][-1]
    assert len(steps) >= 2
    for rec in steps:
        assert math.isfinite(rec["loss"]) and rec["tokens_per_s"] > 0 and rec["peak_memory_gib"] > 0
    assert summary["tokens_per_s"] > 0 and summary["peak_memory_gib"] > 0 and summary["memory_kind"] == "cpu-rss"
    return summary


# full fine-tuning only: a one-process LoRA run on chat data is test_lora_with_modules_to_save below (the same
# generate and train, plus the saved copies, and the same _summary); plain LoRA trains in one process in
# test_resume_continues_from_the_checkpoint and test_selective_checkpointing_trains[lora]
@pytest.mark.parametrize("method,data", [("full", "text")])
def test_single_process(run_cli, tiny_data, tmp_path, method, data):
    _generate(run_cli, tmp_path / "run", "tiny-llama", "--method", method)
    _train(tmp_path / "run", tiny_data / f"{data}.jsonl", tiny_data / "tok")
    s = _summary(tmp_path / "run")
    assert s["engine"] == "single" and s["world_size"] == 1


def test_lora_with_modules_to_save(run_cli, tiny_data, tmp_path):
    """--modules-to-save reaches PEFT: the generated run trains the embedding and output head copies too."""
    _generate(run_cli, tmp_path / "run", "tiny-llama", "--method", "lora", "--modules-to-save", "embed_tokens,lm_head")
    config = json.loads((tmp_path / "run" / "train_config.json").read_text())
    assert config["lora"]["modules_to_save"] == ["embed_tokens", "lm_head"]
    _train(tmp_path / "run", tiny_data / "chat.jsonl", tiny_data / "tok")
    from trainfit.api import estimate

    expected = estimate("tiny-llama", "a100-sxm4-80gb", method="lora", modules_to_save="embed_tokens,lm_head").split
    assert _summary(tmp_path / "run")["trainable_params"] == expected.trainable  # the copies train too


@pytest.mark.parametrize("engine_flags,method,engine", [
    (("--gpus", "2"), "lora", "ddp"),
    (("--gpus", "2"), "full", "ddp"),
    (("--gpus", "2", "--fsdp", "full_shard"), "full", "fsdp"),
    (("--gpus", "2", "--fsdp", "full_shard"), "lora", "fsdp"),
    (("--gpus", "2", "--zero", "2"), "full", "deepspeed"),
])
def test_two_processes_gloo(run_cli, tiny_data, tmp_path, engine_flags, method, engine):
    _generate(run_cli, tmp_path / "run", "tiny-llama", "--method", method, *engine_flags)
    _train(tmp_path / "run", tiny_data / "text.jsonl", tiny_data / "tok", 2)
    s = _summary(tmp_path / "run")
    assert s["engine"] == engine and s["world_size"] == 2
    assert s["parameters"] == ("dtensor" if engine == "fsdp" else "plain")  # FSDP2 really sharded


@pytest.mark.parametrize("model,task,data,method", [("tiny-bert", "classification", "cls", "full"),
                                                    ("tiny-llama", "dpo", "dpo", "lora"),
                                                    ("tiny-llama", "pretrain", "text", "freeze")])
def test_other_tasks(run_cli, tiny_data, tmp_path, model, task, data, method):
    _generate(run_cli, tmp_path / "run", model, "--method", method, "--task", task)
    _train(tmp_path / "run", tiny_data / f"{data}.jsonl", tiny_data / "tok")
    _summary(tmp_path / "run")


def test_resume_continues_from_the_checkpoint(run_cli, tiny_data, tmp_path):
    _generate(run_cli, tmp_path / "run", "tiny-llama", "--method", "lora")
    _train(tmp_path / "run", tiny_data / "text.jsonl", tiny_data / "tok")
    _train(tmp_path / "run", tiny_data / "text.jsonl", tiny_data / "tok", 1, "--resume", "--max-steps", "3")
    lines = [json.loads(x) for x in (tmp_path / "run" / "out" / "metrics.jsonl").read_text().splitlines()]
    steps = [x["step"] for x in lines if "step" in x and not x.get("summary")]
    assert steps == [1, 2, 3]


def test_optimizer_in_backward_trains_and_resumes(run_cli, tiny_data, tmp_path):
    """--optimizer-in-backward reaches train.py: per-parameter optimizers stepped in backward, checkpointed and
    resumed like any other optimizer."""
    _generate(run_cli, tmp_path / "run", "tiny-llama", "--method", "full", "--grad-accum", "1",
              "--optimizer-in-backward")
    config = json.loads((tmp_path / "run" / "train_config.json").read_text())
    assert config["optimizer"]["in_backward"] is True
    _train(tmp_path / "run", tiny_data / "text.jsonl", tiny_data / "tok")
    _train(tmp_path / "run", tiny_data / "text.jsonl", tiny_data / "tok", 1, "--resume", "--max-steps", "3")
    lines = [json.loads(x) for x in (tmp_path / "run" / "out" / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines if "step" in x and not x.get("summary")] == [1, 2, 3]


def test_optimizer_in_backward_is_one_gpu_in_the_generated_setup(run_cli, tmp_path):
    code, _, err = run_cli("generate", "--model", "tiny-llama", "--gpu", "a100-sxm4-80gb", "--gpus", "2",
                           "--fsdp", "full_shard", "--grad-accum", "1", "--optimizer-in-backward",
                           "--out", str(tmp_path / "run"))
    assert code == 2 and "one GPU" in err


@pytest.mark.parametrize("case", ["missing", "columns", "qlora", "paged"])
def test_train_py_refuses_bad_input_before_training(run_cli, tiny_data, tmp_path, case):
    method = "qlora" if case == "qlora" else "lora"
    extra = ("--optimizer", "adamw-8bit", "--paged-optimizer") if case == "paged" else ()
    _generate(run_cli, tmp_path / "run", "tiny-llama", "--method", method, *extra)
    data = {"missing": tmp_path / "nope.jsonl", "columns": tiny_data / "dpo.jsonl", "qlora": tiny_data / "text.jsonl",
            "paged": tiny_data / "text.jsonl"}
    proc = _train(tmp_path / "run", data[case], tiny_data / "tok", expect_ok=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("train.py: error:")
    assert not (tmp_path / "run" / "out" / "metrics.jsonl").exists()


# LoRA only: full fine-tuning with selective checkpointing runs train.py's training loop in
# test_checkpointing_recomputes_what_the_estimate_assumes[selective] below (and counts what it recomputes); the
# generated file as a script is what every other test here runs
@pytest.mark.parametrize("method", ["lora"])
def test_selective_checkpointing_trains(run_cli, tiny_data, tmp_path, method):
    """--grad-ckpt selective reaches train.py and trains (the generated file, run as a script)."""
    _generate(run_cli, tmp_path / "run", "tiny-llama", "--method", method, "--grad-ckpt", "selective")
    assert json.loads((tmp_path / "run" / "train_config.json").read_text())["grad_ckpt"] == "selective"
    _train(tmp_path / "run", tiny_data / "text.jsonl", tiny_data / "tok")
    _summary(tmp_path / "run")


@pytest.mark.parametrize("ckpt", ["none", "selective", "full"])
def test_checkpointing_recomputes_what_the_estimate_assumes(run_cli, tiny_data, tmp_path, monkeypatch, ckpt):
    """train.py's training loop (run in-process) recomputes in backward what each checkpointing level says: none
    nothing; selective the attention core only — SDPA runs twice per block per micro-batch, the MLP once (Megatron's
    selective recompute, as the estimate and the trace assume); full whole blocks — both twice."""
    import torch
    from transformers.models.llama import modeling_llama

    from trainfit.train import runner

    _generate(run_cli, tmp_path / "run", "tiny-llama", "--method", "full", "--grad-ckpt", ckpt)
    cfg = json.loads((tmp_path / "run" / "train_config.json").read_text())
    args = runner.parse_args(["--config", str(tmp_path / "run" / "train_config.json"), "--data",
                              str(tiny_data / "text.jsonl"), "--tokenizer", str(tiny_data / "tok"), "--random-init",
                              "--max-steps", "1", "--device", "cpu", "--output-dir", str(tmp_path / "out")])
    calls = {"sdpa": 0, "mlp": 0}
    sdpa, mlp = torch.nn.functional.scaled_dot_product_attention, modeling_llama.LlamaMLP.forward

    def counted_sdpa(*a, **k):
        calls["sdpa"] += 1
        return sdpa(*a, **k)

    def counted_mlp(self, *a, **k):
        calls["mlp"] += 1
        return mlp(self, *a, **k)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counted_sdpa)
    monkeypatch.setattr(modeling_llama.LlamaMLP, "forward", counted_mlp)
    summary = runner.train(cfg, args)
    assert math.isfinite(summary["final_loss"])
    forwards = cfg["model"]["hf_config"]["num_hidden_layers"] * cfg["grad_accum"]  # one step
    assert calls == {"sdpa": forwards * (1 if ckpt == "none" else 2), "mlp": forwards * (2 if ckpt == "full" else 1)}
