"""train.py's checkpoints and final model: checkpoints during the run and --resume from the latest (DeepSpeed's
own, torch.distributed.checkpoint under FSDP, else a torch.save of what trains), and at the end the model in Hugging
Face format that serving reads (the LoRA adapter, the merged model, gathered to rank 0 from FSDP / ZeRO-3 shards)."""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import sys

if __package__:  # trainfit.train.train_checkpoint
    from .train_common import SetupError
    from .train_engine import _ZERO3_CONFIG
    from .train_launch import Dist
    from .train_model import compute_dtype, model_location
else:  # the generated job folder: train.py's modules side by side
    from train_common import SetupError
    from train_engine import _ZERO3_CONFIG
    from train_launch import Dist
    from train_model import compute_dtype, model_location

__all__ = ["DEFAULT_OUTPUT_DIR", "ADAPTER_DIR", "MERGED_DIR", "ARTIFACT_FILE", "ARTIFACT_VERSION", "_ckpt_dir",
           "save_checkpoint", "_write_latest", "load_checkpoint", "final_model_wanted", "final_dtype", "_unwrapped",
           "_sharded", "_gathered_state", "_model_class", "_zero3_off", "_cpu_copy", "_available_ram", "_elements",
           "_publish", "_long_wait_group", "save_final_model", "_not_merged_because", "_describer",
           "_write_final_model", "_merged_model", "_write_artifact"]

DEFAULT_OUTPUT_DIR = "output"
# The run's result in Hugging Face format, under the output directory, written at the end of training: LoRA / QLoRA
# runs write the PEFT adapter to ADAPTER_DIR, every run the model to serve (adapter merged in) to MERGED_DIR, which
# also holds ARTIFACT_FILE. `trainfit generate --serving` reads these names (its default --model-path is
# DEFAULT_OUTPUT_DIR/MERGED_DIR, and --from OUTPUT_DIR finds MERGED_DIR there).
ADAPTER_DIR, MERGED_DIR, ARTIFACT_FILE = "adapter", "merged", "trainfit_artifact.json"
ARTIFACT_VERSION = 1


# ---- checkpoints ----------------------------------------------------------------------------------------------

def _ckpt_dir(out_dir: str) -> str:
    return os.path.join(out_dir, "checkpoint")


def save_checkpoint(cfg, out_dir, model, optimizer, scheduler, engine, dist, step: int) -> None:
    import torch

    path = _ckpt_dir(out_dir)
    if engine is not None:
        engine.save_checkpoint(path, tag=f"step{step}", client_state={"step": step})
        return
    if cfg["engine"] == "fsdp":
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model_sd, optim_sd = get_state_dict(model, optimizer)
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=os.path.join(path, f"step{step}"))
        if dist.main:
            _write_latest(path, step)
        return
    if not dist.main:
        return
    inner = model.module if hasattr(model, "module") else model
    os.makedirs(path, exist_ok=True)
    trainable = {k: v for k, v in inner.state_dict().items()} if cfg["method"] == "full" else \
        {n: p.detach() for n, p in inner.named_parameters() if p.requires_grad}
    torch.save({"model": trainable, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                "step": step}, os.path.join(path, f"step{step}.pt"))
    _write_latest(path, step)


def _write_latest(path: str, step: int) -> None:
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "latest_step"), "w", encoding="utf-8") as fh:
        fh.write(str(step))


def load_checkpoint(cfg, out_dir, model, optimizer, scheduler, engine, dist) -> int:
    import torch

    path = _ckpt_dir(out_dir)
    if engine is not None:
        _, client = engine.load_checkpoint(path)
        return int((client or {}).get("step", 0))
    marker = os.path.join(path, "latest_step")
    if not os.path.isfile(marker):
        raise SetupError(f"--resume: no checkpoint in {path}")
    with open(marker, encoding="utf-8") as fh:
        step = int(fh.read().strip())
    if cfg["engine"] == "fsdp":
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        model_sd, optim_sd = get_state_dict(model, optimizer)
        state = {"model": model_sd, "optim": optim_sd}
        dcp.load(state, checkpoint_id=os.path.join(path, f"step{step}"))
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        for _ in range(step):
            scheduler.step()
        return step
    state = torch.load(os.path.join(path, f"step{step}.pt"), map_location=dist.device, weights_only=False)
    inner = model.module if hasattr(model, "module") else model
    inner.load_state_dict(state["model"], strict=False)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    return int(state["step"])


