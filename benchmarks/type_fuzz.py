"""Every model type transformers knows, as a bare config.json ({"model_type": T}: its config class's defaults),
through the commands a user runs on a config: each must answer (exit 0, or 1 for a plan nothing meets) or say what
is wrong in one line with exit 2 — never an internal error (exit 70) or a timeout.

    .venv/bin/python benchmarks/type_fuzz.py                      # estimate (LoRA on an A10, full on an H100)
    .venv/bin/python benchmarks/type_fuzz.py --serving --causal   # serving on four engines, plan and compare
    .venv/bin/python benchmarks/type_fuzz.py --types gpt-sw3,blt --serving

Each command runs in a fresh process (as the CLI runs), with its own structure cache. A type without a template is
built on the meta device the first time (3-9 s), so the whole set takes about an hour on 2 cores. Prints one line
per failure and the counts; asserts nothing (the unit tests pin each failure found here: tests/test_conv1d_reader.py,
tests/test_serving.py, tests/test_model_inputs_fuzz.py).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

ESTIMATE = [["estimate", "--gpu", "a10", "--method", "lora", "--seq-len", "64", "--json"],
            ["estimate", "--gpu", "h100-sxm", "--method", "full", "--seq-len", "128", "--json"]]
SERVING = [["serving", "--gpu", "h100-sxm", "--json"],
           ["serving", "--gpu", "a10", "--engine", "sglang", "--json"],
           ["serving", "--gpu", "a100-sxm4-80gb", "--engine", "lmdeploy", "--json"],
           ["serving", "--gpu", "h100-sxm", "--engine", "trtllm", "--workload", "sharegpt", "--json"],
           ["plan", "--method", "lora", "--dataset-tokens", "10M", "--json"],
           ["compare", "--gpu", "a10,h100-sxm", "--method", "qlora", "--json"]]
ANSWERS = (0, 1, 2)  # answered, a plan that nothing meets, one clear line


def model_types(causal: bool) -> list[str]:
    if causal:
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

        return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    from transformers import CONFIG_MAPPING

    return sorted(CONFIG_MAPPING.keys())


def run(model_type: str, commands: list[list[str]], cache: str, timeout: int) -> list[tuple[str, object, str]]:
    folder = tempfile.mkdtemp(prefix="type-fuzz-")
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as fh:
        json.dump({"model_type": model_type}, fh)
    out = []
    for cmd in commands:
        argv = [cmd[0], "--model", folder, *cmd[1:]]
        try:
            proc = subprocess.run([sys.executable, "-m", "trainfit", *argv], capture_output=True, text=True,
                                  timeout=timeout, env={**os.environ, "TRAINFIT_CACHE_DIR": cache})
            lines = proc.stderr.strip().splitlines()
            code, last = proc.returncode, (lines[-1] if lines else "")
            if code == 2 and len(lines) != 1:
                code = "2 (not one line)"
        except subprocess.TimeoutExpired:
            code, last = "timeout", ""
        out.append((" ".join(cmd[:3]), code, last))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--serving", action="store_true", help="serving, plan and compare instead of estimate")
    ap.add_argument("--causal", action="store_true", help="only the types with a causal-LM class")
    ap.add_argument("--types", help="comma-separated model types (default: all)")
    ap.add_argument("--timeout", type=int, default=180, help="seconds per command")
    args = ap.parse_args()
    types = args.types.split(",") if args.types else model_types(args.causal)
    commands = SERVING if args.serving else ESTIMATE
    cache = tempfile.mkdtemp(prefix="type-fuzz-cache-")
    counts: collections.Counter = collections.Counter()
    for t in types:
        for what, code, last in run(t, commands, cache, args.timeout):
            counts[code if code in ANSWERS else "failure"] += 1
            if code not in ANSWERS:
                print(f"{t:28s} {what:32s} {code}: {last[:160]}", flush=True)
    print(f"{len(types)} types x {len(commands)} commands: " +
          ", ".join(f"{k}: {v}" for k, v in sorted(counts.items(), key=str)))


if __name__ == "__main__":
    main()
