"""Words of the HTML/Markdown reports and the web calculator: read from the one message table (trainfit.i18n;
the reports' own entries are in i18n/report.py)."""

from __future__ import annotations

from ..i18n import t as _t


def w(key: str, lang: str, **kw) -> str:
    text = _t(key, lang)
    return text.format(**kw) if kw else text