# ---- the final model: Hugging Face format, what serving reads ------------------------------------------------------

def final_model_wanted(cfg: dict, args: argparse.Namespace) -> bool:
    """A run writes its final model unless told not to; a --synthetic run (benchmarks: random tokens) never does."""
    return not (getattr(args, "no_final_model", False) or args.synthetic or cfg.get("final_model") is False)


def final_dtype(cfg: dict, dist: Dist):
    """The merged weights' dtype: the training compute dtype (bf16 / fp16); fp32 only for an fp32 run."""
    import torch

    return torch.float32 if cfg["precision"] == "fp32" else compute_dtype(cfg, dist)


def _unwrapped(model):
    """The model inside DDP, a DeepSpeed engine and torch.compile (a PeftModel for LoRA, else the HF model)."""
    import torch

    while True:
        if hasattr(model, "_orig_mod"):
            model = model._orig_mod
        elif isinstance(model, torch.nn.parallel.DistributedDataParallel) or type(model).__name__ == "DeepSpeedEngine":
            model = model.module
        else:
            return model


def _sharded(cfg: dict, engine) -> bool:
    """Whether no rank holds the whole model: FSDP, or DeepSpeed ZeRO-3 (partitioned parameters)."""
    if cfg["engine"] == "fsdp":
        return True
    return engine is not None and bool(engine.zero_optimization_partition_weights())


def _gathered_state(cfg: dict, model, engine, trainable_only: bool) -> dict | None:
    """The full state dict of a sharded model, on rank 0's CPU (None on the other ranks); every rank calls this.
    FSDP: torch.distributed.checkpoint's get_model_state_dict with full_state_dict + cpu_offload (only rank 0
    receives it); ZeRO-3: the engine's layer-by-layer 16-bit consolidation (what save_16bit_model writes).
    `trainable_only`: the trained parameters alone (a QLoRA adapter)."""
    if cfg["engine"] == "fsdp":
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(_unwrapped(model), options=StateDictOptions(
            full_state_dict=True, cpu_offload=True, ignore_frozen_params=trainable_only))
    return engine._zero3_consolidated_16bit_state_dict(exclude_frozen_parameters=trainable_only)


def _model_class(cfg: dict):
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    return AutoModelForSequenceClassification if cfg["task"] == "classification" else AutoModelForCausalLM


def _zero3_off() -> None:
    """Rank 0 builds plain CPU models after training: transformers must no longer build them inside zero.Init."""
    _ZERO3_CONFIG.clear()
    try:
        from transformers.integrations.deepspeed import unset_hf_deepspeed_config

        unset_hf_deepspeed_config()
    except ImportError:
        pass


def _cpu_copy(cfg: dict, live, state: dict):
    """Rank 0: a plain CPU model built like the trained one (PEFT-wrapped for LoRA) holding the gathered weights
    (`state`); the buffers no state dict carries (RoPE's inv_freq) are taken from the live model, which FSDP and
    ZeRO-3 do not shard."""
    import torch

    _zero3_off()
    peft = hasattr(live, "peft_config")
    base = live.get_base_model() if peft else live
    with torch.device("meta"):
        model = _model_class(cfg).from_config(copy.deepcopy(base.config))
        if peft:
            from peft import get_peft_model

            model = get_peft_model(model, copy.deepcopy(live.peft_config["default"]))
    model.load_state_dict(state, strict=False, assign=True)
    live_buffers = dict(live.named_buffers())
    for name, buf in list(model.named_buffers()):
        if buf.is_meta and name in live_buffers:
            owner, _, attr = name.rpartition(".")
            model.get_submodule(owner)._buffers[attr] = live_buffers[name].detach().to("cpu", copy=True)
    missing = [n for n, p in [*model.named_parameters(), *model.named_buffers()] if p.is_meta]
    if missing:
        raise SetupError(f"final model: {missing[0]} is not in the gathered weights")
    if getattr(base.config, "tie_word_embeddings", False):
        (model.get_base_model() if peft else model).tie_weights()
    return model


