"""Variable-length data (issue 13): memory at the longest batch, time at micro-batches padded to their longest
sample, the allocator's extra reserve when shapes vary, and validate reading the lengths a case states."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import trainfit
from trainfit.catalog.efficiency import Efficiencies
from trainfit.i18n.notes import has_chinese
from trainfit.spec.lengths import count_tokens, expected_max, expected_padded_len, read_lengths
from trainfit.units import GiB
from trainfit.validate import comparable, load_cases, predict_case, validate

DEV = str(Path(__file__).resolve().parents[1] / "data" / "validation" / "published_dev.jsonl")
JOB = dict(method="lora", grad_ckpt="full", framework="hf-trainer")


def test_expected_max_is_exact_on_a_small_sample():
    # two lengths 1 and 2, micro-batch of 2 drawn with replacement: P(max = 1) = 1/4, so E = 1/4 + 2 * 3/4 = 1.75
    assert expected_max([2, 1], 2) == pytest.approx(1.75)
    assert expected_max([5, 7, 9], 1) == pytest.approx(7.0)  # one sample: the mean


def test_padded_length_from_the_mean_grows_with_the_batch_and_stops_at_the_longest():
    assert expected_padded_len(300, 2048, 1) == 300
    assert expected_padded_len(300, 2048, 4) == round(300 * (1 + 1 / 2 + 1 / 3 + 1 / 4))
    assert expected_padded_len(300, 400, 8) == 400


def test_memory_at_the_longest_time_at_the_padded_length():
    packed = trainfit.estimate("qwen2-7b", "a10", seq_len=2048, micro_batch=4, **JOB)
    var = trainfit.estimate("qwen2-7b", "a10", max_len=2048, avg_len=300, micro_batch=4, **JOB)
    short = trainfit.estimate("qwen2-7b", "a10", seq_len=var.training.time_len, micro_batch=4, **JOB)
    assert var.memory.allocated == pytest.approx(packed.memory.allocated)  # memory at the longest batch
    assert var.step_time_s == pytest.approx(short.step_time_s)  # time at the padded length
    assert var.tokens_per_step == 4 * 300  # the tokens that count, not the padding
    assert var.tokens_per_s < short.tokens_per_s  # padding is computed, not counted
    assert var.mfu < short.mfu


def test_allocator_reserve_when_shapes_vary_and_expandable_segments_shrink_it():
    packed = trainfit.estimate("qwen2-7b", "a10", seq_len=2048, micro_batch=2, **JOB)
    var = trainfit.estimate("qwen2-7b", "a10", max_len=2048, avg_len=300, micro_batch=2, **JOB)
    exp = trainfit.estimate("qwen2-7b", "a10", max_len=2048, avg_len=300, micro_batch=2, expandable_segments=True,
                            **JOB)
    extra = var.memory.reserved - packed.memory.reserved
    parts = var.memory.parts
    f = Efficiencies.default().for_gpu(var.gpu)
    assert extra == pytest.approx(f("allocator_varlen_fraction") * (parts["activations"] + parts["logits"]), rel=1e-6)
    assert extra > 0.1 * GiB
    assert packed.memory.reserved < exp.memory.reserved < var.memory.reserved
    assert exp.memory.allocated == var.memory.allocated == packed.memory.allocated
    assert dict(var.memory.overheads)["other/allocator_varying_shapes"] == pytest.approx(extra)


def test_lengths_from_a_data_file(tmp_path):
    path = tmp_path / "d.jsonl"
    rows = [{"instruction": "a b c", "output": "d e f"}, {"text": "一二三四"}, {"messages": [{"content": "x " * 300}]}]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    assert count_tokens("a b c d e f") == 8 and count_tokens("一二三四") == 4
    lengths = read_lengths(str(path), max_len=256)
    assert lengths.lengths == (8, 4, 256) and lengths.longest == 256 and lengths.counted_by == "whitespace"
    est = trainfit.estimate("qwen2-7b", "a10", max_len=2048, data=str(path), **JOB)
    # the chat sample: 300 words x 4/3 = 400, and its template's tokens: 4 for its one message + 1 (spec/lengths.py)
    assert est.training.seq_len == 405 and est.training.avg_len == round((8 + 4 + 405) / 3)  # cut at 2048
    assert any("lengths from --data" in a and "whitespace" in a for a in est.assumptions)


@pytest.mark.parametrize("argv,needle", [
    (["--avg-len", "5000"], "avg-len"),
    (["--avg-len", "100", "--data", "x.jsonl"], "not both"),
    (["--data", "/no/such/file.jsonl"], "no such file"),
    (["--max-len", "1024", "--seq-len", "2048"], "give one"),
    (["--avg-len", "100", "--set", "allocator_varlen_fraction=5"], "valid range"),
])
def test_bad_length_input_exits_2(run_cli, argv, needle):
    code, _, err = run_cli("estimate", "--model", "qwen2-7b", "--gpu", "a10", "--method", "lora", *argv)
    assert code == 2 and needle in err and "Traceback" not in err, err


def test_length_sentences_have_chinese():
    var = trainfit.estimate("qwen2-7b", "a10", max_len=2048, avg_len=300, micro_batch=2, **JOB)
    unknown = predict_case(_unsloth_case(), Efficiencies.default())
    for est in (var, unknown):
        for text in est.assumptions:
            if "variable-length" in text or "allocator:" in text:
                assert has_chinese(text), text


def _unsloth_case() -> dict:
    return copy.deepcopy(next(c for c in load_cases([DEV]) if c["id"] == "unsloth-nb-llama31-8b-alpaca"))


def test_validate_uses_the_lengths_a_case_states():
    case = _unsloth_case()
    assert case["training"]["fixed_length"] is False and "avg_len" not in case["training"]
    assert not comparable(case, "throughput") and comparable(case, "memory")
    at_cap = predict_case(case, Efficiencies.default())
    assert at_cap.training.seq_len == case["training"]["seq_len"] and at_cap.training.variable_length
    stated = copy.deepcopy(case)
    stated["training"].update(avg_len=250, max_len=1200)  # a synthetic case: lengths as a source would state them
    est = predict_case(stated, Efficiencies.default())
    assert est.training.seq_len == 1200 and est.training.avg_len == 250
    assert est.memory.allocated < at_cap.memory.allocated
    assert comparable(stated, "throughput")
    row = validate([stated], Efficiencies.default()).rows[0]
    assert "throughput" in row.error and "memory" in row.error
    bad = copy.deepcopy(case)
    bad["training"].update(max_len=99999)
    assert validate([bad], Efficiencies.default()).skipped


def test_estimate_json_states_the_lengths_and_the_stack():
    from trainfit.report.estimate import estimate_dict

    var = trainfit.estimate("qwen2-7b", "a10", max_len=2048, avg_len=300, micro_batch=2, **JOB)
    c = estimate_dict(var)["config"]
    assert c["variable_length"] and c["avg_len"] == 300 and c["seq_len"] == 2048 and c["framework"] == "hf-trainer"
    assert c["padded_len"] == expected_padded_len(300, 2048, 2) == var.training.time_len
    packed = estimate_dict(trainfit.estimate("qwen2-7b", "a10", method="lora"))["config"]
    assert not packed["variable_length"] and packed["avg_len"] is None and packed["framework"] is None
