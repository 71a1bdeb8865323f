"""The serving model's named values (catalog/data/serving.yaml) as an `Efficiencies` table, with overrides."""

from __future__ import annotations

from functools import lru_cache

from ..catalog._io import read_yaml
from ..catalog.efficiency import Efficiencies, _shipped
from ..errors import CatalogError, ServingError


@lru_cache(maxsize=1)
def _table() -> dict[str, dict]:
    data = read_yaml("serving.yaml")
    values = data.get("values") if isinstance(data, dict) else None
    if not isinstance(values, dict):
        raise CatalogError("serving.yaml: missing 'values'")
    # the GPU's usable share (ECC reserve) is the same fact training uses: one declaration, in efficiency.yaml
    return {**values, "memory_reserved_fraction": _shipped()["memory_reserved_fraction"]}


@lru_cache(maxsize=1)
def default_knobs() -> Efficiencies:
    return Efficiencies(_table(), origin="serving.yaml")


def knobs(overrides: dict[str, float] | None = None) -> Efficiencies:
    if not overrides:
        return default_knobs()
    unknown = [k for k in overrides if k not in _table()]
    if unknown:
        raise ServingError("sv_e_set", name=unknown[0], known=", ".join(sorted(_table())))
    return default_knobs().with_overrides(overrides)