def _available_ram() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _elements(p) -> int:
    """A parameter's element count: the unpacked shape of a bitsandbytes 4-bit weight, ZeRO-3's full size."""
    state = getattr(p, "quant_state", None)
    if state is not None and getattr(state, "shape", None) is not None:
        return int(math.prod(state.shape))
    return int(getattr(p, "ds_numel", p.numel()))


def _publish(path: str, write) -> None:
    """Write a directory under a temporary name, then put it in place: `trainfit generate --serving --from` never
    finds a half-written model, and an earlier run's (before --resume) is replaced whole."""
    import shutil

    tmp = f"{path}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    write(tmp)
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.replace(tmp, path)


def _long_wait_group(dist: Dist):
    """A gloo group with a long timeout for the other ranks to wait in while rank 0 writes the model (a large one
    takes longer than the default group's timeout, NCCL's 10 minutes); None for a single process."""
    import datetime

    import torch

    if dist.world == 1 or not torch.distributed.is_initialized():
        return None
    return torch.distributed.new_group(backend="gloo", timeout=datetime.timedelta(hours=6))


def save_final_model(cfg: dict, args: argparse.Namespace, out_dir: str, model, engine, tok, dist: Dist,
                     step: int) -> dict:
    """After the last checkpoint: the run's model in Hugging Face format under `out_dir`, which serving reads.
    LoRA / QLoRA: the PEFT adapter (save_pretrained: adapter_config.json + adapter_model.safetensors) in
    ADAPTER_DIR, and the model with the adapter merged in (merge_and_unload) in MERGED_DIR; full / freeze: the model
    in MERGED_DIR. Merged weights are safetensors in the training dtype (final_dtype); the tokenizer, when the run
    loaded one, is saved beside both; MERGED_DIR/ARTIFACT_FILE says what it is. Under FSDP and ZeRO-3 the full
    weights are gathered to rank 0 first (every rank takes part), only rank 0 writes, and the others wait.
    QLoRA: merging into the 4-bit base would give a 4-bit model, so rank 0 reloads the base in 16-bit on the CPU
    and applies the saved adapter; when the host has too little free memory for that, or the base was random
    (--random-init), only the adapter is written and the artefact file (in ADAPTER_DIR) says why.
    Returns {"adapter": path or None, "merged": path or None} (the same on every rank)."""
    import torch

    lora = cfg["method"] in ("lora", "qlora")
    qlora = cfg["method"] == "qlora"
    live = _unwrapped(engine if engine is not None else model)
    sharded = _sharded(cfg, engine)
    random_init = bool(args.random_init or cfg["model"].get("random_init"))
    # where the base weights came from (every rank: a ModelScope download synchronises the ranks)
    base_location = None if random_init else model_location(cfg, args, dist)
    group = _long_wait_group(dist)
    state = _gathered_state(cfg, model, engine, trainable_only=qlora) if sharded else None
    adapter_dir, merged_dir = os.path.join(out_dir, ADAPTER_DIR), os.path.join(out_dir, MERGED_DIR)
    dtype = final_dtype(cfg, dist)
    result = {"adapter": adapter_dir if lora else None, "merged": merged_dir}
    note = _not_merged_because(live, dtype, random_init) if qlora else None
    if note:
        result["merged"] = None
    if dist.main:
        describe = _describer(cfg, base_location, random_init, dtype, step, note)
        _write_final_model(cfg, live, state, tok, describe, result, adapter_dir, merged_dir, base_location, dtype)
        where = result["merged"] or result["adapter"]
        print(f"train.py: wrote the final model to {where}" + (f" (adapter: {adapter_dir})" if lora else "")
              + (f"; not merged: {note}" if note else f"; serve it: trainfit generate --serving --from {out_dir}"),
              file=sys.stderr, flush=True)
    if group is not None:
        torch.distributed.barrier(group=group)  # the others wait (long timeout) while rank 0 writes
    return result


