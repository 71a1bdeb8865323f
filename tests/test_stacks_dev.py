"""Published runs of the stacks people use (issue 35): ms-swift and LLaMA-Factory, data/validation/stacks_dev.jsonl,
sources in stacks_sources.md. Development data collected 2026-12-06/07; nothing is fitted on it yet. The limits hold
today's error per stack so that a change which makes either worse fails here; issue 35's goal is 8 % on memory."""

import os

from trainfit.catalog.efficiency import Efficiencies
from trainfit.validate import load_cases, validate

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def _doc():
    cases = load_cases([os.path.join(ROOT, "data/validation/stacks_dev.jsonl")])
    stacks = [c["training"]["framework"] for c in cases]
    assert (stacks.count("ms-swift"), stacks.count("llama-factory"), len(stacks)) == (38, 9, 47)
    return validate(cases, Efficiencies.default()).to_dict()


def test_published_stack_runs_within_their_error_limit():
    """`trainfit validate data/validation/stacks_dev.jsonl` on 2026-12-07: 45 of 47 runs predicted (a Yi-6B run
    longer than its positions, a LoRA run under expert parallelism refused).
    ms-swift: memory MAPE 15.2 % over 36 (the January 2024 Benchmark.md runs under-predicted, worst the H20 run with
    Liger kernels, which the schema cannot state), throughput 20.4 % over 6.
    LLaMA-Factory (its paper's Table 4, one A100 40GB): memory 9.1 % over 8 (its QLoRA runs ran Unsloth's code and
    are under-predicted 15-20 %), throughput 20.0 % over 8 (the Unsloth LoRA / QLoRA runs 21-34 % too fast), and the
    Llama-2-13B full fine-tune the paper reports as out of memory predicted not to fit."""
    doc = _doc()
    mem, thr = doc["memory"]["by_framework"], doc["throughput"]["by_framework"]
    assert mem["ms-swift"]["n"] >= 36 and mem["ms-swift"]["mape"] <= 0.16
    assert thr["ms-swift"]["n"] >= 6 and thr["ms-swift"]["mape"] <= 0.21
    assert mem["llama-factory"]["n"] >= 8 and mem["llama-factory"]["mape"] <= 0.10
    assert thr["llama-factory"]["n"] >= 8 and thr["llama-factory"]["mape"] <= 0.21
    assert doc["oom"]["n"] >= 1 and doc["oom"]["correct"] == doc["oom"]["n"]
