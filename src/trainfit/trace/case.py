"""A traced step as a validation case (data/validation/SCHEMA.md) of the trace source.

The case states the job through the case door (spec/job.py, the same fields `bench` writes and `validate` reads), the
traced view (one GPU, no sharding) and, as its measurement, the allocated bytes at the peak of the traced step
(`memory_kind: allocated`: no allocator cache, no CUDA context). `validate` and `calibrate` read such cases as the
source "trace" (validate.TRACE_SOURCE), beside the published runs. Written by `trainfit trace --case-out FILE` and
`benchmarks/conformance.py --cases-out FILE`.
"""

from __future__ import annotations

from typing import Any

from ..errors import SpecError
from ..units import GiB

SOURCE = ("trace (trainfit.trace: allocations of one training step of the Hugging Face / PEFT code under "
          "FakeTensorMode + MemTracker on the CPU, no weights; {origin})")


def check_traceable_case(est: Any) -> None:
    """A case states trace truth only for a setup the trace runs as stated (SpecError otherwise)."""
    t = est.training
    if t.method.value == "qlora":
        raise SpecError("--case-out: QLoRA is traced as LoRA on a 16-bit base and its weights corrected analytically; "
                        "that peak is not trace truth, so no case is written")
    if t.paged_optimizer:
        raise SpecError("--case-out: the trace keeps the optimizer states on the device (no paged states); it did "
                        "not run the stated setup, so no case is written")
    if t.variable_length:
        raise SpecError("--case-out: the trace runs one fixed length (--seq-len); drop --avg-len / --data")


def environment() -> dict[str, str | None]:
    """Versions of the code that was traced (the trace's numbers are those of this code)."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for pkg in ("torch", "transformers", "peft"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def trace_case(est: Any, traced_bytes: float, hf_config: dict, *, case_id: str, origin: str, peak_moment: str,
               traced_layers: tuple[int, ...], extra: dict | None = None) -> dict[str, Any]:
    """The case of a traced step. `est` is the one-GPU estimate of the traced workload (its model, training and GPU
    are the case's), `traced_bytes` the allocated bytes at the traced peak, `hf_config` the config the trace ran
    (num_hidden_layers is set to the model's depth)."""
    from ..spec.job import CASE, json_values
    from ..validate import note_phrases

    check_traceable_case(est)
    m, t = est.model, est.training
    layers = m.layers
    extrapolated = tuple(traced_layers) != (layers,)
    notes = ["allocated bytes at the peak of the traced step (step 2: optimizer states exist), counted by "
             "torch's MemTracker: no allocator cache, no CUDA context, no NCCL buffers",
             f"peak at {peak_moment}",
             "every block traced" if not extrapolated else
             f"blocks {', '.join(map(str, traced_layers))} traced and each moment extrapolated linearly to {layers}",
             "one GPU's unsharded view; the GPU named is the one the estimate is taken for (allocated bytes do not "
             "depend on it)"]
    notes += note_phrases(t)
    return {
        "id": case_id,
        "source": SOURCE.format(origin=origin),
        "reliability": "high",
        "model": {"name": m.name, "hf_config": {**hf_config, "num_hidden_layers": layers}, "params": est.split.total},
        "hardware": {"gpu": est.gpu.id, "num_gpus": 1, "gpus_per_node": 1},
        "training": {**json_values(t, "training", CASE), "global_batch": t.micro_batch * t.grad_accum,
                     "fixed_length": True, "avg_len": None, "max_len": None, "framework": None},
        "parallel": {"dp": 1, "tp": 1, "pp": 1, "cp": 1, "zero_stage": None, "fsdp": None, "offload": "none"},
        "measured": {"tokens_per_s_per_gpu": None, "step_time_s": None, "mfu": None,
                     "peak_memory_gib": round(traced_bytes / GiB, 9), "memory_kind": "allocated", "oom": None,
                     "peak_memory_bytes": round(traced_bytes)},
        "notes": "; ".join(notes),
        "trace": {"layers": layers, "traced_layers": list(traced_layers), "peak_moment": peak_moment,
                  **(extra or {})},
        "environment": environment(),
    }
