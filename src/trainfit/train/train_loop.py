"""train.py's step loop: the loss of a micro-batch (the model's own, or DPO's against a reference), mixed precision
and loss scaling where the engine does not do them, gradient accumulation without synchronising all but the last
micro-batch, the optimizer step, one metrics line per step (loss, tokens/s, peak memory), periodic checkpoints, and
the run's summary."""

from __future__ import annotations

import argparse
import math
import time
from contextlib import nullcontext

if __package__:  # trainfit.train.train_loop
    from .train_checkpoint import save_checkpoint
    from .train_common import SetupError, log
    from .train_data import tokens_per_step
    from .train_engine import InBackward
    from .train_launch import Dist, Watchdog
    from .train_model import compute_dtype
else:  # the generated job folder: train.py's modules side by side
    from train_checkpoint import save_checkpoint
    from train_common import SetupError, log
    from train_data import tokens_per_step
    from train_engine import InBackward
    from train_launch import Dist, Watchdog
    from train_model import compute_dtype

__all__ = ["token_logps", "dpo_loss", "micro_step_loss", "autocast", "grad_scaler", "no_sync", "memory_gib",
           "total_steps", "run_steps", "optimizer_step", "_sync_time", "summarize", "sharding_of"]


def token_logps(logits, input_ids, loss_mask):
    """Sum of log-probabilities of the masked (answer) tokens, per sequence."""
    import torch

    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    picked = logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return (picked * loss_mask[:, 1:]).sum(-1)


def dpo_loss(model, batch: dict, cfg: dict, reference):
    """Direct Preference Optimization (Rafailov et al. 2023, eq. 7): -log σ(β[(π_c - π_r) - (ref_c - ref_r)])."""
    import torch

    beta = cfg.get("dpo_beta", 0.1)
    ids, mask, loss_mask = batch["input_ids"], batch["attention_mask"], batch["loss_mask"]
    n = ids.shape[0] // 2
    with torch.no_grad():
        if reference is None:  # LoRA: the base model with adapters switched off is the reference
            inner = model.module if hasattr(model, "module") else model
            with inner.disable_adapter():
                ref = token_logps(model(input_ids=ids, attention_mask=mask).logits, ids, loss_mask)
        else:
            ref = token_logps(reference(input_ids=ids, attention_mask=mask).logits, ids, loss_mask)
    pol = token_logps(model(input_ids=ids, attention_mask=mask).logits, ids, loss_mask)
    margin = (pol[:n] - pol[n:]) - (ref[:n] - ref[n:])
    return -torch.nn.functional.logsigmoid(beta * margin).mean()


def micro_step_loss(model, batch: dict, cfg: dict, reference):
    if cfg["task"] == "dpo":
        return dpo_loss(model, batch, cfg, reference)
    return model(**batch).loss


def autocast(cfg: dict, dist: Dist):
    """torch.autocast for mixed precision where the engine does not handle it (DeepSpeed and FSDP do)."""
    import torch

    if cfg["precision"] == "fp32" or cfg["engine"] in ("deepspeed", "fsdp"):
        return nullcontext()
    return torch.autocast(dist.device.type, dtype=compute_dtype(cfg, dist))


def grad_scaler(cfg: dict, dist: Dist):
    """fp16 needs loss scaling (DeepSpeed does its own); bf16 and fp32 get a disabled scaler."""
    import torch

    enabled = cfg["precision"] == "fp16" and cfg["engine"] in ("single", "ddp")
    return torch.amp.GradScaler(dist.device.type, enabled=enabled)


def no_sync(model, cfg: dict, last: bool):
    """Skip gradient synchronisation on all but the last micro-batch of a step."""
    if last:
        return nullcontext()
    if cfg["engine"] == "ddp" and hasattr(model, "no_sync"):
        return model.no_sync()
    if cfg["engine"] == "fsdp" and hasattr(model, "set_requires_gradient_sync"):
        model.set_requires_gradient_sync(False)
    return nullcontext()


def memory_gib(dist: Dist) -> dict:
    import torch

    if dist.cuda:
        return {"peak_memory_gib": torch.cuda.max_memory_allocated(dist.device) / 2**30,
                "peak_reserved_gib": torch.cuda.max_memory_reserved(dist.device) / 2**30, "memory_kind": "allocated"}
    import resource

    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux: KiB
    return {"peak_memory_gib": rss_kib / 2**20, "memory_kind": "cpu-rss"}


def total_steps(cfg: dict, args: argparse.Namespace) -> int:
    if args.max_steps:
        return args.max_steps
    if cfg.get("max_steps"):
        return int(cfg["max_steps"])
    return max(1, math.ceil(cfg["processed_tokens"] / tokens_per_step(cfg)))


