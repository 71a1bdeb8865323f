"""The model preset files (catalog/data/models/*.json) as read, by preset name: the one table that both the preset
objects (models.all_models) and the generic reader's shipped structures (generic._shipped_index) are built from, so
that neither module imports the other for it."""

from __future__ import annotations

from functools import lru_cache

from ..errors import CatalogError
from ._io import model_files


@lru_cache(maxsize=1)
def preset_data() -> dict[str, dict]:
    """Preset name -> its file's data; a file without a name or an hf_config is a CatalogError naming the file."""
    out: dict[str, dict] = {}
    for filename, data in model_files():
        try:
            name, _ = data["name"], data["hf_config"]
        except KeyError as exc:
            from ..i18n import say

            missing = say("ei_missing", what=str(exc))
            raise CatalogError(say("ei_in_file", where=f"models/{filename}", message=missing)) from None
        out[name] = data
    return out
