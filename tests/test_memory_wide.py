"""Terms of the analytic memory model fixed by the wide conformance campaign (issue 35, part 2:
`benchmarks/conformance.py --wide`): each test pins one term's bytes on a small Llama-3-shaped model (analytic only,
no trace; tests/test_conformance.py checks the same configurations against traces)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import conformance  # noqa: E402

from trainfit.estimate.core import clear_memos  # noqa: E402

BASE = dict(family="llama3", layers=2, method="lora", precision="bf16", param_dtype="bf16", optimizer="adamw",
            optimizer_impl="fused", grad_ckpt="none", attention="eager", micro_batch=4, seq_len=1024,
            task="classification", lora_rank=8, lora_targets=("all-linear",), modules_to_save=())
HF = conformance.FAMILIES["llama3"]
HEADS, HIDDEN, INTER = HF["num_attention_heads"], HF["hidden_size"], HF["intermediate_size"]
TOKENS = BASE["micro_batch"] * BASE["seq_len"]


def _phase_items(phase: str, **job) -> dict[str, float]:
    clear_memos()
    est = conformance.estimate_draw(conformance.Draw(**{**BASE, **job}))
    return next(p for p in est.memory.phases if p.name == phase).items


def _blocks(items: dict[str, float], key: str, per_token: float) -> float:
    """How many blocks' worth of `per_token` bytes the item holds."""
    return items.get(f"activations/{key}", 0.0) / (per_token * TOKENS)


@pytest.mark.parametrize("targets,q,k_rep,softmax,probs", [
    (("k_proj",), 2, 1, 2, 1),  # k's gradient needs q; the scores' needs the softmax and v; no one needs the probs
    (("q_proj",), 1, 2, 2, 1),
    (("v_proj",), 1, 1, 1, 2),  # only v's gradient: PV keeps the probabilities, the scores keep nothing
    (("q_proj", "k_proj", "v_proj"), 2, 2, 2, 2),
])
def test_lowest_block_eager_attention_saves_what_the_adapted_projections_need(targets, q, k_rep, softmax, probs):
    """LoRA with the embedding frozen: the lowest block's input takes no gradient, so its eager attention saves
    each matmul operand only for an adapted projection's gradient (traced: +12.3 % on k alone, +27.7 % on v alone,
    before; tests/test_conformance.py). Two blocks: the top one saves everything."""
    items = _phase_items("backward_start", lora_targets=targets)
    assert _blocks(items, "attn/q", 2 * HIDDEN) == pytest.approx(q)
    assert _blocks(items, "attn/k_repeated", 2 * HIDDEN) == pytest.approx(k_rep)
    assert _blocks(items, "attn/softmax_fp32", 4 * HEADS * BASE["seq_len"]) == pytest.approx(softmax)
    assert _blocks(items, "attn/probs", 2 * HEADS * BASE["seq_len"]) == pytest.approx(probs)


def test_lowest_block_attention_saves_nothing_for_an_o_proj_adapter_alone():
    """LoRA on o_proj alone: nothing before o_proj takes a gradient in the lowest block, so neither eager attention
    nor SDPA saves anything there (traced: +47 % eager, +8.7 % SDPA before); o_proj's adapter reads the attention
    output uncast in pure bf16, which stays saved."""
    for attention, key in (("eager", "attn/softmax_fp32"), ("sdpa", "attn/q")):
        items = _phase_items("backward_start", lora_targets=("o_proj",), attention=attention)
        per_token = 4 * HEADS * BASE["seq_len"] if attention == "eager" else 2 * HIDDEN
        assert _blocks(items, key, per_token) == pytest.approx(1), attention
        assert _blocks(items, "attn/out", 2 * HIDDEN) == pytest.approx(2), attention


