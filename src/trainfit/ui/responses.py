"""An error as the web calculator answers it: one line in the user's language, as JSON. Below app.py (the routes)
and guard.py (the middleware that refuses requests before any route sees them), which both answer this way."""

from __future__ import annotations

from typing import Any

from ..i18n import LANGS, Msg


def _one_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:500]


def _known_lang(value: Any, default: str = "en") -> str:
    return value if value in LANGS else default


def error_text(exc: BaseException, lang: str) -> str:
    """One line in the user's language: a LocalizedError's own wording, else the known error shapes (i18n.errors)."""
    from ..errors import LocalizedError, sentence_of
    from ..i18n.errors import localize_error

    if isinstance(exc, LocalizedError):
        return _one_line(RuntimeError(exc.message(lang)))
    sentence = sentence_of(exc)
    if isinstance(sentence, Msg):  # a sentence of the message table (settings that cannot run together): from it
        return _one_line(RuntimeError(localize_error(sentence, lang)))
    return localize_error(_one_line(exc), lang)


def error_response(exc: BaseException, status: int, lang: str):
    from fastapi.responses import JSONResponse

    return JSONResponse({"error": error_text(exc, lang), "kind": type(exc).__name__, "lang": lang},
                        status_code=status)
