"""Loss terms: the logits and the cross-entropy's buffers in forward and backward (transformers' upcast, Gemma-2's
final soft-capping), LitGPT's chunked head and loss, torchtune's chunked output and loss, TRL's DPO (policy and
reference log-probabilities, entropy)."""

from __future__ import annotations

from ..spec.model import ModelSpec
from ..spec.training import Attention, Method, Task, TrainingSpec
from .activations import Regime, softmax_bytes
from .memory_acts import LITGPT_HEAD_CHUNK, attention_mask_kinds


def litgpt_logits_items(m: ModelSpec, t: TrainingSpec, r: Regime, kept_inputs: float) -> tuple[
        dict[str, float], dict[str, float], dict[str, float], dict[str, float], dict[str, float]]:
    """The logits of a LitGPT finetune step (litgpt 0.4.x finetune/lora.py and full.py, utils.chunked_cross_entropy),
    in bytes: (the model's return, the head's last chunk, the loss's end, the backward's start, the head's
    backward).

    The loop's `logits = model(...)` keeps the step's 16-bit logits until the next step's forward returns: while
    that forward runs, the previous logits are alive, and with them the previous graph, whose old-bitsandbytes
    MatMul4Bit nodes still hold their kept inputs (`ctx.tensors` is a plain attribute, not a saved tensor that
    backward frees). LoRA runs the head in 128-token chunks (a list of 16-bit chunks); full fine-tuning runs it
    whole, and the loss flattens the shifted logits, which copies them when a micro-batch holds more than one
    sequence. The loss takes each 128-row chunk through cross_entropy in the logits' dtype: log_softmax keeps its
    16-bit output. In backward each chunk's gradient passes through two 16-bit chunk-sized tensors; a whole head
    gathers the chunks' gradients into the flattened and then the shifted shape (two 16-bit logits-sized
    tensors). Traced with litgpt 0.4.13 under FakeTensorMode on the config_hub cases (Falcon-7B QLoRA: 8.75 GiB
    traced, 8.79 measured)."""
    a, v, tokens = float(r.act), float(m.vocab), t.tokens_per_micro_batch
    b = t.sequences_per_micro_batch
    shifted = b * max(0, t.seq_len - 1)
    logits = a * v * tokens
    chunked = t.method in (Method.LORA, Method.QLORA)
    if chunked:
        last = t.seq_len - LITGPT_HEAD_CHUNK * ((max(1, t.seq_len) - 1) // LITGPT_HEAD_CHUNK)
        copy = a * v * b * max(0, last - 1) if b > 1 else 0.0
        chunk = a * v * b * min(LITGPT_HEAD_CHUNK, t.seq_len)
        head = {"logits/litgpt_logits": logits, "logits/grad": 2 * chunk}
    else:
        copy = a * v * shifted if b > 1 else 0.0
        chunk = a * v * min(LITGPT_HEAD_CHUNK, shifted)
        head = {"logits/litgpt_logits": logits, "logits/grad": 2 * a * v * shifted}
    returned = {"logits/litgpt_logits": logits, "logits/litgpt_previous_step_logits": logits,
                "activations/litgpt_previous_step_kbit_inputs": kept_inputs}
    # the head's last chunk, before its logits exist (where a 4-bit head dequantizes its weight)
    chunks = max(1, -(-t.seq_len // LITGPT_HEAD_CHUNK)) if chunked else 1
    before_last = {**returned, "logits/litgpt_logits": logits * (chunks - 1) / chunks}
    loss_end = {"logits/litgpt_logits": logits, "logits/litgpt_log_softmax": a * v * shifted,
                "logits/litgpt_shifted_copy": copy}
    backward = {"logits/litgpt_logits": logits, "logits/litgpt_log_softmax": a * v * shifted,
                "logits/litgpt_chunk_grads": 2 * chunk}
    return returned, before_last, loss_end, backward, head


def logits_bytes(m: ModelSpec, t: TrainingSpec, r: Regime) -> float:
    """Loss buffers at the start of backward: fp32 log-probs saved by cross-entropy, their gradient and the
    gradient of the fp32 upcast (transformers' ForCausalLMLoss upcasts logits to fp32): 12 bytes x vocab x token.
    Classification heads produce a handful of logits."""
    if t.task == Task.CLASSIFICATION:
        return 0.0
    return 12.0 * m.vocab * t.tokens_per_micro_batch


def logits_dtype_items(m: ModelSpec, t: TrainingSpec, r: Regime) -> tuple[dict[str, float], dict[str, float],
                                                                            dict[str, float]]:
    """A model code's own loss on its logits' dtype with no autocast around it (TrainingSpec.loss_impl
    "logits_dtype"), in bytes: (the forward's end, the backward's start, the head's backward).

    Qwen v1's remote code (modeling_qwen.py `QWenLMHeadModel.forward`, the version ms-swift's repository keeps at
    cb89d91): `lm_logits = self.lm_head(hidden_states)`, `shift_logits = lm_logits[..., :-1, :].contiguous()`,
    `CrossEntropyLoss()(shift_logits.view(-1, V), ...)`: no `.float()`. Under DeepSpeed the module is cast to the
    run's 16-bit dtype and Hugging Face Trainer opens no autocast (the engine owns mixed precision), so log_softmax
    runs on the 16-bit copy and saves its 16-bit output: the logits, the shifted copy and the log-probabilities at
    the forward's end (3 x 2 bytes per vocabulary entry and token, where transformers' upcast loss keeps 10); at the
    backward's start the saved log-probabilities, their gradient and the input's gradient (6, where it keeps 12);
    the head's backward starts from one 16-bit logits gradient (the slice's zero-padded gradient)."""
    a, v, tokens = float(r.act), float(m.vocab), t.tokens_per_micro_batch
    shifted = t.sequences_per_micro_batch * max(0, t.seq_len - 1)
    forward = {"logits/logits": a * v * tokens, "logits/shifted_copy": a * v * shifted,
               "logits/log_softmax": a * v * shifted}
    start = {"logits/log_softmax": a * v * shifted, "logits/log_softmax_output_grad": a * v * shifted,
             "logits/log_softmax_input_grad": a * v * shifted}
    return forward, start, {"logits/grad": a * v * tokens}


def fused_xentropy_items(m: ModelSpec, t: TrainingSpec, r: Regime) -> tuple[dict[str, float], dict[str, float],
                                                                              dict[str, float]]:
    """flash-attn's fused cross-entropy on the 16-bit logits (TrainingSpec.loss_impl "fused_xentropy"), in bytes:
    (the forward's end, the backward's start, the head's backward). llm-foundry's ComposerMPTCausalLM takes it by
    default (llmfoundry/models/mpt/modeling_mpt.py at 33aeb79 L706-713 and 5e85bd6 L981-987:
    `om_model_config.get('loss_fn', 'fused_crossentropy')` -> flash_attn.losses.cross_entropy.CrossEntropyLoss(
    ignore_index=-100)) on the logits of all the tokens (its targets are the rolled labels: no shifted copy). The
    kernel reads the 16-bit logits and writes one loss and one fp32 log-sum-exp per token, saving the logits and the
    log-sum-exp for backward; without inplace_backward (the default) its backward writes the logits' gradient into a
    new tensor of their size and dtype. No fp32 copy of the logits is made, where transformers' upcast loss keeps 12
    bytes per vocabulary entry and token."""
    a, v, tokens = float(r.act), float(m.vocab), t.tokens_per_micro_batch
    forward = {"logits/logits": a * v * tokens, "logits/lse": 4.0 * tokens}
    start = {"logits/logits": a * v * tokens, "logits/lse": 4.0 * tokens, "logits/grad": a * v * tokens}
    return forward, start, {"logits/grad": a * v * tokens}


def megatron_loss_items(m: ModelSpec, t: TrainingSpec, r: Regime) -> tuple[dict[str, float], dict[str, float],
                                                                            dict[str, float]]:
    """Megatron-Core's vocab-parallel cross-entropy on its GPT model's 16-bit logits (TrainingSpec.loss_impl
    "megatron": Megatron-LM, NeMo and Megatron-Bridge, fused or not), in bytes: (the forward's end, the backward's
    start, the head's backward). Read from Megatron-LM core_v0.16.1: GPTModel.forward keeps the output layer's
    logits until the loss returns; tensor_parallel/cross_entropy.py VocabParallelCrossEntropy.calculate_logits_max
    takes them to fp32 (`.float()`), subtracts the max, exponentiates and normalises in place, and saves that one
    fp32 tensor (the softmax) for backward; backward turns it into the gradient in place, and the fp32-to-16-bit
    copy's backward (or the fused version's `grad_input.to(torch.bfloat16)`, fusions/fused_cross_entropy.py) makes
    the 16-bit gradient the output layer takes. So 6 bytes per vocabulary entry and token at the forward's end
    (16-bit logits and the fp32 softmax) and at the backward's start (the fp32 gradient and its 16-bit copy), where
    transformers' upcast loss keeps 12. `m.vocab` is a tensor-parallel rank's share (the output layer is
    column-parallel: each rank holds vocab / tp of the logits)."""
    a, v, tokens = float(r.act), float(m.vocab), t.tokens_per_micro_batch
    forward = {"logits/logits": a * v * tokens, "logits/fp32_softmax": 4.0 * v * tokens}
    start = {"logits/fp32_softmax": 4.0 * v * tokens, "logits/grad": a * v * tokens}
    return forward, start, {"logits/grad": a * v * tokens}


def final_softcap_bytes(m: ModelSpec, t: TrainingSpec, r: Regime) -> float:
    """Final-logit soft-capping (Gemma-2's final_logit_softcapping: logits / cap, tanh, * cap in Gemma2ForCausalLM.
    forward): tanh saves its output, one more vocabulary-sized tensor per token in the logits' dtype, alive from the
    end of the forward until the head's backward (the division and multiplication by a number save nothing). Its
    backward holds at most three such 16-bit tensors (the saved output, the incoming and the outgoing gradient),
    less than the loss's fp32 buffers at the start of backward. Classification heads do not soft-cap."""
    if not m.final_softcap or t.task == Task.CLASSIFICATION:
        return 0.0
    return float(r.act * m.vocab * t.tokens_per_micro_batch)


# torchtune's recipes (full_finetune_*, lora_finetune_*; configs from PR #1390, 2024-08-28, on): loss
# torchtune.modules.loss.CEWithChunkedOutputLoss, whose num_output_chunks the recipe hands the decoder
# (`self._model.set_num_output_chunks(self._loss_fn.num_output_chunks)`), its default:
# torchtune/modules/loss/ce_chunked_output_loss.py L30 @30b8519 `num_output_chunks: int = 8`
TORCHTUNE_OUTPUT_CHUNKS = 8


def torchtune_logits_items(m: ModelSpec, t: TrainingSpec, r: Regime) -> tuple[dict[str, float], dict[str, float],
                                                                                dict[str, float]]:
    """The logits of a torchtune step (TrainingSpec.loss_impl), in bytes: (the forward's end, the backward's start,
    the head's backward). Read from pytorch/torchtune at 30b8519 (the README's 'Memory and training speed' table)
    and 1814feb (its 'Optimization flags' table), the same code at both:

    torchtune_chunked  torchtune/modules/transformer.py `TransformerDecoder.chunked_output` (L447-466 @30b8519):
                       `[self.output(chunk) for chunk in h.chunk(num_output_chunks, dim=1)]`, 16-bit chunks that
                       the recipe's `logits` holds until the loss returns (recipes/full_finetune_single_device.py
                       `_loss_step`, `del logits` after the loss); CEWithChunkedOutputLoss (L35-83) upcasts one chunk
                       at a time (`F.cross_entropy(logits.float(), labels, reduction="sum")`). With compile=True the
                       recipes compile only that per-chunk function (torchtune/training/_compile.py L68-71
                       `loss.compute_cross_entropy = torch.compile(...)`): Inductor saves each chunk's 16-bit input
                       and per-row statistics, no fp32 copy, and its backward writes one 16-bit chunk gradient (seen
                       in its output code and by counting saved tensors: 2.00 B x V x token saved, torch 2.13 CPU).
                       Eager, each chunk's log_softmax saves its fp32 output: 4 B x V x token kept, and the last
                       chunk's fp32 copy and log-probabilities beside the 16-bit chunks at the forward's peak; its
                       backward holds one chunk's fp32 gradient and the log_softmax's input gradient.
    torchtune_fp32     torch.nn.CrossEntropyLoss (the Optimization-flags rows before '+ Chunked Cross Entropy';
                       configs/llama3_1/405B_qlora.yaml L59-60 @30b8519): the decoder returns the whole logits upcast,
                       `self.output(h).float()` (transformer.py L614 @30b8519, the 16-bit logits freed at once); the
                       loss runs eagerly (the full-finetune and distributed recipes discard compile_loss's result:
                       recipes/full_finetune_single_device.py L292 @1814feb): fp32 logits and log-probabilities at the
                       forward's end, then the saved log-probabilities, their gradient and the input's (12 B).

    The autograd engine runs every chunk's loss backward before the head's (they were made later), so the head's
    backward begins with all the chunks' 16-bit gradients. Traced eagerly with torchtune 0.3.1 on CPU (Llama-3.1
    builder, 1 block, vocab 32768, 2 x 512 tokens, live bytes after each op, per V x token): chunked 6.50 forward
    peak, 5.00 backward; fp32 8.00 and 12.00; the terms below give the same. Not counted: a trained head's weight
    is used by eight matmuls, and the same CPU trace (eager, torch 2.13) sums their weight gradients out of place,
    three V x d 16-bit tensors at once in the head's backward; the README's 8B and 70B full fine-tunes measured
    below what that would add, so it is left out until a GPU trace settles it."""
    a, v, tokens = float(r.act), float(m.vocab), t.tokens_per_micro_batch
    if t.loss_impl == "torchtune_fp32":
        return ({"logits/torchtune_fp32_logits": 4.0 * v * tokens, "logits/torchtune_log_softmax": 4.0 * v * tokens},
                {"logits/loss_buffers": 12.0 * v * tokens}, {"logits/grad": a * v * tokens})
    per_seq = -(-t.seq_len // TORCHTUNE_OUTPUT_CHUNKS)  # torch.chunk: ceil(s / n) tokens a chunk, the last smaller
    chunk = v * t.sequences_per_micro_batch * min(per_seq, t.seq_len)
    chunks = {"logits/torchtune_output_chunks": a * v * tokens}
    head = {"logits/torchtune_chunk_grads": a * v * tokens}
    if t.torch_compile:
        return chunks, {**chunks, "logits/torchtune_chunk_grad": a * chunk}, head
    upcast = 4.0 if r.act < 4 else 0.0  # .float() of an fp32 chunk returns it
    forward = {**chunks, "logits/torchtune_log_softmax": 4.0 * v * tokens, "logits/torchtune_chunk_upcast":
               upcast * chunk}
    return forward, {"logits/torchtune_log_softmax": 4.0 * v * tokens, "logits/torchtune_chunk_grads_fp32":
                     8.0 * chunk}, head


DPO_ENTROPY_CHUNK_ROWS = 128  # trl/trainer/utils.py v1.9.0 `entropy_from_logits(logits, chunk_size=128)`


def dpo_logits_items(m: ModelSpec, t: TrainingSpec, r: Regime) -> tuple[dict[str, float], dict[str, float],
                                                                         dict[str, float]]:
    """The logits of a DPO step as TRL's DPOTrainer computes its loss (trl v1.9.0, dpo_trainer.py
    `DPOTrainer._compute_loss`, default sigmoid loss; traced in trainfit.trace.tracer.dpo_loss), for 2 x micro-batch
    sequences (chosen + rejected): accelerate converts each forward's 16-bit logits to fp32 (`convert_outputs_to_fp32`,
    the 16-bit ones then freed), `selective_log_softmax` takes fp32 logits through a per-row logsumexp whose backward
    keeps the fp32 logits themselves. (the policy forward's end, the logged metrics' moment, the loss backward's
    start; bytes):
      forward end  the 16-bit logits and their fp32 copy, while autocast's weight casts are still cached;
      metrics      the policy's and the reference's fp32 logits (both alive until the loss returns), the entropy's
                   flattened copy of the shifted logits (`entropy_from_logits`: the slice is not contiguous) and three
                   fp32 temporaries of its 128-row chunk;
      backward     the saved fp32 logits, gather's dense gradient, the per-row logsumexp gradients and their sum:
                   4 + 12 bytes x vocab x token."""
    tokens = t.tokens_per_micro_batch
    shifted = t.sequences_per_micro_batch * max(0, t.seq_len - 1)  # logits[..., :-1, :]
    v = float(m.vocab)
    conversion = r.act if r.act < 4 else 0.0  # accelerate converts whenever the precision is 16-bit
    forward = {"logits/dpo_16bit_logits": conversion * v * tokens, "logits/dpo_fp32_logits": 4.0 * v * tokens}
    metrics = {"logits/dpo_policy_and_reference_fp32_logits": 2 * 4.0 * v * tokens,
               "logits/dpo_entropy_flat_copy": 4.0 * v * shifted,
               "logits/dpo_entropy_chunk": 3 * 4.0 * v * min(DPO_ENTROPY_CHUNK_ROWS, shifted)}
    backward = {"logits/dpo_saved_fp32_logits": 4.0 * v * tokens, "logits/dpo_loss_backward": 12.0 * v * shifted}
    return forward, metrics, backward


def dpo_reference_eager_items(m: ModelSpec, t: TrainingSpec, r: Regime) -> dict[str, float]:
    """The reference forward of a DPO step with eager attention (under no_grad, after the policy's forward: its fp32
    logits alive): the block running it holds its attention scores in the activation dtype, their fp32 copy and the
    fp32 softmax (`softmax(x, dtype=float32)` converts first: ATen's fused half-to-float path is CUDA fp16 only), the
    causal mask it builds, b x s x s in the hidden states' dtype, and the attention's inputs (the residual and its
    norm, q and k before and after rotation, v, k and v repeated to every head). Traced: LoRA, eager, 2 x 2048 tokens,
    656 MiB of scores and mask in a 2-block Llama, 13 MiB of inputs; the same reference with fp32 weights, 568 MiB.
    With fp16 on a GPU the fused kernel skips the fp32 copy: the CPU trace, and this term, count 4 bytes a score more
    than such a run holds (bf16 converts on both). Empty for SDPA (its reference forward is outweighed by the logged
    metrics' logits)."""
    if t.attention != Attention.EAGER or m.is_encoder:
        return {}
    tokens = t.tokens_per_micro_batch
    soft = softmax_bytes(m, r)
    # an fp32 residual stream (fp32 weights under autocast) makes the mask fp32 and the rotary embedding's q and k
    # fp32: adding the mask promotes the 16-bit scores to fp32, which the softmax then takes without a copy (traced:
    # 8 bytes per score there, 10 with a 16-bit base)
    rot = 4 if r.residual == 4 else r.act
    if soft == r.act:
        scores = 2 * soft
    else:
        scores = 2 * soft if r.residual == 4 else r.act + 2 * soft
    # one mask per kind of attention block, built before the first block (Gemma-2: sliding-window and global)
    mask = (4 if (r.weight == 4 or r.kbit_upcast) else 2) * t.sequences_per_micro_batch * t.seq_len * t.seq_len \
        * attention_mask_kinds(m)
    inputs = (2 * r.residual * m.hidden + r.act * (2 * m.q_dim + 2 * m.kv_dim) + rot * (2 * m.q_dim + m.kv_dim)) \
        * tokens
    return {"logits/dpo_fp32_logits": 4.0 * m.vocab * tokens,
            "activations/dpo_reference_attention_scores": float(scores * m.heads * t.seq_len * tokens),
            "activations/dpo_reference_causal_mask": float(mask),
            "activations/dpo_reference_attention_inputs": float(inputs)}
