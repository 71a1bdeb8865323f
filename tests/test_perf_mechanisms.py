"""Time-model mechanisms found from the leave-one-source-out throughput error (issue 13): FlashAttention in Triton
(llm-foundry's attn_impl='triton'), a GPTQ int4 base's unpacking in torch ops (the Qwen README's Q-LoRA), and the
kernel launches of optimizers that loop over the parameters in Python (Adafactor, for-loop AdamW), hidden behind the
last backward except under fp16 loss scaling."""

from dataclasses import replace
from pathlib import Path

import pytest

from trainfit.catalog import get_gpu, resolve_model
from trainfit.catalog.efficiency import Efficiencies
from trainfit.estimate.activations import Regime
from trainfit.estimate.core import run_estimate
from trainfit.estimate.params import layer_linears
from trainfit.estimate.perf import (ADAFACTOR_KERNELS, FORLOOP_ADAMW_KERNELS, GPTQ_UNPACK_BYTES_PER_PARAM,
                                    _backward_multiplier, _block_times, optimizer_launches)
from trainfit.estimate.trainable import split_params
from trainfit.spec.cluster import cluster_for
from trainfit.spec.training import (Attention, GradCkpt, Method, Optimizer, OptimizerImpl, Precision, Strategy,
                                    TrainingSpec)
from trainfit.validate import Skip, load_cases, predict_case, validate

DEV = str(Path(__file__).resolve().parents[1] / "data" / "validation" / "published_dev.jsonl")
EFF = Efficiencies.default()
GPU = get_gpu("a100-sxm4-80gb")


@pytest.fixture(scope="module")
def dev_cases():
    return load_cases([DEV])


def _est(model, t, gpu=GPU):
    return run_estimate(resolve_model(model), t, Strategy(), cluster_for(gpu, 1, 1, None, None), EFF)


def _ops(model, t):
    m = resolve_model(model)
    return _block_times(m, t, split_params(m, t), GPU, EFF, Regime(2, 2, False))


# ---- FlashAttention in Triton ------------------------------------------------------------------------------------

def test_triton_attention_is_slower_by_the_published_factors():
    """Forward by triton_attention_forward_slowdown, backward by _backward_slowdown (FlashAttention-2 paper 4.1);
    nothing else in the block moves."""
    t = TrainingSpec(seq_len=4096, attention=Attention.FLASH)
    tri = replace(t, triton_attention=True)
    view = EFF.shared_view(GPU)
    a, b = _ops("llama-2-7b", t), _ops("llama-2-7b", tri)
    fwd = view("triton_attention_forward_slowdown")
    bwd = view("triton_attention_backward_slowdown")
    assert fwd > 1 and bwd > 1
    assert b["attention/core"][0] == pytest.approx(a["attention/core"][0] * fwd)
    back = (b["attention/core"][0] * _backward_multiplier("attention/core", True, tri, view)
            / (a["attention/core"][0] * _backward_multiplier("attention/core", True, t, view)))
    assert back == pytest.approx(bwd)
    assert {k: v for k, v in a.items() if k != "attention/core"} == {k: v for k, v in b.items()
                                                                    if k != "attention/core"}
    assert _est("llama-2-7b", tri).step_time_s > _est("llama-2-7b", t).step_time_s


def test_triton_attention_is_read_from_the_llm_foundry_notes(dev_cases):
    """Every llm-foundry case states 'triton flash-attention kernel' (submit_benchmarks.py's default attn_impl);
    no other case is read as Triton."""
    seen = 0
    for case in dev_cases:
        try:
            t = predict_case(case, EFF).training
        except Skip:
            continue
        seen += 1
        assert t.triton_attention == ("triton flash-attention kernel" in (case.get("notes") or ""))
        assert t.triton_attention == case["id"].startswith("llmfoundry")
    assert seen > 200


# ---- GPTQ int4 base ----------------------------------------------------------------------------------------------

def test_gptq_unpacking_costs_its_counted_bytes_and_no_backward_pass():
    t = TrainingSpec(method=Method.QLORA, seq_len=512, grad_ckpt=GradCkpt.FULL)
    g = replace(t, gptq_base=True)
    m = resolve_model("qwen2-7b")
    weights = sum(lin.in_features * lin.out_features * lin.count * lin.share for lin in layer_linears(m))
    view = EFF.shared_view(GPU)
    seconds = weights * GPTQ_UNPACK_BYTES_PER_PARAM / (GPU.memory_bandwidth * view("memory_bandwidth_efficiency"))
    assert _ops("qwen2-7b", g)["qlora/dequantize"][0] == pytest.approx(seconds)
    assert _backward_multiplier("qlora/dequantize", False, g, view) == 0.0
    assert _backward_multiplier("qlora/dequantize", False, t, view) == 1.0
    assert _est("qwen2-7b", g).step_time_s > _est("qwen2-7b", t).step_time_s


