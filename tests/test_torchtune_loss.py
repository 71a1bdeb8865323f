"""torchtune's output head and loss (issue 35): its recipes run the output projection in 8 chunks and
CEWithChunkedOutputLoss upcasts one chunk at a time (TrainingSpec.loss_impl "torchtune_chunked", frameworks.yaml); a
run with torch.nn.CrossEntropyLoss upcasts the whole logits in the decoder ("torchtune_fp32"). These tests hold the
terms to that code's arithmetic (estimate/memory_loss.py `torchtune_logits_items`, which cites it) and to the
README's measured drop when chunked cross-entropy is turned on."""

import json
from pathlib import Path

import pytest

import trainfit.estimate.memory as memory
from trainfit.api import estimate
from trainfit.catalog import resolve_model
from trainfit.catalog.efficiency import Efficiencies
from trainfit.estimate.activations import Regime
from trainfit.estimate.memory_loss import TORCHTUNE_OUTPUT_CHUNKS, logits_bytes, torchtune_logits_items
from trainfit.spec.training import TrainingSpec
from trainfit.validate import _model, _training, predict_case

ROOT = Path(__file__).resolve().parents[1]
GIB = 2**30


def _terms(loss_impl, compiled, seq_len=4096, micro_batch=2, act=2):
    m = resolve_model("llama-3.2-3b")
    t = TrainingSpec(method="full", seq_len=seq_len, micro_batch=micro_batch, param_dtype="bf16",
                     torch_compile=compiled, loss_impl=loss_impl)
    r = Regime(act=act, weight=act, autocast=False)
    return m, t, [sum(x.values()) for x in torchtune_logits_items(m, t, r)]


def test_chunked_output_and_loss_follow_torchtunes_code():
    """Compiled CEWithChunkedOutputLoss keeps the eight 16-bit chunks (Inductor saves them, no fp32 copy) and its
    backward adds one 16-bit chunk gradient; eager, each chunk's log_softmax keeps its fp32 output (4 B) and the
    forward's peak adds the last chunk's fp32 copy; torch.nn.CrossEntropyLoss on the decoder's fp32 logits holds
    them and the log-probabilities (8 B), then 12 B in backward, as transformers' loss. Per V x token, for 2 x 4096
    tokens: the numbers of the eager trace in the function's docstring (6.50 / 5.00 and 8.00 / 12.00)."""
    assert TORCHTUNE_OUTPUT_CHUNKS == 8
    m, t, (fwd, start, head) = _terms("torchtune_chunked", compiled=True)
    e = m.vocab * t.tokens_per_micro_batch
    assert (fwd / e, start / e, head / e) == pytest.approx((2.0, 2.0 + 2.0 / 8, 2.0))
    _, _, (fwd, start, head) = _terms("torchtune_chunked", compiled=False)
    assert (fwd / e, start / e, head / e) == pytest.approx((2.0 + 4.0 + 4.0 / 8, 4.0 + 8.0 / 8, 2.0))
    for compiled in (True, False):
        _, _, (fwd, start, head) = _terms("torchtune_fp32", compiled=compiled)
        assert (fwd / e, start / e, head / e) == pytest.approx((8.0, 12.0, 2.0))
    # the unchunked backward is transformers' 12 B; the chunked one is a fraction of it
    assert start == logits_bytes(m, t, Regime(act=2, weight=2, autocast=False))


def test_chunks_are_torch_chunk_sized():
    """`h.chunk(8, dim=1)` gives ceil(s / 8) tokens a chunk (the last smaller): the one chunk's gradient a compiled
    backward adds is that size, for every sequence of the micro-batch."""
    m, t, (_, start, _) = _terms("torchtune_chunked", compiled=True, seq_len=1001, micro_batch=3)
    assert start - 2.0 * m.vocab * 3 * 1001 == pytest.approx(2.0 * m.vocab * 3 * 126)


def test_framework_selects_the_loss_path():
    """`--framework torchtune` takes its recipes' chunked loss (compile off, the recipes' default: eager chunks);
    without a framework the step is transformers' (12 B x V x token at the backward's start). Removing the
    mechanism would give both the same logits."""
    job = dict(method="full", seq_len=4096, micro_batch=2, param_dtype="bf16", grad_ckpt="full")
    tt = estimate("llama-3.2-3b", "a100-sxm4-80gb", framework="torchtune", **job)
    hf = estimate("llama-3.2-3b", "a100-sxm4-80gb", **job)
    assert tt.training.loss_impl == "torchtune_chunked" and hf.training.loss_impl == "hf"
    e = tt.model.vocab * tt.training.tokens_per_micro_batch
    for est, per_token in ((tt, 4.0 + 8.0 / 8), (hf, 12.0)):
        c = memory.Step(est.model, est.training.for_memory, est.strategy, est.split, est.table.for_gpu(est.gpu))
        start = memory.step_terms(c).items["loss_start"]
        logits = sum(v for k, v in start.items() if k.startswith("logits/"))
        assert logits == pytest.approx(c.loss_factor * per_token * e)
    assert "logits/torchtune_log_softmax" in dict(next(p for p in tt.memory.phases
                                                        if p.name == "backward_start").items)


@pytest.fixture(scope="module")
def torchtune_cases():
    with open(ROOT / "data/validation/published_dev.jsonl") as f:
        cases = [json.loads(line) for line in f if line.strip()]
    return {c["id"]: c for c in cases if (c.get("training") or {}).get("framework") == "torchtune"}


def test_cases_take_the_loss_they_ran(torchtune_cases):
    """The README tables' runs: the recipes' CEWithChunkedOutputLoss, but the Optimization-flags rows before '+ Chunked
    Cross Entropy' and the 405B QLoRA config (torch.nn.CrossEntropyLoss at 30b8519)."""
    unchunked = {"torchtune-optflags-llama3.2-3b-compile", "torchtune-readme-llama3-405b-qlora-a100-g8"}
    assert unchunked <= set(torchtune_cases)
    for case_id, case in torchtune_cases.items():
        t = _training(case, _model(case))
        assert t.loss_impl == ("torchtune_fp32" if case_id in unchunked else "torchtune_chunked"), case_id


def test_chunked_cross_entropy_row_drops_as_measured(torchtune_cases):
    """The Optimization-flags table's '+ Chunked Cross Entropy' row (README.md L122-123 @1814feb): 51.0 -> 42.9 GiB
    active for Llama 3.2 3B at 2 x 4096 tokens, nothing else changed. The shipped calibration with the mechanism
    predicts that drop within 25 %; without it (one loss path for both rows) the two predictions are equal."""
    eff = Efficiencies.default()
    before = predict_case(torchtune_cases["torchtune-optflags-llama3.2-3b-compile"], eff).memory.allocated / GIB
    after = predict_case(torchtune_cases["torchtune-optflags-llama3.2-3b-chunked-ce"], eff).memory.allocated / GIB
    assert before - after == pytest.approx(51.0 - 42.9, rel=0.25)
