"""Published ms-swift runs (issue 35: the stacks people use): data/validation/stacks_dev.jsonl, sources in
stacks_sources.md. Development data collected 2026-12-06; nothing is fitted on it yet. The limits hold today's error
so that a change which makes ms-swift worse fails here; issue 35's goal is 8 % on memory."""

import os

from trainfit.catalog.efficiency import Efficiencies
from trainfit.validate import load_cases, validate

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def test_ms_swift_published_runs_within_their_error_limit():
    """`trainfit validate data/validation/stacks_dev.jsonl` on 2026-12-06: 36 of 38 runs predicted (a Yi-6B run
    longer than its positions, a LoRA run under expert parallelism refused), memory MAPE 15.2 % over 36 (the
    January 2024 Benchmark.md runs under-predicted, worst the H20 run with Liger kernels, which the schema cannot
    state), throughput 20.4 % over 6."""
    cases = load_cases([os.path.join(ROOT, "data/validation/stacks_dev.jsonl")])
    assert len(cases) == 38 and {c["training"]["framework"] for c in cases} == {"ms-swift"}
    doc = validate(cases, Efficiencies.default()).to_dict()
    assert doc["memory"]["n"] >= 36 and doc["memory"]["mape"] <= 0.16
    assert doc["throughput"]["n"] >= 6 and doc["throughput"]["mape"] <= 0.21
