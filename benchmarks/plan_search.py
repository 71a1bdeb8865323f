"""Speed of `trainfit plan`: candidates evaluated and seconds per plan for the issue's acceptance scenarios.

    python benchmarks/plan_search.py            # each scenario in a fresh process (cold caches, as the CLI runs)
    python benchmarks/plan_search.py --runs 5   # the least of 5 fresh processes per scenario (a shared machine's noise)

Each process runs with bytecode written and read (as after `pip install`, which compiles it; a shell with
PYTHONDONTWRITEBYTECODE set would time Python compiling trainfit's sources instead): one untimed run first writes it.

Prints a table; asserts nothing (speed is measured here, not in the unit tests).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

SCENARIOS = {
    "qwen2-7b lora 200M x3, 48h, ¥3000": ["--model", "qwen2-7b", "--task", "sft", "--method", "lora",
                                           "--dataset-tokens", "200M", "--epochs", "3", "--seq-len", "2048",
                                           "--deadline", "48h", "--budget", "3000"],
    "qwen2-7b auto method 200M x3": ["--model", "qwen2-7b", "--method", "auto", "--dataset-tokens", "200M",
                                     "--epochs", "3", "--deadline", "48h", "--budget", "3000"],
    "bert-base classification 100k x256": ["--model", "bert-base-uncased", "--task", "classification",
                                           "--method", "full", "--samples", "100k", "--avg-len", "256",
                                           "--epochs", "3"],
    "llama-2-13b full 1B": ["--model", "llama-2-13b", "--method", "full", "--dataset-tokens", "1B"],
    "qwen2-72b full 10B, 7d": ["--model", "qwen2-72b", "--method", "full", "--dataset-tokens", "10B",
                               "--deadline", "7d"],
    # issue 34's acceptance run: tensor x pipeline layouts searched beside ZeRO / FSDP (issue 36's 70B scenario)
    "llama-3-70b full 20B, h100, 7d (aws)": ["--model", "llama-3-70b", "--method", "full", "--dataset-tokens", "20B",
                                             "--gpu", "h100-sxm", "--deadline", "7d", "--provider", "aws"],
    "all providers, fastest (usd-cny 7.1)": ["--model", "llama-3-8b", "--method", "lora", "--dataset-tokens", "1B",
                                             "--provider", "all", "--usd-cny", "7.1", "--objective", "fastest"],
}


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run(argv: list[str]) -> tuple[dict, float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "trainfit", "plan", *argv, "--json"], capture_output=True,
                          text=True, env=ENV)
    if proc.returncode not in (0, 1):  # 1: the plan answered that nothing meets the request
        raise SystemExit(f"plan {' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return json.loads(proc.stdout), time.perf_counter() - start


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1, help="fresh processes per scenario; the least time of each is shown")
    runs = max(1, ap.parse_args().runs)
    run(next(iter(SCENARIOS.values())))  # writes the bytecode (and the YAML parses' cache, as any first run does)
    print(f"{'scenario':40s} {'candidates':>11s} {'estimates':>10s} {'search s':>9s} {'process s':>10s}  top choice")
    for name, argv in SCENARIOS.items():
        tries = [run(argv) for _ in range(runs)]
        doc, wall = tries[0][0], min(w for _, w in tries)
        s = dict(doc["search"], seconds=min(d["search"]["seconds"] for d, _ in tries))
        recs = doc["recommendations"]
        st = recs[0]["strategy"] if recs else {}
        layout = "".join(f" {k.upper()} {st[k]}" for k in ("tp", "pp", "cp") if (st.get(k) or 1) > 1)
        top = (f"{recs[0]['nodes']} x {recs[0]['instance_type']} ({recs[0]['strategy']['method']}{layout}), "
               f"{recs[0]['hours']:.1f} h, {recs[0]['cost']:,.0f} {recs[0]['currency']}") if recs else \
            f"none: {doc['binding_constraint']['constraint']}"
        print(f"{name:40s} {s['candidates']:>11,d} {s['estimates']:>10,d} {s['seconds']:>9.3f} {wall:>10.2f}  {top}")


if __name__ == "__main__":
    main()
