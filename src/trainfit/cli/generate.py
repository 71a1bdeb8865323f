"""`trainfit generate`: DeepSpeed/FSDP config, launch.sh, train.py, requirements and README from a plan."""

from __future__ import annotations

import argparse
import os
import shlex

from ..train.runner import DEFAULT_OUTPUT_DIR  # the runner imports only the standard library at module level
from .common import (add_job_flags, check_out, console, lang_of, parse_sets, print_json, strategy_kwargs,
                     workload_kwargs)

HELP = "write a runnable training setup (engine config, launch.sh, train.py) from a plan"
EXAMPLES = """examples:
  trainfit plan --model qwen2-7b --method lora --dataset-tokens 200M --out p && trainfit generate --plan p --out run
  trainfit generate --plan p/plan.json --out run --data /data/sft.jsonl --lang zh
  trainfit generate --model llama-3-8b --gpu a100-sxm4-80gb --gpus 8 --zero 3 --micro-batch 4 --out run
  trainfit generate --serving --from run/output --gpu a10 --out serve     # the model run/train.py trained
  trainfit generate --serving --model qwen2-7b --gpu a10 --model-path run/output/merged --out serve
  trainfit generate --serving --model qwen2-7b --gpu l20 --engine sglang --adapter run/output/adapter --out serve
"""