def test_qwen_q_lora_cases_run_on_a_gptq_base(dev_cases):
    qlora = [c for c in dev_cases if c["id"].startswith("qwen1-readme") and c["training"]["method"] == "qlora"]
    assert qlora and all(predict_case(c, EFF).training.gptq_base for c in qlora)


# ---- optimizer launches ------------------------------------------------------------------------------------------

def _bert_tensors(m):
    """BERT-large for classification, counted by hand: per layer q, k, v, o, intermediate, output (weight + bias
    each) and two LayerNorms (weight + bias each); word, position and token-type embeddings and their LayerNorm
    (weight + bias); pooler and classifier (weight + bias each)."""
    matrices = 6 * m.layers + 3 + 2
    vectors = (6 + 4) * m.layers + 2 + 2
    return matrices, vectors


def test_optimizer_launches_count_the_tensors():
    from trainfit.spec.training import Task

    m = resolve_model("bert-large-uncased")
    matrices, vectors = _bert_tensors(m)
    full = TrainingSpec(task=Task.CLASSIFICATION, seq_len=512)
    split = split_params(m, full)
    ada = replace(full, optimizer=Optimizer.ADAFACTOR)
    assert optimizer_launches(m, ada, split) == matrices * ADAFACTOR_KERNELS[0] + vectors * ADAFACTOR_KERNELS[1]
    loop = replace(full, optimizer_impl=OptimizerImpl.FORLOOP)
    assert optimizer_launches(m, loop, split) == (matrices + vectors) * FORLOOP_ADAMW_KERNELS
    assert optimizer_launches(m, full, split) == 0  # fused
    assert optimizer_launches(m, replace(full, optimizer_impl=OptimizerImpl.FOREACH), split) == 0


def test_launches_hide_behind_the_backward_except_under_fp16_loss_scaling():
    """A compute-bound step hides the for-loop optimizer's launches behind its last backward; fp16's GradScaler
    reads found_inf first, so there they add in full."""
    from trainfit.spec.training import Task

    base = TrainingSpec(task=Task.CLASSIFICATION, seq_len=512, micro_batch=8, optimizer=Optimizer.ADAFACTOR,
                        precision=Precision.BF16)
    bf16 = _est("bert-large-uncased", base).time.parts["optimizer/step"]
    fp16 = _est("bert-large-uncased", replace(base, precision=Precision.FP16)).time.parts["optimizer/step"]
    m = resolve_model("bert-large-uncased")
    launches = optimizer_launches(m, base, split_params(m, base)) * EFF.shared_view(GPU)("op_overhead_s")
    assert fp16 == pytest.approx(launches)
    assert bf16 < fp16


def test_adamw_hf_notes_run_the_for_loop_adamw(dev_cases):
    hf = [c for c in dev_cases if "adamw_hf" in (c.get("notes") or "")]
    assert hf
    for case in hf:
        assert predict_case(case, EFF).training.optimizer_impl == OptimizerImpl.FORLOOP
        assert "forloop_optimizer" in validate([case], EFF).rows[0].from_notes
    other = next(c for c in dev_cases if c["id"] == "qwen1-readme-7b-lora-s512")
    assert predict_case(other, EFF).training.optimizer_impl == OptimizerImpl.FUSED


def test_gptq_unpacking_launches_in_forward_only():
    """Overhead-bound (a few tokens): the unpacking's kernels lengthen the forward, not the backward, which runs
    fewer launches than bitsandbytes' (it dequantizes again for the input gradient)."""
    from trainfit.estimate.perf import _micro_batch_time

    m = resolve_model("qwen2-7b")
    t = TrainingSpec(method=Method.QLORA, seq_len=16)
    g = replace(t, gptq_base=True)
    r = Regime(2, 2, False)
    bnb = _micro_batch_time(m, t, split_params(m, t), GPU, EFF, r)
    gptq = _micro_batch_time(m, g, split_params(m, g), GPU, EFF, r)
    assert dict(gptq.bound)["overhead"] > 0
    assert gptq.forward > bnb.forward
    assert gptq.backward < bnb.backward
