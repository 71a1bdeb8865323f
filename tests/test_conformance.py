"""Regression cases from the conformance campaign (benchmarks/conformance.py): configurations where the analytic
peak was off from the traced step, each fixed in the model (not the tolerance). Each runs the campaign's own
trace-and-estimate on a small configuration (seconds)."""

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import conformance  # noqa: E402

BASE = dict(family="llama3", layers=2, method="full", precision="bf16", param_dtype="fp32", optimizer="adamw",
            optimizer_impl="fused", grad_ckpt="full", attention="sdpa", micro_batch=1, seq_len=128, task="sft",
            lora_rank=8, lora_targets=("all-linear",), modules_to_save=())

CASES = {
    # the optimizer step holds the implementation's intermediates: the peak moves there when activations are small
    "adamw_foreach": dict(optimizer_impl="foreach"),
    "adamw_forloop_bf16": dict(optimizer_impl="forloop", param_dtype="bf16"),
    "adafactor_bf16": dict(optimizer="adafactor", optimizer_impl="forloop", param_dtype="bf16", family="qwen2"),
    "adafactor_fp32": dict(optimizer="adafactor", optimizer_impl="forloop"),
    # LoRA with adapters about as large as the blocks (rank 128 on every Linear, hidden 256, fp32 adapters), a
    # classification head (no vocabulary-sized loss buffers) and few activations: the peak is the optimizer step
    # (60.4 MiB traced), where foreach's sqrt over the whole group adds one state's worth, 10 MiB; without that
    # transient the analytic peak falls to the forward's end, 53.1 MiB (-12 %)
    "lora_foreach": dict(method="lora", optimizer_impl="foreach", lora_rank=128, layers=4, grad_ckpt="none",
                         task="classification"),
    # eager attention's softmax backward (fp32 gradients of heads x seq² beside the saved softmax)
    "eager_full_ckpt": dict(attention="eager", seq_len=1024, param_dtype="bf16"),
    "eager_no_ckpt": dict(attention="eager", seq_len=1024, grad_ckpt="none", method="lora"),
    # Adafactor stepping a 16-bit modules_to_save head beside fp32 adapters: the step's per-tensor intermediates are
    # 16 bytes per element of the head (its own dtype), not the adapters' 8 (-22.9 % before)
    "adafactor_16bit_saved_head": dict(family="qwen3", layers=4, method="lora", precision="fp16",
                                       optimizer="adafactor", optimizer_impl="forloop", attention="eager",
                                       micro_batch=2, lora_targets=("q_proj", "v_proj"), modules_to_save=("lm_head",)),
    # LoRA on Phi-3's MLP only, eager attention at 8K: the lowest block saves no attention tensors, so the blocks
    # below the top one keep far less than the mean block (+25.3 % before)
    "lora_mlp_only_eager_8k": dict(family="phi3", method="lora", optimizer="sgd", optimizer_impl="forloop",
                                   grad_ckpt="none", attention="eager", micro_batch=4, seq_len=8192,
                                   task="classification", lora_rank=16, lora_targets=("gate_up_proj", "down_proj")),
    # eager attention under full checkpointing with fp32 weights: the b x s x s fp32 causal mask stays alive to the
    # end of backward, and the softmax backward's moment holds the MLP's and o_proj's gradients but not the MLP's
    # saved tensors (+7.6 % on the classifier, the mask then hidden by the MLP's tensors counted in its place)
    "eager_mask_fp32_ckpt": dict(family="qwen3", layers=3, optimizer="adafactor", optimizer_impl="forloop",
                                 attention="eager", seq_len=2048, task="classification"),
    "eager_classifier_softmax_moment": dict(family="qwen2", layers=3, optimizer="sgd", attention="eager",
                                            micro_batch=16, task="classification"),
    # transformers' checkpointing makes the embeddings' output require grad, so a freeze fine-tune's backward runs
    # down through the frozen blocks, each keeping its checkpointed input (-5.2 % without them, two frozen of four;
    # before the tracer released MemTracker's hooks after each backward, -11.6 % on a Phi-3 classifier at 4 x 8K: the
    # tracker's hooks had kept the previous step's embeddings output and its gradient alive)
    "freeze_ckpt_frozen_blocks_run_backward": dict(layers=4, method="freeze", optimizer="sgd", optimizer_impl="forloop",
                                                   seq_len=4096, task="classification"),
    "freeze_fp32_ckpt_eager": dict(family="qwen3", method="freeze", optimizer="adafactor", optimizer_impl="forloop",
                                   attention="eager", micro_batch=2, seq_len=512, task="classification"),
    # GPT-2 (LayerNorm, Conv1D, learned positions): a classifier's final LayerNorm backward is one fused kernel
    # (+4.6 % with RMSNorm's five fp32 temporaries)
    "gpt2_classifier": dict(family="gpt2", param_dtype="bf16", grad_ckpt="none", micro_batch=16, seq_len=256,
                            task="classification"),
    # GPT-2's learned position table gets its gradient last, after the bottom block's backward (+9.2 % with it)
    "gpt2_position_grad": dict(family="gpt2", layers=4, optimizer="sgd", seq_len=1024, task="classification"),
    # Mixtral's experts are one 3-D tensor per projection (gate and up fused): Adafactor's per-tensor intermediates
    # are sized by it, and the step is the peak (-17.4 % with one expert's matrix)
    "mixtral_freeze_adafactor": dict(family="mixtral", layers=3, method="freeze", param_dtype="bf16",
                                     optimizer="adafactor", optimizer_impl="forloop", grad_ckpt="none"),
    # for-loop AdamW: the previous tensor's denom is alive while the next one's is built; GPT-2 steps its position
    # table right after the token embedding (-7.0 % with two of the largest tensor only)
    "gpt2_forloop_adamw_previous_denom": dict(family="gpt2", layers=2, precision="fp16", optimizer_impl="forloop",
                                              grad_ckpt="none"),
    # Mixtral: sparse MoE, balanced routing, LoRA on the attention projections
    "mixtral_lora": dict(family="mixtral", method="lora", grad_ckpt="none", micro_batch=2, seq_len=1024,
                         lora_targets=("q_proj", "v_proj")),
    # Gemma-2 soft-caps its attention scores (tanh), which SDPA cannot: transformers runs its eager attention when
    # SDPA is asked for (s x s scores per head), and tanh saves its output, one more s x s tensor (-43.4 % with
    # SDPA's saved tensors, at 2K tokens)
    "gemma2_softcapped_attention_runs_eager": dict(family="gemma2", param_dtype="bf16", grad_ckpt="none",
                                                   seq_len=2048),
    # final-logit soft-capping: tanh saves its vocabulary-sized output until the head's backward (-11.4 % without
    # it, at 16 x 128 tokens where the logits outweigh the attention)
    "gemma2_final_logit_softcap": dict(family="gemma2", param_dtype="bf16", grad_ckpt="none", attention="eager",
                                       micro_batch=16),
    # Gemma-2's blocks alternate sliding-window and global attention: one forward builds two b x s x s masks, and
    # under full checkpointing each block kind keeps its own until its backward (-5.6 % with one mask, fp32 weights)
    "gemma2_two_masks_ckpt": dict(family="gemma2", attention="eager", seq_len=4096),
    # sandwich norms: the post-attention and both feed-forward norms run after the attention core, so their saved
    # tensors are gone at the eager softmax's backward, as are the MLP's LoRA adapters' inputs (+2.2 % with the
    # norms, +3.2 % with the adapters' inputs counted there)
    "gemma2_lora_attention_backward": dict(family="gemma2", method="lora", param_dtype="bf16", attention="eager",
                                           micro_batch=4, seq_len=1024, task="classification", lora_rank=16),
    # DPO as TRL's DPOTrainer runs it (trainfit.trace.tracer.dpo_loss): the frozen reference keeps the policy's fp32
    # weights, and the logits are fp32 (accelerate converts each forward's), both forwards' alive beside the logged
    # entropy's flattened copy; the loss backward holds 16 bytes x vocab x token (-17.6 % before: a 16-bit reference
    # and SFT's cross-entropy buffers)
    "dpo_full_fp32_reference": dict(task="dpo"),
    "dpo_full_larger_batch": dict(task="dpo", seq_len=512, micro_batch=2),
    "dpo_lora": dict(task="dpo", method="lora", grad_ckpt="none"),
    # the reference forward with eager attention runs after the policy's: its scores, their fp32 copy and the fp32
    # softmax over heads x seq² for all 2 x micro-batch sequences, beside every saved tensor of the policy (-16.9 %
    # without that moment); with fp32 weights the mask add promotes the scores to fp32 (8 bytes a score, not 10:
    # +6.9 % with 10)
    "dpo_lora_eager_reference_forward": dict(task="dpo", method="lora", attention="eager", grad_ckpt="none",
                                             seq_len=2048),
    "dpo_full_fp32_eager_reference_forward": dict(task="dpo", attention="eager", grad_ckpt="none", seq_len=2048),
    # PEFT's modules_to_save: the reference forward runs the original head the policy's forward did not
    "dpo_lora_saved_head": dict(task="dpo", family="qwen3", method="lora", micro_batch=8, seq_len=256,
                                modules_to_save=("lm_head",)),
    # selective checkpointing (the attention core under torch.utils.checkpoint): the core keeps its inputs — K/V
    # not repeated to every head (GQA 8/2) — and eager's fp32 causal mask to the end of backward (-2.45 % with the
    # repeated K/V and no mask)
    "selective_eager_gqa_mask": dict(grad_ckpt="selective", attention="eager", seq_len=1024),
    # a LoRA block's o_proj and MLP adapters' input copies are freed before its softmax backward (+2.24 % kept)
    "selective_lora_eager_softmax_moment": dict(method="lora", grad_ckpt="selective", attention="eager",
                                                seq_len=2048, task="classification"),
    # selective: o_proj frozen (LoRA on q/v), so the attention output is recomputed, not kept (+7.6 %)
    "selective_lora_qv_output_recomputed": dict(layers=4, method="lora", param_dtype="bf16", optimizer="sgd",
                                                optimizer_impl="foreach", grad_ckpt="selective", seq_len=2048,
                                                task="classification", lora_targets=("q_proj", "v_proj")),
    # LoRA on q/v, embedding frozen: the first block's pre-attention norm saves nothing (+2.95 % with it)
    "lora_qv_first_block_norm": dict(layers=4, method="lora", param_dtype="bf16", optimizer="sgd",
                                     optimizer_impl="foreach", grad_ckpt="none", seq_len=2048, task="classification",
                                     lora_targets=("q_proj", "v_proj")),
    # selective: a block's MLP backward runs before its attention core is recomputed (+5.5 % with the whole block)
    "selective_gpt2_mlp_backward_before_recompute": dict(family="gpt2", method="lora", param_dtype="bf16",
                                                         grad_ckpt="selective", micro_batch=16, seq_len=4096,
                                                         task="classification", lora_targets=("c_attn",)),
    # selective with fp32 weights: the core keeps RoPE's fp32 rotated q and k (-3.9 % with 16-bit ones)
    "selective_phi3_fp32_rope_qk": dict(family="phi3", precision="fp16", grad_ckpt="selective", micro_batch=2,
                                        seq_len=2048, task="classification"),
    # optimizer-in-backward (one optimizer per parameter, stepped in a post-accumulate-grad hook): no gradient at a
    # block's peak (+12.8 % with the largest tensor's there)
    "in_backward_no_gradient_at_block_peak": dict(optimizer_in_backward=True, optimizer_impl="foreach",
                                                  param_dtype="bf16", micro_batch=2, seq_len=256,
                                                  task="classification"),
    # the embedding's own step at the end of backward: for-loop AdamW's two fp32 intermediates of its size (-23.1 %)
    "in_backward_embedding_step_forloop": dict(optimizer_in_backward=True, family="qwen2", optimizer_impl="forloop",
                                               task="classification"),
    # a tied embedding: the output head's share waits in autograd's buffer for the embedding's, then both sum:
    # three V x h gradients at the end of backward (-9.5 %)
    "in_backward_tied_embedding": dict(optimizer_in_backward=True, family="qwen2", optimizer_impl="foreach"),
    # GPT-2's position table (8K x h, larger than the tied embedding) steps while the head's share still waits
    # (-14.8 %)
    "in_backward_gpt2_positions_beside_tied_head": dict(optimizer_in_backward=True, family="gpt2",
                                                        optimizer="adafactor", optimizer_impl="forloop",
                                                        grad_ckpt="none"),
    # an untied output head steps in its own backward: for-loop AdamW's two fp32 V x h intermediates beside its
    # gradient, its autocast copy already freed (-7.3 % without the step)
    "in_backward_head_step_forloop": dict(layers=3, optimizer_impl="forloop", grad_ckpt="none",
                                          optimizer_in_backward=True),
    # LoRA on Qwen3's MLP with fp32 adapters under autocast, full checkpointing, a classifier at 16 x 4K (campaign
    # seed 0, draw 23): the peak is the end of the top block's recompute — PEFT's fp32 copy of down_proj's input
    # beside everything the block saves and the running forward's MLP input, down_proj input and output — not the
    # MLP's backward (+7.13 % with the copy counted there, on top of the backward's buffers)
    "lora_fp32_copy_at_recompute_end": dict(family="qwen3", method="lora", optimizer_impl="forloop", micro_batch=16,
                                            seq_len=4096, task="classification",
                                            lora_targets=("gate_proj", "up_proj", "down_proj")),
    # a classifier's final RMSNorm backward runs after the head's, whose saved input is gone; a freeze fine-tune's
    # lowest trained block reads an input that needs no gradient, so its first norm keeps no fp32 input (seed 0,
    # draw 20: +5.31 % with both)
    "freeze_classifier_head_input_freed": dict(family="qwen2", layers=4, method="freeze", param_dtype="bf16",
                                               optimizer="sgd", optimizer_impl="forloop", grad_ckpt="none",
                                               micro_batch=4, seq_len=2048, task="classification",
                                               optimizer_in_backward=True),
    # Gemma-2's sandwich norms with LoRA on the MLP only: the lowest block's post-attention and pre-MLP norms save
    # nothing, and neither does its attention, whose mask is then freed after the forward (seed 0, draw 38: +5.88 %)
    "gemma2_mlp_lora_lowest_block_norms": dict(family="gemma2", method="lora", precision="fp16",
                                               grad_ckpt="selective", micro_batch=16, seq_len=512,
                                               task="classification", lora_rank=4,
                                               lora_targets=("gate_proj", "up_proj", "down_proj")),
    # selective checkpointing with an adapter on o_proj reading the attention output uncast (pure bf16): that output
    # is kept as the adapter's input (seed 0, draw 71: -4.32 % without it)
    "selective_o_adapter_keeps_output": dict(family="qwen2", layers=4, method="lora", param_dtype="bf16",
                                             optimizer="sgd", optimizer_impl="foreach", grad_ckpt="selective",
                                             micro_batch=8, task="classification", lora_rank=32,
                                             lora_targets=("q_proj", "k_proj", "v_proj", "o_proj")),
    # Phi-3's fused qkv: q comes out of RoPE laid out (batch, heads, seq, dim), so a trained o_proj's input is a
    # contiguous copy of the attention output beside the output itself (seed 0, draw 160: -3.08 %)
    "phi3_full_o_proj_input_copy": dict(family="phi3", layers=3, optimizer_impl="forloop", grad_ckpt="none",
                                        micro_batch=16, seq_len=1024, task="classification"),
    # LoRA on every Linear of Phi-3 (fused qkv_proj and gate_up_proj), pure bf16, full checkpointing, 8K tokens: the
    # traced peak is in the top block's recompute, at the fused gate_up adapter's `* scaling` (seen op by op with
    # MemTracker): the base output, lora_B's output and the scaled one (3 x tokens x 2 x intermediate) beside what the
    # block saved before its MLP and the mid-block residual — not the MLP's backward (-6.0 % without that moment,
    # memory._mlp_in_adapter_forward; an open case until 2026-12-01)
    "phi3_lora_all_linear_bf16_ckpt_8k": dict(family="phi3", layers=4, method="lora", param_dtype="bf16",
                                              optimizer_impl="foreach", seq_len=8192, task="classification"),
    # the same moment with fp32 weights under fp16 autocast, LoRA on gate_up and o_proj at 2 x 4K (-8.4 % without it)
    "phi3_lora_gate_up_fp16_autocast_ckpt": dict(family="phi3", layers=3, method="lora", precision="fp16",
                                                 optimizer_impl="foreach", micro_batch=2, seq_len=4096,
                                                 task="classification", lora_targets=("gate_up_proj", "o_proj")),
    # SGD without momentum (torch's default) keeps no state: a Qwen2 full fine-tune of a classifier, pure bf16, at 128
    # tokens (+49.3 % with a momentum buffer counted)
    "sgd_without_momentum_no_state": dict(family="qwen2", optimizer="sgd-nomomentum", optimizer_impl="foreach",
                                          param_dtype="bf16", grad_ckpt="none", task="classification"),
    # PEFT's lora_dropout: each adapter keeps its 1-byte mask (CUDA's native_dropout) and its own dropped copy,
    # so adapters of one input no longer share it (-18 % to -21 % on these three with dropout uncounted); under
    # autocast a recomputed block's lora_A holds the fp32 dropped copy beside the fp32 cast of down's input
    "lora_dropout_autocast_ckpt": dict(method="lora", lora_dropout=0.1, micro_batch=2, seq_len=2048,
                                       task="classification"),
    "lora_dropout_pure_bf16_ckpt": dict(method="lora", lora_dropout=0.1, param_dtype="bf16", micro_batch=2,
                                        seq_len=2048, task="classification"),
    "lora_dropout_pure_bf16": dict(method="lora", lora_dropout=0.1, param_dtype="bf16", grad_ckpt="none",
                                   micro_batch=2, seq_len=2048, task="classification"),
    # lora_dropout under autocast without checkpointing, the forward's own end of a 2-block classifier: the peak is
    # lora_A's matmul on the top block's down_proj (seen op by op), PEFT's fp32 copy of the input and dropout's fp32
    # dropped copy alive together, lora_B's output not yet (-5.4 % with the copy alone, +2.7 % with the dropped copy
    # beside the adapter's outputs; an open case until 2026-12-07)
    "lora_dropout_autocast_forward_end": dict(method="lora", lora_dropout=0.1, grad_ckpt="none", micro_batch=2,
                                              seq_len=2048, task="classification"),
    # optimizer-in-backward on a freeze fine-tune with fp32 weights at 128 tokens: down_proj's gradient is stepped
    # beside the block's saved tensors (-9.9 % before that term), and the lowest trained block's recomputed 16-bit
    # weight copies but down_proj's are alive at its peak (memory.bottom_block_casts; -5.4 % without them, an open
    # case until 2026-12-07)
    "in_backward_down_proj_step_in_block": dict(optimizer_in_backward=True, method="freeze", optimizer="adafactor",
                                                optimizer_impl="forloop", task="classification"),
    # a full fine-tune with fp32 weights under autocast, full checkpointing, hidden 2048 (the wide campaign's width
    # x8) at 6 x 256 tokens: the bottom block's peak in its MLP backward holds its recomputed 16-bit weight copies
    # but down_proj's (seen op by op; -4.1 % without them)
    "bottom_block_recomputed_weight_casts": dict(family="qwen3", optimizer="sgd", micro_batch=6, seq_len=256,
                                                 task="classification", width=8, head_scale=2),
    # the wide campaign's LoRA target subsets (conformance.py --wide, seed 0, draw 49: +7.2 %): with the embedding
    # frozen, the lowest block's eager attention saves each operand only for an adapted projection's gradient
    # (+12.3 % on k alone, +27.7 % on v alone, +47 % on o_proj alone before), SDPA nothing without q/k/v adapters
    # (+8.7 % on o_proj alone), and eager attention's output is saved only for o_proj
    "lora_k_only_eager_lowest_block": dict(method="lora", param_dtype="bf16", grad_ckpt="none", attention="eager",
                                           micro_batch=4, seq_len=1024, task="classification",
                                           lora_targets=("k_proj",)),
    "lora_v_only_eager_lowest_block": dict(method="lora", grad_ckpt="none", attention="eager", micro_batch=4,
                                           seq_len=1024, task="classification", lora_targets=("v_proj",)),
    "lora_o_only_eager_lowest_block": dict(method="lora", param_dtype="bf16", grad_ckpt="none", attention="eager",
                                           micro_batch=4, seq_len=1024, task="classification",
                                           lora_targets=("o_proj",)),
    "lora_o_only_sdpa_lowest_block": dict(method="lora", param_dtype="bf16", grad_ckpt="none", micro_batch=4,
                                          seq_len=1024, task="classification", lora_targets=("o_proj",)),
}