def test_eager_attention_output_is_saved_only_for_o_proj():
    """Eager attention keeps no output of its own (SDPA's kernel does): o_proj's trained weight or an adapter reading
    it uncast saves it, nothing else (traced: Llama-3 LoRA on k and gate, 4 blocks at 12 x 4K, +0.2 % with it)."""
    assert "activations/attn/out" not in _phase_items("backward_start", lora_targets=("k_proj", "gate_proj"))
    under_autocast = _phase_items("backward_start", param_dtype="fp32", lora_targets=("o_proj",))
    assert "activations/attn/out" not in under_autocast  # the adapter keeps its own 16-bit cast instead
    full = _phase_items("backward_start", method="full")
    assert _blocks(full, "attn/out", 2 * HIDDEN) == pytest.approx(2)
    sdpa = _phase_items("backward_start", lora_targets=("k_proj", "gate_proj"), attention="sdpa")
    assert _blocks(sdpa, "attn/out", 2 * HIDDEN) == pytest.approx(2)


def test_lora_dropout_down_proj_forward_holds_the_fp32_dropped_copy():
    """fp32 adapters under autocast with lora_dropout: the forward's peak is lora_A's matmul on the top block's
    down_proj, where PEFT's fp32 copy of the input and dropout's fp32 dropped copy are both alive, and lora_B's output
    is not yet (traced op by op: -5.4 % without the dropped copy)."""
    items = _phase_items("forward_end", param_dtype="fp32", attention="sdpa", lora_dropout=0.1,
                         micro_batch=2, seq_len=2048)
    copy = 4.0 * INTER * 2 * 2048
    assert items["activations/lora_fp32_input_copy"] == pytest.approx(copy)
    assert items["activations/lora_fp32_dropped_copy"] == pytest.approx(copy)
    without = _phase_items("forward_end", param_dtype="fp32", attention="sdpa", micro_batch=2, seq_len=2048)
    assert "activations/lora_fp32_dropped_copy" not in without


def _block_linear_params(hf: dict, without_down: bool = True) -> int:
    h, f = hf["hidden_size"], hf["intermediate_size"]
    hd = hf.get("head_dim") or h // hf["num_attention_heads"]
    q, kv = hf["num_attention_heads"] * hd, hf["num_key_value_heads"] * hd
    return h * q + 2 * h * kv + q * h + 2 * h * f + (0 if without_down else f * h)


def test_bottom_block_holds_its_16bit_weight_copies_but_down_projs():
    """fp32 weights under autocast: the lowest trained block's matmuls saved 16-bit copies of its weights (in the
    forward, or in its recompute), alive at its MLP backward's peak but down_proj's, which its own backward freed
    (seen op by op: -4.1 % without them on a Qwen3 full fine-tune at hidden 2048)."""
    for ckpt in ("full", "none"):
        items = _phase_items("backward_end", method="full", param_dtype="fp32", attention="sdpa", grad_ckpt=ckpt)
        assert items["other/autocast_copies_bottom_block"] == pytest.approx(2.0 * _block_linear_params(HF)), ckpt
    pure = _phase_items("backward_end", method="full", param_dtype="bf16", attention="sdpa", grad_ckpt="full")
    assert "other/autocast_copies_bottom_block" not in pure  # no casts without fp32 weights under autocast
    lora = _phase_items("backward_end", param_dtype="fp32", attention="sdpa", grad_ckpt="full")
    assert "other/autocast_copies_bottom_block" not in lora  # a 16-bit base: only the adapters are cast


def test_recomputed_block_with_an_fp32_residual_holds_one_hidden_tensor_less():
    """Full checkpointing with an fp32 residual stream (fp32 weights under autocast): the recomputed block's
    backward holds one fp32 hidden-sized tensor fewer than the block's forward saves (traced: 3 of the 4 its
    RMSNorms save); a 16-bit residual stream's block holds all it saves."""
    def last_block(ckpt: str, dtype: str) -> float:
        return _phase_items("backward_end", method="full", param_dtype=dtype, attention="sdpa",
                            grad_ckpt=ckpt)["activations/last_block"]

    assert last_block("full", "fp32") - last_block("none", "fp32") == pytest.approx(-4.0 * HIDDEN * TOKENS)
    assert last_block("full", "bf16") == pytest.approx(last_block("none", "bf16"))
