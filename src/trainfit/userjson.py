"""Reading JSON that users hand us (config.json, plan.json, validation cases, monitor logs): one line on anything
malformed, never a traceback. Standard JSON only: NaN / Infinity are refused, as are files that are not UTF-8 text,
nested absurdly deep, or too large to be what they claim to be."""

from __future__ import annotations

import json
import os
from typing import Any

from .errors import SpecError

MAX_BYTES = 64 * 1024 * 1024


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def loads(text: str, where: str) -> Any:
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{where}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    except ValueError as exc:  # NaN / Infinity
        raise SpecError(f"{where}: {exc}") from None
    except RecursionError:
        raise SpecError(f"{where}: JSON nested too deeply") from None


def read_text(path: str, what: str = "file") -> str:
    try:
        if os.path.getsize(path) > MAX_BYTES:
            raise SpecError(f"{path}: {what} larger than {MAX_BYTES // 2**20} MiB")
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise SpecError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not a {what} (not UTF-8 text)") from None


def read(path: str, what: str = "JSON file") -> Any:
    return loads(read_text(path, what), path)
