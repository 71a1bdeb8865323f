"""train.py's engine: DDP, PyTorch FSDP2 (fully_shard, its settings from the Accelerate-format config that
`trainfit generate` wrote, rank-0 loading) or DeepSpeed ZeRO (ds_config.json; ZeRO-3 active before the model is
built), and the optimizer and learning-rate schedule (torch / bitsandbytes / Adafactor, optimizer in backward)."""

from __future__ import annotations

import argparse
import json
import math
import os

if __package__:  # trainfit.train.train_engine
    from .train_common import SetupError
    from .train_data import _small_text
    from .train_launch import Dist
    from .train_model import compute_dtype, decoder_layers
else:  # the generated job folder: train.py's modules side by side
    from train_common import SetupError
    from train_data import _small_text
    from train_launch import Dist
    from train_model import compute_dtype, decoder_layers

__all__ = ["_ds_config_path", "deepspeed_config", "_ZERO3_CONFIG", "activate_zero3", "local_parameters",
           "wrap_engine", "fsdp_settings", "shard_fsdp", "load_from_rank0", "InBackward", "InBackwardScheduler",
           "make_optimizer", "_optimizer_for", "make_scheduler"]


def _ds_config_path(cfg: dict, args: argparse.Namespace) -> str:
    path = cfg.get("deepspeed_config", "ds_config.json")
    return path if os.path.isabs(path) else os.path.join(os.path.dirname(os.path.abspath(args.config)), path)


def deepspeed_config(cfg: dict, args: argparse.Namespace, dist: Dist) -> dict:
    """ds_config.json as this run uses it (the same dict for zero.Init at build time and for the engine)."""
    with open(_ds_config_path(cfg, args), encoding="utf-8") as fh:
        ds_config = json.load(fh)
    if not dist.cuda:  # tests on CPU: torch's AdamW, no fused/CPU-Adam kernels to build
        if "optimizer" in ds_config:
            ds_config["optimizer"].setdefault("params", {})["torch_adam"] = True
        for key in ("bf16", "fp16"):
            ds_config.pop(key, None)
    return ds_config


# Under ZeRO-3 transformers builds the model inside deepspeed.zero.Init while an HfDeepSpeedConfig is alive (it is
# held through a weak reference, so it is kept here for the whole run): each rank then holds only its partition of
# every parameter, and from_pretrained loads the checkpoint shard by shard into the partitions, instead of every rank
# materialising the whole model in host memory first.
_ZERO3_CONFIG: list = []


def activate_zero3(cfg: dict, args: argparse.Namespace, dist: Dist) -> bool:
    """Make the DeepSpeed ZeRO-3 config active before the model is built; True if it was."""
    if cfg["engine"] != "deepspeed" or int(cfg.get("zero_stage") or 0) != 3:
        return False
    from transformers.integrations import HfDeepSpeedConfig

    _ZERO3_CONFIG[:] = [HfDeepSpeedConfig(deepspeed_config(cfg, args, dist))]
    return True


def local_parameters(model) -> dict:
    """What this rank holds right after the model is built: its own elements vs the model's (checks zero.Init)."""
    local = total = 0
    for p in model.parameters():
        if hasattr(p, "ds_tensor"):  # ZeRO-3 partitioned: p itself is empty, ds_tensor is this rank's slice
            local += p.ds_tensor.numel()
            total += p.ds_numel
        else:
            n = p.to_local().numel() if hasattr(p, "to_local") else p.numel()
            local += n
            total += p.numel()
    return {"loaded_local_params": local, "loaded_total_params": total}


