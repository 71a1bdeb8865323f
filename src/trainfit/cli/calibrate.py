"""`trainfit calibrate`: fit the named efficiencies to measured runs and write a calibration file."""

from __future__ import annotations

import argparse
import sys

from .common import add_output_flags, check_out, console, lang_of, print_json

HELP = "fit the estimator's named efficiencies to measured runs (least squares on log error) and write them"
EXAMPLES = """examples:
  trainfit calibrate data/validation/published_dev.jsonl data/measurements/*.jsonl --out calibration.yaml
  trainfit estimate --model qwen2-7b --gpu a10 --calibration calibration.yaml
  cp calibration.yaml ~/.config/trainfit/calibration.yaml     # used by every command from then on
"""


def add_parser(sub) -> None:
    p = sub.add_parser("calibrate", help=HELP, description=HELP, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("measurements", nargs="+", metavar="MEASUREMENTS.jsonl", help="validation cases with measurements")
    p.add_argument("--out", "-o", required=True, help="calibration file to write (YAML)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    add_output_flags(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..calibrate import calibrate, write_calibration

    lang_of(args)
    check_out(args.out, "file")  # before minutes of fitting
    log = None if (args.quiet or args.json) else (lambda line: print(line, file=sys.stderr, flush=True))
    doc = calibrate(args.measurements, log=log)
    write_calibration(doc, args.out)
    if args.json:
        print_json({"out": args.out, **doc})
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
    return 0


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"
