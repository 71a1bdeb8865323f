"""Reading the packaged data files (importlib.resources) with clear errors for malformed rows."""

from __future__ import annotations

import csv
import io
import json
from importlib import resources
from typing import Any

from ..errors import CatalogError

_DATA = "trainfit.catalog.data"


def read_text(name: str) -> str:
    return resources.files(_DATA).joinpath(name).read_text(encoding="utf-8")


def read_csv(name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(read_text(name))))


def read_yaml(name: str) -> Any:
    import yaml  # light; only needed for YAML catalogs

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available: 10x faster
    try:
        return yaml.load(read_text(name), Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        raise CatalogError(f"{name}: invalid YAML: {exc}".replace("\n", " ")) from None


def model_files() -> list[tuple[str, dict]]:
    folder = resources.files(_DATA).joinpath("models")
    out = []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".json"):
            try:
                out.append((entry.name, json.loads(entry.read_text(encoding="utf-8"))))
            except json.JSONDecodeError as exc:
                raise CatalogError(f"models/{entry.name}: invalid JSON: {exc}") from None
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
