"""Reading the packaged data files (beside this module: trainfit installs as a folder, never zipped) with clear errors
for malformed rows. Plain file paths, not importlib.resources, whose import alone costs a plan 10-17 ms (issue 36)."""

from __future__ import annotations

import csv
import io
import json
import os
from typing import Any

from ..errors import CatalogError

_DATA = os.path.join(os.path.dirname(os.path.realpath(__file__)), "data")  # realpath: a symlink in the path is followed


def read_text(name: str) -> str:
    with open(os.path.join(_DATA, name), encoding="utf-8") as fh:
        return fh.read()


def read_csv(name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(read_text(name))))


def read_yaml(name: str) -> Any:
    """A packaged YAML file, parsed. Its parse is kept as JSON in the user's cache, keyed by the file's content, so
    that a command does not import the YAML parser (20-30 ms of every plan, issue 36) once the file has been read."""
    text = read_text(name)
    cache = _yaml_cache_file(name, text)
    try:
        with open(cache, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        pass
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available: 10x faster
    try:
        data = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        raise CatalogError(f"{name}: invalid YAML: {exc}".replace("\n", " ")) from None
    _yaml_cache_put(cache, data)
    return data


YAML_CACHE_MAX_FILES = 64  # each release's files; the oldest go first


def _yaml_cache_file(name: str, text: str) -> str:
    import hashlib

    root = os.environ.get("TRAINFIT_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "trainfit")
    digest = hashlib.sha256(f"{name}\0{text}".encode()).hexdigest()[:24]
    return os.path.join(root, "yaml", f"{digest}.json")


def _yaml_cache_put(cache: str, data: Any) -> None:
    """Keep the parse only where JSON gives it back as it is (a YAML date or a number as a key would not be)."""
    try:
        encoded = json.dumps(data, ensure_ascii=False)
        if json.loads(encoded) != data:
            return
        from ..safe_write import write_text_atomic

        os.makedirs(os.path.dirname(cache), exist_ok=True)
        write_text_atomic(cache, encoded)
        prune_json_files(os.path.dirname(cache), YAML_CACHE_MAX_FILES)
    except (OSError, TypeError, ValueError):  # a read-only home, or data JSON cannot hold: no cache, same answer
        return


def prune_json_files(folder: str, max_files: int, max_bytes: int = 64 * 2**20) -> int:
    """Keep a cache folder within max_files and max_bytes, removing its oldest *.json files (a writer's temporary
    file is left alone); returns how many went. The structure cache (generic.prune_cache) and the YAML parses'."""
    entries = []
    try:
        with os.scandir(folder) as it:
            for e in it:
                try:
                    if e.name.endswith(".json") and e.is_file(follow_symlinks=False):
                        st = e.stat(follow_symlinks=False)
                        entries.append((st.st_mtime, e.name, st.st_size, e.path))
                except OSError:
                    continue
    except OSError:  # no cache yet, or unreadable: nothing to bound
        return 0
    entries.sort(reverse=True)  # newest first
    kept_files = kept_bytes = removed = 0
    for _, _, size, path in entries:
        if kept_files < max_files and kept_bytes + size <= max_bytes:
            kept_files, kept_bytes = kept_files + 1, kept_bytes + size
            continue
        try:
            os.unlink(path)
            removed += 1
        except OSError:
            pass
    return removed


def model_files() -> list[tuple[str, dict]]:
    folder = os.path.join(_DATA, "models")
    out = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            try:
                out.append((name, json.loads(read_text(f"models/{name}"))))
            except json.JSONDecodeError as exc:
                raise CatalogError(f"models/{name}: invalid JSON: {exc}") from None
    return out


def num(row: dict[str, str], col: str, where: str) -> float | None:
    text = (row.get(col) or "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise CatalogError(f"{where}: column {col!r} is not a number: {text!r}") from None


def boolean(row: dict[str, str], col: str, where: str) -> bool:
    text = (row.get(col) or "").strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise CatalogError(f"{where}: column {col!r} must be true/false, got {text!r}")


def items(row: dict[str, str], col: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in (row.get(col) or "").split(";") if x.strip())


def norm_name(name: str) -> str:
    """Key used for name matching: lower case without spaces, '_' and '-'."""
    return "".join(ch for ch in name.lower() if ch not in " _-")
