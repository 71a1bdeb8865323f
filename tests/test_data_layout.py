"""One data layout for estimate, plan and train.py (issue 33): how samples become sequences (packed, padded-batch,
padded-max) is one job field, resolved once, carried by plan.json into train_config.json, and run by train.py as
estimated; --data counts a chat sample's template tokens."""

import json
import math

import pytest

import trainfit
from trainfit.errors import SpecError
from trainfit.spec.lengths import CHAT_TOKENS_PER_MESSAGE, CHAT_TOKENS_PER_SAMPLE, read_lengths
from trainfit.spec.training import training_spec

JOB = dict(method="lora", micro_batch=4)


@pytest.mark.parametrize("task,lengths,expected", [
    ("sft", {}, "packed"),  # train.py packs causal LM data unless told otherwise
    ("sft", {"avg_len": 600}, "padded-batch"),  # lengths given: the stacks pad each micro-batch
    ("pretrain", {}, "packed"),
    ("dpo", {}, "padded-batch"),  # pairs are not packed
    ("classification", {}, "padded-batch"),
])
def test_default_layout(task, lengths, expected):
    assert training_spec("lora", task, **lengths).data_layout == expected


def test_packed_refused_where_samples_are_not_packed():
    with pytest.raises(SpecError, match="not packed"):
        training_spec("lora", "dpo", data_layout="packed")
    assert training_spec("lora", "sft", data_layout="longest").data_layout == "padded-batch"  # as tokenizers say it


def test_layouts_agree_with_each_other_in_the_estimate():
    """padded-max computes every sample at seq-len: the packed step's time, with only the mean counting; packed
    with --avg-len is the fixed-length estimate; padded-batch lies between."""
    fixed = trainfit.estimate("qwen2-7b", "a10", seq_len=2048, **JOB)
    packed = trainfit.estimate("qwen2-7b", "a10", seq_len=2048, avg_len=600, data_layout="packed", **JOB)
    pmax = trainfit.estimate("qwen2-7b", "a10", seq_len=2048, avg_len=600, data_layout="padded-max", **JOB)
    batch = trainfit.estimate("qwen2-7b", "a10", seq_len=2048, avg_len=600, **JOB)
    assert packed.tokens_per_s == fixed.tokens_per_s and not packed.training.variable_length
    assert any("mean sample 600 tokens from --avg-len" in a for a in packed.assumptions)
    assert pmax.step_time_s == pytest.approx(fixed.step_time_s, rel=1e-9)
    assert pmax.tokens_per_s == pytest.approx(fixed.tokens_per_s * 600 / 2048, rel=1e-9)
    assert pmax.memory.allocated == fixed.memory.allocated
    assert batch.training.data_layout == "padded-batch"
    assert pmax.tokens_per_s < batch.tokens_per_s < packed.tokens_per_s


@pytest.mark.parametrize("argv,needle,zh", [
    (["--data-layout", "packd"], "did you mean: packed", "是否想输入"),
    (["--task", "dpo", "--data-layout", "packed"], "not packed", "不能打包"),
])
def test_bad_layout_exits_2_in_both_languages(run_cli, argv, needle, zh):
    base = ("estimate", "--model", "qwen2-7b", "--gpu", "a10", "--method", "lora", *argv)
    code, _, err = run_cli(*base)
    assert code == 2 and needle in err and "Traceback" not in err, err
    code, _, err = run_cli(*base, "--lang", "zh")
    assert code == 2 and zh in err, err


def test_plan_and_train_py_take_the_same_layout(run_cli, tmp_path):
    """plan's hours are the tokens that count over the padded throughput; plan.json carries the layout and the mean
    into train_config.json, and train.py's step count is the plan's: samples x epochs / global batch."""
    from trainfit.train import runner

    common = ("--model", "qwen2-7b", "--method", "lora", "--samples", "20000", "--avg-len", "600", "--gpu", "a10",
              "--top", "1", "--json")
    docs = {}
    for layout in ("padded-batch", "packed", "padded-max"):
        code, out, err = run_cli("plan", *common, "--data-layout", layout)
        assert code == 0, err
        docs[layout] = json.loads(out)
    for layout, doc in docs.items():
        rec = doc["recommendations"][0]
        assert doc["workload"]["processed_tokens"] == 20000 * 600  # the samples' tokens, whatever the layout
        assert rec["strategy"]["data_layout"] == layout
        assert rec["train_hours"] == pytest.approx(20000 * 600 / rec["tokens_per_s"] / 3600, rel=0.01)
    per_gpu = {k: d["recommendations"][0]["tokens_per_s_per_gpu"] for k, d in docs.items()}
    assert per_gpu["padded-max"] < per_gpu["padded-batch"] < per_gpu["packed"]

    out = tmp_path / "setup"
    code, _, err = run_cli("plan", *common[:-1], "--out", str(out))
    assert code == 0, err
    code, _, err = run_cli("generate", "--plan", str(out / "plan.json"), "--out", str(tmp_path / "run"))
    assert code == 0, err
    cfg = json.loads((tmp_path / "run" / "train_config.json").read_text())
    assert cfg["data_layout"] == "padded-batch" and cfg["avg_len"] == 600
    args = runner.parse_args(["--config", str(tmp_path / "run" / "train_config.json"), "--synthetic"])
    assert runner.total_steps(cfg, args) == math.ceil(20000 / cfg["global_batch"])


