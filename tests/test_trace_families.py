"""The analytic estimate agrees with the trace (the real transformers code under FakeTensorMode) for the families the
generic structure reader adds: MLA, MoE with shared experts and dense-first layers, sliding-window layers, a hybrid
with linear-attention layers, post-norm and LayerNorm/bias families.

Each model is transformers' default config for its type (the flagship dimensions) cut to a few blocks — enough to
hold every kind of block of its pattern — and traced at full depth. Tolerance 3% of the traced allocated peak (the
issue's bar); seen: within 2.0% for every case below (LoRA on attention, seq 512; full fine-tuning, seq 256).
"""

import warnings

import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from trainfit.api import estimate  # noqa: E402
from trainfit.catalog.generic import with_layers  # noqa: E402
from trainfit.catalog.models import spec_from_config  # noqa: E402
from trainfit.trace import compare_with_estimate  # noqa: E402

# model_type -> blocks kept (every block kind of the pattern inside) and what the family adds
FAMILIES = {
    "deepseek_v3": (4, "MLA + MoE with a shared expert, 3 dense-first layers"),
    "glm4_moe": (4, "MoE with a shared expert, 1 dense-first layer, partial RoPE"),
    "qwen3_moe": (4, "MoE, 128 experts top-8, q/k norms"),
    "ernie4_5_moe": (4, "MoE with shared experts, dense first layer"),
    "gpt_oss": (4, "MoE with biased experts, alternating sliding/full attention, eager attention only"),
    "gemma3_text": (6, "5 sliding-window layers to 1 global, 262K tied vocabulary, q/k norms"),
    "qwen3_next": (4, "hybrid: 3 gated-DeltaNet linear-attention layers to 1 full attention, MoE + shared expert"),
    "olmo2": (4, "post-norm blocks, q/k norm over all heads"),
    "starcoder2": (4, "LayerNorm with bias, biased two-matrix MLP, tied embeddings"),
    "opt": (4, "learned positions, LayerNorm, tied embeddings"),
}


def _spec(model_type, layers):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = transformers.AutoConfig.for_model(model_type).to_dict()
    return spec_from_config(with_layers(cfg, layers), name=f"{model_type}-cut{layers}")


def _difference(spec, **workload):
    est = estimate(spec, "h100-sxm", **workload)
    doc = compare_with_estimate(est, full=True)
    return doc["difference"]["percent"], doc


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_lora_on_attention_agrees_with_the_trace(model_type):
    spec = _spec(model_type, FAMILIES[model_type][0])
    percent, doc = _difference(spec, method="lora", lora_targets="q_proj,k_proj,v_proj,o_proj", seq_len=512)
    assert abs(percent) <= 3.0, doc


FULL = ["deepseek_v3", "glm4_moe", "qwen3_moe", "ernie4_5_moe", "gpt_oss", "gemma3_text", "olmo2", "starcoder2", "opt"]


@pytest.mark.parametrize("model_type", FULL)
def test_full_fine_tuning_agrees_with_the_trace(model_type):
    spec = _spec(model_type, FAMILIES[model_type][0])
    percent, doc = _difference(spec, method="full", seq_len=256)
    assert abs(percent) <= 3.0, doc
