"""The sentences the estimator, the search and validate write (assumptions, warnings, the plan's "why" lines,
rejection and skip reasons) in the asked language. Each is made with `trainfit.i18n.say(key, **values)` where it is
written: its English is the str, and any language renders from the one message table (the area modules
sentences_estimate, sentences_plan, sentences_validate, ...), not by translating the English. A plain string is
shown as it is; tests/test_i18n.py and tests/test_zh_complete.py generate the sentences over many configurations
and fail on one without Chinese."""

from __future__ import annotations


def localize(text: str, lang: str) -> str:
    """`text` in `lang`: a sentence of the message table (trainfit.i18n.Msg) rendered from the table; any other
    text unchanged."""
    from . import Msg

    return text.render(lang) if isinstance(text, Msg) else text


def has_chinese(text: str) -> bool:
    return localize(text, "zh") != text
