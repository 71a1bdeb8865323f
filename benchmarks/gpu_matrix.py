"""Measurement campaign: `trainfit bench` over a matrix of models, methods, sequence lengths, checkpointing and
micro-batches on this machine's GPU; one JSONL per GPU under data/measurements/ (every line a validation case
with the date, GPU, driver, torch version and the exact configuration).

    PYTHONPATH=src python benchmarks/gpu_matrix.py --budget-s 480          # on a GPU machine
    python benchmarks/gpu_matrix.py --dry-run                             # list the runs, in priority order

Runs go in priority order and stop before the time budget is spent (each run's time is predicted from the last
ones). An out-of-memory is recorded as a result (oom: true), never retried. Measurements are written as measured:
never edit them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# (model, method, seq_len, grad_ckpt, micro_batch or "max"[, extra flags]) in priority order: small and cheap
# first, then the memory options the published cases exercise (modules_to_save, pure-bf16 optimizer in backward),
# then the configurations that stress memory (the max micro-batch, long sequences, 7-8B models).
MATRIX = [
    ("qwen2.5-0.5b", "full", 2048, "none", 1),
    ("qwen2.5-0.5b", "lora", 2048, "none", 1),
    ("llama-3.2-1b", "full", 2048, "none", 1),
    ("llama-3.2-1b", "lora", 2048, "none", 1),
    ("qwen2.5-1.5b", "full", 512, "none", 4),
    ("qwen2.5-1.5b", "lora", 512, "none", 4),
    ("qwen2.5-1.5b", "lora", 1024, "full", 1, ("--modules-to-save", "embed_tokens,lm_head")),
    ("llama-3.2-3b", "full", 1024, "full", 1, ("--param-dtype", "bf16", "--grad-accum", "1",
                                                "--optimizer-in-backward")),
    ("llama-3.2-3b", "full", 1024, "full", 1, ("--param-dtype", "bf16", "--grad-accum", "1")),
    ("llama-3.2-3b", "full", 2048, "full", 1),
    ("llama-3.2-3b", "lora", 2048, "none", 1),
    ("llama-3.1-8b", "lora", 2048, "full", 1),
    ("qwen2.5-7b", "lora", 2048, "full", 2),
    ("llama-3.2-1b", "full", 2048, "full", "max"),
    ("llama-3.2-1b", "lora", 512, "none", "max"),
    ("qwen2.5-0.5b", "full", 512, "none", 8),
    ("llama-3.2-3b", "full", 512, "none", 2),
    ("llama-3.1-8b", "full", 2048, "full", 1),      # expected out of memory for fp32-master AdamW on one GPU
    ("qwen2.5-7b", "lora", 2048, "none", 1),
    ("qwen2.5-1.5b", "full", 2048, "full", "max"),
    ("llama-3.1-8b", "lora", 512, "none", "max"),
]


def bench_argv(run: tuple, steps: int, warmup: int) -> list[str]:
    model, method, seq, ckpt, micro_batch, *rest = run
    argv = [sys.executable, "-m", "trainfit", "bench", "--model", model, "--method", method, "--seq-len", str(seq),
            "--grad-ckpt", ckpt, "--steps", str(steps), "--warmup", str(warmup), "--device", "cuda", "--json",
            *(rest[0] if rest else ())]
    if micro_batch == "max":
        argv.append("--find-max-batch")
    else:
        argv += ["--micro-batch", str(micro_batch)]
    return argv


def gpu_slug() -> str:
    try:
        import torch

        name = torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001 - no GPU
        return "nogpu"
    return "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget-s", type=float, default=480.0, help="stop starting runs after this many seconds")
    p.add_argument("--out-dir", default=os.path.join(ROOT, "data", "measurements"))
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--only", type=int, default=None, help="the first N runs of the matrix")
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args()
    runs = MATRIX[:args.only] if args.only else MATRIX
    if args.dry_run:
        for run in runs:
            print(" ".join(bench_argv(run, args.steps, args.warmup)[2:]))
        return 0
    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, f"{datetime.date.today().isoformat()}-{gpu_slug()}.jsonl")
    start, last = time.time(), 60.0
    for i, run in enumerate(runs):
        elapsed = time.time() - start
        if elapsed + last > args.budget_s:
            print(f"budget: stopping before run {i + 1}/{len(runs)} ({elapsed:.0f} s used)", flush=True)
            break
        t0 = time.time()
        proc = subprocess.run(bench_argv(run, args.steps, args.warmup), capture_output=True, text=True,
                              cwd=ROOT, timeout=max(60.0, args.budget_s - elapsed))
        last = time.time() - t0
        if proc.returncode != 0:
            print(f"run {i + 1} {run}: failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}",
                  flush=True)
            continue
        case = json.loads(proc.stdout)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(case, ensure_ascii=False) + "\n")
        m = case["measured"]
        print(f"run {i + 1} {run}: {m['tokens_per_s_per_gpu'] or 0:,.0f} tok/s/GPU, "
              f"{m['peak_memory_gib'] or 0:.2f} GiB, oom={m['oom']} ({last:.0f} s)", flush=True)
    print(f"wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
