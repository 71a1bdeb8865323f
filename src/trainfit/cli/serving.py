"""`trainfit serving`: serve a (trained) model with vLLM / SGLang: memory, KV capacity, latency, throughput, cost."""

from __future__ import annotations

import argparse
import os

from ..errors import ServingError, did_you_mean
from .common import add_model_flag, add_output_flags, add_report_flags, check_reports, write_reports, console, lang_of, parse_sets, print_json

HELP = "serving after training: KV-cache capacity, TTFT/TPOT, tokens/s and cost with vLLM or SGLang"
EXAMPLES = """examples:
  trainfit serving --model qwen2-7b --gpu a10
  trainfit serving --model qwen2-7b --gpu a10 --concurrency 16 --input-len 1024 --output-len 256 --json
  trainfit serving --model llama-2-70b --gpu a10                       # does not fit: lists what would
  trainfit serving --model llama-3-70b --instance ecs.gn7i-4x --gpus 4 --weights awq
  trainfit serving --model qwen2-7b --compare a10,l20,a100-sxm4-80gb,h20 --concurrency 32
  trainfit serving --model qwen2-7b --target-tokens-per-s 5000 --max-tpot-ms 50 --formats bf16,fp8,awq
"""


def add_parser(sub) -> None:
    p = sub.add_parser("serving", help=HELP, description=HELP, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_flag(p)
    p.add_argument("--gpu", "-g", default=None, help="GPU name (trainfit gpus)")
    p.add_argument("--instance", default=None, help="cloud instance type: GPU, count and links from the catalog")
    p.add_argument("--gpus", type=int, default=None, help="GPUs in tensor parallel (default 1; an instance: all)")
    e = p.add_argument_group("engine")
    e.add_argument("--engine", default="vllm", help="vllm | sglang | trtllm (TensorRT-LLM; alias tensorrt-llm) "
                   "| lmdeploy (default vllm)")
    e.add_argument("--engine-version", default="", help="engine version whose behaviour to model (default: vllm "
                   "0.10.1, sglang 0.4.6, trtllm 1.0.0)")
    e.add_argument("--weights", default="bf16", help="bf16 | fp16 | fp8 | int8 | awq | gptq (default bf16)")
    e.add_argument("--kv-cache-dtype", default="auto", help="auto | fp8 (default auto = the model's dtype)")
    e.add_argument("--gpu-memory-utilization", type=float, default=None,
                   help="vLLM gpu_memory_utilization (default 0.9) / SGLang mem_fraction_static (default by TP) / "
                   "TensorRT-LLM kv_cache_free_gpu_memory_fraction (default 0.9 of the free memory)")
    e.add_argument("--max-model-len", type=int, default=None, help="context length (default 8192, capped at the "
                   "model's)")
    e.add_argument("--max-num-seqs", type=int, default=None, help="requests batched together (engine default)")
    e.add_argument("--max-num-batched-tokens", type=int, default=None, help="tokens per engine step (engine "
                   "default)")
    e.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs (vLLM --enforce-eager)")
    e.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None,
                   help="prefix caching (vLLM; SGLang's radix cache, --no-: --disable-radix-cache). Default: the "
                   "engine version's. A hybrid's states take two pages a request with it on vLLM (on by default for "
                   "hybrids from 0.28); on SGLang they take 0.9/1.9 of the KV memory with it, one per running "
                   "request without")
    e.add_argument("--mamba-ssm-cache-dtype", default="auto", help="auto | float32 | float16 | bfloat16: a hybrid's "
                   "recurrent states (vLLM --mamba-ssm-cache-dtype, SGLang --mamba-ssm-dtype); auto = the config's, "
                   "else the model dtype (vLLM) or float32 (SGLang)")
    e.add_argument("--lmdeploy-backend", default=None, help="LMDeploy: turbomind | pytorch (default turbomind, its "
                   "CLI's default); --kv-cache-dtype int8 | int4 is its --quant-policy 8 | 4")
    w = p.add_argument_group("workload")
    w.add_argument("--input-len", type=int, default=None, help="prompt tokens per request, the mean for a mix "
                   "(default 512; sharegpt: 230)")
    w.add_argument("--output-len", type=int, default=None, help="output tokens per request, the mean for a mix "
                   "(default 256; sharegpt: 203)")
    w.add_argument("--workload", default="fixed", metavar="MIX", help="request lengths: fixed | uniform (vLLM "
                   "random dataset) | sharegpt | FILE (CSV/JSONL of input,output lengths); default fixed")
    w.add_argument("--range-ratio", type=float, default=0.0, help="uniform: lengths in [len*(1-r), len*(1+r)] "
                   "(vLLM --random-range-ratio; default 0)")
    w.add_argument("--concurrency", type=int, default=None, help="requests in flight (closed loop; default 1)")
    w.add_argument("--request-rate", type=float, default=None, help="requests per second (open loop, Poisson); "
                   "inf with --num-prompts: all at once, as benchmarks send them")
    w.add_argument("--num-prompts", type=int, default=None, metavar="N",
                   help="requests the run sends in all (a benchmark's --num-prompts; needed with --request-rate inf)")
    s = p.add_argument_group("comparison and search")
    s.add_argument("--compare", default=None, metavar="GPUS", help="comma-separated GPUs: the smallest TP that "
                   "fits on each, priced by its cheapest instance")
    s.add_argument("--target-tokens-per-s", type=float, default=None, help="search: output tokens/s to serve")
    s.add_argument("--max-ttft-ms", type=float, default=None, help="search: mean time to first token limit")
    s.add_argument("--max-tpot-ms", type=float, default=None, help="search: mean time per output token limit")
    s.add_argument("--formats", default=None, help="search: weight formats to try, e.g. bf16,fp8,awq "
                   "(default: --weights)")
    s.add_argument("--provider", default="alibaba", help="search/compare prices: alibaba | aws | gcp | azure "
                   "(costs compare within one currency; default alibaba, CNY)")
    s.add_argument("--top", type=int, default=10, help="search: options to show (default 10)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="override a named serving value (catalog/data/serving.yaml); repeatable")
    add_output_flags(p)
    add_report_flags(p)
    p.set_defaults(run=run)


def _spec_kwargs(args: argparse.Namespace) -> dict:
    return dict(engine=args.engine, engine_version=args.engine_version, weights=args.weights,
                kv_cache_dtype=args.kv_cache_dtype, gpu_memory_utilization=args.gpu_memory_utilization,
                max_model_len=args.max_model_len, max_num_seqs=args.max_num_seqs,
                max_num_batched_tokens=args.max_num_batched_tokens, concurrency=args.concurrency,
                request_rate=args.request_rate, cuda_graphs=not args.enforce_eager,
                lmdeploy_backend=args.lmdeploy_backend, prefix_caching=args.enable_prefix_caching,
                mamba_ssm_cache_dtype=args.mamba_ssm_cache_dtype, **_mix_kwargs(args))


def _mix_kwargs(args: argparse.Namespace) -> dict:
    """--workload / --range-ratio / lengths: a name, or a file path (file:PATH); sharegpt without lengths takes
    the published ShareGPT_V3 means (catalog/data/sharegpt_lengths.yaml)."""
    w = str(args.workload or "fixed").strip()
    names = ("fixed", "uniform", "sharegpt")
    if w.lower() not in names and not w.startswith("file:"):
        if not os.path.exists(w) and did_you_mean(w, names):  # a mistyped name, not a file of lengths
            raise ServingError("sv_e_workload_name", value=w, dym=did_you_mean(w, names))
        w = "file:" + w
    inp, out = 512, 256
    if w.lower() == "sharegpt":
        from ..serving.workload import sharegpt_shape

        inp, out = (round(sharegpt_shape()[k]) for k in ("mean_input", "mean_output"))
    return dict(workload=w, range_ratio=args.range_ratio, input_len=args.input_len or inp,
                output_len=args.output_len or out)


def run(args: argparse.Namespace) -> int:
    # errors (ServingError by message key, SpecError) are worded by cli/main.py in the chosen language
    return _run(args, lang_of(args))


def _run(args: argparse.Namespace, lang: str) -> int:
    check_reports(args)
    overrides = parse_sets(args.set)
    kwargs = _spec_kwargs(args)
    _check_burst(args)
    if args.compare:
        doc, view = _compare(args.model, args.compare, kwargs, args.gpus, overrides, args.provider, lang)
    elif args.target_tokens_per_s or args.max_ttft_ms or args.max_tpot_ms:
        if args.gpu or args.instance:
            from ..errors import ServingError

            raise ServingError("sv_e_both")
        doc, view = _search(args, kwargs, overrides, lang)
    else:
        doc, view = _estimate(args.model, args.gpu, args.instance, args.gpus, kwargs, overrides, lang,
                              args.num_prompts)
    if args.json:
        print_json(doc)
    else:
        console().print(view)
    from ..report.html_docs import serving_doc

    write_reports(args, lambda: serving_doc(doc, lang))
    return 0


def _check_burst(args: argparse.Namespace) -> None:
    """--request-rate inf needs --num-prompts (the run is simulated request by request), and only a single estimate
    takes it; --num-prompts is a positive count."""
    import math

    n = args.num_prompts
    if n is not None and (n < 1 or n > MAX_NUM_PROMPTS):
        raise ServingError("sv_e_num_prompts", value=n, max=MAX_NUM_PROMPTS)
    inf = args.request_rate is not None and math.isinf(args.request_rate)
    if inf and (n is None or args.compare or args.target_tokens_per_s or args.max_ttft_ms or args.max_tpot_ms):
        raise ServingError("sv_e_burst")


MAX_NUM_PROMPTS = 1_000_000  # cohorts of equal requests keep even this fast; a mix draws at most workload.MAX_PROMPTS
PROVIDERS = ("alibaba", "aws", "gcp", "azure")
FORMATS = ("bf16", "fp16", "fp8", "int8", "awq", "gptq")


def _estimate(model: str, gpu, instance, gpus, spec: dict, overrides, lang: str, num_prompts: int | None = None):
    from ..report.serving import estimate_dict, render_estimate
    from ..serving import serve
    from ..serving.search import alternatives

    est = serve(model, gpu=gpu, instance=instance, gpus=gpus, overrides=overrides, num_prompts=num_prompts, **spec)
    alts = alternatives(est, overrides) if not est.fits else []
    return estimate_dict(est, alts, lang), render_estimate(est, alts, lang)


def _compare(model: str, gpus_csv: str, spec: dict, gpus, overrides, provider: str, lang: str):
    from ..catalog import resolve_model
    from ..i18n import t
    from ..report.serving import option_dict, render_options
    from ..serving.search import compare
    from ..serving.spec import ServingSpec, choice

    provider = choice("provider", provider, PROVIDERS)
    m = resolve_model(model)
    names = [g.strip() for g in gpus_csv.split(",") if g.strip()]
    rows = compare(m, names, ServingSpec(tp=gpus or 1, **spec), overrides, (provider,))
    doc = {"model": m.name, "provider": provider, "rows": [option_dict(o, lang) for o in rows],
           "mix": next((o.est.mix.summary() for o in rows if getattr(o.est, "mix", None)), None)}
    return doc, render_options(t("sv_compare", lang).format(model=m.name), rows, lang)


def _search(args: argparse.Namespace, spec: dict, overrides, lang: str):
    from ..catalog import resolve_model
    from ..errors import ServingError
    from ..i18n import t
    from ..report.serving import option_dict, render_options
    from ..serving.search import Target, search
    from ..serving.spec import ServingSpec, choice

    provider = choice("provider", args.provider, PROVIDERS)
    for flag, value in (("target-tokens-per-s", args.target_tokens_per_s), ("max-ttft-ms", args.max_ttft_ms),
                        ("max-tpot-ms", args.max_tpot_ms), ("top", args.top)):
        if value is not None and value <= 0:
            raise ServingError("sv_e_positive", flag=flag, value=value)
    m = resolve_model(args.model)
    base = ServingSpec(**spec)
    formats = tuple(choice("formats", f, FORMATS) for f in (args.formats or base.weights).split(",") if f.strip())
    target = Target(args.target_tokens_per_s, args.max_ttft_ms, args.max_tpot_ms)
    options, tried = search(m, base, target, overrides, (provider,), formats)
    doc = {"model": m.name, "provider": provider, "target": vars(target), "setups_tried": tried,
           "options": [option_dict(o, lang) for o in options[:args.top]],
           "mix": next((o.est.mix.summary() for o in options if getattr(o.est, "mix", None)), None)}
    if not options:
        from rich.text import Text

        return doc, Text(t("sv_none_meets", lang).format(n=tried), style="bold red")
    return doc, render_options(t("sv_ranked", lang), options[:args.top], lang, f"{t('searched', lang)}: {tried}")
