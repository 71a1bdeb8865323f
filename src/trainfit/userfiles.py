"""Reading files that users hand us (request and calibration YAML, config.json, validation cases, monitor records)
with bounded cost: the size is checked before a byte is read, text must be UTF-8 without NUL bytes, and the YAML and
JSON readers refuse what makes a small file expensive or ambiguous (YAML anchors and aliases, the "billion laughs";
duplicate keys; nesting deeper than MAX_DEPTH). Every refusal is a UserFileError: one line, exit 2, en / zh.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .errors import LocalizedError, SpecError

MAX_DEPTH = 64  # nesting levels of a YAML or JSON document; real request, calibration and config files use < 10
SMALL_FILE = 1024 * 1024  # request, calibration and config.json files: a few KB in practice


class UserFileError(LocalizedError, SpecError):
    """A file the user named is too large, not UTF-8 text, or holds a construct we refuse (the i18n key says which)."""

    def message(self, lang: str) -> str:
        from .i18n import t

        values = dict(self.values)
        if lang == "zh" and "what" in values:
            from .i18n.errors import USERFILE_WHAT_ZH

            values["what"] = USERFILE_WHAT_ZH.get(str(values["what"]), values["what"])
        return t(self.key, lang).format(**values)


def human_bytes(n: int) -> str:
    """1048576 -> '1 MB' (binary units, the way the limits are set)."""
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


def check_size(path: str, what: str, cap_bytes: int) -> os.stat_result:
    """os.stat the file and refuse it (naming its size and the limit) when it is larger than cap_bytes."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UserFileError("uf_unreadable", what=what, path=path, why=exc.strerror or str(exc)) from None
    if os.path.isdir(path):
        raise UserFileError("uf_unreadable", what=what, path=path, why="is a directory")
    if st.st_size > cap_bytes:
        raise UserFileError("uf_too_large", what=what, path=path, size=human_bytes(st.st_size),
                            cap=human_bytes(cap_bytes))
    return st


