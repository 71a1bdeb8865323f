"""Oracle: the analytic per-block activation bytes equal what autograd really saves.

Tiny Hugging Face models (random weights, CPU) run one forward pass; we walk the autograd graph and add up the
distinct storages saved for backward that are not parameters. One block's share is the difference between a 2-block
and a 1-block model. Tolerance 1% (the only unmodelled items are a few bytes of RoPE tables and scalars).
"""

import copy
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from trainfit.estimate.activations import Regime, Trainable, block_saved  # noqa: E402
from trainfit.estimate.trainable import ALL_ROLES, lora_roles  # noqa: E402
from trainfit.spec.model import ModelSpec  # noqa: E402
from trainfit.spec.training import Attention  # noqa: E402

B, S = 2, 64
LLAMA = dict(model_type="llama", hidden_size=256, intermediate_size=688, num_attention_heads=8,
             num_key_value_heads=8, vocab_size=1000, tie_word_embeddings=False)


def _is_dropout_mask(t) -> bool:
    """The CPU's dropout keeps its mask as a float tensor of 0 and 1/(1-p); CUDA's native_dropout keeps a bool."""
    if t.grad_fn is not None or t.requires_grad or not t.is_floating_point() or t.numel() < 2:
        return False
    top = float(t.max())
    return top > 1.0 and bool(torch.all((t == 0) | (t == top)))


def saved_bytes(loss, model, autocast_weights=False, cuda_masks=False):
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    shapes = {tuple(p.shape) for p in model.parameters() if p.dim() == 2}
    seen, stack, visited = {}, [loss.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in visited:
            continue
        visited.add(node)
        for attr in dir(node) + ["saved_tensors"]:  # saved_tensors: a custom autograd.Function's saves
            if not attr.startswith("_saved_") and attr != "saved_tensors":
                continue
            try:
                value = getattr(node, attr)
            except Exception:  # noqa: BLE001 - some saved slots raise once freed
                continue
            for t in value if isinstance(value, (tuple, list)) else [value]:
                if not isinstance(t, torch.Tensor):
                    continue
                key = t.untyped_storage().data_ptr()
                if key in params or key in seen:
                    continue
                # autocast's cached low-precision weight copies are weights, not activations
                if autocast_weights and t.dim() == 2 and (tuple(t.shape) in shapes or tuple(t.shape[::-1]) in shapes):
                    continue
                # count dropout masks as CUDA holds them (1-byte bool), the device the estimate is for
                seen[key] = t.numel() if cuda_masks and _is_dropout_mask(t) else t.untyped_storage().nbytes()
        stack.extend(n for n, _ in node.next_functions)
    return sum(seen.values())


def measure(cfg, layers, dtype, attn, lora=None, autocast=False, cuda_masks=False):
    c = dict(copy.deepcopy(cfg), num_hidden_layers=layers)  # transformers rewrites nested dicts in place
    conf = transformers.AutoConfig.for_model(**c)
    conf._attn_implementation = attn
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.AutoModelForCausalLM.from_config(conf, dtype=dtype)
        if lora:
            peft = pytest.importorskip("peft")
            model = peft.get_peft_model(model, peft.LoraConfig(r=8, target_modules=lora, lora_dropout=0.0))
    model.train()
    ids = torch.randint(0, c["vocab_size"], (B, S))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out = model(input_ids=ids, labels=ids)
    return saved_bytes(out.loss, model, autocast_weights=autocast, cuda_masks=cuda_masks)


CASES = {
    # name: (config, torch dtype, attention, lora targets, autocast, Regime, Trainable)
    "bf16-sdpa": (LLAMA, "bf16", "sdpa", None, False, Regime(2, 2, False), None),
    "bf16-eager": (LLAMA, "bf16", "eager", None, False, Regime(2, 2, False), None),
    "bf16-gqa": (dict(LLAMA, num_key_value_heads=2), "bf16", "sdpa", None, False, Regime(2, 2, False), None),
    "bf16-gqa-eager": (dict(LLAMA, num_key_value_heads=2), "bf16", "eager", None, False, Regime(2, 2, False), None),
    "fp32-sdpa": (LLAMA, "fp32", "sdpa", None, False, Regime(4, 4, False), None),
    "amp-sdpa": (LLAMA, "fp32", "sdpa", None, True, Regime(2, 4, True), None),
    "bf16-autocast": (LLAMA, "bf16", "sdpa", None, True, Regime(2, 2, True), None),
    "lora-all": (LLAMA, "bf16", "sdpa", "all-linear", True, Regime(2, 2, True), "all-linear"),
    "lora-qv": (LLAMA, "bf16", "sdpa", ["q_proj", "v_proj"], True, Regime(2, 2, True), "q_proj,v_proj"),
    "lora-all-no-autocast": (LLAMA, "bf16", "sdpa", "all-linear", False, Regime(2, 2, False), "all-linear"),
    "qwen2-bias": (dict(LLAMA, model_type="qwen2"), "bf16", "sdpa", None, False, Regime(2, 2, False), None),
    "gemma-geglu": (dict(LLAMA, model_type="gemma", head_dim=64, num_key_value_heads=1, tie_word_embeddings=True),
                    "bf16", "sdpa", None, False, Regime(2, 2, False), None),
}
GPT2 = dict(model_type="gpt2", n_embd=256, n_head=8, vocab_size=1000, n_positions=128)
# Dropout 0.1 (GPT-2's defaults) in train mode: masks counted as on CUDA. (SDPA with dropout is not checked here:
# on the CPU it falls back to the math kernel, which saves the s^2 probabilities that CUDA's fused kernels do not.)
DROPOUT_CASES = {
    "gpt2-eager-dropout": (GPT2, "fp32", "eager", Regime(4, 4, False)),
    "gpt2-eager-dropout-bf16": (GPT2, "bf16", "eager", Regime(2, 2, False)),
    # dropout switched off in config.json: no masks, the probabilities saved as they are
    "gpt2-eager-no-dropout": (dict(GPT2, attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0), "fp32", "eager",
                              Regime(4, 4, False)),
}


@pytest.mark.parametrize("name", sorted(DROPOUT_CASES))
def test_dropout_activation_bytes_match_autograd(name):
    cfg, dt, attn, regime = DROPOUT_CASES[name]
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dt]
    measured = (measure(cfg, 2, dtype, attn, cuda_masks=True) - measure(cfg, 1, dtype, attn, cuda_masks=True)) / (B * S)
    spec = ModelSpec.from_hf_config(dict(cfg, n_layer=1))
    assert spec.attention_dropout == spec.hidden_dropout == cfg.get("attn_pdrop", 0.1)  # GPT2Config's default 0.1
    predicted = sum(block_saved(spec, regime, Trainable(ALL_ROLES, frozenset(), True), S, Attention(attn)).values())
    assert predicted == pytest.approx(measured, rel=0.01), (predicted, measured)


