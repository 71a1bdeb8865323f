"""The Python API: strings and numbers in, typed specs built and validated, estimates out.

    >>> import trainfit
    >>> est = trainfit.estimate("qwen2-7b", "a10", method="lora", seq_len=2048, grad_ckpt="full")
    >>> est.fits, round(est.tokens_per_s)
"""

from __future__ import annotations

from typing import Any

from .catalog import get_gpu, get_instance, resolve_model
from .catalog.efficiency import Efficiencies
from .errors import SpecError
from .estimate.core import Estimate, run_estimate
from .spec.cluster import check_network_gbps, cluster_for
from .spec.model import ModelSpec
from .spec.training import (Attention, Fsdp, GradCkpt, Method, Offload, Optimizer, OptimizerImpl, Precision, Strategy,
                            Task, TrainingSpec, default_seq_len, parse_saved_modules, parse_targets)


def training_spec(method: str = "full", task: str | None = None, seq_len: int | None = None, micro_batch: int = 1,
                  grad_accum: int = 1, precision: str = "bf16", param_dtype: str | None = None,
                  optimizer: str = "adamw", grad_ckpt: str = "none", attention: str = "sdpa", lora_rank: int = 16,
                  lora_targets: Any = None, num_labels: int = 2, model: ModelSpec | None = None,
                  modules_to_save: Any = None, optimizer_in_backward: bool = False,
                  paged_optimizer: bool = False, optimizer_impl: str = "fused",
                  framework: str | None = None, max_len: int | None = None, avg_len: int | None = None,
                  data: str | None = None, expandable_segments: bool = False) -> TrainingSpec:
    """`framework`: the training stack (frameworks.yaml); its defaults fill what is not given (param_dtype, how it
    prepares a QLoRA model). Variable-length data (padded to the longest of each micro-batch, not packed):
    `max_len` the longest sample (the same as seq_len), `avg_len` the mean, or `data` a file whose sample lengths
    are counted (spec/lengths.py); `expandable_segments`: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."""
    from .catalog.frameworks import check_framework, framework_defaults

    stack = framework_defaults().get(check_framework(framework) or "", {})
    if param_dtype is None:
        param_dtype = stack.get("param_dtype", "fp32")
    if task is None:
        task = "classification" if model is not None and model.is_encoder else "sft"
    if max_len is not None:
        if seq_len is not None and seq_len != max_len:
            raise SpecError(f"--max-len {max_len} and --seq-len {seq_len} name the same length: give one")
        seq_len = max_len
    if seq_len is None:
        seq_len, _ = default_seq_len(model.max_positions if model is not None else None)
    sequences = micro_batch * (2 if str(task).lower() == "dpo" else 1)
    varlen = _variable_lengths(seq_len, avg_len, data, sequences, model)
    seq_len = varlen.pop("longest", seq_len)  # --data: memory at the longest sample the data holds
    return TrainingSpec(
        method=Method.parse(method, "method"), task=Task.parse(task, "task"), seq_len=seq_len,
        micro_batch=micro_batch, grad_accum=grad_accum, precision=Precision.parse(precision, "precision"),
        param_dtype=param_dtype, optimizer=Optimizer.parse(optimizer, "optimizer"),
        grad_ckpt=GradCkpt.parse(grad_ckpt, "grad-ckpt"), attention=Attention.parse(attention, "attention"),
        lora_rank=lora_rank, lora_targets=parse_targets(lora_targets), num_labels=num_labels,
        modules_to_save=parse_saved_modules(modules_to_save), optimizer_in_backward=optimizer_in_backward,
        paged_optimizer=paged_optimizer, optimizer_impl=OptimizerImpl.parse(optimizer_impl, "optimizer implementation"),
        kbit_fp32_upcast=bool(stack.get("kbit_fp32_upcast", True)),
        kbit_keeps_inputs=bool(stack.get("kbit_keeps_inputs", False)),
        expandable_segments=bool(expandable_segments), **varlen)


def _variable_lengths(seq_len: int, avg_len: int | None, data: str | None, sequences: int,
                      model: ModelSpec | None) -> dict[str, Any]:
    """TrainingSpec fields of variable-length data: {} for packed sequences (neither avg_len nor data)."""
    if avg_len is None and data is None:
        return {}
    if avg_len is not None and data is not None:
        raise SpecError("give --avg-len or --data (whose lengths give the mean), not both")
    if data is None:
        if isinstance(avg_len, bool) or not isinstance(avg_len, int) or not 1 <= avg_len <= seq_len:
            raise SpecError(f"--avg-len must be an integer in [1, the longest sample {seq_len}], got {avg_len!r}")
        return {"variable_length": True, "avg_len": avg_len, "lengths_from": "--avg-len (exponential lengths "
                "assumed: a micro-batch of b is padded to about avg x (1 + 1/2 + ... + 1/b))"}
    from .spec.lengths import TOKENS_PER_CJK_CHAR, TOKENS_PER_WORD, read_lengths

    tok = _local_tokenizer(model)
    lengths = read_lengths(data, seq_len, tok)
    how = ("the model's tokenizer" if tok else f"whitespace words x {TOKENS_PER_WORD:.2f}, CJK characters x "
           f"{TOKENS_PER_CJK_CHAR:g}, no tokenizer at hand")
    return {"variable_length": True, "avg_len": lengths.avg, "padded_len": lengths.padded(sequences),
            "longest": lengths.longest,
            "lengths_from": f"--data {data}: {len(lengths.lengths)} samples, longest {lengths.longest} ({how})"}