def add_parser(sub) -> None:
    p = sub.add_parser("generate", help=HELP, description=HELP, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plan", help="plan.json written by `trainfit plan --out DIR`, or that DIR")
    p.add_argument("--out", required=True,
                   help="directory to write (must not exist or be empty; --force replaces the files an earlier "
                        "generate wrote there, listed in its .trainfit-manifest.json, and leaves every other file)")
    p.add_argument("--data", dest="train_data",
                   help="training data (JSONL/Parquet file or directory), checked now and by train.py")
    p.add_argument("--output-dir", default=DEFAULT_OUTPUT_DIR,
                   help="where train.py writes checkpoints, metrics and, at the end, the final model (adapter/ for "
                        "LoRA, merged/: what `generate --serving --from` reads)")
    p.add_argument("--force", action="store_true",
                   help="write into a non-empty --out (replacing only generate's own unchanged files), and write "
                        "a setup even when it does not fit")
    t = p.add_argument_group("where it runs (launch.sh is always written)")
    t.add_argument("--target", default="ecs", choices=("ecs", "dlc", "pytorchjob", "skypilot", "slurm"),
                   help="ecs: launch.sh on instances you log into (default); dlc: PAI-DLC job (dlc_job.json); "
                        "pytorchjob: Kubeflow PyTorchJob for ACK; skypilot: SkyPilot task; slurm: sbatch script")
    t.add_argument("--model-source", default="hf", choices=("hf", "modelscope", "local"),
                   help="where train.py gets the weights: hf (Hub; HF_ENDPOINT for a mirror), modelscope "
                        "(snapshot_download), local (--model-path DIR on the training machines)")
    t.add_argument("--image", default=None, help="container image for dlc / pytorchjob")
    t.add_argument("--storage", default=None,
                   help="dlc: shared storage mounted on every node (oss://bucket/dir/, nas://..., cpfs://...)")
    t.add_argument("--pvc", default=None, help="pytorchjob: the shared PersistentVolumeClaim (default trainfit-shared)")
    g = p.add_argument_group("without a plan file: the workload flags of `estimate`")
    g.add_argument("--model", "-m", help="model (preset, config.json, model directory)")
    g.add_argument("--gpu", "-g", help="GPU name")
    g.add_argument("--instance", help="cloud instance type")
    g.add_argument("--dataset-tokens", default=None, help="tokens to train on (sets the number of steps)")
    sv = p.add_argument_group("serving (--serving): the engine's launch command instead of a training setup")
    sv.add_argument("--serving", action="store_true", help="write serve.sh (vLLM / SGLang) for the trained model")
    sv.add_argument("--engine", default="vllm", help="vllm | sglang | trtllm (alias tensorrt-llm) | lmdeploy "
                    "(default vllm)")
    sv.add_argument("--engine-version", default="", help="engine version whose defaults to assume")
    sv.add_argument("--weights", default=None,
                    help="bf16 | fp16 | fp8 | int8 | awq | gptq (default bf16; fp16 for a --from model trained in fp16)")
    sv.add_argument("--kv-cache-dtype", default="auto", help="auto | fp8")
    sv.add_argument("--gpu-memory-utilization", type=float, default=None, help="engine memory fraction")
    sv.add_argument("--max-model-len", type=int, default=None, help="context length (default 8192)")
    sv.add_argument("--max-num-seqs", type=int, default=None, help="requests batched together")
    sv.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs")
    sv.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None,
                    help="prefix caching, passed as stated (vLLM; SGLang: --no- is --disable-radix-cache)")
    sv.add_argument("--mamba-ssm-cache-dtype", default="auto", help="auto | float32 | float16 | bfloat16: a hybrid's "
                    "recurrent states (vLLM --mamba-ssm-cache-dtype, SGLang --mamba-ssm-dtype; default auto)")
    sv.add_argument("--lmdeploy-backend", default=None, help="LMDeploy: turbomind | pytorch (default turbomind); "
                    "--kv-cache-dtype int8 | int4 is its --quant-policy 8 | 4")
    sv.add_argument("--from", dest="from_run", metavar="RUN_DIR", default=None,
                    help="serve the model a training run wrote: train.py's output directory (its merged/ folder "
                         "holds the model, config.json included), or a folder holding a Hugging Face model; "
                         "replaces --model and --model-path")
    sv.add_argument("--model-path", default=None, help="the trained model to serve (default output/merged, where "
                    "train.py writes it); with --model-source local, the base model directory to train from")
    sv.add_argument("--adapter", default=None, help="serve this LoRA adapter on the base model (engine LoRA)")
    add_job_flags(p, skip=("data",))  # --data here is the training data (train.py reads it)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import GenerateError
    from ..generate import generate, load_plan, setup_from_estimate, submit_command
    from ..generate.setup import require_generated_stack
    from ..i18n import t

    lang = lang_of(args)
    check_out(args.out, "dir")
    _check_out_dir(args)
    if args.serving:
        return _serving(args, lang)
    if args.from_run:
        raise GenerateError("gen_e_from_needs_serving")
    if args.plan:
        if args.model:
            raise GenerateError("gen_e_plan_and_model")
        # the folder `trainfit plan --out DIR` wrote, or its plan.json
        setup = load_plan(os.path.join(args.plan, "plan.json") if os.path.isdir(args.plan) else args.plan)
    elif args.model:
        from ..api import estimate, load_efficiencies
        from ..units import parse_count

        est = estimate(args.model, args.gpu, instance=args.instance,
                       efficiencies=load_efficiencies(parse_sets(args.set), args.calibration),
                       **workload_kwargs(args), **strategy_kwargs(args))
        tokens = parse_count(args.dataset_tokens) if args.dataset_tokens else 0.0
        setup = setup_from_estimate(est, args.model, tokens)
    else:
        raise GenerateError("gen_e_no_input")
    require_generated_stack(setup)
    c = setup.choice
    if c.get("fits") is False and not args.force:
        raise GenerateError("gen_e_nofit", need=c.get("memory_gib"), usable=c.get("gpu_memory_gib"))
    files = generate(setup, args.out, data=args.train_data, lang=lang, force=args.force, output_dir=args.output_dir,
                     target=args.target, image=args.image, storage=args.storage, pvc=args.pvc,
                     model_source=args.model_source, model_path=args.model_path, inputs=_inputs(args))
    submit = submit_command(args.target, setup)
    if args.json:
        print_json({"out": args.out, "files": files, "engine": setup.strategy["engine"], "target": args.target,
                    "submit": submit, "world_size": setup.world_size, "choice": setup.choice})
        return 0
    console().print(t("gen_wrote", lang).format(out=args.out, files=", ".join(files)), markup=False,
                    soft_wrap=True)
    data = shlex.quote(os.path.abspath(args.train_data)) if args.train_data else "/path/to/data"
    out = shlex.quote(args.out)
    if args.target == "ecs":
        console().print(t("gen_next_ecs", lang).format(out=out, data=data), soft_wrap=True, markup=False)
    else:
        console().print(t("gen_next_submit", lang).format(out=out, submit=submit), soft_wrap=True, markup=False)
    if args.target == "skypilot" and setup.choice.get("provider") == "alibaba":
        console().print(t("gen_sky_note", lang), soft_wrap=True)
    return 0