class _Tok:
    """A stand-in tokenizer: one token per word, chat = role and content words per turn."""
    pad_token_id, eos_token_id = 0, 1

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [2 + len(w) for w in text.split()]}

    def apply_chat_template(self, messages, tokenize=True, add_generation_prompt=False):
        return [7 for m in messages for _ in ([m["role"]] + m["content"].split())]


def test_train_py_builds_each_layout():
    import torch

    from trainfit.train import runner

    rows = [{"text": " ".join(["w"] * n)} for n in (3, 9, 5, 20)]
    seq = 8
    packed = runner.causal_examples(rows, _Tok(), seq, "packed")
    assert all(len(ids) == seq for ids, _ in packed) and len(packed) == math.ceil((3 + 9 + 5 + 20 + 4) / seq)
    pmax = runner.causal_examples(rows, _Tok(), seq, "padded-max")
    assert [len(ids) for ids, _ in pmax] == [seq] * 4 and pmax[0][1][4:] == [-100] * 4  # 3 words + eos, then pad
    pbatch = runner.causal_examples(rows, _Tok(), seq, "padded-batch")
    assert [len(ids) for ids, _ in pbatch] == [4, 8, 6, 8]  # each sample + eos, cut at seq_len
    batch = runner.collate(pbatch[:1] + pbatch[2:3], torch, pad_id=0)
    assert batch["input_ids"].shape == (2, 6) and batch["tokens"] == 10  # padded to the longer; padding not counted
    assert batch["labels"][0].tolist()[4:] == [-100, -100]

    cls = runner.classification_examples([{"text": "a b", "label": 1}, {"text": "a b c d", "label": 0}], _Tok(), seq,
                                         "padded-batch")
    batch = runner.collate(cls, torch, pad_id=0)
    assert batch["input_ids"].shape == (2, 4) and batch["attention_mask"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    dpo = runner.dpo_examples([{"prompt": "p q", "chosen": "a", "rejected": "a b c"}], _Tok(), seq, "padded-batch")
    batch = runner.collate(dpo, torch, pad_id=0)
    assert batch["input_ids"].shape == (2, 6) and batch["loss_mask"].tolist() == [[0, 0, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1]]
    with pytest.raises(runner.SetupError, match="not packed"):
        runner.data_layout({"task": "dpo", "data_layout": "packed"})
    assert runner.data_layout({"task": "sft"}) == "packed"  # a config from before the field: what train.py did


def test_chat_samples_count_their_template(tmp_path):
    path = tmp_path / "chat.jsonl"
    chat = [{"role": "user", "content": "a b c"}, {"role": "assistant", "content": "d e f"}]
    path.write_text(json.dumps({"messages": chat}) + "\n" + json.dumps({"text": "a b c"}) + "\n")
    plain = read_lengths(str(path), max_len=4096)
    words = len("user a b c assistant d e f".split())
    assert plain.lengths == (round(words * 4 / 3) + 2 * CHAT_TOKENS_PER_MESSAGE + CHAT_TOKENS_PER_SAMPLE, 4)

    def counter(text):
        return len(text.split())
    counter.chat = lambda messages: 100  # the model's own template, when its tokenizer is at hand
    assert read_lengths(str(path), max_len=4096, tokenizer=counter).lengths == (100, 3)


@pytest.mark.slow
def test_generated_run_trains_padded_batches(run_cli, tiny_data, tmp_path):
    """A chat SFT setup generated with --avg-len pads each micro-batch (as estimated) and trains; its logged tokens
    are the samples' own."""
    import os
    import sys

    from trainfit import _proc

    code, _, err = run_cli("generate", "--model", "tiny-llama", "--gpu", "a100-sxm4-80gb", "--method", "lora",
                           "--seq-len", "32", "--avg-len", "8", "--micro-batch", "2", "--out", str(tmp_path / "run"))
    assert code == 0, err
    assert json.loads((tmp_path / "run" / "train_config.json").read_text())["data_layout"] == "padded-batch"
    argv = [sys.executable, "train.py", "--data", str(tiny_data / "chat.jsonl"), "--tokenizer", str(tiny_data / "tok"),
            "--random-init", "--max-steps", "2", "--device", "cpu", "--output-dir", str(tmp_path / "run" / "out")]
    proc = _proc.run(argv, cwd=str(tmp_path / "run"), env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = [json.loads(x) for x in (tmp_path / "run" / "out" / "metrics.jsonl").read_text().splitlines()]
    steps = [x for x in steps if "step" in x and not x.get("summary")]
    assert steps and all(0 < x["tokens_per_s"] * x["step_time_s"] < 2 * 32 * 1 for x in steps)  # under mb x seq
