"""`trainfit bench`: real training steps here, measured, beside the estimate."""

from __future__ import annotations

import argparse
import json

from .common import (add_job_flags, check_out, add_model_flag, console, lang_of, parse_sets, print_json, strategy_kwargs,
                     workload_kwargs)

HELP = "run real training steps on this machine's GPU(s) (or CPU) and compare with the estimate"
EXAMPLES = """examples:
  trainfit bench --model qwen2.5-0.5b --method lora --seq-len 2048 --micro-batch 4 --steps 10
  trainfit bench --model llama-3.2-1b --method full --find-max-batch --json >> data/measurements/mine.jsonl
  trainfit bench --model tiny-llama --device cpu --steps 3 --json      # CPU: numbers are CPU numbers
"""


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help=HELP, description=HELP, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_flag(p)
    p.add_argument("--gpu", "-g", default=None,
                   help="GPU for the estimate (default: this machine's GPU; on the CPU: a10)")
    p.add_argument("--steps", type=int, default=10, help="timed optimizer steps (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="warm-up steps excluded from timing (default 3)")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--find-max-batch", action="store_true", help="find the largest micro-batch that fits first")
    p.add_argument("--model-path", help="load real weights from this directory instead of random ones")
    p.add_argument("--out", help="append the validation case to this JSONL file")
    p.add_argument("--timeout", type=float, default=3600, metavar="SECONDS",
                   help="bound on each run; past it the run and every process it started are stopped (default 3600)")
    p.add_argument("--startup-timeout", type=float, default=None, metavar="SECONDS",
                   help="train.py's bound on reaching a first step, naming the phase it was stuck in "
                        "(default: train.py's, 1200)")
    add_job_flags(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..api import estimate, load_efficiencies
    from ..bench import environment, find_max_batch, local_gpu_id, run_steps, validation_case
    from ..errors import SpecError

    lang_of(args)
    if args.steps < 1 or args.warmup < 0:
        raise SpecError("--steps must be >= 1 and --warmup >= 0")
    if not args.timeout > 0 or (args.startup_timeout is not None and not args.startup_timeout >= 0):
        raise SpecError("--timeout must be > 0 and --startup-timeout >= 0 seconds")
    bounds = {"timeout": args.timeout, "startup_timeout": args.startup_timeout}
    if args.out:
        check_out(args.out, "file")  # before the run, not after it
    env = environment()
    device = args.device if args.device != "auto" else ("cuda" if env.get("cuda_available") else "cpu")
    if device == "cuda" and not env.get("cuda_available"):
        raise SpecError("--device cuda but no CUDA GPU is visible")
    if args.find_max_batch and device != "cuda":
        raise SpecError("--find-max-batch needs a CUDA GPU (a CPU run has no device memory to run out of)")
    gpu = args.gpu or (local_gpu_id(env) if device == "cuda" else None) or "a10"
    eff = load_efficiencies(parse_sets(args.set), args.calibration)
    work, strat = workload_kwargs(args), strategy_kwargs(args)

    def estimate_for(micro_batch: int):
        return estimate(args.model, gpu, efficiencies=eff, **dict(work, micro_batch=micro_batch), **strat)

    attempts = None
    from ..spec.job import BY_NAME

    micro_batch = BY_NAME["micro_batch"].convert(work["micro_batch"]) if work.get("micro_batch") else 1
    if args.find_max_batch:
        micro_batch, attempts = find_max_batch(estimate_for, args.model, device, args.model_path,
                                               log=None if args.json else console().print, **bounds)
    est = estimate_for(max(1, micro_batch))
    sampler = _sampler(device)
    if micro_batch == 0:  # not even one sequence fits: the out-of-memory is the result
        measured = {"oom": True}
    else:
        measured = run_steps(est, args.model, args.steps, args.warmup, device, args.model_path, **bounds)
    summary = None
    if sampler is not None:
        from ..monitor.nvml import summarize

        summary = summarize(sampler.stop())
    case = validation_case(est, args.model, measured, env, device, attempts, summary)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(case, ensure_ascii=False) + "\n")
    if args.json:
        print_json(case)
        return 0
    m, e = case["measured"], case["estimate"]
    c = console()
    c.print(f"{case['id']}: {m['tokens_per_s_per_gpu'] or 0:,.0f} tokens/s per GPU measured, "
            f"{e['tokens_per_s_per_gpu']:,.0f} estimated ({e['gpu']})")
    if m["peak_memory_gib"] is not None:
        c.print(f"peak memory {m['peak_memory_gib']:.2f} GiB allocated measured, {e['peak_memory_gib_allocated']:.2f} "
                f"estimated; errors {e.get('error')}")
    if device == "cpu":
        c.print("CPU run: these are CPU numbers, not comparable with the GPU estimate", style="yellow")
    return 0


def _sampler(device: str):
    if device != "cuda":
        return None
    try:
        from ..monitor.nvml import Sampler

        return Sampler(0.5).start()
    except Exception:  # noqa: BLE001 - NVML missing: bench still runs
        return None
