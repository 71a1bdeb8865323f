"""The analytic estimate agrees with the trace (the real transformers code under FakeTensorMode) for the families the
generic structure reader adds: MLA, MoE with shared experts and dense-first layers, sliding-window layers, a hybrid
with linear-attention layers, post-norm and LayerNorm/bias families.

Each model is transformers' default config for its type (the flagship dimensions) cut to a few blocks — enough to
hold every kind of block of its pattern — and traced at full depth. Tolerance 3% of the traced allocated peak (the
issue's bar); seen: within 2.0% for every case below (LoRA on attention, seq 512; full fine-tuning, seq 256).

The MLA / MoE cases at longer sequences pin three mechanisms the trace showed: MLA keeps kv_b_proj's whole output
(values are a view of it) and a GPU runs SDPA's memory-efficient kernel for its unequal head dims (the trace now does
too; the CPU's math fallback kept s x s probabilities); dense-first layers and shared experts have their own MLP
widths (per block group, not the mean block); LoRA on fused experts keeps the experts' matmul inputs and, in the top
block's backward, a full-size 16-bit gradient of the merged expert weight. And the lowest block of LoRA without an
adapter before attention saves no attention tensors.
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
    print(f"\n{model_type} LoRA q,k,v,o seq 512: analytic - trace {percent:+.2f}%")
    assert abs(percent) <= 3.0, doc


FULL = ["deepseek_v3", "glm4_moe", "qwen3_moe", "ernie4_5_moe", "gpt_oss", "gemma3_text", "olmo2", "starcoder2", "opt"]


@pytest.mark.parametrize("model_type", FULL)
def test_full_fine_tuning_agrees_with_the_trace(model_type):
    spec = _spec(model_type, FAMILIES[model_type][0])
    percent, doc = _difference(spec, method="full", seq_len=256)
    print(f"\n{model_type} full seq 256: analytic - trace {percent:+.2f}%")
    assert abs(percent) <= 3.0, doc


# (model_type, blocks, LoRA targets, seq): MLA with LoRA on o_proj only / on the MLA projections; LoRA on fused
# experts (merged weights) with and without dense-first layers and shared experts. Seen before the terms above:
# -14.1%, +1.3%, -2.0%, -9.1%; after: +0.06%, +0.06%, +0.04%, -0.47% (seq as listed).
MLA_MOE_LORA = [
    ("deepseek_v3", 4, "q_proj,k_proj,v_proj,o_proj", 2048),
    ("deepseek_v3", 4, "q_a_proj,q_b_proj,kv_a_proj_with_mqa,kv_b_proj,o_proj", 2048),
    ("qwen3_moe", 4, "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj", 2048),
    ("deepseek_v3", 4, "all-linear", 1024),
]


@pytest.mark.parametrize("model_type,layers,targets,seq", MLA_MOE_LORA)
def test_mla_and_moe_lora_agree_with_the_trace(model_type, layers, targets, seq):
    spec = _spec(model_type, layers)
    percent, doc = _difference(spec, method="lora", lora_targets=targets, seq_len=seq)
    print(f"\n{model_type} LoRA {targets} seq {seq}: analytic - trace {percent:+.2f}%")
    assert abs(percent) <= 3.0, doc


def test_deepseek_v2_lite_preset_lora_agrees_with_the_trace():
    """The shipped DeepSeek-V2-Lite (MLA without q compression, 1 dense-first layer, 2 shared experts), cut to 3."""
    from trainfit.catalog import all_models

    spec = spec_from_config(with_layers(all_models()["deepseek-v2-lite"].hf_config, 3), name="deepseek-v2-lite-cut3")
    percent, doc = _difference(spec, method="lora", lora_targets="q_proj,kv_a_proj_with_mqa,kv_b_proj,o_proj",
                               seq_len=2048)
    print(f"\ndeepseek-v2-lite cut 3 LoRA seq 2048: analytic - trace {percent:+.2f}%")
    assert abs(percent) <= 3.0, doc


def test_moe_lora_with_full_checkpointing_agrees_with_the_trace():
    """LoRA on fused experts under full activation checkpointing: a checkpointed block saves no merged expert copy
    (it lives while the block runs or is recomputed), and the bottom block's backward meets the merged weight's
    gradient. Seen: +50.1% before (merged copies counted for every block), +0.12% after (seq 1024)."""
    spec = _spec("qwen3_moe", 4)
    percent, doc = _difference(spec, method="lora", lora_targets="all-linear", seq_len=1024, grad_ckpt="full")
    print(f"\nqwen3_moe LoRA all-linear full checkpointing seq 1024: analytic - trace {percent:+.2f}%")
    assert abs(percent) <= 3.0, doc