# Open disagreements, held to the worst-case limit (5 %) until the mechanism is pinned down.
OPEN = {
    # a recomputed MoE block's MLP backward: with its gradient buffers at tokens x top-k rows the analytic peak was
    # +0.95 % against a trace that still carried MemTracker's leaked hidden states (tracer._grad_hooks_released); on
    # the clean trace it is +4.1 % at 1K tokens, +5.2 % at 2K, +6.0 % at 4K, and with tokens rows -5.2 / -6.6 / -7.6 %:
    # the buffers lie between the two (about 1.56 x tokens rows for top-2 of 4 experts), which no mechanism here explains
    "mixtral_lora_classifier_ckpt_moe_backward": dict(family="mixtral", layers=3, method="lora", precision="fp16",
                                                      optimizer_impl="forloop", seq_len=1024,
                                                      task="classification", lora_rank=4,
                                                      lora_targets=("q_proj", "v_proj")),
}


# Open and over the 5 % limit: expected to fail until the model explains them (strict: a pass fails, so the entry
# is removed when the model is fixed)
OVER_LIMIT: set[str] = set()


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason="open: over 5 %"))
                                  if n in OVER_LIMIT else n for n in sorted(OPEN)])
def test_open_case_within_the_worst_case_limit(name):
    row = conformance.run_one(conformance.Draw(**{**BASE, **OPEN[name]}))
    assert abs(row["error"]) <= 0.05, row


