"""`trainfit serving` results as a JSON document and as rich tables (en / zh). Facts in, words out."""

from __future__ import annotations

from typing import Any

from ..i18n import t
from ..serving import engine_lmdeploy as lmd
from ..serving import engine_trtllm as trt
from ..units import GiB


def reason_text(reason, lang: str) -> str:
    return t(reason.key, lang).format(**reason.values)


def _load_dict(load) -> dict | None:
    if load is None:
        return None
    return {"requests_in_flight": round(load.batch, 2), "ttft_ms": round(load.ttft_s * 1e3, 2),
            "tpot_ms": round(load.tpot_s * 1e3, 3), "output_tokens_per_s": round(load.output_tokens_per_s, 1),
            "requests_per_s": round(load.requests_per_s, 4), "e2e_latency_s": round(load.e2e_s, 3),
            "queue_s": round(load.queue_s, 4), "decode_bound": load.decode_bound, "stable": load.stable,
            "capacity_requests_per_s": round(load.capacity_requests_per_s, 4),
            "ttft_p99_ms": round(load.ttft_p99_s * 1e3, 2) if load.ttft_p99_s else None}


def estimate_dict(est, alts=(), lang: str = "en") -> dict[str, Any]:
    s, e = est.spec, est.engine
    return {
        "model": est.model.name, "gpu": est.gpu.id, "instance": est.instance.key if est.instance else None,
        "engine": {"name": e.engine, "version": e.version, "memory_fraction": e.memory_fraction,
                   "block_size": e.block_size, "max_model_len": e.max_model_len, "max_num_seqs": e.max_num_seqs,
                   "max_num_batched_tokens": e.max_num_batched_tokens, "cuda_graphs": s.cuda_graphs,
                   **(trt.details(s, e, est.memory) if e.engine == "trtllm" else {}), **e.details},
        "tp": s.tp, "weights_format": s.weights, "kv_cache_dtype": s.kv_cache_dtype,
        "link": est.cluster.intra_link if s.tp > 1 else None,
        "workload": {"input_len": s.input_len, "output_len": s.output_len, "concurrency": s.concurrency,
                     "request_rate": None if s.all_at_once else s.request_rate, "all_at_once": s.all_at_once,
                     "num_prompts": getattr(est, "num_prompts", None), "kind": s.workload,
                     "mix": est.mix.summary() if getattr(est, "mix", None) else None},
        "fits": est.fits, "reasons": [{"key": r.key, **r.values, "text": reason_text(r, lang)} for r in est.reasons],
        "memory": est.memory.to_dict(),
        "speed": _load_dict(est.load),
        "decode_bandwidth_bound_tokens_per_s": round(est.bandwidth_bound_tps, 2),
        "warnings": _warnings(est, lang),
        "alternatives": [alt_dict(a, est, lang) for a in alts],
        "assumptions": [t(n[0], lang).format(**n[1]) if isinstance(n, tuple) else n for n in est.assumptions],
        "values_used": est.used,
    }


def alt_text(a, est, lang: str) -> str:
    parts = []
    c = a.change
    if "gpu" in c:
        parts.append(t("sv_alt_gpu", lang).format(gpu=c["gpu"]))
    if "weights" in c:
        parts.append(t("sv_alt_weights", lang).format(fmt=c["weights"]))
    if "kv_cache_dtype" in c:
        parts.append(t("sv_alt_kv" if c["kv_cache_dtype"] == "fp8" else "sv_alt_kv_int8", lang))
    if "max_model_len" in c:
        parts.append(t("sv_alt_len", lang).format(n=c["max_model_len"]))
    if "max_num_seqs" in c:
        parts.append(t("sv_alt_seqs", lang).format(n=c["max_num_seqs"]))
    if c.get("tp", 1) > 1:
        parts.append(t("sv_alt_tp", lang).format(tp=c["tp"], gpu=c.get("gpu", est.gpu.id)))
    ctx = c.get("max_model_len", est.memory.max_model_len)
    return t("sv_alt", lang).format(what=", ".join(parts), kv=f"{a.kv_tokens:,}", conc=a.max_concurrency, ctx=ctx)


def alt_dict(a, est, lang: str) -> dict:
    return {"change": a.change, "gpus": a.gpus, "kv_cache_tokens": a.kv_tokens,
            "max_concurrency": round(a.max_concurrency, 2), "text": alt_text(a, est, lang)}


