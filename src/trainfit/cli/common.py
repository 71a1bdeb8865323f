"""Flags shared by several subcommands, and output helpers. No arithmetic here."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..errors import SpecError
from ..i18n import LANGS, default_lang


def add_output_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON document (keys in English)")
    p.add_argument("--lang", default=None, help=f"language of tables and messages: {' | '.join(LANGS)} "
                   "(default from the locale)")


def add_prices_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prices", action="append", default=[], metavar="FILE",
                   help="your own price quotes (CSV in the catalog's format: provider,instance_type,region,billing,"
                        "price,currency,price_date,...), used over the shipped and refreshed prices; repeatable")


def apply_prices(args: argparse.Namespace) -> None:
    """Layer the --prices files over the catalog for this command (and only this one)."""
    from ..catalog.prices import use_price_files

    use_price_files(getattr(args, "prices", None) or [])


def add_model_flag(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--model", "-m", required=required,
                   help="preset name (trainfit models), a config.json / model directory, or a Hugging Face id")


def help_lang() -> str:
    """The language of --help texts: --lang on the command line, else the locale's."""
    argv = sys.argv
    if "--lang" in argv[:-1]:
        lang = argv[argv.index("--lang") + 1]
        if lang in LANGS:
            return lang
    return default_lang()


def _add_field_flags(group, part: str, door: str = "cli", skip: tuple[str, ...] = ()) -> None:
    from ..spec.job import fields_of

    lang = help_lang()
    for f in fields_of(part, door):
        if f.name in skip:
            continue
        if f.kind is bool:
            group.add_argument(f.cli_flag, dest=f.name, action="store_true", default=None, help=f.help_text(lang))
        else:
            group.add_argument(f.cli_flag, dest=f.name, default=None, metavar=f.metavar or ("N" if f.kind in (int, float) else "NAME"),
                               help=f.help_text(lang))


def add_workload_flags(p: argparse.ArgumentParser, door: str = "cli", skip: tuple[str, ...] = ()) -> None:
    """The workload flags of a job (estimate, compare, trace, bench, generate; `plan` with door="request"), one per
    declared field of spec/job.py: what is trained, and what it is resolved from (the training stack, the data)."""
    _add_field_flags(p.add_argument_group("workload"), "training", door, skip)
    _add_field_flags(p.add_argument_group("training stack and data"), "input", door, skip)


def add_strategy_flags(p: argparse.ArgumentParser) -> None:
    _add_field_flags(p.add_argument_group("parallelism"), "strategy")


def add_efficiency_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model knobs")
    g.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="override a named efficiency/overhead (see `trainfit efficiencies`); repeatable")
    g.add_argument("--calibration", default=None, help="calibration file from `trainfit calibrate`")


def add_job_flags(p: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    """The flags of a command that estimates one training job: workload, parallelism, model knobs, output."""
    add_workload_flags(p, skip=skip)
    add_strategy_flags(p)
    add_efficiency_flags(p)
    add_output_flags(p)


def parse_sets(items: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise SpecError(f"--set expects NAME=VALUE, got {item!r}")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise SpecError(f"--set {name}: {value!r} is not a number") from None
    return out


def job_kwargs(args: argparse.Namespace, door: str = "cli") -> dict[str, Any]:
    """The declared job fields the command line gave (None = not given), as API keywords."""
    from ..spec.job import through

    return {f.keyword: getattr(args, f.name, None) for f in through(door)}


def workload_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """What is trained and what it is resolved from (the training stack, the data), as API keywords."""
    from ..spec.job import fields_of

    return {f.keyword: getattr(args, f.name, None) for f in fields_of("training", "cli") + fields_of("input", "cli")}


def strategy_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    from ..spec.job import fields_of

    return {f.keyword: getattr(args, f.name, None) for f in fields_of("strategy", "cli")}


def lang_of(args: argparse.Namespace) -> str:
    lang = getattr(args, "lang", None) or default_lang()
    if lang not in LANGS:
        raise SpecError(f"--lang must be one of {', '.join(LANGS)}, got {lang!r}")
    return lang


def print_json(doc: Any) -> None:
    """--json output: standard JSON only (no NaN or Infinity, which strict parsers refuse): a result that is not
    finite is an error, before anything is printed."""
    try:
        text = json.dumps(doc, ensure_ascii=False, indent=2, default=_default, allow_nan=False)
    except ValueError as exc:
        if "not JSON compliant" not in str(exc):
            raise
        raise SpecError("the result holds a number that is not finite (NaN or infinity): check the inputs") from None
    sys.stdout.write(text + "\n")


def _default(obj: Any) -> Any:
    if hasattr(obj, "value"):
        return obj.value
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def console():
    from rich.console import Console

    return Console()


def check_out(path: str, kind: str) -> str:
    """An --out path that can be written, checked before any work (SpecError otherwise): `kind` "dir" (a directory
    that exists or can be created) or "file" (a regular file, new or to be replaced/appended). A probe file is made
    and removed in the nearest existing folder, so read-only and virtual file systems (/proc) are caught too."""
    import tempfile

    if not path or "\0" in path or any(len(part.encode()) > 255 for part in path.split(os.sep)) or len(path) > 4000:
        raise SpecError(f"--out {path!r}: not a usable path (empty, or a name longer than the file system allows)")
    full = os.path.abspath(path)
    if os.path.exists(full):
        if kind == "dir" and not os.path.isdir(full):
            raise SpecError(f"--out {path}: exists and is not a directory")
        if kind == "file" and not os.path.isfile(full):
            raise SpecError(f"--out {path}: exists and is not a regular file")
    folder = full if kind == "dir" else os.path.dirname(full)
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        raise SpecError(f"--out {path}: {folder} is a file, not a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=".trainfit-probe-", dir=folder)
        os.close(fd)
        os.remove(probe)
    except OSError as exc:
        raise SpecError(f"--out {path}: cannot write in {folder} ({exc.strerror or exc})") from None
    return full


def add_report_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--html", default=None, metavar="FILE",
                   help="also write a self-contained HTML report with plots (opens offline)")
    p.add_argument("--md", default=None, metavar="FILE", help="also write a Markdown report")


def check_reports(args: argparse.Namespace) -> None:
    """--html / --md paths checked writable before any work."""
    for flag in ("html", "md"):
        path = getattr(args, flag, None)
        if path:
            check_out(path, "file")


def write_reports(args: argparse.Namespace, build) -> None:
    """Write --html / --md from the document `build()` returns (built only when asked for)."""
    if not (getattr(args, "html", None) or getattr(args, "md", None)):
        return
    from ..report.document import write_report

    for path in write_report(build(), args.html, args.md):
        print(f"report written to {path}", file=sys.stderr)