@pytest.mark.parametrize("name", sorted(CASES))
def test_regression_case_within_2_percent(name):
    row = conformance.run_one(conformance.Draw(**{**BASE, **CASES[name]}))
    assert abs(row["error"]) <= 0.02, row
    assert row["moment_right"], row


CI_LIMITS = {"mape": 2.0, "worst": 5.0, "moment_right": 95.0}  # percent; issue 19's acceptance limits


def test_ci_sample_covers_every_dimension():
    """The CI sample holds every value the generator gives each dimension and every optimizer/implementation on a
    full or freeze fine-tune small enough for the optimizer step to be the peak, and is fixed by its seed."""
    sample = conformance.ci_sample()
    assert len(sample) >= 40
    pool = conformance.draws(2000, seed=20)
    wanted = {(k, v) for d in pool for k, v in d.dims().items()}
    assert {(k, v) for d in sample for k, v in d.dims().items()} == wanted
    exposed = {v for d in sample for k, v in conformance.coverage(d) if k == "optimizer_step_exposed"}
    assert exposed == {f"{d.optimizer}/{d.optimizer_impl}" for d in pool}
    assert sample == conformance.ci_sample()


@pytest.fixture(scope="module")
def ci_traces():
    """The CI sample traced once for this module (the slow part: minutes); the tests below estimate against it."""
    return [(d, *conformance.trace_draw(d)) for d in conformance.ci_sample()]


