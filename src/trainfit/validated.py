"""Which GPUs trainfit's validation data has measured (data/validation/published_dev.jsonl), shipped as a small
derived file (catalog/data/validated_gpus.json, written by `python -m trainfit.validated` from
data/validation/published_dev.jsonl and a10_dev.jsonl: case counts per GPU and trainfit's throughput MAPE there;
tests/test_one_journey.py fails when it no longer matches the data or the model). An estimate on a GPU with no
published throughput measurement says its speed there is unvalidated; where the error on the published runs is over
20 %, it says how large."""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from importlib import resources


def counts_from_cases(lines) -> dict[str, dict[str, int]]:
    """{gpu: {"throughput": cases, "memory": cases}} from validation case lines (JSON text)."""
    out: dict[str, dict[str, int]] = {}
    for line in lines:
        line = line.strip()
        if not line:
            continue
        case = json.loads(line)
        gpu = (case.get("hardware") or {}).get("gpu")
        measured = case.get("measured") or {}
        if not gpu or "serving" in case:
            continue
        row = out.setdefault(gpu, {"throughput": 0, "memory": 0})
        if any(measured.get(k) for k in ("tokens_per_s_per_gpu", "step_time_s", "mfu")):
            row["throughput"] += 1
        if measured.get("peak_memory_gib") or measured.get("oom") is not None:
            row["memory"] += 1
    return dict(sorted(out.items()))


@lru_cache(maxsize=1)
def validated_gpus() -> dict[str, dict[str, int]]:
    try:
        text = resources.files("trainfit.catalog").joinpath("data/validated_gpus.json").read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        return {}
    return json.loads(text)["gpus"]


def throughput_mape_by_gpu(lines: list[str], gpus: set[str] | None = None) -> dict[str, dict[str, float | int]]:
    """{gpu: {"n": predicted cases, "mape": throughput MAPE}} of trainfit's estimate on the cases (validate's
    per-GPU table), for the GPUs asked (all when None)."""
    from .catalog.efficiency import load_efficiencies
    from .uncertainty import shipped_bands
    from .validate import validate

    cases = [json.loads(line) for line in lines if line.strip()]
    cases = [c for c in cases if "serving" not in c and (gpus is None or (c.get("hardware") or {}).get("gpu") in gpus)]
    report = validate(cases, load_efficiencies(), bands=shipped_bands()).to_dict()
    return {g: {"n": v["n"], "mape": round(v["mape"], 4)} for g, v in report["throughput"]["by_gpu"].items()}


def note_for(gpu_id: str) -> str | None:
    """What an estimate says about its speed on this GPU: unvalidated (no published run), or the error trainfit
    has on the published runs there when it is large (over 20 %), else nothing."""
    from .i18n import say  # the sentences: i18n/sentences_estimate.py

    row = validated_gpus().get(gpu_id)
    if validated_gpus() and not (row or {}).get("throughput"):
        return say("es_unvalidated_gpu", gpu=gpu_id)
    mape = (row or {}).get("throughput_mape")
    if mape is not None and mape > 0.2:
        return say("es_large_error_gpu", gpu=gpu_id, n=row["throughput_mape_n"], mape=mape)
    return None


def main(argv=None) -> int:
    paths = (argv if argv is not None else sys.argv[1:]) or ["data/validation/published_dev.jsonl",
                                                             "data/validation/a10_dev.jsonl"]
    counts: dict[str, dict[str, int]] = {}
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for gpu, row in counts_from_cases(fh).items():
                acc = counts.setdefault(gpu, {"throughput": 0, "memory": 0})
                acc["throughput"] += row["throughput"]
                acc["memory"] += row["memory"]
    lines = [line for path in paths for line in open(path, encoding="utf-8")]
    for gpu, row in throughput_mape_by_gpu(lines).items():
        if gpu in counts:
            counts[gpu]["throughput_mape"], counts[gpu]["throughput_mape_n"] = row["mape"], row["n"]
    doc = {"from": paths, "gpus": dict(sorted(counts.items()))}
    out = resources.files("trainfit.catalog").joinpath("data/validated_gpus.json")
    with open(str(out), "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    print(f"wrote {out}: {len(counts)} GPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