def _serving(args: argparse.Namespace, lang: str) -> int:
    from ..errors import GenerateError, ServingError
    from ..generate import generate_serving
    from ..i18n import t
    from ..generate.serving import (DEFAULT_MODEL_PATH, find_trained_model, launch_command, serving_files,
                                    trained_spec)
    from ..textsafe import shell_join
    from ..serving import serve

    trained = None
    if args.from_run:  # the model a training run wrote: its folder is what the engine loads, its config.json is read
        for flag, value in (("--model", args.model), ("--model-path", args.model_path), ("--adapter", args.adapter)):
            if value:
                raise GenerateError("gen_e_from_and", flag=flag)
        trained = find_trained_model(args.from_run)
    elif not args.model:
        raise GenerateError("gen_e_serving_no_model")
    weights = args.weights or ("fp16" if trained is not None and trained.dtype == "float16" else "bf16")
    est = serve(trained_spec(trained) if trained else args.model, gpu=args.gpu, instance=args.instance,
                gpus=_field("gpus_per_node", args.gpus_per_node, None),
                engine=args.engine, engine_version=args.engine_version, weights=weights,
                kv_cache_dtype=args.kv_cache_dtype, gpu_memory_utilization=args.gpu_memory_utilization,
                max_model_len=args.max_model_len, max_num_seqs=args.max_num_seqs,
                cuda_graphs=not args.enforce_eager, lmdeploy_backend=args.lmdeploy_backend,
                prefix_caching=args.enable_prefix_caching, mamba_ssm_cache_dtype=args.mamba_ssm_cache_dtype)
    if not est.fits:
        from ..report.serving import reason_text

        raise ServingError("sv_e_nofit", why=reason_text(est.reasons[0], lang))
    path = trained.path if trained else args.model_path or DEFAULT_MODEL_PATH
    rank = _field("lora_rank", args.lora_rank, 16) if args.adapter else None
    files = generate_serving(serving_files(est, path, args.adapter, rank, lang, trained), args.out, args.force,
                             inputs=_inputs(args))
    command = launch_command(est, path, args.adapter, rank)
    if args.json:
        print_json({"out": args.out, "files": files, "engine": est.spec.engine, "command": command,
                    "fits": est.fits})
    else:
        console().print(t("gen_wrote", lang).format(out=args.out, files=", ".join(files)), markup=False)
        console().print(shell_join(command), soft_wrap=True, markup=False)  # a command the shell reads back as is
    return 0


def _inputs(args: argparse.Namespace) -> tuple[tuple[str, str | None], ...]:
    """The paths this run reads, by flag: --out may not hold any of them."""
    return tuple((flag, getattr(args, dest, None)) for flag, dest in (
        ("--data", "train_data"), ("--plan", "plan"), ("--model", "model"), ("--model-path", "model_path"),
        ("--adapter", "adapter"), ("--from", "from_run"), ("--calibration", "calibration")))


def _check_out_dir(args: argparse.Namespace) -> None:
    """--out checked before any work: not `.`, `..`, ~ or /, not a folder holding an input, and empty unless --force
    (which then replaces only the files generate wrote there)."""
    from ..generate import check_not_empty, check_out_dir

    check_out_dir(args.out, _inputs(args))
    check_not_empty(args.out, args.force)


def _field(name: str, value, default):
    """A declared job field's value from the command line (checked), or `default` when not given."""
    from ..spec.job import BY_NAME

    return BY_NAME[name].convert(value) if value is not None else default

