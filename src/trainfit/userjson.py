"""Reading JSON that users hand us (config.json, plan.json, validation cases, monitor logs): one line on anything
malformed, never a traceback. Standard JSON only: NaN / Infinity are refused, as are duplicate keys, files that are
not UTF-8 text (or hold NUL bytes), documents nested deeper than userfiles.MAX_DEPTH, and files too large to be what
they claim to be (the size is checked before reading; see trainfit.userfiles)."""

from __future__ import annotations

import json
from typing import Any

from .errors import SpecError
from .userfiles import MAX_DEPTH, UserFileError, check_depth, read_user_text

MAX_BYTES = 64 * 1024 * 1024
_CAPS = {"config.json": 1024 * 1024}  # a config.json is a few KB; larger is not one


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


class _Duplicate(Exception):
    def __init__(self, key: str):
        self.key = key


def _unique(pairs: list) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def loads(text: str, where: str, max_depth: int = MAX_DEPTH) -> Any:
    try:
        doc = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique)
    except _Duplicate as exc:
        raise UserFileError("uf_json_duplicate_key", where=where, name=repr(exc.key)) from None
    except json.JSONDecodeError as exc:
        raise SpecError(f"{where}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    except ValueError as exc:  # NaN / Infinity, an integer of more than 4300 digits
        if "integer string conversion" in str(exc):
            raise SpecError(f"{where}: a number with more than 4300 digits is not a value any field takes") from None
        raise SpecError(f"{where}: {' '.join(str(exc).split())[:200]}") from None
    except RecursionError:
        raise UserFileError("uf_too_deep", where=where, limit=max_depth) from None
    return check_depth(doc, where, max_depth)


def read_text(path: str, what: str = "file", cap_bytes: int | None = None) -> str:
    return read_user_text(path, what, cap_bytes or _CAPS.get(what, MAX_BYTES))


def read(path: str, what: str = "JSON file", cap_bytes: int | None = None) -> Any:
    return loads(read_text(path, what, cap_bytes), path)
