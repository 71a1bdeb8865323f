"""`trainfit trace`: exact allocations of one training step of the real model code, on the CPU."""

from __future__ import annotations

import argparse
import os

from .common import (add_job_flags, add_report_flags, check_reports, write_reports, add_model_flag, console, lang_of, parse_sets, print_json, strategy_kwargs,
                     workload_kwargs)

HELP = "trace one training step of the real HF/PEFT code under FakeTensorMode (no GPU, no weights)"
EXAMPLES = """examples:
  trainfit trace --model llama-2-7b --method full --seq-len 2048 --micro-batch 1 --grad-ckpt full
  trainfit trace --model qwen2-7b --method lora --seq-len 4096 --json
  trainfit trace --model tiny-llama --method lora --full-depth      # every block, no extrapolation
  trainfit trace --model ./my-model/config.json --method lora --seq-len 1024   # any architecture transformers knows
  trainfit trace --model ./my-model --method full --seq-len 512 --json        # a model directory
"""


def add_parser(sub) -> None:
    p = sub.add_parser("trace", help=HELP, description=HELP, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_flag(p)
    p.add_argument("--gpu", "-g", default="a100-sxm4-80gb", help="GPU whose usable memory the result is set against")
    p.add_argument("--full-depth", action="store_true", help="trace every block instead of 2 and 3 (slow for 7B+)")
    p.add_argument("--case-out", metavar="FILE", default=None,
                   help="append the traced step to FILE as a validation case of the source 'trace' (memory_kind "
                        "allocated; read by validate and calibrate beside published runs)")
    add_job_flags(p)
    add_report_flags(p)
    p.set_defaults(run=run)


def _quiet_third_parties() -> None:
    """The trace runs torch, transformers, PEFT and bitsandbytes on fake tensors: their warnings about that (a CPU
    4-bit kernel not downloaded, module-tracker and backward-hook notices) say nothing about the user's job, so the
    trace's output is its own. TRAINFIT_DEBUG=1 keeps them."""
    import logging
    import warnings

    if os.environ.get("TRAINFIT_DEBUG"):
        return
    for text in ("The module hierarchy tracking", "Full backward hook is firing", "torch.utils.checkpoint"):
        warnings.filterwarnings("ignore", message=text)
    for name in ("bitsandbytes", "transformers", "peft", "accelerate", "torch.distributed"):
        logging.getLogger(name).setLevel(logging.ERROR)


def run(args: argparse.Namespace) -> int:
    from ..api import estimate, load_efficiencies
    from ..trace import compare_with_estimate

    _quiet_third_parties()

    lang = lang_of(args)
    check_reports(args)
    est = estimate(args.model, args.gpu, efficiencies=load_efficiencies(parse_sets(args.set), args.calibration),
                   **workload_kwargs(args), **strategy_kwargs(args))
    if args.case_out:
        from ..trace.case import check_traceable_case

        check_traceable_case(est)  # before the trace
    doc = compare_with_estimate(est, full=args.full_depth)
    if args.case_out:
        write_case(est, doc, args.case_out)
    doc = {"model": est.model.name, "method": est.training.method.value, "seq_len": est.training.seq_len,
           "micro_batch": est.training.micro_batch, "grad_ckpt": est.training.grad_ckpt.value, **doc}
    from ..report.html_docs import trace_doc

    if args.json:
        print_json(doc)
        write_reports(args, lambda: trace_doc(doc, lang))
        return 0
    from rich.table import Table

    from ..i18n import t as tr
    from ..i18n.notes import localize
    from ..report.words import w

    depth = (w("r_trace_blocks", lang, blocks=", ".join(map(str, doc["traced_layers"]))) if doc["extrapolated"]
             else w("r_trace_every", lang))
    table = Table(title=w("r_trace_title", lang, model=est.model.name, method=est.training.method.value, depth=depth))
    for col in ("r_trace_part", "r_trace_gib", "r_analytic_gib"):
        table.add_column(w(col, lang), justify="right" if col != "r_trace_part" else "left")
    for part in ("weights", "gradients", "optimizer", "activations", "logits", "other"):
        table.add_row(part if lang == "en" else tr(part, lang), f"{doc['memory_gib'][part]:.3f}", f"{doc['estimate']['memory_gib'].get(part, 0):.3f}")
    table.add_row(w("r_trace_total", lang), f"{doc['memory_gib']['total']:.3f}",
                  f"{doc['estimate']['allocated_gib']:.3f}")
    c = console()
    c.print(table)
    pct = doc["difference"]["percent"]
    c.print(w("r_trace_peak", lang, trace=doc["peak_moment"], analytic=doc["estimate"]["peak_phase"],
              gib=f"{doc['difference']['allocated_gib']:+.3f}", pct=f"{pct:+.2f}%" if pct is not None else "-",
              s=f"{doc['seconds']:.1f}"))
    for note in doc["notes"]:
        c.print(f"- {localize(note, lang)}", style="dim")
    moments = Table(title=w("r_moment_chart", lang))
    for col in ("r_moment", "r_traced", "r_analytic", "r_moment_names"):
        moments.add_column(w(col, lang), justify="right" if col in ("r_traced", "r_analytic") else "left")
    for m in doc["moments"]:
        moments.add_row(w(f"m_{m['moment']}", lang), f"{m['trace_gib']:.3f}", f"{m['analytic_gib']:.3f}",
                        f"{m['trace']} / {', '.join(m['analytic'])}")
    c.print(moments)
    write_reports(args, lambda: trace_doc(doc, lang))
    return 0


def write_case(est, doc: dict, path: str) -> None:
    """Append the traced step as a validation case (trace/case.py) to `path`."""
    import hashlib
    import json

    from ..errors import SpecError
    from ..spec.job import CASE, json_values
    from ..trace import one_gpu, trace_config
    from ..trace.case import trace_case

    single = one_gpu(est)
    t = single.training
    job = json.dumps(json_values(t, "training", CASE), sort_keys=True)
    digest = hashlib.sha1(f"{est.model.name}|{est.model.layers}|{job}".encode("utf-8")).hexdigest()[:8]
    case_id = (f"trace-{est.model.name}-{t.method.value}-s{t.seq_len}-mb{t.micro_batch}-{t.grad_ckpt.value}-"
               f"{digest}")
    case = trace_case(single, doc["traced_bytes"], trace_config(est).hf_config, case_id=case_id,
                      origin="trainfit trace --case-out", peak_moment=doc["peak_moment"],
                      traced_layers=tuple(doc["traced_layers"]))
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(case) + "\n")
    except OSError as exc:
        raise SpecError(f"cannot write {path}: {exc.strerror}") from None
