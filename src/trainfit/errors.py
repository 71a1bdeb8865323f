"""Exceptions. The CLI turns every TrainfitError into one clear line and exit code 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class TrainfitError(Exception):
    """Base class: a problem the user can fix; its message is shown as is."""


class SpecError(TrainfitError):
    """Invalid or inconsistent input (unknown name, absurd number, incompatible choices)."""


class BadValue(SpecError, ValueError):
    """A value that does not parse (a count, a duration): a SpecError that older `except ValueError` callers catch."""


class CatalogError(TrainfitError):
    """A catalog file is malformed (a bug in shipped data or in a user's file)."""


class MissingDependency(TrainfitError):
    """An optional heavy dependency (torch, transformers, ...) is needed but not installed."""


class Infeasible(TrainfitError):
    """A configuration that cannot run (e.g. does not fit in memory); `reason` is a short key the search counts."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def did_you_mean(word: str, choices: Iterable[str], n: int = 3) -> str:
    """' (did you mean: a, b?)' or '' — for error messages about unknown names."""
    close = difflib.get_close_matches(word.lower(), [c.lower() for c in choices], n=n, cutoff=0.5)
    if not close:
        return ""
    from .i18n import say

    return say("ei_dym", close=", ".join(close))


def unknown_name(kind: str, word: str, choices: Iterable[str], hint: str = "") -> SpecError:
    """'unknown KIND WORD (did you mean: ...?); HINT' as a sentence of the message table: `kind` and `hint` are
    sentences of the table too (say("ei_kind_gpu"), say("ei_hint_gpus")) or text shown as it is."""
    from .i18n import say

    choices = list(choices)
    return SpecError(say("ei_unknown_name", kind=kind, word=word, dym=did_you_mean(word, choices),
                         hint=say("ei_hint", hint=hint) if hint else ""))


class LocalizedError(TrainfitError):
    """An error worded in every language the CLI speaks: an i18n message key and the values it is filled with."""

    def __init__(self, key: str, **values: object):
        self.key, self.values = key, values
        super().__init__(self.message("en"))

    def message(self, lang: str) -> str:
        from .i18n import Msg, t

        # a value that is itself a sentence of the table ("did you mean ...") is worded in the same language
        return t(self.key, lang).format(**{k: v.render(lang) if isinstance(v, Msg) else v
                                           for k, v in self.values.items()})


class CredentialsMissing(LocalizedError):
    """A live price refresh needs credentials that are not configured."""


class PriceSourceError(LocalizedError):
    """A provider's price API could not be reached or answered with an error."""


class PriceFileError(LocalizedError, CatalogError):
    """A price file (shipped, cached or the user's quotes) is malformed."""


class GenerateError(LocalizedError, SpecError):
    """An input error of `trainfit generate`: the i18n entry `key` (trainfit.i18n.generate) with its values."""


def sentence_of(exc: BaseException) -> str:
    """An error's message: the sentence of the message table it was raised with (`SpecError(say(key, ...))`, a
    trainfit.i18n.Msg: its English as the str, any language from the table), else its text. Settings that cannot
    run together are raised so: `estimate`'s error and the rule the search counts a layout out by are one sentence."""
    from .i18n import Msg

    arg = exc.args[0] if len(exc.args) == 1 else None
    return arg if isinstance(arg, Msg) else str(exc)


class ServingError(LocalizedError, SpecError):
    """A serving input error whose message is the i18n entry `key` formatted with `params` (English by default)."""

    def __init__(self, key: str, **params):
        super().__init__(key, **params)

    @property
    def params(self) -> dict:
        return self.values
