"""Trace one steady-state LitGPT finetune step (litgpt 0.4.13's own model, LoRA layers, loss and loop) under
FakeTensorMode + MemTracker, as a GPU runs it; print the allocated peak per case as JSON lines.

Run by tests/test_litgpt_code.py in a process of its own, with LitGPT and Lightning on PYTHONPATH (make test installs
them into .venv/litgpt without their dependencies): `python tests/litgpt_step.py CASES.json`, where each case is
{"id", "config": litgpt Config kwargs, "method": lora | qlora | full, "micro_batch", "seq_len"}.

What a GPU does differently from the CPU the trace runs on is set explicitly:
* nn.Dropout runs `native_dropout` (CUDA's fused kernel: a bool mask is saved), not the CPU's noise tensor;
* F.scaled_dot_product_attention runs the memory-efficient kernel's op (q, k, v, output and log-sum-exp saved), which
  is what a GPU's flash or efficient kernel keeps; the CPU would pick its own;
* QLoRA's 4-bit Linear is bitsandbytes before 0.43.2 as LitGPT's config_hub ran it: the weight stored as packed
  uint8 plus an fp32 absmax per 64 weights (`bnb.nf4`, no double quantization), dequantized to fp16 and cast to
  bf16 for each matmul (Lightning quantizes from fp16), and MatMul4Bit keeping its input in `ctx.tensors` until its
  node is freed.
The loop keeps `logits` (and through them the graph) until the next forward returns, as finetune/lora.py and
full.py do.
"""

from __future__ import annotations

import json
import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

from trainfit.trace.tracer import _grad_hooks_released, _materialize, _skip_frozen_grad_hooks, _tracker_class


class _OldMatMul4Bit(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A, q, out_f, in_f):  # noqa: ANN001, ANN205
        w = torch.empty(out_f, in_f, dtype=torch.float16, device=A.device).to(A.dtype)
        out = F.linear(A, w)
        ctx.shape = (out_f, in_f)
        # bitsandbytes < 0.43.2: `if any(ctx.needs_input_grad[:2]): ctx.tensors = (A, B)`, a plain attribute alive as
        # long as the node (the 4-bit weight takes no gradient, so: when the input takes one)
        ctx.tensors = (A, q) if A.requires_grad else (None, None)
        return out

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        out_f, in_f = ctx.shape
        w = torch.empty(out_f, in_f, dtype=torch.float16, device=grad.device).to(grad.dtype)
        return grad @ w, None, None, None


class _NF4Linear(nn.Module):
    def __init__(self, lin: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = lin.in_features, lin.out_features
        n = lin.in_features * lin.out_features
        self.q = nn.Parameter(torch.empty(n // 2, dtype=torch.uint8, device="meta"), requires_grad=False)
        self.register_buffer("absmax", torch.empty(n // 64, dtype=torch.float32, device="meta"))
        self.bias = lin.bias

    @property
    def weight(self):  # noqa: ANN201 - LitGPT reads `.weight.device`
        return self.q

    def forward(self, x):  # noqa: ANN001, ANN201
        out = _OldMatMul4Bit.apply(x, self.q, self.out_features, self.in_features)
        return out if self.bias is None else out + self.bias


def _quantize(model: nn.Module) -> None:
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Linear and not child.weight.requires_grad:
                setattr(module, name, _NF4Linear(child))


def _gpu_dropout(input, p=0.5, training=True, inplace=False):  # noqa: A002, ANN001, ANN201, ARG001
    if not training or p == 0:
        return input
    return torch.ops.aten.native_dropout(input, p, True)[0]


def _gpu_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,  # noqa: ANN001, ANN201
              enable_gqa=False):  # noqa: ARG001
    return torch.ops.aten._scaled_dot_product_efficient_attention(
        query, key, value, attn_mask, True, dropout_p, is_causal, scale=scale)[0]


def trace(case: dict) -> float:
    from litgpt.utils import chunked_cross_entropy

    lora = case["method"] in ("lora", "qlora")
    if lora:
        from litgpt.lora import GPT, Config, mark_only_lora_as_trainable
    else:
        from litgpt.model import GPT, Config
    config = Config(**case["config"])
    mb, seq = case["micro_batch"], case["seq_len"]
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        model = GPT(config).to(torch.bfloat16)
    if lora:
        mark_only_lora_as_trainable(model)
    if case["method"] == "qlora":
        _quantize(model)
    saved_dropout, saved_sdpa = F.dropout, F.scaled_dot_product_attention
    F.dropout, F.scaled_dot_product_attention = _gpu_dropout, _gpu_sdpa
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            _materialize(model)
            model.max_seq_length = seq
            for module in model.modules():
                for name, b in list(module._buffers.items()):
                    if b is not None and b.is_meta:
                        module._buffers[name] = torch.empty_like(b, device="cpu")
            params = [p for p in model.parameters() if p.requires_grad]
            opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)  # CUDA's default implementation
            ids = torch.randint(0, config.padded_vocab_size, (mb, seq))
            tracker = _tracker_class()()
            _skip_frozen_grad_hooks(tracker, model)
            tracker.track_external(model, opt)
            with tracker, _grad_hooks_released() as release:
                for step in range(2):
                    if step == 1:
                        tracker.moments.clear()
                        tracker.reset_mod_stats()
                    tracker.phase = "forward"
                    if lora:
                        logits = model(ids, lm_head_chunk_size=128)
                        logits[-1] = logits[-1][..., :-1, :]
                        loss = chunked_cross_entropy(logits, ids[..., 1:])
                    else:
                        logits = model(ids)
                        loss = chunked_cross_entropy(logits[..., :-1, :], ids[..., 1:])
                    tracker.phase = "backward"
                    loss.backward()
                    release()
                    tracker.phase = "optimizer"
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                    loss = 0.0  # the loop's `loss = running_loss.compute().item()`; `logits` lives on
            if os.environ.get("TRAINFIT_LITGPT_DEBUG"):  # each moment's peak by MemTracker category, on stderr
                for name, m in tracker.moments.items():
                    print(name, {k: round(v / 2**20, 2) for k, v in m.snapshot.items()}, file=sys.stderr)
            return max(m.total for m in tracker.moments.values())
    finally:
        F.dropout, F.scaled_dot_product_attention = saved_dropout, saved_sdpa


if __name__ == "__main__":
    for c in json.load(open(sys.argv[1])):
        print(json.dumps({"id": c["id"], "traced_bytes": trace(c)}), flush=True)
