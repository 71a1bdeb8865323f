"""Oracle: trainfit's parameter counts equal the Hugging Face model built on the meta device, for every preset,
and LoRA's trainable counts equal PEFT's."""

import copy
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from trainfit.api import training_spec  # noqa: E402
from trainfit.catalog import all_models  # noqa: E402
from trainfit.estimate.params import count_params  # noqa: E402
from trainfit.estimate.trainable import split_params  # noqa: E402

# Remote-code models (not in transformers): built as the equivalent native architecture (see each preset's note).
EQUIVALENT = {
    "chatglm3-6b": lambda s: dict(model_type="qwen2", hidden_size=s.hidden, intermediate_size=s.intermediate,
                                  num_hidden_layers=s.layers, num_attention_heads=s.heads,
                                  num_key_value_heads=s.kv_heads, vocab_size=s.vocab, tie_word_embeddings=False),
    "baichuan2-7b": lambda s: dict(model_type="llama", hidden_size=s.hidden, intermediate_size=s.intermediate,
                                   num_hidden_layers=s.layers, num_attention_heads=s.heads,
                                   num_key_value_heads=s.kv_heads, vocab_size=s.vocab, tie_word_embeddings=False),
}


def _hf_config(name):
    preset = all_models()[name]
    spec = preset.spec()
    # a deep copy: transformers standardises nested rope_scaling / rope_parameters in place (the preset would change)
    cfg = EQUIVALENT[name](spec) if name in EQUIVALENT else copy.deepcopy(preset.hf_config)
    if isinstance(cfg.get("text_config"), dict):  # multimodal (Gemma 4, Llama 4, Qwen3.5): the text model is counted
        cfg = cfg["text_config"]
    cfg.pop("architectures", None)
    return transformers.AutoConfig.for_model(**cfg), spec


def _meta_count(cls, cfg):
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        return cls.from_config(cfg).num_parameters()


@pytest.mark.parametrize("name", sorted(all_models()))
def test_param_count_equals_hf_meta_model(name):
    cfg, spec = _hf_config(name)
    head, cls = ("none", transformers.AutoModel) if spec.is_encoder else ("lm", transformers.AutoModelForCausalLM)
    ours = count_params(spec, head)
    assert ours == _meta_count(cls, cfg)
    assert ours == all_models()[name].params  # the count written in the preset file


@pytest.mark.parametrize("name", ["llama-2-7b", "qwen2-7b", "gpt2", "bert-base-uncased", "roberta-base", "gemma-2b"])
def test_param_count_with_task_heads(name):
    cfg, spec = _hf_config(name)
    assert count_params(spec, "classification") == _meta_count(transformers.AutoModelForSequenceClassification, cfg)
    if spec.is_encoder:
        assert count_params(spec, "mlm") == _meta_count(transformers.AutoModelForMaskedLM, cfg)


def test_published_counts():
    """Counts published by the model authors (Llama 2: 6.74B; Qwen2-7B: 7.62B; Llama 3: 8.03B)."""
    models = all_models()
    assert count_params(models["llama-2-7b"].spec()) == 6_738_415_616
    assert count_params(models["qwen2-7b"].spec()) == 7_615_616_512
    assert count_params(models["llama-3-8b"].spec()) == 8_030_261_248
    assert count_params(models["chatglm3-6b"].spec()) == 6_243_584_000


LORA_CASES = [
    ("llama-2-7b", "all-linear", "sft"),
    ("llama-2-7b", "q_proj,v_proj", "sft"),
    ("llama-2-7b", "q_proj,v_proj,lm_head", "sft"),  # a LoRA adapter on the output head (LitGPT's lora_head)
    ("gemma-2b", "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj,lm_head,embed_tokens", "sft"),  # tied
    ("qwen2-7b", "all-linear", "sft"),
    ("gpt2", "all-linear", "sft"),
    ("gpt2", "c_attn", "sft"),
    ("mixtral-8x7b", "all-linear", "sft"),
    ("gemma-2b", "all-linear", "sft"),
    ("bert-base-uncased", "query,value", "classification"),
    ("bert-base-uncased", "all-linear", "classification"),
    ("roberta-base", "all-linear", "classification"),
    ("qwen2-7b", "all-linear", "classification"),
]


