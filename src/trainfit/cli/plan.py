"""`trainfit plan`: which instance, how many GPUs and nodes, which settings, how long, how much."""

from __future__ import annotations

import argparse
import sys

from .common import (add_workload_flags, add_strategy_flags, add_max_oom_risk_flag, job_kwargs, add_efficiency_flags, add_report_flags, check_reports, write_reports, add_output_flags, add_prices_flag, apply_prices, check_out, console, lang_of,
                     parse_sets, print_json)

HELP = "recommend instance type, GPU count, nodes and settings for a dataset, deadline and budget"
EXAMPLES = """examples:
  trainfit plan --model qwen2-7b --method lora --dataset-tokens 200M --epochs 3 --deadline 48h --budget 3000
  trainfit plan --model bert-base-uncased --task classification --samples 100k --avg-len 256 --epochs 3
  trainfit plan --model llama-3-8b --method auto --dataset-tokens 1B --objective fastest --budget 20000 --out plan/
  trainfit plan request.yaml            # the same keys in a YAML or TOML file (dataset-tokens: 200M, ...)
"""

# CLI flag -> request key (None values are "not given" and leave the file's or the default value); the job's own
# fields (task, seq-len, precision, ...) come from the declaration in spec/job.py (add_workload_flags).
FLAGS = ("model", "method", "dataset_tokens", "samples", "avg_len", "epochs", "global_batch", "global_batch_tokens",
         "deadline", "budget", "currency", "usd_cny", "provider", "region", "gpu", "instance", "max_nodes", "pricing",
         "objective", "top")


def add_parser(sub) -> None:
    p = sub.add_parser("plan", help=HELP, description=HELP, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("request_file", nargs="?", help="YAML/TOML request file (flags override its values)")
    p.add_argument("--model", "-m", help="preset, config.json / model directory, or Hugging Face id")
    p.add_argument("--method", help="full | lora | qlora | freeze | auto (default auto: let the search choose)")
    g = p.add_argument_group("data")
    g.add_argument("--dataset-tokens", help="dataset size in tokens: 200M, 1.5B, 200 million, 2亿, 5000万, 1,000,000 "
                   "(at most 1e14)")
    g.add_argument("--samples", help="number of samples (50k, 5万), with --avg-len; not with --dataset-tokens unless "
                   "they agree")
    g.add_argument("--avg-len", help="average tokens per sample (900, 1.5k = 1500)")
    g.add_argument("--epochs", help="epochs (default 1)")
    g.add_argument("--global-batch", help="sequences per optimizer step (default 64 for fine-tuning)")
    g.add_argument("--global-batch-tokens", help="tokens per optimizer step (instead of --global-batch)")
    add_workload_flags(p, door="request")
    add_strategy_flags(p, door="request", title="layout (searched unless given: a flag given here is kept)")
    g = p.add_argument_group("constraints")
    g.add_argument("--deadline", help="wall-clock limit: 48h, 2d, 2 days, 90m, 1d12h, 48小时, 2天, 1.5周 (a bare number "
                   "is hours)")
    g.add_argument("--budget", help="spend limit: 3000, 3000元, ¥3,000, $500, 500 USD, 1万元 (a currency in the value "
                   "sets --currency or must agree with it)")
    g.add_argument("--currency", help="CNY | USD, also RMB, 元, $ (default: CNY for Alibaba, USD otherwise)")
    g.add_argument("--usd-cny", help="exchange rate to compare USD and CNY offers (no default: rates change)")
    g.add_argument("--provider", help="alibaba | aws | gcp | azure | usd (AWS, GCP and Azure) | all (with --usd-cny) "
                   "(default alibaba; a --gpu only other providers rent searches those)")
    g.add_argument("--region", help="only prices in this region (e.g. cn-hangzhou)")
    g.add_argument("--gpu", help="only these GPUs, comma-separated (a10,a100-sxm4-80gb)")
    g.add_argument("--instance", help="only these instance types, comma-separated (ecs.gn7i-4x.16xlarge)")
    g.add_argument("--max-nodes", help="most instances to combine (default 8)")
    g.add_argument("--pricing", help="payg | subscription (monthly where it pays off, else pay-as-you-go) | spot "
                   "(can be reclaimed: priced with an interruption model and a checkpoint interval)")
    g.add_argument("--objective", help="cheapest (meets the deadline) | fastest (within the budget)")
    g.add_argument("--top", help="how many recommendations to show (default 5)")
    add_max_oom_risk_flag(g)
    p.add_argument("--out", help="write DIR/plan.json for `trainfit generate`")
    add_efficiency_flags(p)
    add_prices_flag(p)
    add_report_flags(p)
    add_output_flags(p)
    p.set_defaults(run=run)


def build_request(args: argparse.Namespace):
    from ..spec.request import load_request_file, request_from_mapping

    data = load_request_file(args.request_file) if args.request_file else {}
    for name in FLAGS:
        value = getattr(args, name, None)
        if value is not None:
            data[name] = value
    for name, value in job_kwargs(args, door="request").items():
        if value is not None:
            data[name] = value
    return request_from_mapping(data, where=args.request_file or "request")


def run(args: argparse.Namespace) -> int:
    from ..catalog.efficiency import load_efficiencies
    from ..catalog.frameworks import with_framework
    from ..plan import make_plan
    from ..uncertainty import check_max_oom_risk
    from ..report.plan import plan_dict, render_plan, write_plan

    lang = lang_of(args)
    check_reports(args)
    if args.out:
        check_out(args.out, "dir")
    apply_prices(args)
    req = build_request(args)
    check_max_oom_risk(args.max_oom_risk)
    eff = with_framework(load_efficiencies(parse_sets(args.set), args.calibration), req.job_value("framework"))
    plan = make_plan(req, eff, max_oom_risk=args.max_oom_risk)
    path = write_plan(plan, args.out) if args.out and plan.recommendations else None
    if args.json:
        doc = plan_dict(plan)
        if args.out:
            doc["plan_file"] = path
        print_json(doc)
    else:
        console().print(render_plan(plan, lang))
        if path:
            from ..i18n import t

            console().print(t("plan_written", lang).format(path=path))
    from ..report.html_blocks import plan_doc

    write_reports(args, lambda: plan_doc(plan, lang))
    if not plan.recommendations:  # answered (the reasons are printed), but nothing meets the request: exit 1,
        from ..i18n import t       # with or without --out (nothing is written), so a script can tell

        from ..report.plan import constraint_text

        print(t("plan_nothing_meets", lang).format(
            constraint=constraint_text((plan.binding or {}).get("constraint"), lang),
            out=f" ({t('plan_nothing_written', lang).format(out=args.out)})" if args.out else ""), file=sys.stderr)
        return 1
    return 0
