"""Speed of the serving search over the whole instance catalog (every provider, TP degree and weight format).

    python benchmarks/serving_search.py

Times `trainfit.serving.search.search` in-process after a warm-up call that loads the catalogs (what the CLI pays
once per process is shown separately), for a few models and targets. Prints a table; asserts nothing.
"""

from __future__ import annotations

import time

from trainfit.catalog import all_instances, resolve_model
from trainfit.serving.search import Target, search
from trainfit.serving.spec import ServingSpec

PROVIDERS = ("alibaba", "aws", "gcp", "azure")
SCENARIOS = {
    "qwen2-7b, 2000 tok/s, TPOT<=50ms, bf16/fp8/awq": ("qwen2-7b", Target(2000, None, 50), ("bf16", "fp8", "awq")),
    "llama-3-8b, 5000 tok/s, TTFT<=500ms, bf16/awq": ("llama-3-8b", Target(5000, 500, None), ("bf16", "awq")),
    "qwen2.5-72b, 1000 tok/s, TPOT<=80ms, 4 formats": ("qwen2.5-72b", Target(1000, None, 80),
                                                        ("bf16", "fp8", "int8", "awq")),
}


def main() -> None:
    start = time.perf_counter()
    all_instances()
    resolve_model("qwen2-7b")
    print(f"catalog load: {time.perf_counter() - start:.3f} s ({len(all_instances())} instances)")
    print(f"{'scenario':50s} {'setups':>7s} {'options':>8s} {'seconds':>8s}  cheapest of the first provider with options")
    for name, (model, target, formats) in SCENARIOS.items():
        m = resolve_model(model)
        t0 = time.perf_counter()
        tried = found = 0
        best = None
        for provider in PROVIDERS:
            options, n = search(m, ServingSpec(), target, providers=(provider,), formats=formats)
            tried += n
            found += len(options)
            if options and best is None:
                best = options[0]
        dt = time.perf_counter() - t0
        top = (f"{best.instance.key} TP{best.tp} {best.est.spec.weights} x{best.instances}" if best else "-")
        print(f"{name:50s} {tried:7d} {found:8d} {dt:8.3f}  {top}")


if __name__ == "__main__":
    main()