@pytest.mark.parametrize("name,targets,task", LORA_CASES)
def test_lora_trainable_equals_peft(name, targets, task):
    peft = pytest.importorskip("peft")
    cfg, spec = _hf_config(name)
    cls = transformers.AutoModelForSequenceClassification if task == "classification" else \
        transformers.AutoModelForCausalLM
    target_modules = targets if targets == "all-linear" else targets.split(",")
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        model = peft.get_peft_model(cls.from_config(cfg), peft.LoraConfig(
            r=16, target_modules=target_modules, task_type="SEQ_CLS" if task == "classification" else "CAUSAL_LM"))
    expected = sum(p.numel() for p in model.parameters() if p.requires_grad)
    t = training_spec("lora", task, lora_targets=targets, lora_rank=16, model=spec)
    assert split_params(spec, t).trainable == expected


@pytest.mark.parametrize("name", ["llama-2-7b", "qwen2-7b", "gemma-2b"])
def test_lora_modules_to_save_equals_peft(name):
    """LoRA with the embedding and output head trained in full (PEFT modules_to_save, Qwen's 'LoRA (emb)'): PEFT
    trains a copy in the base model's dtype and keeps the original frozen; trainfit's split and the memory model's
    16-bit copy rest on both facts."""
    peft = pytest.importorskip("peft")
    cfg, spec = _hf_config(name)
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        base = transformers.AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
        model = peft.get_peft_model(base, peft.LoraConfig(r=16, target_modules="all-linear",
                                                          modules_to_save=["embed_tokens", "lm_head"]))
    params = dict(model.named_parameters())
    copies = {k: p for k, p in params.items() if ".modules_to_save." in k}
    assert copies and all(p.dtype == torch.bfloat16 and p.requires_grad for p in copies.values())
    assert all(p.dtype == torch.float32 for k, p in params.items() if "lora_" in k)
    t = training_spec("lora", "sft", lora_targets="all-linear", lora_rank=16, model=spec,
                      modules_to_save="embed_tokens,lm_head")
    split = split_params(spec, t)
    assert split.trainable == sum(p.numel() for p in params.values() if p.requires_grad)
    assert split.saved == sum(p.numel() for p in copies.values())
    assert split.all_params == sum(p.numel() for p in params.values())


@pytest.mark.parametrize("name", ["llama-2-7b", "qwen2-7b", "gemma-2b"])
def test_qlora_fp32_upcast_covers_what_peft_casts(name):
    """PEFT's prepare_model_for_kbit_training casts every 16-bit parameter that is not 4-bit to fp32. On a 16-bit
    model where only the blocks' Linear weights would be 4-bit, the parameters it casts are exactly trainfit's
    non-quantized frozen count (total - quantized), which the QLoRA memory model stores at 4 bytes."""
    peft = pytest.importorskip("peft")
    cfg, spec = _hf_config(name)
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        model = transformers.AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
        model = peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    block_linear = {id(m.weight) for n, m in model.named_modules()
                    if isinstance(m, torch.nn.Linear) and ".layers." in n and n.split(".")[-1] != "lm_head"}
    cast = sum(p.numel() for p in model.parameters() if p.dtype == torch.float32 and id(p) not in block_linear)
    t = training_spec("qlora", "sft", lora_rank=16, model=spec)
    split = split_params(spec, t)
    assert cast == split.total - split.quantized
    from trainfit.api import estimate

    est = estimate(spec, "a100-sxm4-80gb", method="qlora", seq_len=512)
    assert est.memory.detail["weights/frozen_fp32_upcast"] == pytest.approx(4.0 * cast)
