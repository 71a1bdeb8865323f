"""DCGM profiling fields through `dcgmi dmon` when DCGM is installed: SM, tensor-pipe and DRAM activity."""

from __future__ import annotations

import shutil
import subprocess

# DCGM field ids (DCGM documentation, "Profiling metrics"): SM active, tensor pipe active, DRAM active
FIELDS = {1002: "sm_active", 1004: "tensor_active", 1005: "dram_active"}


def available() -> bool:
    return shutil.which("dcgmi") is not None


def parse_dmon(text: str) -> dict[int, dict[str, float]]:
    """Last value per GPU from `dcgmi dmon -e 1002,1004,1005` output lines like 'GPU 0  0.812  0.640  0.120'."""
    out: dict[int, dict[str, float]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 + len(FIELDS) and parts[0] == "GPU" and parts[1].isdigit():
            try:
                values = [float(x) for x in parts[2:2 + len(FIELDS)]]
            except ValueError:
                continue
            out[int(parts[1])] = dict(zip(FIELDS.values(), values))
    return out


def read_once(timeout: float = 5.0) -> dict[int, dict[str, float]]:
    if not available():
        return {}
    ids = ",".join(str(k) for k in FIELDS)
    try:
        proc = subprocess.run(["dcgmi", "dmon", "-e", ids, "-c", "1"], capture_output=True, text=True,
                              timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_dmon(proc.stdout)
