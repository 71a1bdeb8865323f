"""Liger kernels (TrainingSpec.liger_kernel, `--liger-kernel`): the fused linear cross-entropy's memory as its code
allocates it (estimate/memory_liger.py), the published run that needs it, and the generated setup that runs it."""

import json
import os

import pytest

import trainfit
from trainfit.estimate.memory_liger import chunk_rows
from trainfit.validate import load_cases, validate
from trainfit.catalog.efficiency import Efficiencies

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
H20_CASE = "swift-h20x4-qwen2.5-7b-full-zero3-liger-fa2-packed16k-mb1-ga4"


def test_chunk_rows_follow_liger_code():
    """Liger's own comment (ops/fused_linear_cross_entropy.py at v0.8.2): BT = 4096*4, V = 32000, H = 4096 ==>
    inc_factor = 8, chunk_size = 2048; a power of two otherwise, never above the tokens in use."""
    assert chunk_rows(4096 * 4, 32000, 4096) == 2048
    assert chunk_rows(16384, 152064, 3584) == 512  # ceil(16384 / 43) = 382 -> 512
    assert chunk_rows(100, 32000, 4096) == 16  # ceil(100 / 8) = 13 -> 16
    assert chunk_rows(3, 32000, 4096) == 1


def _est(**job):
    base = dict(method="full", seq_len=8192, grad_ckpt="full")
    return trainfit.estimate("qwen2.5-0.5b", "a100-sxm4-80gb", **{**base, **job})


def _logits(est) -> dict:
    return {k: v for k, v in est.memory.detail.items() if k.startswith("logits/")}


def test_no_vocabulary_sized_logits_with_liger():
    plain, liger = _est(), _est(liger_kernel=True)
    assert any(k in _logits(plain) for k in ("logits/loss_buffers", "logits/forward_buffers"))
    assert not any(k in _logits(liger) for k in ("logits/loss_buffers", "logits/forward_buffers", "logits/grad"))
    assert liger.memory.device < plain.memory.device - 4 * 2 ** 30  # 8K tokens x 151,936 x 12 B of fp32 buffers


def test_liger_holds_its_gradients_from_the_forward():
    """Full fine-tuning: the head's gradient (V x H) and the hidden states' (tokens x H) exist from the loss's forward
    on; LoRA: the head does not train, only the hidden states' gradient."""
    m = trainfit.estimate("qwen2.5-0.5b", "a100-sxm4-80gb", method="full").model
    full = _est(liger_kernel=True, gpus=4, zero=3)  # DeepSpeed: a 16-bit gathered head, a 16-bit gradient
    phase = {p.name: p for p in full.memory.phases}["forward_end"]
    items = {k: v for c in phase.components for k, v in c.items()}
    assert items["logits/liger_grad_weight"] == 2 * m.vocab * m.hidden
    assert items["logits/liger_grad_input"] == 2 * 8192 * m.hidden
    # the 16-bit gradient accumulates through torch.mm(...).float(): a 16-bit and an fp32 V x H temporary
    assert items["logits/liger_chunk_temporary"] == 6 * m.vocab * m.hidden
    lora = _est(liger_kernel=True, method="lora")  # what the loss keeps for the backward: the hidden states' gradient
    items = {k: v for p in lora.memory.phases if p.name == "backward_start" for c in p.components for k, v in c.items()}
    assert items["logits/liger_grad_weight"] == 0.0 and items["logits/liger_grad_input"] > 0


def test_fp32_gradient_accumulates_in_place_under_bf16():
    """fp32 weights under bf16 autocast (one GPU): addmm(out_dtype=float32, out=grad_weight), no V x H temporary."""
    est = _est(liger_kernel=True)
    items = {k: v for p in est.memory.phases if p.name == "forward_end" for c in p.components for k, v in c.items()}
    assert items["logits/liger_grad_weight"] == 4 * est.model.vocab * est.model.hidden
    assert items["logits/liger_chunk_temporary"] < est.model.vocab * est.model.hidden


@pytest.mark.parametrize("job", [dict(task="dpo", method="lora", seq_len=1024), dict(task="classification")])
def test_dpo_and_classification_keep_their_own_loss(job):
    """TRL's DPO computes its loss from the logits (Liger's lce_forward returns them without labels); a classifier
    has no language-model head."""
    model = "bert-base-uncased" if job.get("task") == "classification" else "qwen2.5-0.5b"
    kw = dict(job, seq_len=job.get("seq_len", 512))
    a = trainfit.estimate(model, "a100-sxm4-80gb", **kw)
    b = trainfit.estimate(model, "a100-sxm4-80gb", liger_kernel=True, **kw)
    assert a.memory.device == b.memory.device


def test_published_liger_run_predicted():
    """ms-swift's examples/train/flash_attention_3/transformers.sh (4 x H20, Qwen2.5-7B, ZeRO-3, 16K packed,
    --use_liger_kernel true): '4 * 43GiB' (stacks_sources.md). 64.7% over without the fused loss, 5.6% with it."""
    cases = [c for c in load_cases([os.path.join(ROOT, "data/validation/stacks_dev.jsonl")]) if c["id"] == H20_CASE]
    assert len(cases) == 1 and "Liger kernel ON" in cases[0]["notes"]
    row = validate(cases, Efficiencies.default()).to_dict()["rows"][0]
    assert "liger_kernel" in row["from_notes"]
    assert row["error"]["memory"] <= 0.06
    without = dict(cases[0], notes=cases[0]["notes"].replace("Liger kernel ON", "Liger kernel"))
    assert validate([without], Efficiencies.default()).to_dict()["rows"][0]["error"]["memory"] > 0.4


def test_generated_setup_applies_liger(tmp_path, run_cli):
    out = tmp_path / "setup"
    code, _, err = run_cli("generate", "--model", "qwen2.5-0.5b", "--gpu", "a10", "--method", "full",
                           "--liger-kernel", "--out", str(out))
    assert code == 0, err
    assert json.loads((out / "train_config.json").read_text())["liger_kernel"] is True
    assert "liger-kernel" in (out / "requirements.txt").read_text()
    assert "_apply_liger_kernel_to_instance(model=model)" in (out / "train_model.py").read_text()
    code, _, err = run_cli("generate", "--model", "qwen2.5-0.5b", "--gpu", "a10", "--method", "full",
                           "--out", str(tmp_path / "plain"))
    assert code == 0 and "liger" not in (tmp_path / "plain" / "requirements.txt").read_text()