def _ci_rows(traces) -> tuple[dict, str]:
    """(summary of the draws held to the limits, the table of all) from a fresh analytic estimate of each traced
    draw. A draw that is an open case (OPEN above, each with its error and what is not pinned down) is reported,
    not held to the limits; at most two may be."""
    from trainfit.estimate import core

    core.clear_memos()  # memory estimates are memoised (core._memory): estimate afresh
    open_draws = {conformance.Draw(**{**BASE, **case}) for case in OPEN.values()}
    rows = [conformance.row_of(d, traced, conformance.estimate_draw(d), seconds) for d, traced, seconds in traces]
    report = conformance.table(rows)
    held = [r for (d, _, _), r in zip(traces, rows) if d not in open_draws]
    assert len(traces) - len(held) <= 2, report
    return conformance.summarize(held), report


def _within(s: dict) -> bool:
    return (s["mape"] <= CI_LIMITS["mape"] and s["worst"] <= CI_LIMITS["worst"]
            and s["moment_right"] >= CI_LIMITS["moment_right"])


def test_ci_sample_within_limits(ci_traces):
    """A fixed, seeded sample of the campaign's generator (benchmarks/conformance.py): the analytic peak within
    2 % of the traced step on average, 5 % at worst, the peak's stage (forward / backward / optimizer) right in
    95 % of the configurations."""
    s, report = _ci_rows(ci_traces)
    assert s["mape"] <= CI_LIMITS["mape"], report
    assert s["worst"] <= CI_LIMITS["worst"], report
    assert s["moment_right"] >= CI_LIMITS["moment_right"], report


