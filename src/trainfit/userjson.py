"""Reading JSON that users hand us (config.json, plan.json, validation cases, monitor logs): one line on anything
malformed, never a traceback. Standard JSON only: NaN / Infinity are refused, as are duplicate keys, files that are
not UTF-8 text (or hold NUL bytes), documents nested deeper than userfiles.MAX_DEPTH, and files too large to be what
they claim to be (the size is checked before reading; see trainfit.userfiles)."""

from __future__ import annotations

from typing import Any

# The JSON reader itself lives in userfiles (which this module builds on); ``loads`` is kept here by name.
from .userfiles import MAX_DEPTH, UserFileError, check_depth, read_user_text  # noqa: F401  (names kept importable)
from .userfiles import load_user_json as loads

MAX_BYTES = 64 * 1024 * 1024
_CAPS = {"config.json": 1024 * 1024}  # a config.json is a few KB; larger is not one


def read_text(path: str, what: str = "file", cap_bytes: int | None = None) -> str:
    return read_user_text(path, what, cap_bytes or _CAPS.get(what, MAX_BYTES))


def read(path: str, what: str = "JSON file", cap_bytes: int | None = None) -> Any:
    return loads(read_text(path, what, cap_bytes), path)
