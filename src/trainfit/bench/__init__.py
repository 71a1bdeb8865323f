"""`bench`: real training steps on this machine's GPU(s) (or CPU), with the code `generate` writes.

The runner (train.py) runs warm-up then timed steps on synthetic tokens of exactly seq_len, in a subprocess (or
under torchrun for several GPUs) so that every attempt starts with clean GPU memory; an out-of-memory is a result.
The measurement comes back as a validation case (shared/validation/SCHEMA.md) with the environment and the
analytic estimate of the same configuration beside it.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from typing import Any

from .. import _proc
from ..errors import SpecError
from ..estimate.flops import step_flops
from ..units import GiB
from ..validate import note_phrases


def _setup(est, model_arg: str):
    from ..generate.setup import setup_from_estimate

    return setup_from_estimate(est, model_arg, 0.0)


def _write_run_dir(est, model_arg: str, folder: str, model_path: str | None) -> str:
    from ..generate import render_files

    setup = _setup(est, model_arg)
    files = render_files(setup, data=None, output_dir=os.path.join(folder, "out"))
    cfg = json.loads(files["train_config.json"])
    cfg["model"]["random_init"] = model_path is None
    cfg["model"]["path"] = model_path
    cfg["save_steps"] = 0
    files["train_config.json"] = json.dumps(cfg, indent=2)
    for name, content in files.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8") as fh:
            fh.write(content)
    return os.path.join(folder, "train_config.json")


def run_steps(est, model_arg: str, steps: int, warmup: int, device: str, model_path: str | None = None,
              timeout: float = 3600, startup_timeout: float | None = None) -> dict[str, Any]:
    """One benchmark run: the runner's summary line (or {"oom": True}). `timeout` bounds the whole run (its
    process tree is stopped when it passes); `startup_timeout` is train.py's bound on reaching a first step."""
    folder = tempfile.mkdtemp(prefix="trainfit-bench-")
    try:
        config = _write_run_dir(est, model_arg, folder, model_path)
        runner = os.path.join(folder, "train.py")
        args = [runner, "--config", config, "--synthetic", "--max-steps", str(steps + warmup), "--warmup-steps",
                str(warmup), "--device", device, "--output-dir", os.path.join(folder, "out"), "--save-steps", "0"]
        if model_path is None:
            args.append("--random-init")
        if startup_timeout is not None:
            args += ["--startup-timeout", str(startup_timeout)]
        gpus = est.strategy.gpus_per_node
        if est.strategy.nodes > 1:
            raise SpecError("bench runs on this machine only: use --nodes 1")
        cmd = [sys.executable, *args] if gpus == 1 else [_torchrun(), "--standalone", "--nproc_per_node", str(gpus),
                                                           *args]
        env = dict(os.environ, TOKENIZERS_PARALLELISM="false")
        if device == "cpu":
            env.setdefault("DS_ACCELERATOR", "cpu")
        try:
            proc = _proc.run(cmd, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise SpecError(f"benchmark run did not finish within {timeout:g} s; stopped it and every process "
                            f"it started") from None
        summary = _summary(os.path.join(folder, "out", "metrics.jsonl"), proc.stdout)
        if proc.returncode == 3 or (summary or {}).get("oom"):
            return {"oom": True, "error": (summary or {}).get("error")}
        if proc.returncode != 0 or summary is None:
            raise SpecError(f"benchmark run failed (exit {proc.returncode}): {_runner_error(proc.stderr)[:500]}")
        return summary
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _runner_error(stderr: str) -> str:
    """train.py's own one-line error when it wrote one (a stale lock, the start-up watchdog), else the last lines."""
    lines = stderr.strip().splitlines()
    mine = [x for x in lines if x.startswith("train.py: error:")]
    return mine[-1] if mine else "\n".join(lines[-3:])


def _torchrun() -> str:
    path = os.path.join(os.path.dirname(sys.executable), "torchrun")
    return path if os.path.exists(path) else "torchrun"


def _summary(metrics_path: str, stdout: str) -> dict | None:
    lines = []
    if os.path.isfile(metrics_path):
        with open(metrics_path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    lines += stdout.splitlines()
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{") and '"summary"' in line:
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return None


def find_max_batch(estimate_for, model_arg: str, device: str, model_path: str | None, limit: int = 1024,
                   log=None, **bounds) -> tuple[int, list[dict]]:
    """Largest micro-batch that runs (`estimate_for(mb)` gives the configuration): doubling until an
    out-of-memory, then bisection; 0 if a micro-batch of 1 does not fit."""
    attempts: list[dict] = []

    def fits(mb: int) -> bool:
        result = run_steps(estimate_for(mb), model_arg, steps=1, warmup=1, device=device, model_path=model_path,
                           **bounds)
        ok = not result.get("oom")
        attempts.append({"micro_batch": mb, "oom": not ok,
                         "peak_memory_gib": result.get("peak_memory_gib"),
                         "peak_reserved_gib": result.get("peak_reserved_gib")})
        if log:
            log(f"micro-batch {mb}: {'fits' if ok else 'out of memory'}")
        return ok

    if not fits(1):
        return 0, attempts
    low, high = 1, None
    mb = 2
    while mb <= limit:
        if fits(mb):
            low = mb
            mb *= 2
        else:
            high = mb
            break
    while high is not None and high - low > 1:
        mid = (low + high) // 2
        if fits(mid):
            low = mid
        else:
            high = mid
    return low, attempts


def environment() -> dict[str, Any]:
    env: dict[str, Any] = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                           "python": platform.python_version(), "platform": platform.platform()}
    from importlib import metadata

    for dist in ("torch", "transformers", "peft", "deepspeed", "accelerate", "bitsandbytes", "flash-attn"):
        try:  # package metadata, not an import: importing deepspeed logs to stdout
            env[dist.replace("-", "_")] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            env[dist.replace("-", "_")] = None
    try:
        import torch

        env["cuda"] = torch.version.cuda
        env["cuda_available"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            env["gpu_name"] = torch.cuda.get_device_name(0)
            env["gpu_count"] = torch.cuda.device_count()
            env["gpu_total_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / GiB, 3)
    except ImportError:
        pass
    try:
        from ..monitor.nvml import environment as nvml_env, nvml

        env.update({k: v for k, v in nvml_env(nvml()).items() if v is not None and k not in env})
    except Exception:  # noqa: BLE001 - no NVML on CPU machines
        pass
    return env


def local_gpu_id(env: dict[str, Any]) -> str | None:
    """The catalog id of the local GPU from its CUDA name ('NVIDIA H200' -> h200), if the catalog knows it."""
    from ..catalog import get_gpu

    name = env.get("gpu_name")
    if not name:
        return None
    for candidate in (name, name.replace("NVIDIA", "").strip(), name.split(" ")[-1]):
        try:
            return get_gpu(candidate).id
        except SpecError:
            continue
    return None


def validation_case(est, model_arg: str, measured: dict, env: dict, device: str, attempts: list | None,
                    samples_summary: dict | None) -> dict[str, Any]:
    """The measurement in the validation-case format, with the estimate beside it."""
    from ..spec.job import CASE, json_values

    m, t, s = est.model, est.training, est.strategy
    on_gpu = device == "cuda"
    tps_gpu = measured.get("tokens_per_s_per_gpu")
    per_token = step_flops(m, t, est.split).model_flops / t.tokens_per_micro_batch
    peak = est.gpu.peak({"fp32": "tf32"}.get(t.precision.value, t.precision.value)) or est.gpu.peak("fp32")
    mfu = tps_gpu * per_token / peak if (on_gpu and tps_gpu) else None
    mem = measured.get("peak_memory_gib") if on_gpu else None
    case = {
        "id": f"bench-{est.gpu.id if on_gpu else 'cpu'}-{m.name}-{t.method.value}-s{t.seq_len}-mb{t.micro_batch}"
              f"-ga{t.grad_accum}-g{s.gpus}-{t.grad_ckpt.value}-{env['date'][:10]}",
        "source": "trainfit bench on this machine" + ("" if on_gpu else " (CPU: numbers are CPU numbers, not a GPU's)"),
        "reliability": "high" if on_gpu else "low",
        "model": {"name": m.name, "hf_config": _schema_config(m), "params": est.split.total},
        "hardware": {"gpu": est.gpu.id if on_gpu else "cpu", "num_gpus": s.gpus, "gpus_per_node": s.gpus_per_node},
        "training": {**json_values(t, "training", CASE), "global_batch": t.micro_batch * t.grad_accum * s.dp,
                     "fixed_length": True, "framework": "trainfit"},
        "parallel": {"dp": s.gpus, "tp": 1, "pp": 1, "cp": 1,
                     "zero_stage": s.zero_stage if s.engine == "deepspeed" else None,
                     "fsdp": s.fsdp.value if s.engine == "fsdp" else None, "offload": s.offload.value},
        "measured": {"tokens_per_s_per_gpu": tps_gpu, "step_time_s": measured.get("step_time_s"),
                     "mfu": None if mfu is None else round(mfu, 4), "peak_memory_gib": mem,
                     "memory_kind": "allocated" if mem is not None else None,
                     "peak_reserved_gib": measured.get("peak_reserved_gib") if on_gpu else None,
                     "oom": True if measured.get("oom") else None},
        "notes": f"synthetic tokens, random weights; {measured.get('timed_steps', 0)} timed steps after "
                 f"{measured.get('warmup_steps', 0)} warm-up; engine {s.engine}"
                 + ("" if on_gpu else f"; CPU run: peak process RSS {measured.get('peak_memory_gib', 0):.2f} GiB")
                 + "".join(f"; {x}" for x in note_phrases(t)),
        "environment": env,
        "estimate": _estimate_beside(est, measured, on_gpu),
    }
    if attempts is not None:
        case["find_max_batch"] = attempts
    if samples_summary is not None:
        case["nvml"] = samples_summary
    return case


def _schema_config(m) -> dict[str, Any]:
    return {"model_type": m.model_type, "hidden_size": m.hidden, "num_hidden_layers": m.layers,
            "num_attention_heads": m.heads, "num_key_value_heads": m.kv_heads,
            "head_dim": m.head_dim if m.head_dim * m.heads != m.hidden else None,
            "intermediate_size": m.intermediate, "vocab_size": m.vocab, "hidden_act": m.activation,
            "position_embedding": None, "max_position_embeddings": m.max_positions or None, "bias": None,
            "tie_word_embeddings": m.tie_embeddings, "num_local_experts": m.num_experts or None,
            "num_experts_per_tok": m.experts_per_tok or None}


def _estimate_beside(est, measured: dict, on_gpu: bool) -> dict[str, Any]:
    out = {"gpu": est.gpu.id, "tokens_per_s_per_gpu": round(est.tokens_per_s_per_gpu, 1),
           "step_time_s": round(est.step_time_s, 4), "mfu": round(est.mfu, 4),
           "peak_memory_gib_allocated": round(est.memory.allocated / GiB, 3),
           "peak_memory_gib_reserved": round(est.memory.reserved / GiB, 3), "fits": est.fits}
    if not on_gpu:
        out["note"] = "estimate for the GPU named, beside CPU numbers: not comparable"
        return out
    errors = {}
    if measured.get("tokens_per_s_per_gpu"):
        errors["throughput_percent"] = round(100 * (est.tokens_per_s_per_gpu / measured["tokens_per_s_per_gpu"] - 1), 1)
    if measured.get("peak_memory_gib"):
        errors["memory_percent"] = round(100 * (est.memory.allocated / GiB / measured["peak_memory_gib"] - 1), 1)
    out["error"] = errors
    return out
