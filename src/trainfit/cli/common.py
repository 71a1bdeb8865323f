"""Flags shared by several subcommands, and output helpers. No arithmetic here."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..errors import SpecError
from ..i18n import LANGS, default_lang


def add_output_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON document (keys in English)")
    p.add_argument("--lang", default=None, help=f"language of tables and messages: {' | '.join(LANGS)} "
                   "(default from the locale)")


def add_prices_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prices", action="append", default=[], metavar="FILE",
                   help="your own price quotes (CSV in the catalog's format: provider,instance_type,region,billing,"
                        "price,currency,price_date,...), used over the shipped and refreshed prices; repeatable")


def apply_prices(args: argparse.Namespace) -> None:
    """Layer the --prices files over the catalog for this command (and only this one)."""
    from ..catalog.prices import use_price_files

    use_price_files(getattr(args, "prices", None) or [])


def add_model_flag(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--model", "-m", required=required,
                   help="preset name (trainfit models), a config.json / model directory, or a Hugging Face id")


def add_workload_flags(p: argparse.ArgumentParser) -> None:
    """The workload flags of `estimate` (also used by compare, plan, generate, trace, bench)."""
    g = p.add_argument_group("workload")
    g.add_argument("--method", default="full", help="full | lora | qlora | freeze (default full)")
    g.add_argument("--task", default=None,
                   help="sft | pretrain | dpo | classification (default sft; classification for encoders)")
    g.add_argument("--seq-len", type=int, default=None,
                   help="tokens per sequence (default 2048, or the model's positions when fewer, e.g. 512 for BERT)")
    g.add_argument("--micro-batch", type=int, default=1, help="sequences per GPU per step (DPO: pairs)")
    g.add_argument("--grad-accum", type=int, default=1, help="gradient accumulation steps (default 1)")
    g.add_argument("--precision", default="bf16", help="bf16 | fp16 | fp32 | fp8 (default bf16)")
    g.add_argument("--param-dtype", default=None,
                   help="storage dtype of trained weights without DeepSpeed: fp32 (mixed precision) | bf16 (pure); "
                        "default fp32, or the --framework's default")
    g.add_argument("--optimizer", default="adamw", help="adamw | adamw-8bit | adafactor | sgd | lamb")
    g.add_argument("--grad-ckpt", default="none", help="activation checkpointing: none | selective | full")
    g.add_argument("--attention", default="sdpa", help="flash | sdpa | eager (default sdpa)")
    g.add_argument("--lora-rank", type=int, default=16, help="LoRA rank (default 16)")
    g.add_argument("--lora-targets", default="all-linear",
                   help="all-linear or a comma list such as q_proj,v_proj (default all-linear)")
    g.add_argument("--modules-to-save", default=None, metavar="NAMES",
                   help="LoRA: modules trained in full beside the adapters, e.g. embed_tokens,lm_head "
                        "(PEFT modules_to_save)")
    g.add_argument("--optimizer-in-backward", action="store_true",
                   help="step each parameter as soon as its gradient is ready, freeing it (torchtune optimizer_in_bwd;"
                        " needs --grad-accum 1)")
    g.add_argument("--paged-optimizer", action="store_true",
                   help="bitsandbytes paged optimizer states (CUDA managed memory, paged out to host under pressure)")
    g.add_argument("--optimizer-impl", default="fused", choices=("fused", "foreach", "forloop"),
                   help="how torch runs AdamW/SGD: fused (Hugging Face Trainer's default, train.py), foreach "
                        "(torch's own default on CUDA: one more state's worth of memory in the step) or forloop")
    g.add_argument("--num-labels", type=int, default=2, help="classes for --task classification")


def add_framework_flag(p: argparse.ArgumentParser) -> None:
    """--framework: the training stack a job runs on (frameworks.yaml names), for its factors and error band."""
    p.add_argument("--framework", default=None, metavar="NAME",
                   help="your training stack: hf-trainer, trainfit, torchtune, torchtitan, litgpt, unsloth, composer, "
                        "or other (a stack not listed); selects its fitted factors and its error band (default: "
                        "unstated, the wider band of any stack)")


def add_length_flags(p: argparse.ArgumentParser) -> None:
    """Variable-length data: samples padded to the longest of each micro-batch instead of packed."""
    g = p.add_argument_group("variable-length data (not packed)")
    g.add_argument("--max-len", type=int, default=None, metavar="TOKENS",
                   help="the longest sample (truncation length; the same as --seq-len): memory is taken there")
    g.add_argument("--avg-len", type=int, default=None, metavar="TOKENS",
                   help="mean tokens per sample: time is taken at micro-batches padded to their longest sample, "
                        "throughput counts these tokens, not the padding")
    g.add_argument("--data", default=None, metavar="FILE",
                   help="JSON lines (or one sample per line) whose sample lengths give the mean, the longest and the "
                        "padding: counted with the model's tokenizer when its files are local, else whitespace "
                        "words x 4/3 (CJK characters x 1)")
    g.add_argument("--expandable-segments", action="store_true",
                   help="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: less memory reserved when shapes vary")


def length_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return dict(max_len=args.max_len, avg_len=args.avg_len, data=args.data,
                expandable_segments=args.expandable_segments)


def add_strategy_flags(p: argparse.ArgumentParser, gpus_default: int = 1) -> None:
    g = p.add_argument_group("parallelism")
    g.add_argument("--gpus", type=int, default=gpus_default, help="GPUs per node (default 1)")
    g.add_argument("--nodes", type=int, default=1, help="nodes (default 1)")
    g.add_argument("--zero", type=int, default=None, help="DeepSpeed ZeRO stage 0-3")
    g.add_argument("--fsdp", default=None, help="PyTorch FSDP: full_shard | shard_grad_op")
    g.add_argument("--offload", default="none", help="none | optimizer | all (DeepSpeed ZeRO / FSDP)")


def add_efficiency_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model knobs")
    g.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="override a named efficiency/overhead (see `trainfit efficiencies`); repeatable")
    g.add_argument("--calibration", default=None, help="calibration file from `trainfit calibrate`")


def add_job_flags(p: argparse.ArgumentParser) -> None:
    """The flags of a command that estimates one training job: workload, parallelism, model knobs, output."""
    add_workload_flags(p)
    add_strategy_flags(p)
    add_efficiency_flags(p)
    add_output_flags(p)


def parse_sets(items: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise SpecError(f"--set expects NAME=VALUE, got {item!r}")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise SpecError(f"--set {name}: {value!r} is not a number") from None
    return out


def workload_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return dict(method=args.method, task=args.task, seq_len=args.seq_len, micro_batch=args.micro_batch,
                grad_accum=args.grad_accum, precision=args.precision, param_dtype=args.param_dtype,
                optimizer=args.optimizer, grad_ckpt=args.grad_ckpt, attention=args.attention,
                lora_rank=args.lora_rank, lora_targets=args.lora_targets, num_labels=args.num_labels,
                modules_to_save=args.modules_to_save, optimizer_in_backward=args.optimizer_in_backward,
                paged_optimizer=args.paged_optimizer, optimizer_impl=getattr(args, "optimizer_impl", "fused"))


def strategy_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return dict(gpus=args.gpus, nodes=args.nodes, zero=args.zero, fsdp=args.fsdp, offload=args.offload)


def lang_of(args: argparse.Namespace) -> str:
    lang = getattr(args, "lang", None) or default_lang()
    if lang not in LANGS:
        raise SpecError(f"--lang must be one of {', '.join(LANGS)}, got {lang!r}")
    return lang


def print_json(doc: Any) -> None:
    json.dump(doc, sys.stdout, ensure_ascii=False, indent=2, default=_default)
    sys.stdout.write("\n")


def _default(obj: Any) -> Any:
    if hasattr(obj, "value"):
        return obj.value
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def console():
    from rich.console import Console

    return Console()


def check_out(path: str, kind: str) -> str:
    """An --out path that can be written, checked before any work (SpecError otherwise): `kind` "dir" (a directory
    that exists or can be created) or "file" (a regular file, new or to be replaced/appended). A probe file is made
    and removed in the nearest existing folder, so read-only and virtual file systems (/proc) are caught too."""
    import tempfile

    if not path or "\0" in path or any(len(part.encode()) > 255 for part in path.split(os.sep)) or len(path) > 4000:
        raise SpecError(f"--out {path!r}: not a usable path (empty, or a name longer than the file system allows)")
    full = os.path.abspath(path)
    if os.path.exists(full):
        if kind == "dir" and not os.path.isdir(full):
            raise SpecError(f"--out {path}: exists and is not a directory")
        if kind == "file" and not os.path.isfile(full):
            raise SpecError(f"--out {path}: exists and is not a regular file")
    folder = full if kind == "dir" else os.path.dirname(full)
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        raise SpecError(f"--out {path}: {folder} is a file, not a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=".trainfit-probe-", dir=folder)
        os.close(fd)
        os.remove(probe)
    except OSError as exc:
        raise SpecError(f"--out {path}: cannot write in {folder} ({exc.strerror or exc})") from None
    return full


def add_report_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--html", default=None, metavar="FILE",
                   help="also write a self-contained HTML report with plots (opens offline)")
    p.add_argument("--md", default=None, metavar="FILE", help="also write a Markdown report")


def check_reports(args: argparse.Namespace) -> None:
    """--html / --md paths checked writable before any work."""
    for flag in ("html", "md"):
        path = getattr(args, flag, None)
        if path:
            check_out(path, "file")


def write_reports(args: argparse.Namespace, build) -> None:
    """Write --html / --md from the document `build()` returns (built only when asked for)."""
    if not (getattr(args, "html", None) or getattr(args, "md", None)):
        return
    from ..report.document import write_report

    for path in write_report(build(), args.html, args.md):
        print(f"report written to {path}", file=sys.stderr)