def decode_text(raw: bytes, path: str, what: str, offset: int = 0) -> str:
    """UTF-8 (a leading BOM dropped) without NUL bytes, else a UserFileError naming the byte offset."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserFileError("uf_not_utf8", what=what, path=path, byte=f"{raw[exc.start]:02x}",
                            offset=offset + exc.start) from None
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise UserFileError("uf_nul", what=what, path=path, offset=offset + nul)
    return text[1:] if text.startswith("\ufeff") else text


def read_user_text(path: str, what: str, cap_bytes: int = SMALL_FILE) -> str:
    """The whole text of a small user file: its size checked before reading (and at most cap_bytes + 1 bytes read,
    for files whose size stat cannot tell, such as devices), strict UTF-8, no NUL bytes."""
    check_size(path, what, cap_bytes)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(cap_bytes + 1)
    except OSError as exc:
        raise UserFileError("uf_unreadable", what=what, path=path, why=exc.strerror or str(exc)) from None
    if len(raw) > cap_bytes:
        raise UserFileError("uf_too_large", what=what, path=path, size=f"> {human_bytes(cap_bytes)}",
                            cap=human_bytes(cap_bytes))
    return decode_text(raw, path, what)


def iter_user_lines(path: str, what: str, cap_bytes: int, max_line: int = SMALL_FILE):
    """(line number, text) of each line of a JSONL-like file, read line by line: the file's size checked first, no
    line longer than max_line bytes, each strict UTF-8 without NUL bytes."""
    check_size(path, what, cap_bytes)
    offset = 0
    try:
        with open(path, "rb") as fh:
            for n, raw in enumerate(iter(lambda: fh.readline(max_line + 1), b""), 1):
                if len(raw) > max_line and not raw.endswith(b"\n"):
                    raise UserFileError("uf_line_too_long", what=what, path=path, line=n, cap=human_bytes(max_line))
                if offset + len(raw) > cap_bytes:
                    raise UserFileError("uf_too_large", what=what, path=path, size=f"> {human_bytes(cap_bytes)}",
                                        cap=human_bytes(cap_bytes))
                yield n, decode_text(raw, path, what, offset)
                offset += len(raw)
    except OSError as exc:
        raise UserFileError("uf_unreadable", what=what, path=path, why=exc.strerror or str(exc)) from None


def check_depth(doc: Any, where: str, limit: int = MAX_DEPTH) -> Any:
    """Refuse a parsed document nested deeper than `limit` (walked without recursion)."""
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list, tuple)):
            if depth > limit:
                raise UserFileError("uf_too_deep", where=where, limit=limit)
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list, tuple)))
    return doc


# ---- YAML --------------------------------------------------------------------------------------------------------

def _yaml_loader():
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        """SafeLoader without anchors or aliases, duplicate keys or nesting deeper than MAX_DEPTH."""

        where = "YAML"
        depth = 0

        def compose_node(self, parent, index):
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise UserFileError("uf_yaml_alias", where=self.where, line=event.start_mark.line + 1)
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    raise UserFileError("uf_too_deep", where=self.where, limit=MAX_DEPTH)
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen = set()
                for key_node, _ in node.value:
                    if not isinstance(key_node, yaml.ScalarNode):
                        continue  # complex keys: SafeConstructor refuses the unhashable ones
                    key = self.construct_object(key_node, deep=True)
                    try:
                        duplicate = key in seen
                    except TypeError:
                        continue
                    if duplicate:
                        raise UserFileError("uf_duplicate_key", where=self.where, name=repr(key),
                                            line=key_node.start_mark.line + 1)
                    seen.add(key)
            return super().construct_mapping(node, deep)

    return BoundedLoader


def load_user_yaml(text: str, where: str) -> Any:
    """YAML text -> Python data with the SafeLoader's types, refusing anchors/aliases, duplicate keys and deep
    nesting; a syntax error is one line naming `where`."""
    import yaml

    loader = _yaml_loader()(text)
    loader.where = where
    try:
        return loader.get_single_data()
    except UserFileError:
        raise
    except RecursionError:
        raise UserFileError("uf_too_deep", where=where, limit=MAX_DEPTH) from None
    except (yaml.YAMLError, ValueError, TypeError) as exc:  # ValueError: e.g. an integer of 5000 digits
        detail = " ".join(str(exc).split())[:200]
        raise UserFileError("uf_yaml_syntax", where=where, detail=detail) from None
    finally:
        loader.dispose()


def read_user_yaml(path: str, what: str, cap_bytes: int = SMALL_FILE) -> Any:
    return load_user_yaml(read_user_text(path, what, cap_bytes), path)


# ---- JSON --------------------------------------------------------------------------------------------------------

def _no_constant(name: str):
    from .i18n import say

    raise ValueError(say("ei_json_constant", name=name))


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


def load_user_json(text: str, where: str, max_depth: int = MAX_DEPTH) -> Any:
    """JSON text -> Python data: standard JSON only (no NaN / Infinity), duplicate keys and deep nesting refused.
    trainfit.userjson.loads is this function."""
    from .errors import sentence_of
    from .i18n import Msg, say

    try:
        doc = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique)
    except _Duplicate as exc:
        raise UserFileError("uf_json_duplicate_key", where=where, name=repr(exc.key)) from None
    except json.JSONDecodeError as exc:
        raise SpecError(say("ei_not_json", where=where, detail=f"{exc.msg}, line {exc.lineno}")) from None
    except ValueError as exc:  # NaN / Infinity, an integer of more than 4300 digits
        if "integer string conversion" in str(exc):
            raise SpecError(say("ei_json_digits", where=where)) from None
        inner = sentence_of(exc)  # "NaN is not a JSON number" (a sentence of the table), else the parser's words
        raise SpecError(say("ei_in_file", where=where,
                            message=inner if isinstance(inner, Msg) else " ".join(str(exc).split())[:200])) from None
    except RecursionError:
        raise UserFileError("uf_too_deep", where=where, limit=max_depth) from None
    return check_depth(doc, where, max_depth)


def read_user_json(path: str, what: str, cap_bytes: int = SMALL_FILE) -> Any:
    return load_user_json(read_user_text(path, what, cap_bytes), path)
