"""Source ids used by every catalog row: id -> {title, date, kind, url}."""

from __future__ import annotations

from functools import lru_cache

from ._io import read_yaml

_FILES = ("sources_gpus.yaml", "sources_instances.yaml", "sources_models.yaml")


@lru_cache(maxsize=1)
def all_sources() -> dict[str, dict]:
    out: dict[str, dict] = {}
    for name in _FILES:
        try:
            data = read_yaml(name) or {}
        except FileNotFoundError:
            continue
        out.update(data)
    return out