@pytest.mark.parametrize("name", sorted(CASES))
def test_block_activation_bytes_match_autograd(name):
    cfg, dt, attn, lora, autocast, regime, targets = CASES[name]
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dt]
    measured = (measure(cfg, 2, dtype, attn, lora, autocast) - measure(cfg, 1, dtype, attn, lora, autocast)) / (B * S)
    spec = ModelSpec.from_hf_config(dict(cfg, num_hidden_layers=1))
    if targets:
        trainable = Trainable(frozenset(), lora_roles(tuple(targets.split(","))), False, lora_rank=8)
    else:
        trainable = Trainable(ALL_ROLES, frozenset(), True)
    predicted = sum(block_saved(spec, regime, trainable, S, Attention(attn)).values())
    assert predicted == pytest.approx(measured, rel=0.01), (predicted, measured)


def _bnb_linear4bit_forward(self, x):
    """bitsandbytes' Linear4bit.forward as far as dtypes go: the input cast to the compute dtype, the output cast back
    to the input's dtype (bnb 0.4x); its MatMul4Bit saves no input. Only its dtype behaviour matters here."""
    return torch.nn.functional.linear(x.to(torch.bfloat16), self.weight, self.bias).to(x.dtype)


def _measure_4bit(layers, forward, targets="all-linear", upcast=False, bf16_adapters=False, autocast=True):
    """Saved bytes of a bf16 tiny Llama whose blocks' Linears run `forward` (a 4-bit matmul emulated on the CPU),
    with PEFT LoRA on `targets`; `upcast` first applies PEFT's prepare_model_for_kbit_training."""
    import types

    peft = pytest.importorskip("peft")
    conf = transformers.AutoConfig.for_model(**dict(copy.deepcopy(LLAMA), num_hidden_layers=layers))
    conf._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.AutoModelForCausalLM.from_config(conf, dtype=torch.bfloat16)
        if upcast:  # PEFT's own function: every 16-bit parameter to fp32 (no Params4bit on the CPU)...
            model = peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
        for name, mod in model.named_modules():  # ...and the blocks' Linears back to a 16-bit "dequantized" weight
            if isinstance(mod, torch.nn.Linear) and ".layers." in name:
                mod.weight.data = mod.weight.data.to(torch.bfloat16)
                mod.forward = types.MethodType(forward, mod)
        model = peft.get_peft_model(model, peft.LoraConfig(r=8, target_modules=targets, lora_dropout=0.0),
                                    autocast_adapter_dtype=not bf16_adapters)
    model.train()
    ids = torch.randint(0, LLAMA["vocab_size"], (B, S))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out = model(input_ids=ids, labels=ids)
    return saved_bytes(out.loss, model, autocast_weights=autocast)


