"""The memory model as named terms (issue 38, part 2): each moment of the step is the sum of the terms that
`estimate/memory.py`'s MOMENTS table lists for it, each term built by its own function. These tests hold the table to
the phases the estimator reports, so a term added to a row is a term the estimate counts, and one taken out is not."""

import pytest

import trainfit.estimate.memory as memory
from trainfit.api import estimate
from trainfit.estimate.core import clear_memos

# Jobs that reach every branch of the term functions: engines, PEFT, DPO, LitGPT's code, optimizer in backward,
# paged states, accumulation, classification
JOBS = (
    ("qwen2-7b", dict(method="full", grad_ckpt="full")),
    ("qwen2-7b", dict(method="lora", grad_accum=4, grad_ckpt="none", micro_batch=2)),
    ("qwen2-7b", dict(method="qlora", task="dpo")),
    ("qwen2-7b", dict(method="full", gpus=8, zero=3)),
    ("qwen2-7b", dict(method="full", gpus=8, fsdp="full_shard")),
    ("qwen2-7b", dict(method="full", param_dtype="bf16", optimizer_in_backward=True)),
    ("qwen2-7b", dict(method="lora", paged_optimizer=True, model_code="litgpt")),
    ("qwen2-7b", dict(method="freeze", task="classification", seq_len=512)),
    ("mixtral-8x7b", dict(method="lora", gpus=8, zero=3)),
)


def _estimate(model, job):
    return estimate(model, "h100-sxm", seq_len=job.pop("seq_len", 2048), **job)


@pytest.mark.parametrize("model,job", JOBS, ids=[f"{m}-{'-'.join(f'{k}={v}' for k, v in j.items())}"
                                                   for m, j in JOBS])
def test_every_moment_is_the_sum_of_its_rows_terms(model, job):
    """Every name in a row is a term step_terms builds, and each reported phase (but the forward's end, the largest
    of its candidates) holds exactly the items of its row's terms."""
    est = _estimate(model, dict(job))
    t, s, split = est.training.for_memory, est.strategy, est.split
    c = memory.Step(est.model, t, s, split, est.table.for_gpu(est.gpu))
    found = memory.step_terms(c)
    rows = dict(memory.MOMENTS)
    phases = {p.name: p for p in est.memory.phases}
    assert set(phases) == {"forward_end", *rows}
    for name, names in memory.MOMENTS:
        if name == "optimizer" and t.optimizer_in_backward:
            names = memory.IN_BACKWARD_OPTIMIZER
        assert set(names) <= set(found.items), (name, set(names) - set(found.items))
        expected: dict[str, float] = {}
        for term in names:
            for key, value in found.items[term].items():
                if value:
                    expected[key] = expected.get(key, 0.0) + value
        got = {k: v for k, v in phases[name].items.items() if v}
        assert got.keys() == expected.keys(), name
        assert all(got[k] == pytest.approx(expected[k], rel=1e-12) for k in got), name
        assert phases[name].total == pytest.approx(sum(expected.values()), rel=1e-9)


def test_a_term_taken_out_of_a_row_leaves_that_moment(monkeypatch):
    """The table drives the phases: without the optimizer step's buffers in its row, the optimizer moment of a full
    fine-tune on one GPU (foreach AdamW: a parameter-sized transient) shrinks by exactly that term, and no other
    moment changes."""
    job = dict(method="full", grad_ckpt="full", seq_len=1024, optimizer_impl="foreach")
    clear_memos()
    intact = {p.name: p.total for p in _estimate("qwen2.5-0.5b", dict(job)).memory.phases}
    rows = tuple((name, tuple(x for x in names if x != "step_buffers") if name == "optimizer" else names)
                 for name, names in memory.MOMENTS)
    try:
        with monkeypatch.context() as patch:
            patch.setattr(memory, "MOMENTS", rows)
            clear_memos()
            est = _estimate("qwen2.5-0.5b", dict(job))
            without = {p.name: p.total for p in est.memory.phases}
            c = memory.Step(est.model, est.training.for_memory, est.strategy, est.split, est.table.for_gpu(est.gpu))
            step = sum(memory.step_terms(c).items["step_buffers"].values())
    finally:
        clear_memos()
    assert step > 0
    assert intact["optimizer"] - without["optimizer"] == pytest.approx(step, rel=1e-9)
    assert {k: v for k, v in intact.items() if k != "optimizer"} == {k: v for k, v in without.items()
                                                                     if k != "optimizer"}
