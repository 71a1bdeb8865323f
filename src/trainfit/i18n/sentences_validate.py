"""Sentences of the validate area (en / zh), made with `trainfit.i18n.say(key, **values)` where they are written and
rendered in either language from here: the message table, not a translation of the English. Registered in the one
message table by `trainfit.i18n`."""

from __future__ import annotations

SENTENCES: dict[str, dict[str, str]] = {
}
