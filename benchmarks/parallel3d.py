"""The published tensor / pipeline / context / expert parallel runs (issue 34), predicted as `trainfit validate`
predicts them (estimate/model_parallel.py): per run the layout, measured and predicted throughput (tokens/s per GPU)
and, where the run has it, peak memory, with each error and the MAPE per source file and per stack. Runs validate
leaves out of its statistics (a power limit, a speed above the GPU's peak) are printed and marked, not averaged.

    .venv/bin/python benchmarks/parallel3d.py [--rows]      # --rows: each run's time terms

Reads data/validation/published_dev.jsonl and data/validation/parallel_dev.jsonl (development data: never vTrain's
ground-truth CSVs, a reserved outside check).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from trainfit.catalog.efficiency import Efficiencies  # noqa: E402
from trainfit.units import GiB  # noqa: E402
from trainfit.validate import (Skip, inconsistent_throughput, is_model_parallel_case, load_cases,  # noqa: E402
                               measured_values, memory_of_kind, power_limited, predict_case)

FILES = ("data/validation/published_dev.jsonl", "data/validation/parallel_dev.jsonl")


def _throughput(case: dict, est) -> tuple[float | None, float | None, str]:
    """(measured, predicted) tokens/s per GPU (from the step time where that is what was measured) and why the run
    is left out of the statistics ('' when it counts)."""
    meas = measured_values(case)
    if meas.get("tokens_per_s_per_gpu"):
        measured = meas["tokens_per_s_per_gpu"]
    elif meas.get("step_time_s"):
        measured = est.tokens_per_s_per_gpu * est.step_time_s / meas["step_time_s"]
    else:
        return None, None, ""
    why = power_limited(case, est) or inconsistent_throughput(meas, est) or ""
    return measured, est.tokens_per_s_per_gpu, why


def run(rows: bool = False) -> dict:
    eff = Efficiencies.default()
    out: dict[str, list[float]] = {}
    for path in FILES:
        for case in load_cases([str(ROOT / path)]):
            if not is_model_parallel_case(case):
                continue
            try:
                est = predict_case(case, eff)
            except Skip as exc:
                print(f"{case['id'][:56]:<56} skipped: {exc}")
                continue
            measured, predicted, why = _throughput(case, est)
            line = f"{case['id'][:56]:<56} {est.strategy.label()[:40]:<40}"
            if measured:
                err = (predicted - measured) / measured
                line += f" tok/s {measured:8.0f} pred {predicted:8.0f} {err:+7.1%}" + (" (left out)" if why else "")
                if not why:
                    out.setdefault(Path(path).name, []).append(abs(err))
                    out.setdefault("framework=" + str(case["training"].get("framework")), []).append(abs(err))
            gib = measured_values(case).get("peak_memory_gib")
            if gib:
                pred = memory_of_kind(est, measured_values(case).get("memory_kind")) / GiB
                line += f"  GiB {gib:5.1f} pred {pred:5.1f} {(pred - gib) / gib:+6.1%}"
                out.setdefault("memory", []).append(abs(pred - gib) / gib)
            print(line)
            if rows:
                print("    " + ", ".join(f"{k}={v:.3f}s" for k, v in est.time.parts.items()))
    for name, errs in out.items():
        print(f"{'memory' if name == 'memory' else 'throughput'} MAPE {sum(errs) / len(errs):.1%} over {len(errs)} "
              f"({name}), worst {max(errs):.1%}")
    return {k: sum(v) / len(v) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", action="store_true", help="print each run's time terms")
    run(ap.parse_args(argv).rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
