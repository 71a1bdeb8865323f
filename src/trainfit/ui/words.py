"""Labels of the web calculator's form (en / zh), sent to the page by /api/options: the `ui_` entries of the one
message table (i18n/ui.py), under their bare label."""

from __future__ import annotations

from ..i18n import _MESSAGES, t


def words(lang: str) -> dict[str, str]:
    return {k[3:]: t(k, lang) for k in _MESSAGES if k.startswith("ui_")}
