"""The trace takes the attention path a real run takes: call by call, what reaches
torch.nn.functional.scaled_dot_product_attention under FakeTensorMode equals what reaches it with real tensors."""

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trainfit.trace.tracer import as_a_gpu_run, forward_loss  # noqa: E402

TINY = dict(model_type="llama", hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=128, max_position_embeddings=256, tie_word_embeddings=False, num_hidden_layers=2)


def _sdpa_calls(fake: bool, explicit: bool) -> list[tuple]:
    from contextlib import nullcontext

    from torch._subclasses.fake_tensor import FakeTensorMode
    from transformers import AutoConfig, AutoModelForCausalLM

    calls = []
    real_sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        calls.append((tuple(q.shape), tuple(k.shape), tuple(v.shape),
                      None if attn_mask is None else tuple(attn_mask.shape), bool(is_causal), bool(enable_gqa)))
        return real_sdpa(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                         enable_gqa=enable_gqa)

    conf = AutoConfig.for_model(**copy.deepcopy(TINY))  # transformers rewrites nested dicts in place
    conf._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(conf)
    ids = torch.randint(0, 128, (2, 32))
    mode = FakeTensorMode(allow_non_fake_inputs=True) if fake else nullcontext()
    torch.nn.functional.scaled_dot_product_attention = spy
    try:
        with mode, (as_a_gpu_run() if explicit else nullcontext()):
            if fake:
                model = _fake_copy(model)
            loss = forward_loss(model, {"input_ids": ids, "labels": ids}, torch.bfloat16, False)
            loss.backward()
    finally:
        torch.nn.functional.scaled_dot_product_attention = real_sdpa
    return calls


def _fake_copy(model):
    from trainfit.trace.tracer import _materialize

    model = model.to("meta")
    _materialize(model)
    for module in model.modules():
        if hasattr(module, "inv_freq"):
            module.register_buffer("inv_freq", torch.empty(module.inv_freq.shape), persistent=False)
    return model


def test_fake_trace_reaches_sdpa_like_a_real_run():
    real = _sdpa_calls(fake=False, explicit=False)
    traced = _sdpa_calls(fake=True, explicit=True)
    assert len(real) == 2 and real == traced
    q, k, v, mask, causal, gqa = real[0]
    assert mask is None and causal and gqa and k[1] == 2  # is_causal, K/V not repeated to every head


def test_without_the_explicit_path_fake_tensors_build_a_mask():
    """The mechanism the fix addresses: left alone, transformers cannot read fake position ids and assumes packing."""
    traced = _sdpa_calls(fake=True, explicit=False)
    assert traced and traced[0][3] is not None


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_selective_checkpointing_recomputes_the_attention_core_exactly(attention):
    """The trace's selective checkpointing (tracer.selective_attention) runs each block's attention core a second
    time in backward — SDPA (or eager's softmax) is called twice per block — with the same gradients as without it,
    and leaves transformers' attention functions as they were."""
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.models.llama import modeling_llama

    from trainfit.trace.tracer import selective_attention

    conf = AutoConfig.for_model(**TINY)
    conf._attn_implementation = attention
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(conf)
    ids = torch.randint(0, 128, (2, 32))
    before = (ALL_ATTENTION_FUNCTIONS["sdpa"], modeling_llama.eager_attention_forward)
    counted = torch.nn.functional.softmax if attention == "eager" else torch.nn.functional.scaled_dot_product_attention
    name = "softmax" if attention == "eager" else "scaled_dot_product_attention"

    def run(selective: bool) -> tuple[int, list]:
        calls = []

        def spy(*args, **kwargs):
            calls.append(1)
            return counted(*args, **kwargs)

        model.zero_grad(set_to_none=True)
        setattr(torch.nn.functional, name, spy)
        try:
            with selective_attention(model, selective):
                loss = forward_loss(model, {"input_ids": ids, "labels": ids}, torch.bfloat16, False)
                loss.backward()
        finally:
            setattr(torch.nn.functional, name, counted)
        return len(calls), [p.grad.clone() for p in model.parameters()]

    plain_calls, plain_grads = run(False)
    selective_calls, selective_grads = run(True)
    assert plain_calls == TINY["num_hidden_layers"] and selective_calls == 2 * plain_calls
    assert all(torch.equal(a, b) for a, b in zip(plain_grads, selective_grads))
    assert (ALL_ATTENTION_FUNCTIONS["sdpa"], modeling_llama.eager_attention_forward) == before
