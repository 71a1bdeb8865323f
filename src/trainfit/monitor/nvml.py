"""NVML sampling (nvidia-ml-py) and the summary of a sample series: compute-bound, memory-bandwidth-bound,
starved (input or communication), close to OOM.

The summary rules read NVML's counters: `utilization.gpu` (share of time a kernel ran), `utilization.memory`
(share of time device memory was read or written), power against the enforced limit, memory used against total.
A GPU that runs kernels all the time and draws near its power limit is busy on its math units; one that runs
kernels all the time with the memory controller busy but the power well below the limit is waiting on memory;
a GPU idle between kernels is waiting on the CPU, the input pipeline or communication. DCGM's profiling fields
(tensor / DRAM activity) are used instead when DCGM is present.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from statistics import mean
from typing import Any

from ..errors import TrainfitError

# Thresholds of the summary rules (fractions).
BUSY = 0.85  # kernels running at least this share of the time
STARVED = 0.60  # kernels running less than this share of the time: the GPU waits
POWER_HIGH = 0.70  # of the power limit: math units busy
MEMORY_BUSY = 0.50  # memory controller busy this share of the time
NEAR_OOM = 0.95  # of device memory in use


class NoGpu(TrainfitError):
    """No NVIDIA GPU or no NVML on this machine."""


@dataclass
class Sample:
    t: float
    gpu: int
    util: float  # 0..1
    mem_util: float  # 0..1
    mem_used_gib: float
    mem_total_gib: float
    power_w: float | None
    power_limit_w: float | None
    sm_clock_mhz: float | None
    pcie_tx_mb_s: float | None = None
    pcie_rx_mb_s: float | None = None
    tensor_active: float | None = None  # DCGM, 0..1
    dram_active: float | None = None  # DCGM, 0..1


def nvml():
    try:
        import pynvml
    except ImportError:
        raise NoGpu("no NVML: install nvidia-ml-py (pip install 'trainfit[gpu]') on a machine with an NVIDIA GPU") \
            from None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, driver not loaded, ...
        raise NoGpu(f"no NVIDIA GPU visible to NVML ({exc})") from None
    if pynvml.nvmlDeviceGetCount() == 0:
        raise NoGpu("NVML found no GPU")
    return pynvml


def _safe(fn, *args, scale: float = 1.0):
    try:
        return fn(*args) * scale
    except Exception:  # noqa: BLE001 - counters a driver does not expose
        return None


def sample_all(pynvml) -> list[Sample]:
    out = []
    now = time.time()
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        util = pynvml.nvmlDeviceGetUtilizationRates(h)
        mem = pynvml.nvmlDeviceGetMemoryInfo(h)
        out.append(Sample(
            t=now, gpu=i, util=util.gpu / 100, mem_util=util.memory / 100, mem_used_gib=mem.used / 2**30,
            mem_total_gib=mem.total / 2**30, power_w=_safe(pynvml.nvmlDeviceGetPowerUsage, h, scale=1e-3),
            power_limit_w=_safe(pynvml.nvmlDeviceGetEnforcedPowerLimit, h, scale=1e-3),
            sm_clock_mhz=_safe(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM),
            pcie_tx_mb_s=_safe(pynvml.nvmlDeviceGetPcieThroughput, h, pynvml.NVML_PCIE_UTIL_TX_BYTES, scale=1e-3),
            pcie_rx_mb_s=_safe(pynvml.nvmlDeviceGetPcieThroughput, h, pynvml.NVML_PCIE_UTIL_RX_BYTES, scale=1e-3)))
    return out


def environment(pynvml) -> dict[str, Any]:
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    name = pynvml.nvmlDeviceGetName(h)
    return {"gpu_name": name.decode() if isinstance(name, bytes) else name,
            "gpu_count": pynvml.nvmlDeviceGetCount(),
            "driver": _text(_safe(pynvml.nvmlSystemGetDriverVersion))}


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


@dataclass
class Sampler:
    """Samples every `interval` seconds in a background thread until stopped."""

    interval: float = 0.5
    samples: list[Sample] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._nvml = nvml()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from . import dcgm

        use_dcgm = dcgm.available()
        while not self._stop.is_set():
            batch = sample_all(self._nvml)
            if use_dcgm:  # profiling fields: tensor-pipe and DRAM activity
                fields = dcgm.read_once()
                for s in batch:
                    s.tensor_active = fields.get(s.gpu, {}).get("tensor_active")
                    s.dram_active = fields.get(s.gpu, {}).get("dram_active")
            self.samples.extend(batch)
            self._stop.wait(self.interval)

    def start(self) -> "Sampler":
        self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.samples


def summarize(samples: list[Sample]) -> dict[str, Any]:
    """Per-GPU statistics and a verdict, from a sample series (recorded or live)."""
    if not samples:
        return {"verdict": "no samples", "gpus": {}}
    gpus: dict[int, list[Sample]] = {}
    for s in samples:
        gpus.setdefault(s.gpu, []).append(s)
    per_gpu = {g: _gpu_stats(series) for g, series in sorted(gpus.items())}
    verdicts = [v["verdict"] for v in per_gpu.values()]
    worst = next((v for v in ("close to OOM", "starved (input or communication)", "memory-bandwidth-bound",
                              "compute-bound", "mixed") if v in verdicts), verdicts[0])
    return {"verdict": worst, "gpus": per_gpu, "samples": len(samples),
            "seconds": round(max(s.t for s in samples) - min(s.t for s in samples), 1)}


def _gpu_stats(series: list[Sample]) -> dict[str, Any]:
    busy = [s for s in series if s.util > 0.05] or series  # ignore the idle start-up and tail
    util = mean(s.util for s in busy)
    mem_util = mean(s.mem_util for s in busy)
    powers = [s.power_w / s.power_limit_w for s in busy if s.power_w and s.power_limit_w]
    power = mean(powers) if powers else None
    peak_mem = max(s.mem_used_gib / s.mem_total_gib for s in series if s.mem_total_gib)
    tensor = [s.tensor_active for s in busy if s.tensor_active is not None]
    dram = [s.dram_active for s in busy if s.dram_active is not None]
    stats = {"util_mean": round(util, 3), "mem_util_mean": round(mem_util, 3),
             "power_fraction_mean": None if power is None else round(power, 3),
             "memory_used_peak_fraction": round(peak_mem, 3),
             "memory_used_peak_gib": round(max(s.mem_used_gib for s in series), 2),
             "sm_clock_mean_mhz": _mean_or_none([s.sm_clock_mhz for s in busy])}
    stats["verdict"], stats["why"] = _verdict(util, mem_util, power, peak_mem,
                                              mean(tensor) if tensor else None, mean(dram) if dram else None)
    return stats


def _mean_or_none(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return round(mean(values), 1) if values else None


def _verdict(util: float, mem_util: float, power: float | None, peak_mem: float, tensor: float | None,
             dram: float | None) -> tuple[str, str]:
    if peak_mem >= NEAR_OOM:
        return "close to OOM", f"peak memory use {peak_mem:.0%} of the GPU (>= {NEAR_OOM:.0%})"
    if util < STARVED:
        return ("starved (input or communication)",
                f"kernels ran only {util:.0%} of the time (< {STARVED:.0%}): the GPU waits on data, the CPU or "
                "collectives")
    if tensor is not None and dram is not None:
        if tensor >= dram:
            return "compute-bound", f"DCGM tensor activity {tensor:.0%} >= DRAM activity {dram:.0%}"
        return "memory-bandwidth-bound", f"DCGM DRAM activity {dram:.0%} > tensor activity {tensor:.0%}"
    if util >= BUSY and power is not None and power >= POWER_HIGH:
        return "compute-bound", f"kernels {util:.0%} of the time at {power:.0%} of the power limit"
    if util >= BUSY and mem_util >= MEMORY_BUSY:
        return ("memory-bandwidth-bound", f"kernels {util:.0%} of the time, memory busy {mem_util:.0%}, power "
                f"{'unknown' if power is None else f'{power:.0%}'} of the limit")
    return "mixed", f"kernels {util:.0%} of the time, memory busy {mem_util:.0%}"


def samples_to_dicts(samples: list[Sample]) -> list[dict]:
    return [asdict(s) for s in samples]


def samples_from_dicts(rows: list[dict]) -> list[Sample]:
    """Samples recorded earlier (monitor --record); a malformed record is a ValueError/TypeError naming the sample."""
    import dataclasses
    import math

    from ..i18n import say

    if not isinstance(rows, list):
        raise TypeError(say("ei_samples_list"))
    required = {f.name for f in dataclasses.fields(Sample) if f.default is dataclasses.MISSING}
    out = []
    for i, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise TypeError(say("ei_sample_not_object", i=i))
        for key, value in row.items():
            ok = value is None and key not in required or \
                isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            if not ok:
                raise ValueError(say("ei_sample_not_finite", i=i, key=key, value=f"{value!r:.40}"))
        if key_gpu := row.get("gpu"):
            if not float(key_gpu).is_integer():
                raise ValueError(say("ei_sample_gpu_index", i=i))
        out.append(Sample(**row))
    return out
