"""`trainfit estimate`: memory per GPU, step time, tokens/s, MFU and the bottleneck of one configuration."""

from __future__ import annotations

import argparse

from .common import (add_max_oom_risk_flag, add_job_flags, add_report_flags, check_reports, write_reports, add_model_flag, console, lang_of, parse_sets, print_json, strategy_kwargs,
                     workload_kwargs)

HELP = "will it fit, how fast: memory breakdown and step time of one training configuration"
EXAMPLES = """examples:
  trainfit estimate --model qwen2-7b --gpu a10 --method lora --seq-len 2048 --grad-ckpt full
  trainfit estimate --model llama-3-8b --gpu a100-sxm4-80gb --gpus 8 --zero 3 --micro-batch 4 --json
  trainfit estimate --model ./my-model/config.json --instance ecs.gn7i-c32g1.32xlarge --gpus 4 --zero 2
"""


def add_parser(sub) -> None:
    p = sub.add_parser("estimate", help=HELP, description=HELP, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_flag(p)
    p.add_argument("--gpu", "-g", default=None, help="GPU name (trainfit gpus), e.g. a10, a100-sxm4-80gb, h100-sxm")
    p.add_argument("--instance", default=None, help="cloud instance type: GPU, count and links from the catalog")
    p.add_argument("--network-gbps", type=float, default=None, help="network between nodes, Gbit/s")
    add_job_flags(p)
    add_max_oom_risk_flag(p)
    add_report_flags(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rich.text import Text

    from ..advise import alternatives_within
    from ..api import estimate, load_efficiencies
    from ..uncertainty import check_max_oom_risk, oom_risk, within_policy
    from ..report.estimate import estimate_dict, render_estimate

    lang = lang_of(args)
    check_reports(args)
    eff = load_efficiencies(parse_sets(args.set), args.calibration)
    est = estimate(args.model, args.gpu, instance=args.instance, network_gbps=args.network_gbps,
                   efficiencies=eff, **workload_kwargs(args), **strategy_kwargs(args))
    max_risk = check_max_oom_risk(args.max_oom_risk)
    within = within_policy(est, max_risk)  # "fits" as plan and compare mean it (one out-of-memory policy)
    alts = alternatives_within(est, eff, max_risk) if not within else []
    if args.json:
        doc = estimate_dict(est, alts)
        risk = oom_risk(est)
        doc["oom_policy"] = {"max_oom_risk": max_risk, "oom_risk": None if risk is None else round(risk, 4),
                             "within": within}
        if not within:  # what fits within the limit (does_not_fit holds the same list when it does not fit at all)
            doc["oom_policy"]["alternatives"] = [a.to_dict() for a in alts]
        print_json(doc)
    else:
        console().print(render_estimate(est, lang, alts))
        if est.fits and not within:
            from ..i18n import t

            key = "oom_policy_over" if alts else "oom_policy_over_none"
            console().print(Text(t(key, lang).format(risk=f"{oom_risk(est):.0%}", limit=f"{max_risk:.0%}"),
                                 style="yellow"))
    from ..report.html_blocks import estimate_doc

    write_reports(args, lambda: estimate_doc(est, alts, lang))
    return 0
