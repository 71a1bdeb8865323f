"""The loss path under Liger kernels (TrainingSpec.liger_kernel): Liger's fused linear cross-entropy (FLCE) instead of
transformers' output head, fp32 upcast and cross-entropy.

What it allocates, read from linkedin/Liger-Kernel at v0.8.2 (ead96b61, src/liger_kernel/ops/
fused_linear_cross_entropy.py `fused_linear_cross_entropy_forward` and `LigerFusedLinearCrossEntropyFunction`; the
transformers models reach it through `lce_forward`, which skips the logits in training):

- the tokens are taken in chunks of `next_power_of_2(ceil(BT / ceil(V / H)))` rows, so a chunk's logits are about
  as large as the hidden states: `logits_chunk = _input_chunk @ weight.t()` (the autocast dtype), the loss and the
  logits' gradient written into it in place by one kernel;
- `grad_input = zeros_like(_input)`: the hidden states' gradient, computed in the forward chunk by chunk
  (`grad_logits_chunk @ weight`, a chunk x H temporary copied in);
- `grad_weight = zeros_like(weight)` where the head trains: the head's gradient, accumulated in the forward. With an
  fp32 gradient on Ampere or newer under torch >= 2.8, `torch.addmm(..., out_dtype=float32, out=grad_weight)`
  accumulates in place (from v0.8.1, PR #1239, whose benchmark measured the old path's extra peak as 6 bytes per
  V x H element); otherwise `grad_weight += torch.mm(grad_logits_chunk.t(), _input_chunk).float()` makes a 16-bit
  and an fp32 V x H temporary while it adds;
- `loss_1d`: fp32 per token;
- for the backward it keeps `grad_input` and `grad_weight` (mean / sum reduction, transformers' use), which its
  backward scales in place: the head's backward allocates nothing vocabulary-sized.

Soft-capping runs inside the kernel (no tanh tensor). The fused RMSNorm, SwiGLU and RoPE that Liger also patches in
change what a block saves; they are not modelled here (counted as the eager model's, an over-estimate of the saved
activations without checkpointing)."""

from __future__ import annotations

from ..spec.model import ModelSpec
from ..spec.training import Precision, TrainingSpec


def chunk_rows(tokens: int, vocab: int, hidden: int) -> int:
    """Rows of one FLCE chunk: `triton.next_power_of_2(triton.cdiv(BT, triton.cdiv(V, H)))`, at most BT in use."""
    inc = -(-vocab // hidden)
    rows = -(-tokens // inc)
    return min(tokens, 1 << max(0, rows - 1).bit_length())


def liger_items(m: ModelSpec, t: TrainingSpec, act: int, residual: int, weight: int,
                head_trains: bool) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """(the FLCE forward's peak, what it keeps for the backward, what the head's backward holds) in bytes. `act`: the
    matmul's dtype (autocast's, else the weights'); `residual`: the hidden states' dtype; `weight`: the head weight's
    dtype as the forward sees it (gathered 16-bit under ZeRO-3 / FSDP); `head_trains`: full fine-tuning of an LM."""
    tokens, v, h = t.tokens_per_micro_batch, m.vocab, m.hidden
    rows = chunk_rows(tokens, v, h)
    grad_input = float(residual * tokens * h)
    grad_weight = float(weight * v * h) if head_trains else 0.0
    in_place = weight == 4 and t.precision == Precision.BF16  # the addmm out_dtype path: bf16 implies Ampere+
    accumulate = 0.0 if (not head_trains or in_place) else float((act + 4) * v * h)
    forward = {"logits/liger_grad_input": grad_input, "logits/liger_grad_weight": grad_weight,
               "logits/liger_loss_per_token": 4.0 * tokens, "logits/liger_chunk": float(act * rows * v),
               "logits/liger_chunk_temporary": max(float(act * rows * h), accumulate)}
    kept = {"logits/liger_grad_input": grad_input, "logits/liger_grad_weight": grad_weight}
    return forward, kept, {"logits/liger_grad_input": grad_input}
