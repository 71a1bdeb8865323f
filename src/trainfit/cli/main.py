"""The `trainfit` command: a thin shell over the Python API. Subcommands live in one small module each."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..errors import SpecError, TrainfitError

DESCRIPTION = ("trainfit: will my Transformer training job fit on this GPU, how long will it take, what will it cost, "
               "and how should I launch it?")


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors as one line (usage is one `--help` away) that main() prints in the chosen form."""

    def error(self, message: str):
        raise UsageError(_usage_sentence(message, self.prog))


# argparse's own messages (its English, the only form it gives them in) -> the sentence of the message table
_ARGPARSE = ((r"argument (?P<argument>\S+): invalid choice: (?P<value>'.*?') \(choose from (?P<choices>.+)\)",
              "ec_argparse_invalid_choice"),
             (r"unrecognized arguments: (?P<arguments>.+)", "ec_argparse_unrecognized"),
             (r"the following arguments are required: (?P<arguments>.+)", "ec_argparse_required"),
             (r"argument (?P<argument>\S+): expected one argument", "ec_argparse_expected_one"))


def _usage_sentence(message: str, prog: str) -> str:
    """argparse's `message` with where to read the usage: a sentence of the message table where its shape is
    known, else the text as argparse words it."""
    import re

    from ..i18n import say

    for pattern, key in _ARGPARSE:
        m = re.fullmatch(pattern, message, re.S)
        if m:
            return say(key, prog=prog, **m.groupdict())
    return f"{message} (see `{prog} --help`)"


class UsageError(TrainfitError):
    pass


# command -> (its module in cli/, the function that adds its parser): `trainfit plan ...` imports and builds only
# plan's parser (issue 36: the other twelve commands' modules cost about 50 ms of every command's start)
COMMANDS = {"estimate": ("estimate", "add_parser"), "compare": ("compare", "add_parser"), "plan": ("plan", "add_parser"),
            "generate": ("generate", "add_parser"), "trace": ("trace", "add_parser"), "bench": ("bench", "add_parser"),
            "monitor": ("monitor", "add_parser"), "validate": ("validate", "add_parser"),
            "serving": ("serving", "add_parser"), "calibrate": ("calibrate", "add_parser"),
            "models": ("catalog_cmds", "add_parsers"), "gpus": ("catalog_cmds", "add_parsers"),
            "instances": ("catalog_cmds", "add_parsers"), "efficiencies": ("catalog_cmds", "add_parsers"),
            "prices": ("prices", "add_parser"), "ui": ("ui", "add_parser")}


