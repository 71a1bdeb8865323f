"""`trainfit calibrate`: fit the named efficiencies to measured runs and write a calibration file; with --cv, the
leave-one-group-out error instead."""

from __future__ import annotations

import argparse
import sys

from .common import add_output_flags, check_out, console, lang_of, print_json

HELP = "fit the estimator's named efficiencies to measured runs (least squares on log error) and write them"
EXAMPLES = """examples:
  trainfit calibrate data/validation/published_dev.jsonl data/measurements/*.jsonl --out calibration.yaml
  trainfit calibrate data/validation/published_dev.jsonl --cv source      # error on sources the fit never saw
  trainfit calibrate data/validation/published_dev.jsonl --cv source --out cv.json --jobs 2
  trainfit calibrate data/validation/published_dev.jsonl --cv source --metric throughput --only mosaicml/llm-foundry
  trainfit estimate --model qwen2-7b --gpu a10 --calibration calibration.yaml
  cp calibration.yaml ~/.config/trainfit/calibration.yaml     # used by every command from then on
"""


def add_parser(sub) -> None:
    p = sub.add_parser("calibrate", help=HELP, description=HELP, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("measurements", nargs="+", metavar="MEASUREMENTS.jsonl", help="validation cases with measurements")
    p.add_argument("--out", "-o", default=None,
                   help="calibration file to write (YAML); with --cv, the cross-validation result (JSON)")
    p.add_argument("--cv", choices=("source", "framework"), default=None,
                   help="leave one source (or framework) out at a time: fit on the others, report the error on it")
    p.add_argument("--jobs", "-j", type=int, default=1, help="--cv: folds fitted in parallel processes")
    p.add_argument("--rounds", type=int, default=None,
                   help="--cv: coordinate-descent rounds per fold (default: as the shipped fit; fewer is faster)")
    p.add_argument("--metric", choices=("throughput", "memory"), default=None,
                   help="--cv: fit and score only this metric's parameters, on the cases compared on it (quicker; "
                        "a diagnostic, not the cv_source.json the error bands are made from)")
    p.add_argument("--only", action="append", default=None, metavar="GROUP",
                   help="--cv: leave out only this source (or framework), repeatable (faster; overall = these)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    add_output_flags(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import SpecError

    lang_of(args)
    if args.cv:
        return run_cv(args)
    if not args.out:
        raise SpecError("--out is required (the calibration file to write), except with --cv")
    from ..calibrate import calibrate, write_calibration

    check_out(args.out, "file")  # before minutes of fitting
    log = None if (args.quiet or args.json) else (lambda line: print(line, file=sys.stderr, flush=True))
    doc = calibrate(args.measurements, log=log)
    write_calibration(doc, args.out)
    if args.json:
        from ..calibrate import at_bound

        print_json({"out": args.out, **doc, "at_bound": at_bound(doc["values"])})
        return 0
    c = console()
    errs = doc["meta"]["errors"]
    c.print(f"wrote {args.out}: {len(doc['values'])} efficiencies fitted on {doc['meta']['cases']['train']} cases, "
            f"{doc['meta']['cases']['held_back']} held back")
    for when in ("before", "after"):
        for part in ("train", "held_back"):
            e = errs[when][part]
            c.print(f"  {when:6s} {part:9s} throughput MAPE {_pct(e['throughput']['mape'])} (n={e['throughput']['n']})"
                    f"  memory MAPE {_pct(e['memory']['mape'])} (n={e['memory']['n']})")
    print_bounds(doc["values"])
    return 0


def print_bounds(values: dict) -> None:
    from ..calibrate import at_bound

    for b in at_bound(values):
        console().print(f"  at a bound: {b['name']} {b['level']} = {b['value']:g} (fit bound {b['bound']:g}): the data "
                        "push it to the edge; read it as a missing term, not as the hardware's value", style="yellow")


def run_cv(args: argparse.Namespace) -> int:
    import json

    from ..calibrate import cross_validate
    from ..errors import SpecError

    if args.jobs < 1:
        from ..i18n import say

        raise SpecError(say("ec_positive", option="jobs", value=args.jobs))
    if args.out:
        check_out(args.out, "file")
    log = None if (args.quiet or args.json) else (lambda line: print(line, file=sys.stderr, flush=True))
    from ..calibrate import ROUNDS

    rounds = ROUNDS if args.rounds is None else args.rounds
    if rounds < 1:
        from ..i18n import say

        raise SpecError(say("ec_positive", option="rounds", value=rounds))
    from ..calibrate import METRICS

    metrics = (args.metric,) if args.metric else METRICS
    doc = cross_validate(args.measurements, args.cv, jobs=args.jobs, log=log, rounds=rounds, metrics=metrics,
                         only=args.only)
    if args.out:
        try:
            with open(args.out, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=1, sort_keys=True)
                fh.write("\n")
        except OSError as exc:
            raise SpecError(f"cannot write {args.out}: {exc.strerror}") from None
    if args.json:
        print_json(doc)
    else:
        render_cv(doc)
    return 0


def render_cv(doc: dict) -> None:
    from rich.table import Table

    t = Table(title=f"leave-one-{doc['by']}-out: each {doc['by']} predicted by a fit that never saw it "
                    f"({doc['rounds']} round(s) of coordinate descent per fold)")
    for col in (doc["by"], "fitted on", "left out", "throughput n", "MAPE", "memory n", "MAPE "):
        t.add_column(col, justify="left" if col == doc["by"] else "right")
    for g, s in doc["groups"].items():
        t.add_row(g, str(s["fitted"]), str(s["left_out"]), str(s["throughput"]["n"]), _pct(s["throughput"]["mape"]),
                  str(s["memory"]["n"]), _pct(s["memory"]["mape"]))
    o, ins = doc["overall"], doc["in_sample"]
    t.add_row("all measured (left out)" if doc.get("trace") else "all (left out)", "", "",
              str(o["throughput"]["n"]), _pct(o["throughput"]["mape"]),
              str(o["memory"]["n"]), _pct(o["memory"]["mape"]), style="bold")
    t.add_row("all (in-sample, shipped calibration)", "", "", str(ins["throughput"]["n"]),
              _pct(ins["throughput"]["mape"]), str(ins["memory"]["n"]), _pct(ins["memory"]["mape"]))
    c = console()
    c.print(t)
    for metric in ("throughput", "memory"):
        cov = o[metric].get("band_coverage") or {}
        if cov.get("n"):
            c.print(f"{metric}: {cov['coverage']:.0%} of {cov['n']} left-out values inside their {cov['level']:.0%} "
                    f"band (each band made from the other {doc['by']}s' residuals)")


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"