def render_estimate(est, alts, lang: str):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from .tables import fit

    s, mem = est.spec, est.memory
    title = t("sv_title", lang).format(model=est.model.name, gpus=s.tp, gpu=est.gpu.id, tp=s.tp,
                                       engine=est.engine.engine, version=est.engine.version)
    verdict = Text(t("sv_fits", lang) if est.fits else t("sv_not_fit", lang),
                   style="bold green" if est.fits else "bold red")
    m = Table(title=t("sv_memory", lang))
    m.add_column(t("part", lang))
    m.add_column("GiB", justify="right")
    if est.engine.engine == "trtllm":
        m.add_row(*trt.budget_row(est, lambda key: t(key, lang)))
    elif est.engine.engine == "lmdeploy":
        m.add_row(*lmd.budget_row(est, lambda key: t(key, lang)))
    else:
        m.add_row(t("sv_budget", lang).format(frac=mem.fraction, total=mem.total_gpu / GiB),
                  f"{mem.total_gpu * mem.fraction / GiB:.2f}")
    m.add_row("  " + t("sv_weights", lang).format(fmt=s.weights), f"{mem.weights.total / GiB:.2f}")
    if mem.buffers:
        m.add_row("  " + t("sv_buffers", lang), f"{mem.buffers / GiB:.2f}")
    if mem.activation:
        m.add_row("  " + t("sv_activation", lang), f"{mem.activation / GiB:.2f}")
    m.add_row("  " + t("sv_non_torch", lang), f"{mem.non_torch / GiB:.2f}")
    if mem.cuda_graphs:
        m.add_row("  " + t("sv_cuda_graph", lang), f"{mem.cuda_graphs / GiB:.2f}")
    if mem.hybrid and "state_pool_gib" in mem.hybrid:  # SGLang's, TensorRT-LLM's, LMDeploy's state pool
        m.add_row("  " + t("sv_state_pool", lang).format(n=mem.hybrid["state_slots"]),
                  f"{mem.hybrid['state_pool_gib']:.2f}")
    m.add_row("  " + t("sv_kv_budget", lang), f"{mem.kv_budget / GiB:.2f}")
    m.add_row(t("sv_kv_per_token", lang), f"{mem.kv_per_token:,} B")
    m.add_row(t("sv_kv_tokens", lang), f"{mem.kv_tokens:,}")
    m.add_row(t("sv_max_conc", lang).format(n=f"{mem.max_model_len:,}"), f"{mem.max_concurrency:.2f}x")
    parts: list = [Text(title, style="bold"), verdict, fit(m)]
    for r in est.reasons:
        parts.append(Text("  - " + reason_text(r, lang), style="red"))
    if est.load:
        parts.append(fit(_speed_table(est, lang)))
        for w in _warnings(est, lang):
            parts.append(Text("  ! " + w, style="bold yellow"))
    if alts:
        parts.append(Text(t("sv_what_fits", lang), style="bold"))
        parts += [Text("  - " + alt_text(a, est, lang)) for a in alts]
    notes = [t(n[0], lang).format(**n[1]) if isinstance(n, tuple) else n for n in est.assumptions]
    if notes:
        parts.append(Text(t("sv_assumptions", lang) + ": " + "; ".join(notes), style="dim"))
    return Group(*parts)


def _warnings(est, lang: str) -> list[str]:
    load = est.load
    if load is None or load.stable:
        return []
    return [t("sv_r_unstable", lang).format(need=est.spec.request_rate, have=load.capacity_requests_per_s)
            + " — " + t("sv_unbounded", lang)]