def run_steps(cfg: dict, args: argparse.Namespace, dist: Dist, wrapped: tuple, reference, selective, feed,
              start: int, steps: int, out_dir: str, metrics_path: str, watchdog: Watchdog | None = None) -> list[dict]:
    """Optimizer steps start + 1 .. steps on the micro-batches of `feed`, inside `selective` (selective_attention);
    `wrapped`: wrap_engine's (model, optimizer, scheduler, engine). Each step's record is logged (to
    `metrics_path` too), the watchdog is told when the first step has finished, and a checkpoint is saved every
    save_steps (the last step's is the caller's). Returns the records."""
    model, optimizer, scheduler, engine = wrapped
    scaler = grad_scaler(cfg, dist)
    history = []
    save_every = args.save_steps if args.save_steps is not None else cfg.get("save_steps", 0)
    with selective:
        for step in range(start, steps):
            record = optimizer_step(cfg, dist, wrapped, reference, selective, feed, scaler, step)
            history.append(record)
            log(dist, record, metrics_path)
            if watchdog and len(history) == 1:
                watchdog.started()
            if save_every and (step + 1) % save_every == 0 and step + 1 < steps:
                save_checkpoint(cfg, out_dir, model, optimizer, scheduler, engine, dist, step + 1)
    return history


def optimizer_step(cfg: dict, dist: Dist, wrapped: tuple, reference, selective, feed, scaler, step: int) -> dict:
    """Step `step` + 1: grad_accum micro-batches forward and backward, then the update (unscaled, clipped, stepped,
    the schedule advanced; DeepSpeed's engine and an optimizer in backward step themselves). Returns its record."""
    import torch

    model, optimizer, scheduler, engine = wrapped
    ga = cfg["grad_accum"]
    t0 = _sync_time(dist)
    loss_sum, seen = 0.0, 0
    for micro in range(ga):
        batch, epoch = next(feed)
        seen += batch.pop("tokens")
        batch = {k: v.to(dist.device) for k, v in batch.items()}
        with no_sync(model, cfg, micro == ga - 1), autocast(cfg, dist):
            loss = micro_step_loss(model, batch, cfg, reference)
        if engine is not None:
            engine.backward(loss)
            engine.step()
        else:
            if cfg["engine"] == "fsdp" and micro == ga - 1 and hasattr(model, "set_requires_gradient_sync"):
                model.set_requires_gradient_sync(True)
            scaler.scale(loss / ga).backward()
        loss_sum += float(loss.detach())
        if selective.enabled and selective.calls == 0:
            raise SetupError("grad_ckpt selective: this model's attention does not go through transformers' "
                             "attention functions, so nothing was checkpointed; use grad_ckpt full or none")
    if isinstance(optimizer, InBackward):  # stepped inside backward; nothing to clip or step here
        scheduler.step()
    elif engine is None:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad],
                                       cfg["optimizer"].get("max_grad_norm", 1.0))
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
    seconds = _sync_time(dist) - t0
    tokens = seen * dist.world  # this rank's samples' tokens (padding not counted) x the ranks
    record = {"step": step + 1, "loss": loss_sum / ga, "step_time_s": seconds, "tokens_per_s": tokens / seconds,
              "tokens_per_s_per_gpu": tokens / seconds / dist.world, "epoch": epoch, **memory_gib(dist)}
    if not math.isfinite(record["loss"]):
        raise SetupError(f"loss is {record['loss']} at step {step + 1}")
    return record


def _sync_time(dist: Dist) -> float:
    import torch

    if dist.cuda:
        torch.cuda.synchronize(dist.device)
    return time.perf_counter()


def summarize(history: list[dict], warmup: int, dist: Dist, cfg: dict) -> dict:
    timed = history[warmup:] or history
    seconds = sum(r["step_time_s"] for r in timed)
    tokens = sum(r["tokens_per_s"] * r["step_time_s"] for r in timed)
    return {"summary": True, "steps": len(history), "timed_steps": len(timed), "warmup_steps": len(history) - len(timed),
            "final_loss": history[-1]["loss"] if history else None, "step_time_s": seconds / max(1, len(timed)),
            "tokens_per_s": tokens / seconds if seconds else None,
            "tokens_per_s_per_gpu": tokens / seconds / dist.world if seconds else None,
            "world_size": dist.world, "device": "cuda" if dist.cuda else "cpu", "engine": cfg["engine"],
            **memory_gib(dist)}


def sharding_of(model) -> str:
    """What wraps the parameters: 'dtensor' under FSDP2, 'plain' otherwise (recorded for checks)."""
    first = next(iter(model.parameters()), None)
    return "dtensor" if type(first).__name__ == "DTensor" or type(getattr(first, "data", None)).__name__ == "DTensor" \
        else "plain"
