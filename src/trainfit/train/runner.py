#!/usr/bin/env python3
"""Training script written by `trainfit generate` (this file is copied verbatim as train.py, its modules train_*.py
(JOB_MODULES) beside it; `trainfit bench` runs the same code). Self-contained: the Python standard library plus
torch, transformers, peft and, for DeepSpeed plans, deepspeed.

    python train.py --config train_config.json --data data.jsonl            # one GPU
    torchrun --nproc_per_node 8 train.py --config train_config.json ...      # DDP, FSDP or DeepSpeed (see launch.sh)

Engines are PyTorch DDP, PyTorch FSDP2 (`fully_shard`) and DeepSpeed ZeRO, as train_config.json says; the loop
around them only feeds batches, accumulates gradients, logs tokens/s and peak memory, and checkpoints.
Data (JSONL or Parquet): `text` (pre-training / SFT on plain text), `messages` (chat SFT: the loss covers the
assistant turns), `prompt`/`chosen`/`rejected` (DPO), `text`/`label` (classification). How samples become
sequences is train_config.json's data_layout, the one trainfit estimated: packed (causal LM: concatenated and cut into
seq_len blocks), padded-batch (each micro-batch padded to its longest sample) or padded-max (every sample padded to
seq_len); samples longer than seq_len are cut.

This module is the entry: the command line, the configuration, the checks before torch is imported, and `train`,
which assembles the parts (each name of theirs is importable from here too):
    train_common.py      SetupError, the JSON log line
    train_launch.py      the process group (Dist), the start-up watchdog, launcher death, stale JIT-extension locks
    train_data.py        reading the data files, tokenisation, data layout (packing, padding), micro-batches
    train_model.py       the model built or loaded, dtypes, LoRA / QLoRA / freeze, selective checkpointing
    train_engine.py      DDP / FSDP2 / DeepSpeed set-up, the optimizer and schedule
    train_loop.py        the step loop, losses, mixed precision, metrics, the summary
    train_checkpoint.py  checkpoints, --resume, the final Hugging Face model (adapter, merged) for serving
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

if __package__:  # trainfit.train.runner
    from .train_common import *  # noqa: F401,F403
    from .train_launch import *  # noqa: F401,F403
    from .train_model import *  # noqa: F401,F403
    from .train_data import *  # noqa: F401,F403
    from .train_engine import *  # noqa: F401,F403
    from .train_checkpoint import *  # noqa: F401,F403
    from .train_loop import *  # noqa: F401,F403
else:  # train.py in the generated job folder (or this folder on sys.path): the modules lie beside it
    from train_common import *  # noqa: F401,F403
    from train_launch import *  # noqa: F401,F403
    from train_model import *  # noqa: F401,F403
    from train_data import *  # noqa: F401,F403
    from train_engine import *  # noqa: F401,F403
    from train_checkpoint import *  # noqa: F401,F403
    from train_loop import *  # noqa: F401,F403

CONFIG_VERSION = 1
# what `trainfit generate` writes beside train.py (this file): the modules above, copied verbatim
JOB_MODULES = ("train_common.py", "train_launch.py", "train_model.py", "train_data.py", "train_engine.py",
               "train_checkpoint.py", "train_loop.py")


# ---- configuration and inputs ----------------------------------------------------------------------------------

def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="trainfit training script")
    p.add_argument("--config", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "train_config.json"))
    p.add_argument("--data", help="training data: .jsonl / .json / .parquet file or a directory of them")
    p.add_argument("--synthetic", action="store_true", help="random tokens of exactly seq_len (benchmarks, tests)")
    p.add_argument("--model-path", help="local model directory or Hub id (default: the config's)")
    p.add_argument("--tokenizer", help="tokenizer directory or Hub id (default: the model's)")
    p.add_argument("--random-init", action="store_true", help="build the model from its config with random weights")
    p.add_argument("--output-dir", help="checkpoints and metrics (default: the config's)")
    p.add_argument("--max-steps", type=int, help="optimizer steps (default: from the dataset size and epochs)")
    p.add_argument("--warmup-steps", type=int, default=None, help="steps excluded from the throughput summary")
    p.add_argument("--save-steps", type=int, help="checkpoint every N steps (0: only at the end)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --output-dir")
    p.add_argument("--no-final-model", action="store_true",
                   help=f"write only checkpoints: no {ADAPTER_DIR}/ and {MERGED_DIR}/ Hugging Face model at the end "
                        f"(also `final_model: false` in the config; --synthetic runs never write one)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--startup-timeout", type=float, default=None, metavar="SECONDS",
                   help=f"stop with an error naming the phase if no first step has finished after this long "
                        f"(default: $TRAINFIT_STARTUP_TIMEOUT or {DEFAULT_STARTUP_TIMEOUT_S}; 0: no bound)")
    p.add_argument("--clear-stale-locks", action="store_true",
                   default=os.environ.get("TRAINFIT_CLEAR_STALE_LOCKS") == "1",
                   help="remove JIT-extension build locks that no live process holds (left by an interrupted "
                        "DeepSpeed build) instead of stopping on them ($TRAINFIT_CLEAR_STALE_LOCKS=1)")
    return p.parse_args(argv)


def load_config(path: str) -> dict:
    if not os.path.isfile(path):
        raise SetupError(f"config not found: {path}")
    cfg = _json(_small_text(path, "config"), path)
    if not isinstance(cfg, dict):
        raise SetupError(f"{path}: not a train_config.json (a JSON object)")
    if cfg.get("config_version") != CONFIG_VERSION:
        raise SetupError(f"{path}: config_version {cfg.get('config_version')!r}, this script reads {CONFIG_VERSION}")
    return cfg


def validate_inputs(cfg: dict, args: argparse.Namespace) -> None:
    """Everything that can be checked without torch, before the model is loaded."""
    if not args.synthetic:
        path = args.data or cfg.get("data")
        if not path:
            raise SetupError("no training data: pass --data PATH (or --synthetic for a benchmark)")
        files = data_files(path)
        check_columns(read_rows(files, limit=1), cfg["task"], files[0])
    if cfg["engine"] == "deepspeed" and not os.path.isfile(_ds_config_path(cfg, args)):
        raise SetupError(f"DeepSpeed config not found: {_ds_config_path(cfg, args)}")
    if cfg["optimizer"].get("in_backward") and (cfg["engine"] != "single" or cfg["grad_accum"] != 1
                                                 or cfg["precision"] == "fp16"):
        raise SetupError("optimizer in backward runs on one GPU, with grad_accum 1 and without fp16 loss scaling")


# ---- training: the parts assembled -----------------------------------------------------------------------------

def train(cfg: dict, args: argparse.Namespace, watchdog: Watchdog | None = None) -> dict:
    """Run training; returns the summary (also logged as the last JSON line)."""
    phase = watchdog.enter if watchdog else (lambda name: None)
    phase("import")
    try:
        import torch
        import transformers  # noqa: F401  (imported here so that a slow or broken import is named as such)
    except ImportError as exc:
        raise SetupError(f"{exc.name or exc} is not installed: pip install -r requirements.txt (torch, transformers, "
                         f"peft{', deepspeed' if cfg['engine'] == 'deepspeed' else ''})") from None

    phase("rendezvous")
    dist = Dist(cfg, args)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    out_dir = args.output_dir or cfg.get("output_dir") or DEFAULT_OUTPUT_DIR
    os.makedirs(out_dir, exist_ok=True)
    metrics_path = os.path.join(out_dir, "metrics.jsonl")
    steps = total_steps(cfg, args)
    mb = cfg["micro_batch"]
    phase("data")
    tok = None if args.synthetic else load_tokenizer(cfg, args, dist)  # also saved beside the final model
    examples = build_examples(cfg, args, needed=max(2 * mb * dist.world, 8), dist=dist, tok=tok)
    phase("model build")
    activate_zero3(cfg, args, dist)
    model = build_model(cfg, args, dist)
    loaded = local_parameters(model)
    reference = reference_model(model, cfg, dist)
    # grad_ckpt selective: the attention core checkpointed (entered around the loop; apply_method did the rest)
    selective = selective_attention(model, cfg.get("grad_ckpt") == "selective")
    phase("engine init")
    model, optimizer, scheduler, engine = wrap_engine(model, cfg, args, dist, steps)
    start = load_checkpoint(cfg, out_dir, model, optimizer, scheduler, engine, dist) if args.resume else 0
    phase("first step")
    feed = batches(examples, dist, mb, args.seed + start, tok.pad_token_id if tok is not None else 0)
    warmup = args.warmup_steps if args.warmup_steps is not None else min(2, max(0, steps - start - 1))
    history = run_steps(cfg, args, dist, (model, optimizer, scheduler, engine), reference, selective, feed, start,
                        steps, out_dir, metrics_path, watchdog)
    save_checkpoint(cfg, out_dir, model, optimizer, scheduler, engine, dist, steps)
    summary = summarize(history, warmup, dist, cfg)
    summary["parameters"] = sharding_of(model)
    summary.update(loaded)
    summary["trainable_params"] = sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters() if p.requires_grad)
    if final_model_wanted(cfg, args):
        phase("final model")
        summary["final_model"] = save_final_model(cfg, args, out_dir, model, engine, tok, dist, steps)
    log(dist, summary, metrics_path)
    if watchdog:
        watchdog.tearing_down()
    if dist.world > 1 and torch.distributed.is_initialized():
        torch.distributed.barrier()  # every rank done with its checkpoint and log before the group goes away
        torch.distributed.destroy_process_group()
    return summary


def _is_oom(exc: BaseException) -> bool:
    return type(exc).__name__ in ("OutOfMemoryError", "OutOfMemoryError_") or "out of memory" in str(exc).lower()


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        watchdog = Watchdog(startup_timeout(args))
        cfg = load_config(args.config)
        validate_inputs(cfg, args)
        train(cfg, args, watchdog)
        watchdog.stop()
    except SetupError as exc:
        print(f"train.py: error: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, MemoryError) as exc:
        if not _is_oom(exc):
            raise
        # an out-of-memory is a result (benchmarks search for the largest micro-batch that fits)
        print(json.dumps({"summary": True, "oom": True, "error": str(exc).splitlines()[0][:300]}), flush=True)
        print(f"train.py: error: out of memory: {str(exc).splitlines()[0][:200]}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    code = main()
    # Everything this run writes (checkpoint, metrics, summary) is closed by now. Interpreter teardown is skipped:
    # two-process gloo runs on the CPU have died there with "terminate called without an active exception" (a
    # C++ thread destroyed at exit) after finishing, which torchrun reports as a failed job.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