def _measure_qlora(layers, upcast):
    return _measure_4bit(layers, _bnb_linear4bit_forward, upcast=upcast)


@pytest.mark.parametrize("upcast", [False, True])
def test_qlora_block_activations_match_autograd(upcast):
    """QLoRA through PEFT: prepare_model_for_kbit_training's fp32 embeddings and norms make the hidden states fp32 and
    bitsandbytes hands fp32 back from every 4-bit Linear, so the MLP's intermediates are saved in fp32 (6 x f bytes
    more per token for a gated MLP). Emulated on the CPU with PEFT's real function and bnb's dtype handling."""
    measured = (_measure_qlora(2, upcast) - _measure_qlora(1, upcast)) / (B * S)
    spec = ModelSpec.from_hf_config(dict(LLAMA, num_hidden_layers=1))
    trainable = Trainable(frozenset(), lora_roles(("all-linear",)), False, lora_rank=8)
    predicted = sum(block_saved(spec, Regime(2, 2, True, kbit_upcast=upcast), trainable, S,
                                Attention("sdpa")).values())
    assert predicted == pytest.approx(measured, rel=0.01), (predicted, measured)


class _OldMatMul4Bit(torch.autograd.Function):
    """bitsandbytes' MatMul4Bit before 0.43.2 as far as memory goes: it held its input A until backward whenever any
    gradient flowed (`ctx.tensors = (A, B)`), though a frozen weight's backward needs only the weight (removed by
    bitsandbytes PR #1270). Here the input is saved the visible way, with the same lifetime."""

    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x)
        ctx.weight = weight
        return torch.nn.functional.linear(x, weight)

    @staticmethod
    def backward(ctx, grad):
        return grad @ ctx.weight, None


def _old_bnb_forward(self, x):
    return _OldMatMul4Bit.apply(x, self.weight)


def _measure_old_bnb(layers, targets, bf16_adapters):
    return _measure_4bit(layers, _old_bnb_forward, targets, bf16_adapters=bf16_adapters, autocast=False)


@pytest.mark.parametrize("targets,bf16_adapters", [(["q_proj", "v_proj"], True), (["q_proj", "v_proj"], False),
                                                   ("all-linear", True), ("all-linear", False)])
def test_old_bitsandbytes_keeps_frozen_inputs(targets, bf16_adapters):
    """QLoRA on bitsandbytes < 0.43.2 in a pure-bf16 stack (LitGPT bf16-true): every frozen 4-bit Linear's input
    stays alive; inputs an adapter saves anyway (bf16 adapters read the very tensor) add nothing, fp32 adapters'
    casts do not stand in for it."""
    measured = (_measure_old_bnb(2, targets, bf16_adapters) - _measure_old_bnb(1, targets, bf16_adapters)) / (B * S)
    spec = ModelSpec.from_hf_config(dict(LLAMA, num_hidden_layers=1))
    roles = lora_roles(tuple(targets) if isinstance(targets, list) else (targets,))
    trainable = Trainable(frozenset(), roles, False, lora_rank=8)
    regime = Regime(2, 2, False, adapter=2 if bf16_adapters else 4, kbit_keeps_inputs=True)
    predicted = sum(block_saved(spec, regime, trainable, S, Attention("sdpa")).values())
    assert predicted == pytest.approx(measured, rel=0.01), (predicted, measured)
    without = sum(block_saved(spec, Regime(2, 2, False, adapter=regime.adapter), trainable, S,
                              Attention("sdpa")).values())
    if targets == "all-linear" and bf16_adapters:  # every input is an adapter's input already
        assert predicted == without
    else:
        assert predicted > without
