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
    p.add_argument("--lang", default=None, help=LANG_HELP)


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
    return argv_lang(sys.argv) or default_lang()


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


def add_strategy_flags(p: argparse.ArgumentParser, door: str = "cli", title: str = "parallelism") -> None:
    _add_field_flags(p.add_argument_group(title), "strategy", door)


def add_max_oom_risk_flag(p: argparse.ArgumentParser) -> None:
    """The one out-of-memory policy's threshold, the same flag and default on estimate, compare and plan."""
    from ..uncertainty import DEFAULT_MAX_OOM_RISK

    p.add_argument("--max-oom-risk", type=float, default=DEFAULT_MAX_OOM_RISK, metavar="PROBABILITY",
                   help="accepted probability that a configuration runs out of memory, from the cross-validated error "
                        f"bands (default {DEFAULT_MAX_OOM_RISK:g}); the same on estimate, compare, plan and the web page")


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
            from ..i18n import say

            raise SpecError(say("ei_set_form", item=item))
        try:
            out[name.strip()] = float(value)
        except ValueError:
            from ..i18n import say

            raise SpecError(say("ei_set_number", name=name, value=value)) from None
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


# --lang as people write it (issue 33): a language tag (zh-CN, zh_CN, zh-Hans, en-US), a locale (zh_CN.UTF-8) or a
# name (chinese, 中文, english), in any case.
_LANG_NAMES = {"en": "en", "english": "en", "eng": "en", "英文": "en", "英语": "en",
               "zh": "zh", "cn": "zh", "chinese": "zh", "chs": "zh", "中文": "zh", "汉语": "zh", "简体中文": "zh",
               "zh-cn": "zh", "zh-hans": "zh", "zh-sg": "zh", "zh-hans-cn": "zh", "en-us": "en", "en-gb": "en"}
LANG_HELP = ("language of tables and messages: en | zh (also zh-CN, zh_CN, zh-Hans, cn, chinese, 中文, en-US, english; "
             "default from TRAINFIT_LANG or the locale); before or after the command")


def normalize_lang(value: object) -> str | None:
    """'zh-CN', 'zh_CN.UTF-8', 'Chinese', '中文' -> 'zh'; 'en-US', 'English' -> 'en'; None for anything else."""
    text = str(value).strip().lower().replace("_", "-").split(".")[0].split("@")[0]
    if text in _LANG_NAMES:
        return _LANG_NAMES[text]
    head = text.split("-")[0]
    return head if head in LANGS and text != head else None  # zh-TW, en-AU: the language without its region


def check_lang(value: object, flag: str = "--lang") -> str:
    """A --lang value as 'en' or 'zh' (SpecError with a did-you-mean otherwise)."""
    from ..errors import did_you_mean

    lang = normalize_lang(value)
    if lang is None:
        from ..i18n import say

        raise SpecError(say("ei_lang", flag=flag, value=value, dym=did_you_mean(str(value), _LANG_NAMES)))
    return lang


def argv_lang(argv: list[str]) -> str | None:
    """The --lang a command line gives (`--lang zh`, `--lang=zh-CN`; the last one wins), normalized; None if none."""
    found = None
    for i, word in enumerate(argv):
        if word == "--lang" and i + 1 < len(argv):
            found = argv[i + 1]
        elif word.startswith("--lang="):
            found = word.split("=", 1)[1]
    return normalize_lang(found) if found is not None else None


def lang_of(args: argparse.Namespace) -> str:
    """The language of the output: --lang (any spelling normalize_lang knows), else TRAINFIT_LANG / the locale."""
    given = getattr(args, "lang", None)
    if given is None:
        env = os.environ.get("TRAINFIT_LANG")  # also 'chinese', 'zh-Hans' (default_lang knows zh* and en*)
        return (normalize_lang(env) or default_lang()) if env else default_lang()
    lang = check_lang(given)
    args.lang = lang  # one spelling from here on (error messages read args.lang)
    return lang


def print_json(doc: Any) -> None:
    """--json output: standard JSON only (no NaN or Infinity, which strict parsers refuse): a result that is not
    finite is an error, before anything is printed."""
    try:
        text = json.dumps(doc, ensure_ascii=False, indent=2, default=_default, allow_nan=False)
    except ValueError as exc:
        if "not JSON compliant" not in str(exc):
            raise
        from ..i18n import say

        raise SpecError(say("ei_result_not_finite")) from None
    sys.stdout.write(text + "\n")


def _default(obj: Any) -> Any:
    if hasattr(obj, "value"):
        return obj.value
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def console():
    """The console output prints to: as wide as the terminal, COLUMNS when set, and 120 columns when piped (rich
    alone would take 80 there, or the width of a terminal on stdin); every table it prints is laid out so that no
    value is cut (report/tables.py: whole, split, or one block per row)."""
    from ..report.tables import fit_console, terminal_width

    return fit_console(width=terminal_width())


def check_out(path: str, kind: str) -> str:
    """An --out path that can be written, checked before any work (SpecError otherwise): `kind` "dir" (a directory
    that exists or can be created) or "file" (a regular file, new or to be replaced/appended). A probe file is made
    and removed in the nearest existing folder, so read-only and virtual file systems (/proc) are caught too."""
    import tempfile

    from ..i18n import say

    if not path or "\0" in path or any(len(part.encode()) > 255 for part in path.split(os.sep)) or len(path) > 4000:
        raise SpecError(say("ei_out_unusable", path=path))
    full = os.path.abspath(path)
    if os.path.exists(full):
        if kind == "dir" and not os.path.isdir(full):
            raise SpecError(say("ei_out_not_dir", path=path))
        if kind == "file" and not os.path.isfile(full):
            raise SpecError(say("ei_out_not_file", path=path))
    folder = full if kind == "dir" else os.path.dirname(full)
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        raise SpecError(say("ei_out_folder_is_file", path=path, folder=folder))
    try:
        fd, probe = tempfile.mkstemp(prefix=".trainfit-probe-", dir=folder)
        os.close(fd)
        os.remove(probe)
    except OSError as exc:
        raise SpecError(say("ei_out_cannot_write", path=path, folder=folder, why=exc.strerror or str(exc))) from None
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
        from ..i18n import t

        print(t("report_written", lang_of(args)).format(path=path), file=sys.stderr)
