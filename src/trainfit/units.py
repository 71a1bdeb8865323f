"""Units in one place. Internally everything is SI: bytes, seconds, FLOP, FLOP/s, bytes/s.

Conversions happen at the boundary (catalog loading and display); displays say GB or GiB explicitly.
"""

from __future__ import annotations

import math
import re

from .errors import BadValue

KiB = 2**10
MiB = 2**20
GiB = 2**30
GB = 10**9
TB = 10**12
TFLOPS = 1e12
GBIT = 1e9 / 8  # bytes per second in one Gbit/s

HOUR = 3600.0
DAY = 86400.0

DTYPE_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}


def gib(n_bytes: float) -> float:
    """Bytes -> GiB (for display and JSON)."""
    return n_bytes / GiB


_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_COUNT_RE = re.compile(r"^\s*(-?[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbgt]?)\s*$", re.IGNORECASE)


def parse_count(text: str | float | int) -> float:
    """'200M' -> 2e8, '1.5B' -> 1.5e9, '50k' -> 5e4, 1e9 -> 1e9. Raises ValueError on anything else."""
    m = None if isinstance(text, (int, float)) else _COUNT_RE.match(str(text))
    try:
        value = float(text) if isinstance(text, (int, float)) and not isinstance(text, bool) else (
            float(m.group(1)) * _SUFFIX[m.group(2).lower()] if m else None)
    except OverflowError:  # an integer of hundreds of digits (YAML reads it as int)
        value = None
    if value is None or not math.isfinite(value):
        raise BadValue(f"not a count: {text!r} (examples: 200M, 1.5B, 50k, 1e9)")
    return value


_DURATION_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(s|m|min|h|d|w)?\s*$", re.IGNORECASE)
_DURATION_UNIT = {"s": 1.0, "m": 60.0, "min": 60.0, "h": HOUR, "d": DAY, "w": 7 * DAY, None: HOUR}


def parse_duration(text: str | float | int) -> float:
    """'48h' -> 172800 s, '7d', '90m'; a bare number is hours."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text > 1e300 or not math.isfinite(text) or text < 0:  # (an int past float's range compares too)
            raise BadValue(f"not a duration: {text!r} (examples: 48h, 7d, 90m)")
        return float(text) * HOUR
    m = _DURATION_RE.match(str(text))
    if not m:
        raise BadValue(f"not a duration: {text!r} (examples: 48h, 7d, 90m)")
    unit = m.group(2).lower() if m.group(2) else None
    return float(m.group(1)) * _DURATION_UNIT[unit]
