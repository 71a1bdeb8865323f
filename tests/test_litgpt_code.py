"""The LitGPT code path of the memory model (TrainingSpec.model_code "litgpt", frameworks.yaml) against LitGPT itself:
litgpt 0.4.13's model, LoRA layers, chunked loss and finetune loop traced under FakeTensorMode (tests/litgpt_step.py)
on small models of three layouts (Llama: GQA, RMSNorm, gated MLP; Falcon: multi-query, one LayerNorm, parallel
block; Gemma: tied embeddings that LitGPT unties, GeGLU), LoRA / QLoRA / full. The analytic estimate must be within
TOLERANCE of the traced allocated peak for each; the same estimate with transformers' code path (model_code hf) must
not be, so each case checks something the LitGPT path models.

make test installs LitGPT and Lightning into .venv/litgpt (no dependencies: they import with the suite's torch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainfit.catalog.efficiency import load_efficiencies
from trainfit.validate import predict_case

ROOT = Path(__file__).resolve().parents[1]
LITGPT = ROOT / os.environ.get("TRAINFIT_TEST_VENV", ".venv") / "litgpt"  # make test-latest: .venv-latest
TOLERANCE = 0.03

LLAMA_HF = {"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 2, "num_attention_heads": 8,
            "num_key_value_heads": 2, "intermediate_size": 1376, "vocab_size": 8000, "hidden_act": "silu",
            "tie_word_embeddings": False}
LLAMA_LIT = dict(name="tiny-llama-like", block_size=1024, vocab_size=8000, padded_vocab_size=8000, n_layer=2, n_head=8,
                 n_embd=512, n_query_groups=2, head_size=64, rotary_percentage=1.0, parallel_residual=False,
                 bias=False, norm_class_name="RMSNorm", mlp_class_name="LLaMAMLP", intermediate_size=1376)
FALCON_HF = {"model_type": "falcon", "hidden_size": 512, "num_hidden_layers": 2, "num_attention_heads": 8,
             "num_key_value_heads": 1, "intermediate_size": 2048, "vocab_size": 8000, "hidden_act": "gelu",
             "tie_word_embeddings": False}
FALCON_LIT = dict(name="tiny-falcon-like", block_size=1024, vocab_size=8000, padded_vocab_size=8000, n_layer=2,
                  n_head=8, n_embd=512, n_query_groups=1, head_size=64, rotary_percentage=1.0, parallel_residual=True,
                  shared_attention_norm=True, bias=False, norm_class_name="LayerNorm", mlp_class_name="GptNeoxMLP",
                  intermediate_size=2048)
GEMMA_HF = {"model_type": "gemma", "hidden_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 1, "head_dim": 128, "intermediate_size": 2048, "vocab_size": 16000,
            "hidden_act": "gelu_pytorch_tanh", "tie_word_embeddings": True}
GEMMA_LIT = dict(name="tiny-gemma-like", block_size=1024, vocab_size=16000, padded_vocab_size=16000, n_layer=2,
                 n_head=4, n_embd=512, n_query_groups=1, head_size=128, rotary_percentage=1.0, parallel_residual=False,
                 bias=False, norm_class_name="RMSNorm", mlp_class_name="GemmaMLP", gelu_approximate="tanh",
                 intermediate_size=2048, scale_embeddings=True)

QV = ("q_proj", "v_proj")
ALL_GATED = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")


def _lora_kwargs(targets: tuple[str, ...]) -> dict:
    t = set(targets)
    return dict(lora_r=8, lora_alpha=16, lora_dropout=0.05, lora_query="q_proj" in t, lora_key="k_proj" in t,
                lora_value="v_proj" in t, lora_projection="o_proj" in t,
                lora_mlp=bool(t & {"gate_proj", "up_proj", "down_proj"}), lora_head="lm_head" in t)


# (id, hf config, litgpt config, method, lora targets, micro-batch, sequence length)
CASES = [
    ("llama-lora-qv", LLAMA_HF, LLAMA_LIT, "lora", QV, 2, 256),
    ("llama-lora-all-head", LLAMA_HF, LLAMA_LIT, "lora", ALL_GATED, 2, 256),
    ("llama-qlora-qv", LLAMA_HF, LLAMA_LIT, "qlora", QV, 2, 256),
    ("llama-full-mb2", LLAMA_HF, LLAMA_LIT, "full", (), 2, 256),
    ("falcon-lora-qv", FALCON_HF, FALCON_LIT, "lora", QV, 1, 512),
    ("falcon-qlora-qv", FALCON_HF, FALCON_LIT, "qlora", QV, 1, 512),
    ("gemma-lora-all-head", GEMMA_HF, GEMMA_LIT, "lora", ALL_GATED, 2, 256),
    ("gemma-qlora-all-head", GEMMA_HF, GEMMA_LIT, "qlora", ALL_GATED, 2, 256),
]


def _case(cid: str, hf: dict, method: str, targets: tuple[str, ...], mb: int, seq: int) -> dict:
    return {"id": cid, "source": "test", "model": {"name": cid, "hf_config": hf},
            "hardware": {"gpu": "a100-80g", "num_gpus": 1, "gpus_per_node": 1},
            "training": {"method": method, "lora_rank": 8 if targets else None, "lora_targets": list(targets) or None,
                         "precision": "bf16", "optimizer": "adamw", "seq_len": seq, "micro_batch": mb,
                         "grad_accum": 1, "grad_ckpt": "none", "attention": "sdpa", "fixed_length": True,
                         "framework": "litgpt"},
            "parallel": {"dp": 1, "tp": 1, "pp": 1}, "measured": {}}


def _analytic(case: dict, model_code: str | None = None) -> float:
    # the memory model alone: no per-framework calibration factor
    eff = load_efficiencies(overrides={"framework_activation_factor": 1.0, "framework_logits_factor": 1.0})
    est = predict_case(case, eff)
    if model_code is not None:
        from trainfit.estimate.core import run_estimate

        est = run_estimate(est.model, est.training.with_(model_code=model_code), est.strategy, est.cluster, eff)
    return est.memory.allocated


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> dict[str, float]:
    if not (LITGPT / "litgpt").is_dir():
        pytest.skip("LitGPT is not installed in .venv/litgpt (make test installs it)")
    spec = [{"id": cid, "config": {**lit, **(_lora_kwargs(targets) if method != "full" else {})}, "method": method,
             "micro_batch": mb, "seq_len": seq} for cid, _, lit, method, targets, mb, seq in CASES]
    path = tmp_path_factory.mktemp("litgpt") / "cases.json"
    path.write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(LITGPT), str(ROOT / "src")])}
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "litgpt_step.py"), str(path)], capture_output=True,
                         text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return {d["id"]: d["traced_bytes"] for d in map(json.loads, out.stdout.splitlines())}


@pytest.mark.parametrize("cid,hf,lit,method,targets,mb,seq", CASES, ids=[c[0] for c in CASES])
def test_litgpt_path_matches_litgpt_traced(traced, cid, hf, lit, method, targets, mb, seq) -> None:
    case = _case(cid, hf, method, targets, mb, seq)
    predicted, truth = _analytic(case), traced[cid]
    assert abs(predicted / truth - 1) <= TOLERANCE, f"{cid}: analytic {predicted / 2**20:.1f} MiB, traced " \
                                                    f"{truth / 2**20:.1f} MiB ({predicted / truth - 1:+.1%})"
    # transformers' code path for the same job is off: the LitGPT path is what matches
    hf_path = _analytic(case, "hf")
    assert abs(hf_path / truth - 1) > TOLERANCE, f"{cid}: the hf path is within {TOLERANCE:.0%} too"
