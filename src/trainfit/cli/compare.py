"""`trainfit compare`: the same workload across GPU types, with cost per billion tokens."""

from __future__ import annotations

import argparse

from .common import (add_max_oom_risk_flag, add_job_flags, add_report_flags, check_reports, write_reports, add_model_flag, add_prices_flag, apply_prices, console, lang_of, parse_sets,
                     print_json, strategy_kwargs, workload_kwargs)

HELP = "A10 vs A100 vs H100 ...: fits, tokens/s, hours and CNY per billion tokens for one workload"
EXAMPLES = """examples:
  trainfit compare --model llama-2-7b --method lora
  trainfit compare --model qwen2-7b --method full --gpus 8 --zero 3 --gpu a10,a100-sxm4-80gb,h20,h100-sxm
"""


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help=HELP, description=HELP, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_flag(p)
    p.add_argument("--gpu", "-g", "--gpus-list", dest="gpus_list", default=None,
                   help="comma-separated GPU names (default: t4,v100-sxm2-32gb,a10,l20,a100-sxm4-40gb,"
                        "a100-sxm4-80gb,h20,h100-sxm,h200)")
    add_job_flags(p)
    add_prices_flag(p)
    add_max_oom_risk_flag(p)
    add_report_flags(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..api import load_efficiencies
    from ..compare import compare
    from ..report.compare import compare_dict, render_compare

    lang = lang_of(args)
    check_reports(args)
    apply_prices(args)
    gpus_list = [g.strip() for g in args.gpus_list.split(",") if g.strip()] if args.gpus_list else None
    eff = load_efficiencies(parse_sets(args.set), args.calibration)
    from ..uncertainty import check_max_oom_risk

    rows = compare(args.model, gpus_list, efficiencies=eff, max_oom_risk=check_max_oom_risk(args.max_oom_risk),
                   **strategy_kwargs(args), **workload_kwargs(args))
    if args.json:
        print_json(compare_dict(args.model, rows))
    else:
        console().print(render_compare(args.model, rows, lang))
    from ..report.html_blocks import compare_doc

    write_reports(args, lambda: compare_doc(args.model, rows, lang))
    return 0