def _local_tokenizer(model: ModelSpec | None):
    """A token counter from the model's own tokenizer when its files are on this machine (a model directory),
    else None (no download)."""
    import os

    path = str(getattr(model, "source", "") or "") if model is not None else ""
    if os.path.isfile(path):
        path = os.path.dirname(path) or "."
    if not path or not any(os.path.isfile(os.path.join(path, f)) for f in ("tokenizer.json", "tokenizer_config.json")):
        return None
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception:  # noqa: BLE001 - no usable tokenizer: the whitespace count, said so
        return None
    return lambda text: len(tok(text, add_special_tokens=True)["input_ids"])


def strategy_spec(gpus: int = 1, nodes: int = 1, zero: int | None = None, fsdp: str | None = None,
                  offload: str = "none") -> Strategy:
    return Strategy(gpus_per_node=gpus, nodes=nodes, zero_stage=int(zero or 0), fsdp=Fsdp.parse(fsdp),
                    offload=Offload.parse(offload, "offload"))


def user_calibration_path() -> str | None:
    """A user's calibration from the environment or the config directory, when there is one.

    $TRAINFIT_CALIBRATION names a file; otherwise $XDG_CONFIG_HOME/trainfit/calibration.yaml (default
    ~/.config/trainfit/calibration.yaml) is used when it exists.
    """
    import os

    env = os.environ.get("TRAINFIT_CALIBRATION")
    if env:
        return env
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    path = os.path.join(base, "trainfit", "calibration.yaml")
    return path if os.path.isfile(path) else None


def load_efficiencies(overrides: dict[str, Any] | None = None, calibration: str | None = None) -> Efficiencies:
    """Shipped efficiencies and calibration, then a user's calibration (--calibration FILE, or the config
    directory), then explicit overrides."""
    eff = Efficiencies.default()
    calibration = calibration or user_calibration_path()
    if calibration:
        from .calibrate import load_calibration  # reads a YAML file: only when asked for

        eff = eff.with_overrides(load_calibration(calibration), origin=f"calibration:{calibration}")
    if overrides:
        eff = eff.with_overrides(overrides, origin="--set")
    return eff


def with_framework(eff: Efficiencies, framework: str | None) -> Efficiencies:
    """The efficiencies for a stated training stack (its by_framework values); unchanged when none is stated."""
    from .catalog.frameworks import check_framework

    name = check_framework(framework)
    return eff if name is None else eff.for_framework(name)


def estimate(model: str | ModelSpec, gpu: str, *, gpus: int = 1, nodes: int = 1, method: str = "full",
             task: str | None = None, seq_len: int | None = None, micro_batch: int = 1, grad_accum: int = 1,
             precision: str = "bf16", param_dtype: str | None = None, optimizer: str = "adamw", zero: int | None = None,
             fsdp: str | None = None, offload: str = "none", grad_ckpt: str = "none", attention: str = "sdpa",
             lora_rank: int = 16, lora_targets: Any = None, num_labels: int = 2, modules_to_save: Any = None,
             optimizer_in_backward: bool = False, paged_optimizer: bool = False, optimizer_impl: str = "fused",
             instance: str | None = None, network_gbps: float | None = None, overrides: dict[str, Any] | None = None,
             calibration: str | None = None, efficiencies: Efficiencies | None = None,
             framework: str | None = None, max_len: int | None = None, avg_len: int | None = None,
             data: str | None = None, expandable_segments: bool = False) -> Estimate:
    """Estimate memory per GPU, step time and throughput of one training configuration. `framework`: the training
    stack (frameworks.yaml names, or "other"), when known: its fitted factors and its narrower error band."""
    spec = model if isinstance(model, ModelSpec) else resolve_model(model)
    inst = get_instance(instance) if instance else None
    gpu_spec = get_gpu(gpu) if gpu else None
    if inst is not None:
        if not inst.gpu:
            raise SpecError(f"{inst.instance_type}: the catalog does not know its GPU")
        if gpu_spec is not None and gpu_spec.id != inst.gpu:
            raise SpecError(f"{inst.instance_type} carries {inst.gpu}, not {gpu_spec.id}")
        gpu_spec = get_gpu(inst.gpu)
    if gpu_spec is None:
        raise SpecError("give --gpu or --instance")
    t = training_spec(method, task, seq_len, micro_batch, grad_accum, precision, param_dtype, optimizer, grad_ckpt,
                      attention, lora_rank, lora_targets, num_labels, model=spec, modules_to_save=modules_to_save,
                      optimizer_in_backward=optimizer_in_backward, paged_optimizer=paged_optimizer,
                      optimizer_impl=optimizer_impl, framework=framework, max_len=max_len, avg_len=avg_len,
                      data=data, expandable_segments=expandable_segments)
    s = strategy_spec(gpus, nodes, zero, fsdp, offload)
    if network_gbps is not None:
        check_network_gbps(network_gbps)
    eff = with_framework(efficiencies or load_efficiencies(overrides, calibration), framework)
    default_net = eff.for_gpu(gpu_spec)("default_inter_node_gbps") if nodes > 1 else None
    cluster = cluster_for(gpu_spec, gpus, nodes, inst, network_gbps, default_net)
    return run_estimate(spec, t, s, cluster, eff)
