"""`trainfit generate`: DeepSpeed/FSDP config, launch.sh, train.py, requirements and README from a plan."""

from __future__ import annotations

import argparse

from .common import (add_job_flags, check_out, console, lang_of, parse_sets, print_json, strategy_kwargs,
                     workload_kwargs)

HELP = "write a runnable training setup (engine config, launch.sh, train.py) from a plan"
EXAMPLES = """examples:
  trainfit plan --model qwen2-7b --method lora --dataset-tokens 200M --out p && trainfit generate --plan p/plan.json --out run
  trainfit generate --plan p/plan.json --out run --data /data/sft.jsonl --lang zh
  trainfit generate --model llama-3-8b --gpu a100-sxm4-80gb --gpus 8 --zero 3 --micro-batch 4 --out run
"""


def add_parser(sub) -> None:
    p = sub.add_parser("generate", help=HELP, description=HELP, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plan", help="plan.json written by `trainfit plan --out DIR`")
    p.add_argument("--out", required=True, help="directory to write (must not exist or be empty; --force replaces)")
    p.add_argument("--data", help="training data (JSONL/Parquet file or directory), checked now and by train.py")
    p.add_argument("--output-dir", default="output", help="where train.py writes checkpoints and metrics")
    p.add_argument("--force", action="store_true", help="replace a non-empty --out directory")
    g = p.add_argument_group("without a plan file: the workload flags of `estimate`")
    g.add_argument("--model", "-m", help="model (preset, config.json, model directory)")
    g.add_argument("--gpu", "-g", help="GPU name")
    g.add_argument("--instance", help="cloud instance type")
    g.add_argument("--dataset-tokens", default=None, help="tokens to train on (sets the number of steps)")
    add_job_flags(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import SpecError
    from ..generate import generate, load_plan, setup_from_estimate

    lang = lang_of(args)
    check_out(args.out, "dir")
    if args.plan:
        if args.model:
            raise SpecError("give --plan or the workload flags (--model ...), not both")
        setup = load_plan(args.plan)
    elif args.model:
        from ..api import estimate, load_efficiencies
        from ..units import parse_count

        est = estimate(args.model, args.gpu, instance=args.instance,
                       efficiencies=load_efficiencies(parse_sets(args.set), args.calibration),
                       **workload_kwargs(args), **strategy_kwargs(args))
        tokens = parse_count(args.dataset_tokens) if args.dataset_tokens else 0.0
        setup = setup_from_estimate(est, args.model, tokens)
    else:
        raise SpecError("give --plan plan.json, or --model with the workload flags")
    files = generate(setup, args.out, data=args.data, lang=lang, force=args.force, output_dir=args.output_dir)
    if args.json:
        print_json({"out": args.out, "files": files, "engine": setup.strategy["engine"],
                    "world_size": setup.world_size, "choice": setup.choice})
    else:
        console().print(f"wrote {args.out}: {', '.join(files)}")
        console().print(f"next: pip install -r {args.out}/requirements.txt && DATA=/path/to/data {args.out}/launch.sh")
    return 0