def wrap_engine(model, cfg: dict, args: argparse.Namespace, dist: Dist, steps: int):
    """(model to call, optimizer or None for DeepSpeed, scheduler or None, DeepSpeed engine or None)."""
    import torch

    if cfg["engine"] == "deepspeed":
        import deepspeed

        ds_config = deepspeed_config(cfg, args, dist)
        client_optimizer = None
        if "optimizer" not in ds_config:  # 8-bit AdamW, Adafactor, SGD: built here, stepped by DeepSpeed
            client_optimizer = make_optimizer(model, cfg)
        engine, _, _, scheduler = deepspeed.initialize(
            model=model, optimizer=client_optimizer,
            model_parameters=[p for p in model.parameters() if p.requires_grad], config=ds_config)
        return engine, None, scheduler, engine
    rank0_load = getattr(dist, "rank0_load", False)
    if not rank0_load or dist.main:
        model.to(dist.device)
    if cfg["engine"] == "fsdp":
        full = model.state_dict() if rank0_load and dist.main else None
        model = shard_fsdp(model, cfg, args, dist)
        if rank0_load:
            load_from_rank0(model, full, dist)
            del full
    elif cfg["engine"] == "ddp" and dist.world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dist.local_rank] if dist.cuda else None)
    if args.compile:
        model = torch.compile(model)
    optimizer = make_optimizer(model, cfg)
    return model, optimizer, make_scheduler(optimizer, cfg, steps), None


def fsdp_settings(cfg: dict, args: argparse.Namespace) -> dict:
    """The `fsdp_config` section of the Accelerate-format YAML that `trainfit generate` wrote."""
    import yaml

    path = cfg.get("fsdp_config", "accelerate_config.yaml")
    path = path if os.path.isabs(path) else os.path.join(os.path.dirname(os.path.abspath(args.config)), path)
    if not os.path.isfile(path):
        raise SetupError(f"FSDP config not found: {path}")
    class _NoAliases(yaml.SafeLoader):  # a 300-byte "billion laughs" file would take gigabytes
        def compose_node(self, parent, index):
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise SetupError(f"{path}: YAML anchors and aliases are not accepted "
                                 f"(line {event.start_mark.line + 1})")
            return super().compose_node(parent, index)

    text = _small_text(path, "FSDP config")
    try:
        doc = yaml.load(text, Loader=_NoAliases) or {}  # noqa: S506 - a SafeLoader subclass
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        raise SetupError(f"{path}: not valid YAML ({' '.join(str(exc).split())[:160]})") from None
    if not isinstance(doc, dict):
        doc = {}
    if doc.get("distributed_type") != "FSDP" or not isinstance(doc.get("fsdp_config"), dict):
        raise SetupError(f"{path}: not an FSDP config (distributed_type: FSDP with an fsdp_config section)")
    return doc["fsdp_config"]


def shard_fsdp(model, cfg: dict, args: argparse.Namespace, dist: Dist):
    """FSDP2 (fully_shard): each decoder layer is a unit, then the root; on GPUs the compute dtype gathers
    parameters and gradients are reduced in fp32 (MixedPrecisionPolicy)."""
    import torch
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    fsdp = fsdp_settings(cfg, args)
    kwargs = {}
    if dist.cuda and cfg["precision"] != "fp32":
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=compute_dtype(cfg, dist), reduce_dtype=torch.float32)
    if fsdp.get("fsdp_offload_params"):
        kwargs["offload_policy"] = CPUOffloadPolicy()
    reshard = bool(fsdp.get("fsdp_reshard_after_forward", True))
    for layer in decoder_layers(model):
        fully_shard(layer, reshard_after_forward=reshard, **kwargs)
    fully_shard(model, reshard_after_forward=reshard, **kwargs)
    return model


