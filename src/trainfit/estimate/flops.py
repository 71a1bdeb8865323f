"""FLOPs of one training step, split into forward, input-gradient and weight-gradient parts.

Matmul FLOPs are 2·m·n·k. A frozen weight skips its weight gradient; blocks below the lowest trainable block run
no backward at all. Attention's sequence-squared term follows PaLM (Chowdhery et al. 2022, appendix B): per token
and layer 2·2·s·(heads·head_dim) forward (QKᵀ and PV), twice that backward. MFU uses PaLM's model FLOPs
6·N + 12·L·H·Q·T per token (no recomputation), with N the parameters that take part in a matmul.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..spec.model import ModelSpec
from ..spec.choices import selective_every
from ..spec.training import GradCkpt, Task, TrainingSpec
from .params import layer_linears, matmul_params_per_token, op_policy_split
from .trainable import ParamSplit, head_for


@dataclass(frozen=True)
class StepFlops:
    """FLOPs per micro-batch on one GPU, by part."""

    forward: float
    input_grad: float
    weight_grad: float
    recompute: float
    attention_forward: float  # the s² part of `forward` (also inside the other parts)
    model_flops: float  # PaLM convention, for MFU
    attention: float = 0.0  # the s² part of `total`: forward, input gradient and recomputation
    causal: bool = True  # a decoder's attention: a causal kernel may skip the upper triangle of QKᵀ, no more

    @property
    def matmul_floor(self) -> float:
        """FLOPs the step's matmuls need whatever the attention kernel does — a lower bound on the work of the
        micro-batch: `total` with the s² terms (counted in full, PaLM's convention) at half for a causal model (the
        most a causal kernel skips is the upper triangle; blocks along the diagonal are computed whole) and left out
        otherwise (an encoder's kernel may skip padding). Its backward counts two matmuls per forward one (dV, dP,
        dQ, dK), not FlashAttention's recomputation of the scores, so the bound holds for any kernel."""
        return self.total - self.attention * (0.5 if self.causal else 1.0)

    @property
    def total(self) -> float:
        return self.forward + self.input_grad + self.weight_grad + self.recompute

    def as_dict(self) -> dict[str, float]:
        return {"forward": self.forward, "input_grad": self.input_grad, "weight_grad": self.weight_grad,
                "recompute": self.recompute, "total": self.total, "model_flops": self.model_flops}


def block_linear_flops_per_token(m: ModelSpec) -> float:
    total = 0.0
    for lin in layer_linears(m):
        active = m.experts_per_tok if lin.count > 1 else 1
        total += 2.0 * lin.in_features * lin.out_features * active * lin.share
    if m.is_moe and m.structure is None:  # a read structure lists its router among the Linears
        total += 2.0 * m.hidden * m.num_experts  # router
    return total


def _op_policy_recompute_flops(m: ModelSpec) -> float:
    """Forward FLOPs per token of the Linears torchtitan's per-op checkpointing runs again (params.op_policy_split)."""
    return sum(2.0 * lin.in_features * lin.out_features * (m.experts_per_tok if lin.count > 1 else 1) * lin.share
               for lin in op_policy_split(m)[1])


def attention_flops_per_token(m: ModelSpec, seq_len: int) -> float:
    """QKᵀ and PV for one token against the whole sequence (PaLM convention: no causal halving), per mean block.

    A read structure weighs its block kinds: a sliding-window layer attends to min(s, window) keys; an MLA layer's
    QKᵀ runs over the q/k head dim (nope + rope) and PV over the value head dim; linear-attention and state-space
    layers have no s² term (their recurrence is linear in s and not counted: their projections are among the
    Linears)."""
    if m.structure is None:
        return 4.0 * seq_len * m.q_dim
    total = 0.0
    for g in m.structure.groups:
        share = g.count / m.layers
        if g.mixer in ("linear_attention", "mamba", "other"):
            continue
        keys = min(seq_len, g.window) if g.mixer == "sliding_attention" and g.window else seq_len
        if g.mixer == "mla":
            v_dim = int(m.extra.get("v_head_dim") or m.head_dim)
            total += share * 2.0 * keys * m.heads * (m.head_dim + v_dim)
        else:
            total += share * 4.0 * keys * m.q_dim
    return total


def head_flops_per_token(m: ModelSpec, task: Task) -> float:
    if task == Task.CLASSIFICATION:
        return 0.0  # a few thousand FLOPs per sequence
    return 2.0 * m.vocab * m.hidden + (2.0 * m.hidden * m.hidden if m.is_encoder else 0.0)


def adapter_flops_per_token(m: ModelSpec, split: ParamSplit) -> float:
    return 2.0 * split.adapters / m.layers if split.adapters else 0.0


@lru_cache(maxsize=16384)
def step_flops(m: ModelSpec, t: TrainingSpec, split: ParamSplit) -> StepFlops:
    tokens = t.tokens_per_micro_batch
    blocks_bwd = m.layers - split.lowest_trainable_block
    lin = block_linear_flops_per_token(m)
    att = attention_flops_per_token(m, t.seq_len)
    ada = adapter_flops_per_token(m, split)
    head = head_flops_per_token(m, t.task)
    full = split.trainable_blocks == m.layers and not split.adapters

    forward = tokens * (m.layers * (lin + att + ada) + head)
    input_grad = tokens * (blocks_bwd * (lin + 2 * att + ada) + head)
    trainable_lin = lin if (full or split.adapters == 0) else 0.0
    weight_grad = tokens * (split.trainable_blocks * trainable_lin + m.layers * ada * (1 if split.adapters else 0)
                            + (head if full and t.task != Task.CLASSIFICATION else 0.0))
    # blocks recomputed whole (full checkpointing, or every N-th under a layer-selective policy), and what the other
    # selective policies run again in each block: the attention core, or torchtitan's per-op share of the Linears
    every = selective_every(t.selective_ac) if t.grad_ckpt == GradCkpt.SELECTIVE else None
    whole = blocks_bwd if t.grad_ckpt == GradCkpt.FULL else (blocks_bwd // every if every else 0)
    core = t.grad_ckpt == GradCkpt.SELECTIVE and t.selective_ac == "attention"
    per_block = _op_policy_recompute_flops(m) if t.grad_ckpt == GradCkpt.SELECTIVE and t.selective_ac == "op" else 0.0
    recompute = tokens * (whole * (lin + att + ada) + blocks_bwd * ((att if core else 0.0) + per_block))
    recomputed_att = whole + (blocks_bwd if core else 0)
    attention = tokens * (m.layers * att + blocks_bwd * 2 * att + recomputed_att * att)
    if t.task == Task.DPO:  # frozen reference model: one more forward over the same sequences
        forward += tokens * (m.layers * (lin + att) + head)
        attention += tokens * m.layers * att
    # Model FLOPs: the work the method needs, without recomputation. For full training this is PaLM's
    # 6N + 12·L·H·Q·T per token; LoRA skips the frozen weights' gradients (about 4N).
    model_flops = forward + input_grad + weight_grad
    return StepFlops(forward, input_grad, weight_grad, recompute, tokens * m.layers * att, model_flops, attention,
                     causal=not m.is_encoder)


def palm_model_flops_per_token(m: ModelSpec, t: TrainingSpec) -> float:
    """PaLM appendix B: 6N + 12·L·H·Q·T, N = parameters in matmuls (full training, no recompute)."""
    n_matmul = matmul_params_per_token(m, head_for(m, t.task) if t.task != Task.CLASSIFICATION else "none")
    return 6.0 * n_matmul + 3.0 * m.layers * attention_flops_per_token(m, t.seq_len)
