"""How much the caching allocator keeps reserved on variable-length runs: measured reserved memory against the
estimate's own parts, per published run, and the memory error at other values of allocator_varlen_fraction.

    python benchmarks/varlen_reserve.py

For each variable-length run with a reserved (torch.cuda.max_memory_reserved) peak it prints the peak moment's
parts that do not follow the batch's length (weights, gradients, optimizer states: "static"), those that do
(activations and logits: "varying"), the predicted reserved peak and the measured one, and the ratio
(measured - static) / varying: 1 + the allocator's reserve as a share of the varying bytes, if the static parts are
right. Then the memory MAPE of stacks_dev.jsonl (by stack) and of published_dev.jsonl (its Unsloth notebooks, the only
variable-length reserved runs there) at several values of allocator_varlen_fraction.

Prints; asserts nothing (efficiency.yaml's value is not changed by this script).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from trainfit.catalog.efficiency import Efficiencies  # noqa: E402
from trainfit.errors import SpecError  # noqa: E402
from trainfit.units import GiB  # noqa: E402
from trainfit.validate import Skip, load_cases, predict_case, validate  # noqa: E402

STACKS = str(ROOT / "data/validation/stacks_dev.jsonl")
PUBLISHED = str(ROOT / "data/validation/published_dev.jsonl")
FRACTIONS = (0.25, 0.5, 1.0, 1.5, 2.0)


def _parts(est) -> tuple[float, float]:
    """(static, varying) bytes of the estimate's peak moment."""
    peak = next(p for p in est.memory.phases if p.name == est.memory.peak_phase)
    varying = sum(v for k, v in peak.items.items() if k.startswith(("activations", "logits")))
    return peak.total - varying, varying


def rows(eff: Efficiencies) -> None:
    print(f"{'case':62s} {'static':>7s} {'varying':>8s} {'pred':>7s} {'meas':>7s} {'ratio':>6s}")
    for path in (STACKS, PUBLISHED):
        for case in load_cases([path]):
            m = case["measured"]
            if case["training"].get("fixed_length") is not False or m.get("memory_kind") != "reserved" \
                    or not m.get("peak_memory_gib"):
                continue
            try:
                est = predict_case(case, eff)
            except (Skip, SpecError):
                continue
            static, varying = _parts(est)
            meas = m["peak_memory_gib"] * GiB
            print(f"{case['id'][:62]:62s} {static / GiB:7.2f} {varying / GiB:8.2f} {est.memory.reserved / GiB:7.2f} "
                  f"{meas / GiB:7.2f} {(meas - static) / varying if varying else float('nan'):6.2f}")


def sweep(eff: Efficiencies) -> None:
    stacks, published = load_cases([STACKS]), load_cases([PUBLISHED])
    print(f"\n{'allocator_varlen_fraction':>26s}  stacks_dev memory (by stack)            published_dev memory "
          f"(Unsloth)")
    for vf in FRACTIONS:
        e = eff.with_overrides({"allocator_varlen_fraction": vf}, origin="benchmark")
        a, b = validate(stacks, e).to_dict()["memory"], validate(published, e).to_dict()["memory"]
        by = ", ".join(f"{k} {v['mape']:.1%}" for k, v in sorted(a["by_framework"].items()))
        unsloth = next((v["mape"] for k, v in b["by_source"].items() if "unsloth" in k.lower()), None)
        print(f"{vf:26.2f}  {a['mape']:6.1%} over {a['n']} ({by})  {b['mape']:6.1%} over {b['n']} "
              f"({unsloth:.1%})")


def main() -> None:
    eff = Efficiencies.default()
    rows(eff)
    sweep(eff)


if __name__ == "__main__":
    main()
