"""Model-state terms: trainable weights, gradients, optimizer states and the optimizer step's own transients.

ZeRO (Rajbhandari et al. 2020, section 3) and DeepSpeed's own estimators (DeepSpeed 0.19
`estimate_zero2_model_states_mem_needs`, `estimate_zero3_model_states_mem_needs`) for DeepSpeed; FSDP's sharded fp32
states and gathered blocks; torch.optim's foreach / for-loop AdamW and Adafactor step intermediates (traced:
tests/test_trace.py)."""

from __future__ import annotations

from dataclasses import replace

from ..spec.model import ModelSpec
from ..spec.training import Fsdp, Method, Offload, Optimizer, OptimizerImpl, Precision, Strategy, TrainingSpec
from .params import Tensor
from .trainable import ParamSplit, adafactor_state_bytes, adamw_8bit_state_bytes
from .memory_result import _add


HOST_BUFFER_FACTOR = 1.5  # DeepSpeed's `additional_buffer_factor` default in its estimators


def host_offload_bytes(t: TrainingSpec, s: Strategy, split: ParamSplit) -> float:
    """Host RAM per node that CPU offload needs, by DeepSpeed's estimator arithmetic (buffer factor 1.5):
    ZeRO-1/2 optimizer offload max(4 x GPUs, 16) x Ψ; ZeRO-3 16 x Ψ / nodes (optimizer) or 18 x Ψ / nodes (all).
    FSDP CPU offload keeps fp32 parameters, gradients and Adam states on the host: 16 x Ψ / nodes. 0 without
    offload (loading the model is not counted)."""
    if s.offload == Offload.NONE:
        return 0.0
    psi = split.trainable
    frozen = split.frozen * 2.0  # frozen 16-bit weights offloaded with the parameters
    if s.engine == "fsdp":
        return (16.0 * psi + frozen) / s.nodes * HOST_BUFFER_FACTOR
    if s.zero_stage == 3:
        per_param = 18.0 if s.offload == Offload.ALL else 16.0
        extra = frozen if s.offload == Offload.ALL else 0.0
        return (per_param * psi + extra) / s.nodes * HOST_BUFFER_FACTOR
    return psi * max(4.0 * s.gpus, 16.0) * HOST_BUFFER_FACTOR


def _trainable_bytes(t: TrainingSpec, s: Strategy) -> tuple[float, float]:
    """(bytes per trainable weight as stored on the GPU, bytes per gradient element) for the engine."""
    fp32 = t.precision == Precision.FP32
    if s.engine == "deepspeed":
        return (4.0, 4.0) if fp32 else (2.0, 2.0)
    if t.method in (Method.LORA, Method.QLORA):
        # PEFT keeps adapters (and a trained head) in fp32; pure 16-bit stacks keep them in the base dtype
        return (2.0, 2.0) if t.param_dtype == "bf16" else (4.0, 4.0)
    w = 4.0 if fp32 or t.param_dtype == "fp32" else 2.0
    return w, w


def _optimizer_state_bytes(m: ModelSpec, t: TrainingSpec, split: ParamSplit, w_bytes: float, deepspeed: bool) -> float:
    """Optimizer state bytes for all trainable parameters (before sharding), without fp32 master weights."""
    psi = split.trainable
    state = 4.0 if (deepspeed or w_bytes == 4.0) else w_bytes  # torch keeps states in the parameter dtype
    if t.optimizer == Optimizer.ADAMW or t.optimizer == Optimizer.LAMB:
        return 2 * state * psi
    if t.optimizer == Optimizer.ADAMW_8BIT:  # bitsandbytes' blockwise 8-bit m and v, per tensor
        return adamw_8bit_state_bytes(split, split.trainable_blocks, m.vocab * m.hidden)
    if t.optimizer == Optimizer.SGD:
        return state * psi  # momentum buffer
    if t.optimizer == Optimizer.SGD_NOMOMENTUM:
        return 0.0  # torch.optim.SGD with momentum 0 keeps no state (torch/optim/sgd.py: no momentum_buffer)
    return adafactor_state_bytes(m, split, split.trainable_blocks)