# Issue 19's acceptance: breaking the optimizer step's transient or the loss's logits buffers makes the CI sample
# fail. Each is looked up by name in trainfit.estimate.memory (the only module that calls them), patched there.
MUTATIONS = ("optimizer_step_transient", "logits_bytes")


@pytest.mark.parametrize("name", MUTATIONS)
def test_ci_sample_catches_a_broken_term(ci_traces, monkeypatch, name):
    """With one term of the analytic model returning 0, the same traced sample violates the CI limits (MAPE over
    2 %, worst over 5 % or the peak's stage right in under 95 %): the sample covers the term."""
    import trainfit.estimate.memory as memory
    from trainfit.estimate import core

    assert callable(getattr(memory, name))
    intact, report = _ci_rows(ci_traces)
    assert _within(intact), report  # the mutation, not the model as it is, is what must break the limits
    try:
        with monkeypatch.context() as patch:
            patch.setattr(memory, name, lambda *args, **kwargs: 0.0)
            broken, report = _ci_rows(ci_traces)
    finally:
        core.clear_memos()  # no memoised mutant estimate outlives the test
    assert broken != intact, f"{name} -> 0 changed no estimate of the sample\n{report}"
    assert not _within(broken), f"{name} -> 0 and the sample still passes: {broken}\n{report}"


# The wide space (benchmarks/conformance.py --wide: every method x targets x checkpointing x micro-batch 1-32 x dtype
# and autocast x optimizer x freeze depth x vocabulary up to 256K x width x head_dim x lora_dropout a user can ask of
# one GPU): a small fixed sample of it. Limits measured 2026-12-07 (docs/accuracy.md, "The wide space"):
# MAPE within the 2 %, the worst of this sample as measured (3.86 %, a Phi-3 LoRA DPO draw), rounded up.
WIDE_LIMITS = {"mape": 2.0, "worst": 4.0}


def test_wide_sample_within_limits():
    """15 draws of the wide space (conformance.wide_sample, fixed by its seed), each traced and estimated."""
    sample = conformance.wide_sample()
    assert len(sample) == 15 and sample == conformance.wide_sample()
    assert len({d.method for d in sample}) == 3 and max(d.micro_batch for d in sample) > 16
    rows = [conformance.run_one(d) for d in sample]
    s, report = conformance.summarize(rows), conformance.table(rows)
    assert s["mape"] <= WIDE_LIMITS["mape"], report
    assert s["worst"] <= WIDE_LIMITS["worst"], report
