"""`trainfit validate`: the measured error of every prediction on validation cases."""

from __future__ import annotations

import argparse
import sys

from .common import add_efficiency_flags, add_output_flags, add_report_flags, check_reports, write_reports, console, lang_of, parse_sets, print_json

HELP = "predict measured training runs (validation cases) and report the error per metric, GPU, method and source"
EXAMPLES = """examples:
  trainfit validate data/validation/published_dev.jsonl
  trainfit validate data/validation/published_dev.jsonl data/measurements/*.jsonl --json
  trainfit validate cases.jsonl --max-mape-throughput 0.15 --max-mape-memory 0.10   # exit 1 when exceeded
  trainfit validate cases.jsonl --calibration my-calibration.yaml --rows
  trainfit validate data/validation/published_dev.jsonl data/validation/trace_cases.jsonl   # trace beside published
"""


def add_parser(sub) -> None:
    p = sub.add_parser("validate", help=HELP, description=HELP, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cases", nargs="+", metavar="CASES.jsonl", help="validation cases (the format: data/validation/SCHEMA.md in the repository)")
    p.add_argument("--max-mape-throughput", type=float, default=None, metavar="FRACTION",
                   help="exit 1 when the throughput MAPE exceeds this (0.15 = 15%%)")
    p.add_argument("--max-mape-memory", type=float, default=None, metavar="FRACTION",
                   help="exit 1 when the peak-memory MAPE exceeds this")
    p.add_argument("--max-mape-trace", type=float, default=None, metavar="FRACTION",
                   help="trace cases (source 'trace'): exit 1 when their allocated-peak MAPE exceeds this")
    p.add_argument("--max-mape-kv", type=float, default=None, metavar="FRACTION",
                   help="serving cases: exit 1 when the KV-capacity MAPE exceeds this")
    p.add_argument("--max-mape-serving-throughput", type=float, default=None, metavar="FRACTION",
                   help="serving cases: exit 1 when the throughput MAPE exceeds this")
    p.add_argument("--max-mape-ttft", type=float, default=None, metavar="FRACTION",
                   help="serving cases: exit 1 when the TTFT MAPE exceeds this")
    p.add_argument("--max-mape-tpot", type=float, default=None, metavar="FRACTION",
                   help="serving cases: exit 1 when the TPOT MAPE exceeds this")
    p.add_argument("--min-predicted", type=float, default=None, metavar="FRACTION",
                   help="exit 1 when fewer than this fraction of the cases are predicted")
    p.add_argument("--rows", action="store_true", help="also print one line per case")
    p.add_argument("--keep-inconsistent", action="store_true",
                   help="count measured peaks below the weights and optimizer states of their stated setup "
                        "(listed under 'excluded' otherwise)")
    p.add_argument("--shipped", action="store_true",
                   help="use efficiency.yaml without the shipped calibration (the calibration's starting point)")
    add_efficiency_flags(p)
    add_output_flags(p)
    add_report_flags(p)
    p.set_defaults(run=run)


def _serving_limits(args: argparse.Namespace, doc: dict | None) -> list[str]:
    from ..i18n import say

    failed = []
    for metric, limit in (("kv_capacity", args.max_mape_kv), ("throughput", args.max_mape_serving_throughput),
                          ("ttft", args.max_mape_ttft), ("tpot", args.max_mape_tpot)):
        mape = (doc or {}).get(metric, {}).get("mape")
        if limit is not None and mape is None:  # a gate on nothing fails: an empty file must not pass CI
            failed.append(say("ei_limit_nothing", metric=say("ei_limit_serving", metric=metric)))
        elif limit is not None and mape > limit:
            failed.append(say("ei_limit_mape", metric=say("ei_limit_serving", metric=metric), mape=mape, limit=limit))
    return failed


def _limits(args: argparse.Namespace, doc: dict) -> list[str]:
    from ..i18n import say

    failed = []
    for metric, limit in (("throughput", args.max_mape_throughput), ("memory", args.max_mape_memory)):
        if limit is None:
            continue
        mape = doc[metric]["mape"]
        if mape is None:  # a gate on nothing fails: an empty or unpredictable file must not pass CI
            failed.append(say("ei_limit_nothing", metric=metric))
        elif mape > limit:
            failed.append(say("ei_limit_mape", metric=metric, mape=mape, limit=limit))
    trace = (doc.get("trace") or {}).get("memory") or {}
    if args.max_mape_trace is not None and trace.get("mape") is None:
        failed.append(say("ei_limit_nothing", metric="trace memory"))
    elif args.max_mape_trace is not None and trace["mape"] > args.max_mape_trace:
        failed.append(say("ei_limit_mape", metric="trace memory", mape=trace["mape"], limit=args.max_mape_trace))
    if args.min_predicted is not None and not doc["cases"]:
        failed.append(say("ei_limit_no_cases"))
    elif args.min_predicted is not None:
        share = doc["predicted"] / doc["cases"]
        if share < args.min_predicted:
            failed.append(say("ei_limit_predicted", share=share, limit=args.min_predicted))
    return failed


def run(args: argparse.Namespace) -> int:
    from ..api import load_efficiencies
    from ..catalog.efficiency import Efficiencies
    from ..errors import SpecError
    from ..serving.validate import is_serving
    from ..serving.validate import validate as validate_serving
    from ..uncertainty import shipped_bands
    from ..validate import load_cases, validate

    lang = lang_of(args)
    check_reports(args)
    for name, limit in (("--max-mape-throughput", args.max_mape_throughput),
                        ("--max-mape-memory", args.max_mape_memory), ("--min-predicted", args.min_predicted),
                        ("--max-mape-trace", args.max_mape_trace),
                        ("--max-mape-kv", args.max_mape_kv),
                        ("--max-mape-serving-throughput", args.max_mape_serving_throughput),
                        ("--max-mape-ttft", args.max_mape_ttft), ("--max-mape-tpot", args.max_mape_tpot)):
        if limit is not None and not 0 <= limit <= 10:
            raise SpecError(f"{name} is a fraction (0.15 = 15%), got {limit}")
    if args.shipped:
        eff = Efficiencies.shipped()
        if args.set:
            eff = eff.with_overrides(parse_sets(args.set))
    else:
        eff = load_efficiencies(parse_sets(args.set), args.calibration)
    all_cases = load_cases(args.cases)
    cases = [c for c in all_cases if not is_serving(c)]
    serving = [c for c in all_cases if is_serving(c)]
    doc = validate(cases, eff, args.keep_inconsistent, bands=shipped_bands()).to_dict()
    doc["efficiencies"] = eff.origin
    doc["serving"] = validate_serving(serving) if serving else None
    failed = (_limits(args, doc) if cases or not serving else []) + _serving_limits(args, doc["serving"])
    doc["limits_failed"] = failed
    if args.json:
        print_json(doc)
    else:
        if cases:
            render(doc, args.rows, lang)
        if doc["serving"]:
            render_serving(doc["serving"], args.rows, lang)
    from ..report.html_docs import validate_doc

    write_reports(args, lambda: validate_doc(doc, lang))
    from ..i18n.errors import FALLBACK_ZH, localize_error

    for line in failed:
        zh = localize_error(line, lang) if lang == "zh" else line
        lead = "超出限制" if lang == "zh" else "limit exceeded"
        sep = "：" if lang == "zh" else ": "
        print(f"trainfit: {lead}{sep}{line if zh.startswith(FALLBACK_ZH) else zh}", file=sys.stderr)
    return 1 if failed else 0


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def _w(key: str, lang: str, **values) -> str:
    from ..i18n import t

    return t(key, lang).format(**values)


def _counts_and_errors(c, doc: dict, lang: str, prefix: str, metrics: tuple, groupings: tuple,
                       suffix: str = "") -> None:
    """The cases predicted, the reasons others were skipped, and the error table by metric and group (training and
    serving cases alike)."""
    from rich.table import Table

    from ..i18n.notes import localize

    c.print(prefix + _w("v_predicted", lang, p=doc["predicted"], n=doc["cases"]) + suffix)
    if doc["skipped"]:
        c.print(_w("v_skipped", lang) + "; ".join(f"{localize(reason, lang)} ({n})"
                                                  for reason, n in doc["skipped"].items()))
    if not any(doc[metric]["n"] for metric in metrics):  # e.g. trace cases only: their own table follows
        return
    t = Table(title=prefix + _w("v_title", lang))
    for col, justify in ((_w("v_metric", lang), "left"), (_w("v_group", lang), "left"), ("n", "right"),
                         ("MAPE", "right"), (_w("v_worst", lang), "right")):
        t.add_column(col, justify=justify)
    for metric in metrics:
        m = doc[metric]
        if not m["n"]:
            continue
        t.add_row(metric, "all", str(m["n"]), _pct(m["mape"]), _pct(m["max_ape"]))
        for by in groupings:
            for group, s in m[by].items():
                t.add_row("", f"{by[3:]}={group}", str(s["n"]), _pct(s["mape"]), _pct(s["max_ape"]))
    c.print(t)


def render(doc: dict, rows: bool = False, lang: str = "en") -> None:
    from rich.table import Table

    from ..i18n.notes import localize
    from ..validate import metric_key

    c = console()
    _counts_and_errors(c, doc, lang, "", ("throughput", "memory", "mfu"), ("by_gpu", "by_method", "by_framework"),
                       f" · efficiencies: {doc['efficiencies']}")
    render_sources(c, doc, lang)
    for metric in ("throughput", "memory"):
        cov = doc[metric].get("band_coverage") or {}
        if cov.get("n"):
            c.print(_w("v_coverage", lang, metric=metric, c=f"{cov['coverage']:.0%}", n=cov["n"],
                       level=f"{cov['level']:.0%}"))
    oom = doc["oom"]
    if oom["n"]:
        c.print(_w("v_oom", lang, ok=oom["correct"], n=oom["n"]))
    ran = doc.get("ran") or {}
    if ran.get("n"):
        c.print(_w("v_ran", lang, ok=ran["fit"], n=ran["n"]))
        for case_id in ran["predicted_oom"]:
            c.print(_w("v_ran_oom", lang, id=case_id))
    for ex in doc["excluded"]:
        c.print(_w("v_excluded", lang, metric=ex["metric"], err=_pct(ex["error"]), id=ex["id"],
                   reason=localize(ex["reason"], lang)))
    if rows:
        r = Table(title=_w("v_per_case", lang))
        for col in ("case", "gpu", "method", "tok/s/GPU or s pred", "meas", "err", "GiB pred", "meas", "err"):
            r.add_column(col, justify="left" if col in ("case", "gpu", "method") else "right")
        for row in doc["rows"]:
            p, m, e = row["predicted"], row["measured"], row["error"]
            key = metric_key(m, "throughput") or "step_time_s"
            r.add_row(row["id"], row["gpu"], row["method"],
                      f"{p[key]:.4g}" if "throughput" in e else "-",
                      f"{m[key]:.4g}" if "throughput" in e else "-", _pct(e.get("throughput")),
                      f"{p['peak_memory_gib']:.1f}" if "memory" in e else "-",
                      f"{m['peak_memory_gib']:.1f}" if "memory" in e else "-", _pct(e.get("memory")))
        c.print(r)
    for note in doc["notes"]:
        c.print(f"- {localize(note, lang)}", style="dim")


def render_sources(c, doc: dict, lang: str = "en") -> None:
    """Peak-memory errors per truth (measured runs, traced steps) and per source and the counter it measured
    (memory_kind), one line each: trace truth beside published truth."""
    from rich.table import Table

    by_kind = doc.get("memory_by_source_kind") or {}
    if not by_kind:
        return
    t = Table(title=_w("v_by_source", lang))
    for col, justify in ((_w("v_truth", lang), "left"), (_w("v_source", lang), "left"),
                         (_w("v_counter", lang), "left"), ("n", "right"), ("MAPE", "right"),
                         (_w("v_worst", lang), "right")):
        t.add_column(col, justify=justify)
    for truth, s in (("measured", doc["memory"]), ("trace", (doc.get("trace") or {}).get("memory"))):
        if not s or not s["n"]:
            continue
        t.add_row(truth, "all", "", str(s["n"]), _pct(s["mape"]), _pct(s["max_ape"]), style="bold")
        for source, kinds in by_kind.items():
            for kind, k in kinds.items():
                if k["truth"] == truth:
                    t.add_row("", source, kind, str(k["n"]), _pct(k["mape"]), _pct(k["max_ape"]))
    c.print(t)


def render_serving(doc: dict, rows: bool = False, lang: str = "en") -> None:
    from rich.table import Table

    from ..i18n.notes import localize

    c = console()
    _counts_and_errors(c, doc, lang, _w("v_serving", lang), ("kv_capacity", "throughput", "ttft", "tpot"),
                       ("by_gpu", "by_engine", "by_weights"))
    for ex in doc.get("excluded", []):
        c.print(_w("v_excluded", lang, metric=ex["metric"], err=_pct(ex["error"]), id=ex["id"],
                   reason=localize(ex["reason"], lang)))
    if rows:
        r = Table(title=_w("v_serving", lang) + _w("v_per_case", lang))
        for col in ("case", "metric", "predicted", "measured", "error"):
            r.add_column(col, justify="left" if col in ("case", "metric") else "right")
        for row in doc["rows"]:
            for key, meas in row["measured"].items():
                metric = next(m for m, keys in _SERVING_KEYS.items() if key in keys)
                r.add_row(row["id"], key, f"{row['predicted'][key]:.4g}", f"{meas:.4g}",
                          _pct(row["error"].get(metric)))
        c.print(r)
    for note in doc["notes"]:
        c.print(f"- {localize(note, lang)}", style="dim")


_SERVING_KEYS = {"kv_capacity": ("kv_cache_tokens", "max_concurrency", "kv_cache_gib"),
                 "throughput": ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s"),
                 "ttft": ("ttft_ms",), "tpot": ("tpot_ms",)}
