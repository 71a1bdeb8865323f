"""Conformance campaign: the analytic memory model against the traced step over a random configuration space.

Seeded draws over what the estimator accepts for one GPU — model families at cut depth (2-4 blocks, small hidden
sizes so each trace takes seconds; fake tensors make sequence length and micro-batch free), method, stored dtype,
optimizer and its implementation, checkpointing (none, selective: the attention core recomputed, full: whole
blocks), attention, micro-batch, sequence length, head, modules_to_save, optimizer-in-backward (one optimizer per
parameter stepped in backward, as torchtune's optimizer_in_bwd; not with fp16) —
each traced for two steps (`trainfit.trace.run_trace`: peak of step 2 and of every moment) and estimated
analytically. Prints the error of the analytic peak by dimension (MAPE, worst) and where each peak falls.

    PYTHONPATH=src python benchmarks/conformance.py --n 300 [--seed 0] [--wide] [--jsonl out.jsonl] [--only 17,203]
                                                    [--cases-out cases.jsonl]

--wide draws from the wide space (`widen`): every combination a user can ask of one GPU, each dimension drawn
uniformly by a stream of its own seeded from the shipped stream's state after each draw (the shipped stream, the
trace cases and the CI sample are unchanged): method full / LoRA / freeze; dtype pure bf16, fp32 weights under bf16
or fp16 autocast, fp32 without autocast; checkpointing none / selective / full; micro-batch 1-32; freeze depth 1 to
all blocks (`freeze_trainable_layers`, passed to the estimator as an efficiency override); LoRA targets all-linear or
any non-empty subset of the block's Linears; lora_dropout 0 / 0.05 / 0.1; vocabulary the family's (6K-12K), 32K, 50K,
128K, 152K or 256K; width x1-x8 (hidden 192-2304) and head_dim x1-x4 (32-256), both free under fake tensors. The
other fields are the shipped draw's (family, optimizer and implementation, attention, sequence 128-8192, task,
modules_to_save, optimizer-in-backward); blocks stay 2-4 so each trace takes seconds. `wide_sample()` is its CI sample
(tests/test_conformance.py). Left out of the wide space, and why: gradient accumulation (the tracer runs one
micro-batch per step), sequences over 8K (free under fake tensors, but eager attention's s x s tensors then dominate
every draw), deeper models (a freeze depth needs the blocks traced, not extrapolated), GPT-2's c_proj alone as a LoRA
target (the name covers two modules; the estimator refuses it), and what the shipped stream leaves out (below).

`--only` reruns single draws of the same seeded stream by index (a --jsonl row's `index`, the `[i]` before each of
the worst configurations). --cases-out writes each traced configuration as a validation case of the source "trace"
(trainfit/trace/case.py: memory_kind allocated, the job through the case door), which `trainfit validate` and
`trainfit calibrate` read beside the published runs. The shipped data/validation/trace_cases.jsonl is

    PYTHONPATH=src python benchmarks/conformance.py --n 48 --seed 0 --cases-out data/validation/trace_cases.jsonl

`tests/test_conformance.py` runs a fixed seeded sample of the same generator with the CI limits.

Tasks: sft, classification and DPO (a third of the language-model draws; micro_batch counts preference pairs),
traced as TRL's DPOTrainer runs a step with its defaults (trainfit.trace.tracer.dpo_loss: chosen + rejected in one
batch, accelerate's fp32 logits, the reference forward under no_grad — the base with adapters disabled for LoRA, a
frozen copy in the policy's dtype for full and freeze — and the logged metrics).

Families: Llama-3, Qwen2, Qwen3, Phi-3 (fused qkv / gate_up), Mixtral (sparse MoE, traced with balanced routing),
GPT-2 (learned positions, Conv1D, LayerNorm, GELU) and Gemma-2 (soft-capped attention and logits, which make
transformers run eager attention where SDPA is asked for; sandwich norms; sliding-window blocks alternating with
global ones). Not in the generator yet, and why:
  GPT-2 eager       CPU autocast runs GPT-2's softmax in bf16, CUDA's in fp32: a CPU trace is not a GPU's view
                    (+38 % at seq 1024); the trace would need CUDA's autocast policy. GPT-2 is drawn with SDPA.
  Mixtral LoRA all-linear  -6.3 % at seq 1024 (what PEFT adapts around the 3-D experts and the router is not
                    pinned down); Mixtral LoRA is drawn on the attention projections.
  8-bit AdamW       bitsandbytes 0.50 steps its 8-bit optimizers on the CPU, but not on fake tensors (its step reads
                    values: DataDependentOutputException); the states are checked instead against bitsandbytes' own
                    optimizer on a real small model (tests/test_optimizer_impl.py), the step's transients are not.
  QLoRA             bitsandbytes' NF4 storage and 4-bit matmul were not traced; the tracer stands QLoRA in as LoRA on a
                    16-bit base, which checks none of the 4-bit terms.
  LAMB, Lion        no implementation in torch to trace on the CPU (DeepSpeed's FusedLamb is a CUDA kernel; torch
                    2.13 has no Lion); the estimator counts LAMB's two states as AdamW's, Lion is not accepted.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, replace

# Small configs in each family's real shape (GQA ratios, biases, tying, norms, fused modules, MoE), vocabulary
# large beside hidden as in the real models (Llama-3 128K/4096 ≈ 31; here 8000/256).
FAMILIES: dict[str, dict] = {
    "llama3": dict(model_type="llama", hidden_size=256, intermediate_size=896, num_attention_heads=8,
                   num_key_value_heads=2, vocab_size=8000, max_position_embeddings=8192, tie_word_embeddings=False,
                   rope_theta=500000.0),
    "qwen2": dict(model_type="qwen2", hidden_size=224, intermediate_size=608, num_attention_heads=7,
                  num_key_value_heads=1, vocab_size=9000, max_position_embeddings=8192, tie_word_embeddings=True),
    "qwen3": dict(model_type="qwen3", hidden_size=256, intermediate_size=768, num_attention_heads=8,
                  num_key_value_heads=4, head_dim=32, vocab_size=9000, max_position_embeddings=8192,
                  tie_word_embeddings=True),
    "phi3": dict(model_type="phi3", hidden_size=192, intermediate_size=512, num_attention_heads=6,
                 num_key_value_heads=6, vocab_size=6000, max_position_embeddings=8192, tie_word_embeddings=False,
),
    # sparse MoE: 4 experts, top-2 (traced with balanced routing: fake tensors carry no routing data)
    "mixtral": dict(model_type="mixtral", hidden_size=256, intermediate_size=512, num_attention_heads=8,
                    num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, vocab_size=8000,
                    max_position_embeddings=8192, tie_word_embeddings=False),
    # learned positions, Conv1D projections (fused c_attn), LayerNorm with biases, GELU MLP, tied head; dropout off
    # (the CPU keeps a dropout mask in the activation dtype, a GPU a 1-byte one: see trainfit.trace)
    "gpt2": dict(model_type="gpt2", n_embd=256, n_head=8, n_positions=8192, vocab_size=8000, resid_pdrop=0.0,
                 embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=True),
    # google/gemma-2-2b's shape (hidden 2304, 8 heads of 256 over 4 KV heads: q width 2048 < hidden, MLP 4x, tied,
    # sandwich norms, GELU-tanh, soft-capped attention and logits, query_pre_attn_scalar = head_dim) at small size.
    # Blocks alternate sliding-window (even) and global (odd) attention; the window is cut with the model (4096 of
    # an 8K context there, 512 here) so that most drawn sequences (128-8192) are longer than it and the two kinds of
    # block really attend differently, as a real Gemma-2 does beyond 4K tokens. (Memory does not follow the window:
    # eager attention builds a full b x s x s mask for each kind whatever it is; a trace with a window of 8192 at
    # 4K tokens peaks at the same bytes.)
    "gemma2": dict(model_type="gemma2", hidden_size=288, intermediate_size=1152, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=64, vocab_size=12000, max_position_embeddings=8192,
                   tie_word_embeddings=True, hidden_activation="gelu_pytorch_tanh", attn_logit_softcapping=50.0,
                   final_logit_softcapping=30.0, sliding_window=512, query_pre_attn_scalar=64,
                   attention_dropout=0.0),
}
# GPT-2's eager attention computes softmax in the activation dtype: CUDA's autocast runs it in fp32 (softmax is
# on its fp32 list), the CPU's autocast, which the trace runs, in bf16 — the trace is then not a GPU's view
SDPA_ONLY = frozenset({"gpt2"})
for _hf in FAMILIES.values():  # classification pools at the last non-pad token: it needs a pad token
    _hf.update(pad_token_id=0, bos_token_id=1, eos_token_id=2)


@dataclass(frozen=True)
class Draw:
    family: str
    layers: int
    method: str
    precision: str  # bf16 | fp16 (autocast dtype)
    param_dtype: str  # fp32 (mixed: fp32 weights + autocast) | bf16 (pure 16-bit)
    optimizer: str
    optimizer_impl: str
    grad_ckpt: str
    attention: str
    micro_batch: int
    seq_len: int
    task: str
    lora_rank: int
    lora_targets: tuple[str, ...]
    modules_to_save: tuple[str, ...]
    optimizer_in_backward: bool = False  # one optimizer per parameter, stepped in backward (torchtune's optimizer_in_bwd)
    lora_dropout: float = 0.0  # PEFT's lora_dropout (regression cases; the campaign draws 0)
    # the wide space (`draw(..., wide=True)`); the defaults are the shipped stream's fixed values
    freeze_layers: int = 2  # a freeze fine-tune's trained top blocks (LLaMA-Factory's freeze_trainable_layers)
    vocab_size: int = 0  # 0: the family's own (FAMILIES)
    width: int = 1  # hidden and MLP sizes times this; head counts times width // head_scale
    head_scale: int = 1  # head_dim times this (at most `width`)

    def dims(self) -> dict[str, str]:
        mb = self.micro_batch
        return {"family": self.family, "method": self.method, "dtype": f"{self.param_dtype}/{self.precision}",
                "optimizer": f"{self.optimizer}/{self.optimizer_impl}", "grad_ckpt": self.grad_ckpt,
                "attention": self.attention, "task": self.task,
                "micro_batch": "1" if mb == 1 else ("2-4" if mb <= 4 else ("5-16" if mb <= 16 else "17-32")),
                "seq_len": "<=512" if self.seq_len <= 512 else ("<=2048" if self.seq_len <= 2048 else ">2048"),
                "modules_to_save": "yes" if self.modules_to_save else "no",
                "optimizer_in_backward": "yes" if self.optimizer_in_backward else "no",
                "freeze_layers": "-" if self.method != "freeze" else
                ("all" if self.freeze_layers >= self.layers else str(self.freeze_layers)),
                "vocab": "family" if not self.vocab_size else ("<=50k" if self.vocab_size <= 51200 else
                                                               ("<=152k" if self.vocab_size <= 152064 else "256k")),
                "width": f"x{self.width}", "head_dim": f"x{self.head_scale}",
                "lora_dropout": "-" if self.method != "lora" else ("yes" if self.lora_dropout else "no"),
                "lora_targets": "-" if self.method != "lora" else (
                    "all-linear" if self.lora_targets == ("all-linear",) else str(len(self.lora_targets)))}


TARGET_SETS = (("all-linear",), ("q_proj", "v_proj"), ("q_proj", "k_proj", "v_proj", "o_proj"),
               ("gate_proj", "up_proj", "down_proj"))


def draw(rng: random.Random, with_dpo: bool = True) -> Draw:
    """One configuration from the seeded stream. `with_dpo`: a third of the language-model (sft) draws become DPO,
    decided by one more value taken at the end of the draw, so each draw's other fields come from the stream as
    before; without it the stream is the one the shipped trace cases were made from (data/validation/
    trace_cases.jsonl, regenerated by `regenerate`)."""
    family = rng.choice(sorted(FAMILIES))
    method = rng.choice(("full", "full", "lora", "lora", "freeze"))
    param_dtype = rng.choice(("fp32", "bf16"))
    precision = "bf16" if param_dtype == "bf16" else rng.choice(("bf16", "bf16", "fp16"))
    optimizer = rng.choice(("adamw", "adamw", "adamw", "sgd", "adafactor"))
    impl = rng.choice(("foreach", "fused", "forloop")) if optimizer in ("adamw", "sgd") else "forloop"
    task = rng.choice(("sft", "sft", "sft", "classification"))
    targets = rng.choice(TARGET_SETS)
    if family == "phi3" and targets != ("all-linear",):  # fused qkv_proj / gate_up_proj
        targets = ("qkv_proj", "o_proj") if "q_proj" in targets else ("gate_up_proj", "down_proj")
    if family == "gpt2" and targets != ("all-linear",):  # Conv1D: fused c_attn; c_proj names two modules
        targets = ("c_attn",) if "q_proj" in targets else ("c_fc",)
    if family == "mixtral" and targets[0] in ("all-linear", "gate_proj"):  # experts are 3-D tensors, not Linears
        targets = ("q_proj", "k_proj", "v_proj", "o_proj")  # all-linear: see the module doc
    saved = ()
    if method == "lora" and task == "sft" and rng.random() < 0.2:
        saved = ("embed_tokens", "lm_head") if not FAMILIES[family].get("tie_word_embeddings") else ("lm_head",)
    d = Draw(family=family, layers=rng.randint(2, 4), method=method, precision=precision, param_dtype=param_dtype,
             optimizer=optimizer, optimizer_impl=impl, grad_ckpt=rng.choice(("none", "full")),
             attention="sdpa" if family in SDPA_ONLY else rng.choice(("sdpa", "sdpa", "eager")), micro_batch=rng.choice((1, 1, 2, 4, 8, 16)),
             seq_len=rng.choice((128, 256, 512, 1024, 2048, 4096, 8192)), task=task,
             lora_rank=rng.choice((4, 8, 16, 32, 64, 128)), lora_targets=targets, modules_to_save=saved)
    if with_dpo and rng.random() < 1 / 3 and task == "sft":  # preference pairs: micro_batch counts pairs
        d = replace(d, task="dpo")
    # drawn after the rest, so the draws above keep their values: selective checkpointing (the attention core
    # recomputed) in place of a third of the full ones, and optimizer-in-backward where the estimator takes it
    # (grad-accum 1 here always; not with fp16's loss scaling)
    if d.grad_ckpt == "full" and rng.random() < 1 / 3:
        d = replace(d, grad_ckpt="selective")
    if d.precision != "fp16" and rng.random() < 0.2:
        d = replace(d, optimizer_in_backward=True)
    # SGD without momentum (torch's default, Hugging Face Trainer's optim="sgd") for half of the SGD draws, decided by
    # a stream of its own seeded from this one's state, which takes nothing from it: every other field of every draw
    # keeps its value. The seed is the hash of the state's tuple of ints, the same in every process (ints are not
    # hash-randomised); the whole state also holds None, whose hash is its address before Python 3.12
    if d.optimizer == "sgd" and random.Random(hash(rng.getstate()[1])).random() < 0.5:
        d = replace(d, optimizer="sgd-nomomentum")
    return d


# The wide space: what a user can ask of one GPU beyond the shipped stream's draws, each value equally likely
WIDE_DTYPES = (("fp32", "bf16"), ("fp32", "fp16"), ("fp32", "fp32"), ("bf16", "bf16"))  # (param_dtype, precision)
WIDE_MICRO_BATCH = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
WIDE_VOCAB = (0, 32000, 50257, 128256, 151936, 256000)  # 0: the family's own (6K-12K)
WIDE_WIDTH = (1, 2, 4, 8)
WIDE_HEAD_SCALE = (1, 2, 4)  # head_dim 32-64 in FAMILIES; x4: 128-256, as the real models'
WIDE_LORA_DROPOUT = (0.0, 0.05, 0.1)
# each family's Linears inside a block, by the names PEFT matches (GPT-2's c_proj names two modules, which the
# estimator refuses as a target; Mixtral's experts are
# 3-D tensors, not Linears: see the module doc)
BLOCK_LINEARS = {"phi3": ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"), "gpt2": ("c_attn", "c_fc"),
                 "mixtral": ("q_proj", "k_proj", "v_proj", "o_proj")}
LLAMA_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def wide_targets(family: str, rng: random.Random) -> tuple[str, ...]:
    """LoRA targets of the wide space: all-linear for half the draws (not Mixtral's), else any non-empty subset of
    the block's Linears, each equally likely."""
    names = BLOCK_LINEARS.get(family, LLAMA_LINEARS)
    subsets = [tuple(n for i, n in enumerate(names) if mask >> i & 1) for mask in range(1, 2 ** len(names))]
    if family != "mixtral" and rng.random() < 0.5:
        return ("all-linear",)
    return rng.choice(subsets)


def widen(d: Draw, rng: random.Random) -> Draw:
    """The draw moved into the wide space by a stream of its own (`rng`, seeded from the shipped stream's state,
    from which it takes nothing): method, dtype and autocast (fp32 weights under bf16 or fp16 autocast, fp32 without
    autocast, pure bf16), checkpointing, micro-batch 1-32, freeze depth, vocabulary up to 256K and width redrawn
    uniformly; the rest of the draw (family, optimizer, targets, task, sequence, ...) is the shipped draw's."""
    method = rng.choice(("full", "lora", "freeze"))
    param_dtype, precision = rng.choice(WIDE_DTYPES)
    optimizer_in_backward = d.optimizer_in_backward and precision != "fp16"
    saved = d.modules_to_save if method == "lora" and d.task == "sft" else ()
    if method == "lora" and d.task == "sft" and not saved and rng.random() < 0.2:
        saved = ("embed_tokens", "lm_head") if not FAMILIES[d.family].get("tie_word_embeddings") else ("lm_head",)
    width = rng.choice(WIDE_WIDTH)
    return replace(d, method=method, param_dtype=param_dtype, precision=precision,
                   grad_ckpt=rng.choice(("none", "selective", "full")), micro_batch=rng.choice(WIDE_MICRO_BATCH),
                   freeze_layers=rng.randint(1, d.layers), vocab_size=rng.choice(WIDE_VOCAB), width=width,
                   head_scale=rng.choice([h for h in WIDE_HEAD_SCALE if h <= width]),
                   optimizer_in_backward=optimizer_in_backward, modules_to_save=saved,
                   lora_targets=wide_targets(d.family, rng), lora_dropout=rng.choice(WIDE_LORA_DROPOUT)
                   if method == "lora" else 0.0)


def draws(n: int, seed: int = 0, with_dpo: bool = True, wide: bool = False) -> list[Draw]:
    """`wide`: each draw then moved into the wide space (`widen`) by a stream seeded from the shipped stream's state
    after that draw, so draw i of the wide space is draw i of the shipped stream, widened."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        d = draw(rng, with_dpo)
        out.append(widen(d, random.Random(hash(rng.getstate()[1]) + 1)) if wide else d)
    return out


def hf_config(d: Draw) -> dict:
    """The draw's model config: its family's, with the wide space's vocabulary and width."""
    hf = dict(FAMILIES[d.family])
    if d.vocab_size:
        hf["vocab_size"] = d.vocab_size
    for key in ("hidden_size", "intermediate_size", "n_embd"):
        if key in hf:
            hf[key] *= d.width
    for key in ("num_attention_heads", "num_key_value_heads", "n_head"):
        if key in hf:
            hf[key] = max(1, hf[key] * d.width // d.head_scale)
    for key in ("head_dim", "query_pre_attn_scalar"):
        if key in hf:
            hf[key] *= d.head_scale
    return hf


def coverage(d: Draw) -> set[tuple[str, str]]:
    """What a draw brings to the CI sample: its value of every dimension, and for a full or freeze fine-tune of a
    classifier on at most 512 tokens (no vocabulary-sized loss buffers, few activations: the peak is the optimizer
    step) with the optimizer stepped after backward, its optimizer and implementation."""
    out = set(d.dims().items())
    if d.method in ("full", "freeze") and d.task == "classification" and d.micro_batch * d.seq_len <= 512 and \
            not d.optimizer_in_backward:  # in backward, the step has no moment of its own
        out.add(("optimizer_step_exposed", f"{d.optimizer}/{d.optimizer_impl}"))
    return out


def ci_sample(n: int = 40, seed: int = 20) -> list[Draw]:
    """The CI sample: the first draws of a seeded stream that each bring something (`coverage`) no earlier pick
    had, then the next draws in order up to `n`. Fixed by the seed; every value of every dimension appears, and
    every optimizer and implementation on a workload small enough for its step to be the peak
    (tests/test_conformance.py checks both). Seed 20: since selective checkpointing and optimizer-in-backward are
    drawn, seed 19's pool of 2000 holds no such workload for SGD/foreach."""
    rng = random.Random(seed)
    pool = [draw(rng) for _ in range(2000)]
    wanted = set().union(*(coverage(d) for d in pool))
    picked: list[Draw] = []
    seen: set[tuple[str, str]] = set()
    for d in pool:
        new = coverage(d) - seen
        if new:
            picked.append(d)
            seen |= new
        if seen == wanted:
            break
    rest = (d for d in pool if d not in picked)
    while len(picked) < n:
        picked.append(next(rest))
    return picked


def wide_sample(n: int = 15, seed: int = 7) -> list[Draw]:
    """The wide space's CI sample (tests/test_conformance.py): from a seeded pool of the wide stream (`draws(...,
    wide=True)`), each draw in order that brings a value of some dimension no earlier pick had, up to `n`. Fixed by
    the seed; with 15 draws it cannot hold every value of every dimension (the campaign's 300 do)."""
    picked: list[Draw] = []
    seen: set[tuple[str, str]] = set()
    for d in draws(500, seed, wide=True):
        new = set(d.dims().items()) - seen
        if new:
            picked.append(d)
            seen |= new
        if len(picked) == n:
            break
    return picked


def stage(moment: str) -> str:
    """The stage of a moment, analytic or traced: forward, backward or optimizer."""
    if moment.startswith("forward"):
        return "forward"
    return "optimizer" if moment.startswith("optimizer") else "backward"


def run_one(d: Draw, case: dict | None = None) -> dict:
    """Trace and estimate one draw; with `case` ({"seed": ..., "index": ...}: where the draw came from), the row also
    holds the traced step as a validation case of the trace source (row["case"])."""
    start = time.perf_counter()
    traced, _ = trace_draw(d)
    est = estimate_draw(d)
    return row_of(d, traced, est, round(time.perf_counter() - start, 2), case)


def trace_config(d: Draw):
    """The draw as the tracer's configuration."""
    from trainfit.trace.tracer import TraceConfig

    hf = hf_config(d)
    return TraceConfig(hf_config=hf, layers=d.layers, method=d.method, task=d.task, seq_len=d.seq_len,
                       micro_batch=d.micro_batch, precision=d.precision, param_dtype=d.param_dtype,
                       grad_ckpt=d.grad_ckpt, attention=d.attention, lora_rank=d.lora_rank,
                       lora_targets=d.lora_targets, num_labels=2, freeze_trainable_layers=d.freeze_layers,
                       optimizer=d.optimizer,
                       modules_to_save=d.modules_to_save, optimizer_impl=d.optimizer_impl,
                       balanced_routing=bool(hf.get("num_local_experts")),
                       optimizer_in_backward=d.optimizer_in_backward, lora_dropout=d.lora_dropout)


def trace_draw(d: Draw) -> tuple:
    """The traced step of one draw (`trainfit.trace.run_trace`, every moment) and the seconds it took: the slow half
    of run_one, which a caller may keep and re-estimate against (tests: the CI sample under mutations of the
    analytic model)."""
    from trainfit.trace import run_trace

    start = time.perf_counter()
    traced = run_trace(trace_config(d), d.layers, full=True)
    return traced, round(time.perf_counter() - start, 2)


def estimate_draw(d: Draw):
    """The analytic estimate of one draw (trainfit.api.estimate on one A100 80GB; only its allocated peak and the
    peak's phase are compared)."""
    from trainfit.api import estimate
    from trainfit.spec.model import ModelSpec

    hf = hf_config(d)
    spec = ModelSpec.from_hf_config(dict(hf, num_hidden_layers=d.layers), name=d.family)
    overrides = {"freeze_trainable_layers": d.freeze_layers} if d.freeze_layers != 2 else None
    return estimate(spec, "a100-sxm4-80gb", overrides=overrides, method=d.method, task=d.task, seq_len=d.seq_len,
                    micro_batch=d.micro_batch, precision=d.precision, param_dtype=d.param_dtype,
                    optimizer=d.optimizer, grad_ckpt=d.grad_ckpt, attention=d.attention, lora_rank=d.lora_rank,
                    lora_targets=",".join(d.lora_targets), modules_to_save=",".join(d.modules_to_save) or None,
                    optimizer_in_backward=d.optimizer_in_backward, lora_dropout=d.lora_dropout, **_impl_kwargs(d))


def row_of(d: Draw, traced, est, seconds: float, case: dict | None = None) -> dict:
    """The comparison row of a draw from its trace and its estimate (see run_one)."""
    analytic, truth = est.memory.allocated, traced.total
    row = {"draw": d.__dict__, "dims": d.dims(), "traced_bytes": truth, "analytic_bytes": analytic,
           "error": (analytic - truth) / truth, "traced_moment": traced.peak_moment,
           "analytic_moment": est.memory.peak_phase,
           "moment_right": stage(traced.peak_moment) == stage(est.memory.peak_phase),
           "seconds": seconds}
    if case is not None:
        row["case"] = trace_case_of(d, est, truth, traced, case["seed"], case["index"], case.get("with_dpo", True),
                                    case.get("wide", False))
    return row


def trace_case_of(d: Draw, est, truth: float, traced, seed: int, index: int, with_dpo: bool = True,
                  wide: bool = False) -> dict:
    """The traced draw as a validation case of the trace source (trainfit.trace.case); `with_dpo` (recorded when
    true): drawn from the stream that draws DPO (`draw`); `wide` (recorded when true): from the wide space."""
    from trainfit.trace.case import trace_case

    return trace_case(est, truth, hf_config(d), case_id=f"trace-conformance-s{seed}-{index:03d}-{d.family}-"
                      f"{d.method}", origin=f"benchmarks/conformance.py --seed {seed}, draw {index}",
                      peak_moment=traced.peak_moment, traced_layers=traced.traced_layers,
                      extra={"generator": "benchmarks/conformance.py", "seed": seed, "index": index,
                             **({"with_dpo": True} if with_dpo else {}), **({"wide": True} if wide else {}),
                             "draw": json.loads(json.dumps(_recorded(d)))})


def _recorded(d: Draw) -> dict:
    """A draw as a trace case records it: fields added after the shipped cases were made (lora_dropout) only where
    they are not their default, so the shipped cases regenerate unchanged."""
    defaults = {"lora_dropout": 0.0, "freeze_layers": 2, "vocab_size": 0, "width": 1, "head_scale": 1}
    return {k: v for k, v in d.__dict__.items() if not (k in defaults and v == defaults[k])}


def regenerate(case: dict) -> dict:
    """A shipped trace case made again from its seed and draw index (tests: the shipped numbers reproduce)."""
    seed, index = case["trace"]["seed"], case["trace"]["index"]
    with_dpo = bool(case["trace"].get("with_dpo"))  # cases made before DPO was drawn: the stream without it
    wide = bool(case["trace"].get("wide"))
    d = draws(index + 1, seed, with_dpo, wide)[index]
    return run_one(d, {"seed": seed, "index": index, "with_dpo": with_dpo, "wide": wide})["case"]


def _impl_kwargs(d: Draw) -> dict:
    """optimizer_impl, where the estimator takes it."""
    import inspect

    from trainfit.api import estimate

    return {"optimizer_impl": d.optimizer_impl} if "optimizer_impl" in inspect.signature(estimate).parameters else {}


def summarize(rows: list[dict]) -> dict:
    errs = [abs(r["error"]) for r in rows]
    return {"n": len(rows), "mape": 100 * sum(errs) / len(errs), "worst": 100 * max(errs),
            "moment_right": 100 * sum(r["moment_right"] for r in rows) / len(rows)}


def table(rows: list[dict]) -> str:
    lines = []
    s = summarize(rows)
    lines.append(f"overall: {s['n']} configurations  MAPE {s['mape']:.2f}%  worst {s['worst']:.2f}%  "
                 f"peak stage right {s['moment_right']:.0f}%")
    for dim in rows[0]["dims"]:
        groups: dict[str, list[dict]] = defaultdict(list)
        for r in rows:
            groups[r["dims"][dim]].append(r)
        lines.append(f"\n{dim}")
        lines.append(f"  {'value':<22}{'n':>4}{'MAPE %':>9}{'worst %':>9}{'stage ok %':>12}  traced peak at")
        for value in sorted(groups):
            g = groups[value]
            s = summarize(g)
            at = defaultdict(int)
            for r in g:
                at[stage(r["traced_moment"])] += 1
            where = ", ".join(f"{k} {v}" for k, v in sorted(at.items()))
            lines.append(f"  {value:<22}{s['n']:>4}{s['mape']:>9.2f}{s['worst']:>9.2f}{s['moment_right']:>12.0f}  {where}")
    worst = sorted(rows, key=lambda r: -abs(r["error"]))[:10]
    over = sum(abs(r["error"]) > 0.05 for r in rows)
    lines.append(f"\nworst configurations ({over} of {len(rows)} over 5 %)")
    for r in worst:
        d = r["draw"]
        lines.append(f"  [{r.get('index', '-')}] {100 * r['error']:+7.2f}%  {r['traced_moment']:<22} vs {r['analytic_moment']:<15} "
                     + " ".join(f"{k}={v}" for k, v in d.items() if k not in ("lora_targets",)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jsonl", help="write one row per configuration")
    ap.add_argument("--only", help="comma-separated draw indices of the seeded stream: rerun just those draws")
    ap.add_argument("--wide", action="store_true", help="draw from the wide space (`widen`): every combination a "
                    "user can ask of one GPU")
    ap.add_argument("--cases-out", metavar="FILE",
                    help="write each traced configuration as a validation case of the source 'trace'")
    args = ap.parse_args(argv)
    rows, start = [], time.perf_counter()
    out = open(args.jsonl, "w") if args.jsonl else None
    cases_out = open(args.cases_out, "w", encoding="utf-8") if args.cases_out else None
    only = {int(x) for x in args.only.split(",")} if args.only else None
    n = max(args.n, max(only) + 1) if only else args.n
    for i, d in enumerate(draws(n, args.seed, wide=args.wide)):
        if only is not None and i not in only:
            continue
        try:
            row = run_one(d, {"seed": args.seed, "index": i, "wide": args.wide} if cases_out else None)
        except Exception as exc:  # noqa: BLE001 - a configuration the trace cannot run is reported, not hidden
            print(f"[{i}] not traced: {type(exc).__name__}: {exc} {d}", file=sys.stderr)
            continue
        if cases_out:
            cases_out.write(json.dumps(row.pop("case")) + "\n")
            cases_out.flush()
        row["index"] = i
        rows.append(row)
        if out:
            out.write(json.dumps(row) + "\n")
            out.flush()
    for fh in (out, cases_out):
        if fh:
            fh.close()
    print(table(rows))
    print(f"\n{len(rows)} of {len(only) if only is not None else n} traced in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