def load_from_rank0(model, full: dict | None, dist: Dist) -> None:
    """Fill the sharded model from rank 0's full state dict: each rank receives only its shards
    (torch.distributed.checkpoint's set_model_state_dict, broadcast_from_rank0); buffers, which FSDP does not shard
    and which may not be in the state dict (RoPE's inv_freq), are broadcast whole."""
    import torch
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    if not dist.main:
        model.to_empty(device=dist.device)
    set_model_state_dict(model, full if dist.main else {},
                         options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    for buf in model.buffers():
        torch.distributed.broadcast(buf, src=0)


class InBackward:
    """Optimizer in backward (torchtune's optimizer_in_bwd): one optimizer per parameter, stepped by a hook as soon
    as that parameter's gradient is accumulated, which then frees the gradient; no full set of gradients ever
    exists. step() and zero_grad() are no-ops for the loop; there is no global gradient clipping."""

    def __init__(self, params: list, make):
        self.optimizers = [make([p]) for p in params]
        self._by_param = {p: o for p, o in zip(params, self.optimizers)}
        for p in params:
            p.register_post_accumulate_grad_hook(self._step)

    def _step(self, param) -> None:
        opt = self._by_param[param]
        opt.step()
        opt.zero_grad(set_to_none=True)

    def step(self) -> None:
        pass

    def zero_grad(self, set_to_none: bool = True) -> None:
        pass

    def state_dict(self) -> dict:
        return {str(i): o.state_dict() for i, o in enumerate(self.optimizers)}

    def load_state_dict(self, state: dict) -> None:
        for i, o in enumerate(self.optimizers):
            o.load_state_dict(state[str(i)])


class InBackwardScheduler:
    """The learning-rate schedule of every per-parameter optimizer, stepped together."""

    def __init__(self, optimizer: InBackward, make):
        self.schedulers = [make(o) for o in optimizer.optimizers]

    def step(self) -> None:
        for s in self.schedulers:
            s.step()

    def state_dict(self) -> dict:
        return {str(i): s.state_dict() for i, s in enumerate(self.schedulers)}

    def load_state_dict(self, state: dict) -> None:
        for i, s in enumerate(self.schedulers):
            s.load_state_dict(state[str(i)])


def make_optimizer(model, cfg: dict):
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg["optimizer"].get("in_backward"):
        return InBackward(params, lambda group: _optimizer_for(group, cfg))
    return _optimizer_for(params, cfg)


def _optimizer_for(params: list, cfg: dict):
    import torch

    opt = cfg["optimizer"]
    name, lr, wd = opt["name"], opt["lr"], opt.get("weight_decay", 0.0)
    if opt.get("paged"):
        if not any(p.is_cuda for p in params):
            raise SetupError("paged optimizers (bitsandbytes) need a CUDA GPU")
        import bitsandbytes as bnb

        if name == "adamw":
            return bnb.optim.PagedAdamW(params, lr=lr, betas=tuple(opt.get("betas", (0.9, 0.95))), weight_decay=wd)
        if name == "adamw-8bit":
            return bnb.optim.PagedAdamW8bit(params, lr=lr, weight_decay=wd)
        raise SetupError(f"no paged version of optimizer {name!r}")
    # torch's AdamW / SGD in the implementation the estimate assumed (optimizer_impl; fused only on CUDA)
    impl = opt.get("impl", "fused")
    kernel = ({"fused": True} if any(p.is_cuda for p in params) else {}) if impl == "fused" else \
        {"foreach": impl == "foreach"}
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=tuple(opt.get("betas", (0.9, 0.95))), weight_decay=wd,
                                 **kernel)
    if name == "adamw-8bit":
        import bitsandbytes as bnb

        return bnb.optim.AdamW8bit(params, lr=lr, weight_decay=wd)
    if name == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(params, lr=lr, relative_step=False, scale_parameter=False, weight_decay=wd)
    if name in ("sgd", "sgd-nomomentum"):
        return torch.optim.SGD(params, lr=lr, momentum=0.9 if name == "sgd" else 0.0, weight_decay=wd, **kernel)
    raise SetupError(f"optimizer {name!r} is not supported by this script")


def make_scheduler(optimizer, cfg: dict, steps: int):
    import torch

    if isinstance(optimizer, InBackward):
        return InBackwardScheduler(optimizer, lambda o: make_scheduler(o, cfg, steps))
    warm = max(1, int(cfg["optimizer"].get("warmup_ratio", 0.03) * steps))

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warm) / max(1, steps - warm))))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