def _command_of(argv: list[str] | None) -> str | None:
    """The command argv names (the first word that is not an option or --lang's value), None when there is none."""
    if not argv:
        return None
    words = iter(argv)
    for word in words:
        if word == "--lang":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser, or, when argv names a known command, the parser with that command alone (the same
    parser for those arguments: the other commands' subparsers are never reached)."""
    import importlib

    parser = _Parser(prog="trainfit", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"trainfit {_version()}")
    # `trainfit --lang zh plan ...`: --lang before the command too (its own dest: a command's --lang, default None,
    # would overwrite it); main() hands it to the command when the command has none of its own
    from .common import LANG_HELP

    parser.add_argument("--lang", dest="top_lang", default=None, metavar="LANG", help=LANG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    command = _command_of(argv)
    wanted = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for module, adder in wanted:
        getattr(importlib.import_module(f".{module}", __package__), adder)(sub)
    return parser


def _version() -> str:
    from .. import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    _tolerant_output()
    as_json = "--json" in argv
    parser = build_parser(argv)
    args = None
    try:
        args = parser.parse_args(argv)
        _top_lang(args)
        _check_numbers(args)
        if not getattr(args, "run", None):
            parser.print_help()
            return 2
        return args.run(args)
    except TrainfitError as exc:
        return _fail(_message(exc, args, argv), as_json, type(exc).__name__, getattr(exc, "key", None))
    except OSError as exc:  # a file the user named (--out, an input) that the checks before the work could not see
        if isinstance(exc, BrokenPipeError):
            return 0
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        return _fail(f"{where}{exc.strerror or exc}", as_json, "OSError")
    except KeyboardInterrupt:
        print("trainfit: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - a bug: one line, not a traceback (TRAINFIT_DEBUG=1 shows it)
        if os.environ.get("TRAINFIT_DEBUG"):
            raise
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        return _fail(f"internal error, please report it: {type(exc).__name__}: {first} (TRAINFIT_DEBUG=1 shows where)",
                     as_json, "InternalError", exit_code=70)


def _message(exc: TrainfitError, args: argparse.Namespace | None, argv: list[str]) -> str:
    """The error in the user's language where the error carries its message key (LocalizedError)."""
    from ..errors import LocalizedError
    from ..i18n import LANGS, default_lang
    from .common import argv_lang, normalize_lang

    lang = getattr(args, "lang", None)
    lang = (normalize_lang(lang) if lang is not None else None) or argv_lang(argv)
    lang = lang if lang in LANGS else default_lang()
    if isinstance(exc, (LocalizedError,)) or hasattr(exc, "key"):
        return exc.message(lang)
    from ..errors import sentence_of
    from ..i18n.errors import localize_error

    return localize_error(sentence_of(exc), lang)  # a sentence of the message table renders from the table


def _top_lang(args: argparse.Namespace) -> None:
    """--lang given before the command: checked, and the command's language unless it has its own --lang."""
    from .common import check_lang

    top = getattr(args, "top_lang", None)
    if top is None:
        return
    lang = check_lang(top)
    if getattr(args, "lang", None) is None:
        args.lang = lang


# Options that take a number of which only a positive one means anything (a rate, a limit, a duration).
_POSITIVE_OPTIONS = ("target_tokens_per_s", "max_ttft_ms", "max_tpot_ms", "request_rate", "interval", "duration",
                     "timeout", "startup_timeout", "network_gbps", "gpu_memory_utilization")


def _tolerant_output() -> None:
    """A terminal or pipe whose encoding cannot show a character (PYTHONIOENCODING=ascii, a C locale) gets an escape
    for it (\\xb7), not an exception: the answer is still printed."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure") and (getattr(stream, "encoding", "") or "").lower().replace("-", "") \
                not in ("utf8", "utf16", "utf32"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a stream already written to in another mode: leave it
                pass


_INF_OPTIONS = {"request_rate"}  # options where inf means something (serving.py checks it comes with --num-prompts)


def _check_numbers(args: argparse.Namespace) -> None:
    """Every number option, in one place: finite (argparse's float takes 'nan' and 'inf'), and positive where only a
    positive value means anything."""
    import math

    from ..i18n import say

    for name, value in vars(args).items():
        if isinstance(value, bool) or not isinstance(value, float):
            continue
        option = "--" + name.replace("_", "-")
        if name in _INF_OPTIONS and value == math.inf:  # all requests at once (vLLM's --request-rate inf)
            continue
        if not math.isfinite(value):
            raise SpecError(say("ei_option_finite", what=option, value=value))
        if name in _POSITIVE_OPTIONS and value <= 0:
            raise SpecError(say("ei_option_positive", what=option, value=value))


_LONG_WORD = 240  # a longer run of ASCII without a space is a value the user pasted (a 100,000-character name)


def _clip_words(message: str) -> str:
    """Each run of more than _LONG_WORD printable ASCII characters without a space shortened to its start and end,
    with its length: the line stays one a person can read, and still says which value it was (Chinese text, which
    has no spaces, is not such a run)."""
    import re

    return re.sub(r"[!-~]{%d,}" % (_LONG_WORD + 1),
                  lambda m: f"{m.group()[:100]}…{m.group()[-60:]} ({len(m.group()):,} characters)", message)


def _fail(message: str, as_json: bool, kind: str, key: str | None = None, exit_code: int = 2) -> int:
    """Bad input: one line on stderr; with --json also one JSON error object on stdout; exit code 2 (70 for an
    internal error, and the JSON object says the same code)."""
    message = _clip_words(" ".join(message.split()))  # one readable line, whatever the message held
    print(f"trainfit: error: {message}", file=sys.stderr)
    if as_json:
        error = {"type": kind, "message": message, "exit_code": exit_code}
        if key:  # an error worded from the message catalog: its key, stable across languages
            error["key"] = key
        print(json.dumps({"error": error}, ensure_ascii=False))
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