def _not_merged_because(live, dtype, random_init: bool) -> str | None:
    """QLoRA: why rank 0 writes only the adapter (the base was random, or this host has too little free memory to
    reload the base in `dtype` on the CPU), or None when it merges."""
    import torch

    need = sum(_elements(p) for p in live.parameters()) * torch.tensor([], dtype=dtype).element_size()
    free = _available_ram()
    if random_init:
        return "the base model was random (--random-init): nothing to merge the adapter into"
    if free is not None and need * 1.2 > free:
        return (f"merging needs the base model in {str(dtype).split('.')[-1]} on the CPU ({need / 2**30:.1f} GiB) "
                f"and this host has {free / 2**30:.1f} GiB free: merge the adapter on a machine with more memory "
                f"(PeftModel.from_pretrained(base, adapter).merge_and_unload())")
    return None


def _describer(cfg: dict, base_location: str | None, random_init: bool, dtype, step: int, note: str | None):
    """describe(merged): the ARTIFACT_FILE document of the model written (merged: whether MERGED_DIR holds one)."""
    lora = cfg["method"] in ("lora", "qlora")

    def describe(merged: bool) -> dict:
        return {"trainfit_artifact": ARTIFACT_VERSION, "method": cfg["method"], "task": cfg["task"],
                "base_model": {"name": cfg["model"].get("name"), "hf_id": cfg["model"].get("hf_id"),
                               "location": base_location, "random_init": random_init},
                "dtype": str(dtype).split(".")[-1], "step": step, "engine": cfg["engine"],
                "adapter": ADAPTER_DIR if lora else None, "merged": MERGED_DIR if merged else None,
                "note": note, "serve": "trainfit generate --serving --from OUTPUT_DIR (this run's --output-dir) "
                                       "reads the merged model here"}

    return describe


def _write_final_model(cfg: dict, live, state: dict | None, tok, describe, result: dict, adapter_dir: str,
                       merged_dir: str, base_location: str | None, dtype) -> None:
    """Rank 0's part of save_final_model: the adapter (LoRA / QLoRA) and the merged model (result["merged"] not
    None) each written under a temporary name and put in place; a merged model an earlier run left is removed when
    this run writes none. `state`: the gathered weights of a sharded model (None: `live` holds them)."""
    lora = cfg["method"] in ("lora", "qlora")
    qlora = cfg["method"] == "qlora"

    def write_tokenizer(path: str) -> None:
        if tok is not None:
            tok.save_pretrained(path)

    if state is not None and not qlora:
        live = _cpu_copy(cfg, live, state)
        state = None
    if lora:
        def write_adapter(path: str) -> None:
            live.save_pretrained(path, **({"state_dict": state} if state is not None else {}))
            write_tokenizer(path)
            if result["merged"] is None:
                _write_artifact(path, describe(False))

        _publish(adapter_dir, write_adapter)
    if result["merged"] is not None:
        merged = _merged_model(cfg, live, adapter_dir, base_location, dtype)

        def write_merged(path: str) -> None:
            merged.save_pretrained(path)
            write_tokenizer(path)
            _write_artifact(path, describe(True))

        _publish(merged_dir, write_merged)
    elif os.path.isdir(merged_dir):  # an earlier run's merged model is not this run's: serving must not find it
        import shutil

        shutil.rmtree(merged_dir)


def _merged_model(cfg: dict, live, adapter_dir: str, base_location: str | None, dtype):
    """The model to serve, in `dtype`: QLoRA's base reloaded in 16-bit on the CPU with the saved adapter merged in,
    LoRA's adapter merged into the trained base, or the trained model itself (full / freeze)."""
    lora = cfg["method"] in ("lora", "qlora")
    qlora = cfg["method"] == "qlora"
    if qlora:  # the base again in 16-bit, on the CPU, with the saved adapter
        from peft import PeftModel

        _zero3_off()
        base = _model_class(cfg).from_pretrained(base_location, dtype=dtype, **(
            {"num_labels": cfg["num_labels"]} if cfg["task"] == "classification" else {}))
        merged = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload(safe_merge=True)
    elif lora:
        merged = live.merge_and_unload(safe_merge=True)
    else:
        merged = live
    merged.to(dtype)
    merged.config.use_cache = True  # training switched it off for gradient checkpointing
    return merged


def _write_artifact(path: str, doc: dict) -> None:
    with open(os.path.join(path, ARTIFACT_FILE), "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, sort_keys=True)
        fh.write("\n")