def _largest_trainable_tensor(m: ModelSpec, t: TrainingSpec, split: ParamSplit, with_saved: bool = True) -> int:
    """Elements of the largest trainable parameter tensor. MoE experts are one 3-D tensor per projection in
    transformers 5 (experts x out x in), gate and up fused into one (traced: Mixtral, freeze + Adafactor, whose
    per-tensor step intermediates are sized by it: -17 % with one expert's matrix)."""
    sizes = [x.rows * x.cols * (x.count if x.role == "expert" else 1) for x in split.trainable_tensors]
    gate_up = [x for x in split.trainable_tensors if x.role == "expert" and x.module in ("gate_proj", "up_proj")]
    if len(gate_up) == 2:
        sizes.append(sum(x.rows * x.cols * x.count for x in gate_up))
    if split.saved and with_saved:
        sizes.append(m.vocab * m.hidden)
    return max(sizes, default=0)


def _forloop_adamw_elements(m: ModelSpec, t: TrainingSpec, split: ParamSplit) -> int:
    """Elements of the for-loop AdamW step's intermediates at their peak: `denom = exp_avg_sq.sqrt() /
    bias_correction2_sqrt` makes two of a tensor's size, and the previous tensor's `denom` is still bound to the loop
    variable until the next one replaces it (torch/optim/adam.py `_single_tensor_adam`): 2 x a tensor + the one
    before it in parameter order, at least 2 x the largest. Traced: GPT-2's position table stepped right after the
    token embedding (-5.8 % with 2 x the largest only)."""
    def size(x: Tensor) -> int:
        return x.rows * x.cols * (x.count if x.role == "expert" else 1)

    best = 2 * _largest_trainable_tensor(m, t, split)
    block = [size(x) for x in split.trainable_tensors if x.per_layer]
    rest = [size(x) for x in split.trainable_tensors if not x.per_layer]  # in the model's order
    for seq in (block, rest):
        for prev, cur in zip(seq, seq[1:]):
            best = max(best, 2 * cur + prev)
    if block and m.layers > 1:  # a block's first tensor follows the block below's last
        best = max(best, 2 * block[0] + block[-1])
    return best


def in_backward_step_transient(t: TrainingSpec, w_bytes: float, elements: float) -> float:
    """Intermediates of one parameter's own optimizer stepping it in backward (optimizer-in-backward: one optimizer
    per parameter), for a tensor of `elements`: AdamW foreach one state's worth of it (`_foreach_sqrt` over a
    one-tensor group), for-loop two (`exp_avg_sq.sqrt() / bias_correction2_sqrt`; no previous tensor's `denom`
    survives the step, each optimizer has its own loop), fused none, SGD none, Adafactor 8 or 16 bytes per element
    as in optimizer_step_transient. Traced: Qwen2 classifier, fp32 weights, the tied embedding's step at the end
    of backward (+7.69 MiB foreach, +15.38 MiB for-loop beside its 7.69 MiB gradient)."""
    state = 4.0 if w_bytes == 4.0 else w_bytes
    if t.optimizer == Optimizer.ADAMW:
        return {OptimizerImpl.FOREACH: 1.0, OptimizerImpl.FORLOOP: 2.0}.get(t.optimizer_impl, 0.0) * state * elements
    if t.optimizer == Optimizer.ADAFACTOR:
        return (8.0 if w_bytes == 4.0 else 16.0) * elements
    return 0.0