def _speed_table(est, lang: str):
    from rich.table import Table

    s, load = est.spec, est.load
    if s.all_at_once:  # all at once (burst.py): how many
        n = len(est.mix.inputs) if est.mix is not None else getattr(est, "num_prompts", None)
        how = t("sv_all_at_once", lang).format(n=n) if n else t("sv_rate", lang).format(r=s.request_rate)
    else:
        how = (t("sv_rate", lang).format(r=s.request_rate) if s.request_rate is not None
               else t("sv_conc", lang).format(c=s.concurrency or 1))
    tab = Table(title=t("sv_speed", lang).format(inp=s.input_len, out=s.output_len, load=how))
    tab.add_column(t("part", lang))
    tab.add_column("", justify="right")
    tab.add_row(t("sv_ttft", lang), f"{load.ttft_s * 1e3:,.1f} ms")
    if load.ttft_p99_s:  # a run simulated request by request (all at once, or rounds of a fixed concurrency)
        tab.add_row(t("sv_ttft_p99", lang), f"{load.ttft_p99_s * 1e3:,.1f} ms")
    tab.add_row(t("sv_tpot", lang), f"{load.tpot_s * 1e3:,.2f} ms")
    tab.add_row(t("sv_out_tps", lang), f"{load.output_tokens_per_s:,.1f}")
    tab.add_row(t("sv_req_s", lang), f"{load.requests_per_s:,.3f}")
    tab.add_row(t("sv_running", lang), f"{load.batch:,.1f}")
    tab.add_row(t("sv_decode_bound", lang), t("compute" if load.decode_bound == "compute" else "memory", lang))
    tab.add_row(t("sv_bw_bound", lang), f"{est.bandwidth_bound_tps:,.1f}")
    if getattr(est, "mix", None):
        x = est.mix.summary()
        tab.caption = t("sv_mix", lang).format(kind=x["kind"], n=x["requests"], mi=x["input"]["mean"],
                                               i50=x["input"]["p50"], i99=x["input"]["p99"], mo=x["output"]["mean"],
                                               o50=x["output"]["p50"], o99=x["output"]["p99"])
    return tab


def option_dict(o, lang: str = "en") -> dict:
    load = o.est.load
    return {"gpu": o.gpu, "instance": o.instance.key if o.instance else None, "tp": o.tp,
            "weights_format": o.est.spec.weights, "replicas_per_instance": o.replicas, "instances": o.instances,
            "fits": o.est.fits, "reasons": [reason_text(r, lang) for r in o.est.reasons],
            "kv_cache_tokens": o.est.memory.kv_tokens, "max_concurrency": round(o.est.memory.max_concurrency, 2),
            "output_tokens_per_s": round(o.output_tokens_per_s, 1),
            "ttft_ms": round(load.ttft_s * 1e3, 2) if load else None,
            "tpot_ms": round(load.tpot_s * 1e3, 3) if load else None,
            "cost_per_hour": _r(o.cost_per_hour), "cost_per_m_output_tokens": _r(o.cost_per_m_output),
            "currency": o.price.currency if o.price else None, "price_date": o.price.price_date if o.price else None,
            "price_region": o.price.region if o.price else None}


def _r(x):
    return None if x is None else round(x, 4)


def render_options(title: str, options, lang: str, footer: str | None = None):
    from rich.table import Table

    tab = Table(title=title)
    for col in ("gpu", "sv_instance", "TP", "sv_h_setup", "sv_h_kv", "sv_h_tps", "sv_h_ttft", "sv_h_tpot",
                "sv_h_cost_h", "sv_h_cost_m"):
        # names and numbers stay whole; the setup (or why it does not fit) and a note in place of an instance
        # ("no public price ...") may wrap at spaces, never inside a word
        tab.add_column(t(col, lang) if col.startswith(("sv_", "gpu")) else col, overflow="fold",
                       no_wrap=col not in ("sv_h_setup", "sv_instance"),
                       justify="left" if col in ("gpu", "sv_instance", "sv_h_setup") else "right")
    for o in options:
        d = option_dict(o, lang)
        cur = "¥" if d["currency"] == "CNY" else "$"
        conc = o.est.spec.concurrency or 1
        setting = f"{d['weights_format']} c{conc} x{d['replicas_per_instance']}" + (
            f" n{d['instances']}" if d["instances"] > 1 else "")
        if not d["fits"]:
            setting = "; ".join(d["reasons"])
        inst = d["instance"].split("/", 1)[-1] if d["instance"] else t("no_alibaba_price", lang)
        tab.add_row(d["gpu"], inst, str(d["tp"]), setting,
                    f"{d['kv_cache_tokens']:,}", f"{d['output_tokens_per_s']:,.0f}",
                    "-" if d["ttft_ms"] is None else f"{d['ttft_ms']:,.0f} ms",
                    "-" if d["tpot_ms"] is None else f"{d['tpot_ms']:,.1f} ms",
                    "-" if d["cost_per_hour"] is None else f"{cur}{d['cost_per_hour']:,.2f}",
                    "-" if d["cost_per_m_output_tokens"] is None else f"{cur}{d['cost_per_m_output_tokens']:,.3f}")
    tab.caption = (footer + " · " if footer else "") + t("sv_legend", lang)
    from .tables import fit

    return fit(tab, keys=1)