def optimizer_step_transient(m: ModelSpec, t: TrainingSpec, split: ParamSplit, w_bytes: float, psi: float,
                             saved_bytes: float = 0.0) -> float:
    """Intermediates the optimizer's step allocates beside its states (one GPU, torch optimizers), checked against
    traced steps (benchmarks/conformance.py):
      AdamW foreach   `torch._foreach_sqrt(exp_avg_sqs)` over the whole group: one more state's worth (torch/optim/
                      adam.py `_multi_tensor_adam`);
      AdamW for-loop  `(exp_avg_sq.sqrt() / bias_correction2_sqrt)` for one tensor at a time: two of the largest;
      AdamW fused     none; SGD (momentum updated in place; without momentum the
                      parameters updated in place) none;
      Adafactor       (transformers' Adafactor) per tensor: `grad**2 + eps` and the factored estimate built from the
                      row/column factors, both fp32, plus fp32 copies of a 16-bit gradient and weight: 8 or 16 bytes
                      per element of the largest tensor.
    `saved_bytes`: PEFT's modules_to_save copies stored in a dtype of their own (a 16-bit head beside fp32 adapters):
    each dtype's tensors are sized by their own bytes — foreach's per-dtype groups add up, a per-tensor
    intermediate is the larger of the two (traced: Adafactor stepping a 16-bit lm_head copy beside fp32 adapters
    holds 16 bytes per element of the head, not 8; -23 % before)."""
    if saved_bytes and split.saved:
        adapters = optimizer_step_transient(m, t, replace(split, saved=0), w_bytes, psi)
        head = optimizer_step_transient(m, t, replace(split, saved=0, trainable_tensors=(Tensor(
            "modules_to_save", m.vocab, m.hidden, "head", per_layer=False),)), saved_bytes, split.saved)
        both = t.optimizer == Optimizer.ADAMW and t.optimizer_impl == OptimizerImpl.FOREACH
        return adapters + head if both else max(adapters, head)
    state = 4.0 if w_bytes == 4.0 else w_bytes
    if t.optimizer == Optimizer.ADAMW:
        if t.optimizer_impl == OptimizerImpl.FOREACH:
            return state * psi
        if t.optimizer_impl == OptimizerImpl.FORLOOP:
            return state * _forloop_adamw_elements(m, t, split)
        return 0.0
    if t.optimizer == Optimizer.ADAFACTOR:
        return (8.0 if w_bytes == 4.0 else 16.0) * _largest_trainable_tensor(m, t, split)
    return 0.0


def _deepspeed_states(s: Strategy, n: int, psi: float, w_t: float, opt_bytes: float, master: float,
                      largest_module: int, trained_module: int, states: dict, grads: dict, offload_opt: bool) -> None:
    """DeepSpeed's bookkeeping; with ZeRO-3 the largest module is gathered (2 bytes x params) and, when it trains,
    its 16-bit gradient too (DeepSpeed's 4 x largest_layer for full training)."""
    fp32_grad = 4.0 * psi
    if s.zero_stage == 3:
        _add(states, "weights/trainable_shard", psi * w_t / n if s.offload != Offload.ALL else 0.0)
        _add(states, "weights/gathered_layer", 2.0 * largest_module)
        _add(grads, "gradients/gathered_layer", 2.0 * trained_module)
        if not offload_opt:
            _add(states, "optimizer/master_fp32", master / n)
            _add(states, "optimizer/states", opt_bytes / n)
            _add(grads, "gradients/fp32_partition", fp32_grad / n)
        return
    _add(states, "weights/trainable", psi * w_t)
    if offload_opt:  # DeepSpeed's estimator: 2Ψ on the GPU; gradients stream to the host bucket by bucket
        return
    # ZeRO-2 partitions the 16-bit gradients too (DeepSpeed 0.19: 2Ψ + 18Ψ/N); ZeRO-1 keeps them whole.
    _add(grads, "gradients/16bit", psi * w_t / (n if s.zero_stage == 2 else 1))
    _add(grads, "gradients/fp32_partition", fp32_grad / n)
    _add(states, "optimizer/master_fp32", master / n)
    _add(states, "optimizer/states", opt_bytes / n)


def _fsdp_states(t: TrainingSpec, s: Strategy, n: int, psi: float, w_t: float, g_t: float, opt_bytes: float,
                 block_grad: float, block_bytes: float, root: int, states: dict, grads: dict) -> None:
    offload = s.offload != Offload.NONE
    if not offload:
        _add(states, "weights/trainable_shard", psi * w_t / n)
        _add(states, "optimizer/states", opt_bytes / n)
        _add(grads, "gradients/shard", psi * g_t / n)
    if s.fsdp == Fsdp.FULL_SHARD:
        # root unit + current and prefetched block
        _add(states, "weights/gathered_units", 2.0 * root + 2 * block_bytes)
    else:
        _add(states, "weights/gathered_all", 2.0 * psi)  # SHARD_GRAD_OP keeps parameters gathered
    _add(grads, "gradients/unsharded_block", 2.0 * block_grad)
