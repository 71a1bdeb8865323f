"""Report documents for trace, validate and serving, built from the JSON documents those commands print."""

from __future__ import annotations

from typing import Any

from ..estimate.memory import PARTS
from ..i18n import t as tr
from ..i18n.notes import localize
from . import svg
from .document import Doc
from .words import w

VALIDATE_METRICS = (("tokens_per_s_per_gpu", "r_v_tps"), ("step_time_s", "r_v_step"),
                    ("peak_memory_gib", "r_v_memory"), ("mfu", "r_v_mfu"))  # (key, word of report/words.py)


def trace_doc(doc: dict[str, Any], lang: str) -> Doc:
    """Trace vs analytic per moment of the step (`doc["moments"]`, paired by trainfit.trace.paired_moments) as a
    grouped bar plot and a table, then both at the peak by part."""
    d = Doc(f"{w('r_trace', lang)}: {doc['model']} · {doc['method']} · seq {doc['seq_len']} × mb {doc['micro_batch']}"
            f" · ckpt {doc['grad_ckpt']}", lang)
    est = doc["estimate"]
    moments = doc.get("moments") or []
    if moments:
        labels = [w(f"m_{m['moment']}", lang) for m in moments]
        d.chart(svg.grouped_bars(w("r_moment_chart", lang), labels,
                                 [(w("r_traced", lang), [m["trace_gib"] for m in moments]),
                                  (w("r_analytic", lang), [m["analytic_gib"] for m in moments])], "GiB"))
        d.table([w("r_moment", lang), w("r_traced", lang), w("r_analytic", lang), w("r_diff", lang),
                 w("r_moment_names", lang)],
                [[label, f"{m['trace_gib']:.3f}", f"{m['analytic_gib']:.3f}",
                  f"{m['analytic_gib'] - m['trace_gib']:+.3f}", f"{m['trace']} / {', '.join(m['analytic'])}"]
                 for label, m in zip(labels, moments)])
    d.chart(svg.grouped_bars(w("r_trace_chart", lang), [tr(p, lang) for p in PARTS],
                             [(w("r_traced", lang), [doc["memory_gib"].get(p, 0.0) for p in PARTS]),
                              (w("r_analytic", lang), [est["memory_gib"].get(p, 0.0) for p in PARTS])], "GiB"))
    d.table([tr("part", lang), w("r_traced", lang), w("r_analytic", lang)],
            [[tr(p, lang), f"{doc['memory_gib'].get(p, 0):.3f}", f"{est['memory_gib'].get(p, 0):.3f}"] for p in PARTS]
            + [[tr("total", lang), f"{doc['memory_gib']['total']:.3f}", f"{est['allocated_gib']:.3f}"]])
    diff = doc["difference"]
    d.p(f"{tr('peak_phase', lang)}: {doc['peak_moment']} ({w('r_analytic', lang)}: {est['peak_phase']}); "
        f"{w('r_analytic', lang)} − {w('r_traced', lang)} = {diff['allocated_gib']:+.3f} GiB"
        + (f" ({diff['percent']:+.2f}%)" if diff.get("percent") is not None else ""))
    d.items([localize(n, lang) for n in doc.get("notes") or []])
    return d


def validate_doc(doc: dict[str, Any], lang: str) -> Doc:
    d = Doc(f"{w('r_validate', lang)}: {doc.get('predicted', 0)} / {doc.get('cases', 0)}", lang)
    all_rows = doc.get("rows") or []
    summary = []
    charts = [(key, w(word, lang), [r for r in all_rows if r.get("truth") != "trace"]) for key, word in VALIDATE_METRICS]
    # traced steps (the source "trace": allocated bytes) get a chart of their own, beside the measured runs'
    charts.append(("peak_memory_gib", w("r_v_trace", lang),
                   [r for r in all_rows if r.get("truth") == "trace"]))
    for key, label, rows in charts:
        pts = [(r["measured"][key], r["predicted"][key], 1, f"{r['id']}: {r['predicted'][key]:.4g} vs "
                f"{r['measured'][key]:.4g}") for r in rows
               if (r.get("measured") or {}).get(key) is not None and (r.get("predicted") or {}).get(key) is not None]
        if not pts:
            continue
        d.chart(svg.scatter(w("r_val_chart", lang, metric=label), pts, f"{w('r_measured', lang)}: {label}",
                            f"{w('r_predicted', lang)}", ["", w("r_case", lang)], diagonal=True))
        summary.append(f"{label}: n = {len(pts)}")
    for metric in ("throughput", "memory", "mfu"):
        m = doc.get(metric) or {}
        if m.get("n"):
            summary.append(f"{w('r_m_' + metric, lang)}: n = {m['n']}, MAPE {m['mape']:.1%}, "
                           f"{w('r_v_max', lang)} {m['max_ape']:.1%}")
    t = (doc.get("trace") or {}).get("memory") or {}
    if t.get("n"):
        summary.append(f"{w('r_m_trace', lang)}: n = {t['n']}, MAPE {t['mape']:.1%}, {w('r_v_max', lang)} "
                       f"{t['max_ape']:.1%}")
    d.items(summary)
    if doc.get("serving"):
        d.p(w("r_v_serving", lang, n=len(doc["serving"].get("rows") or [])))
    d.items([localize(n if isinstance(n, str) else str(n), lang) for n in doc.get("notes") or []])  # a Msg stays one
    return d


def serving_doc(doc: dict[str, Any], lang: str) -> Doc:
    d = Doc(f"{w('r_serving', lang)}: {doc.get('model')}", lang)
    if "memory" in doc:
        m = doc["memory"]
        parts = (("sv_weights", m["weights_gib"]), ("sv_buffers", m["weight_buffers_gib"]),
                 ("sv_activation", m["activation_peak_gib"]), ("sv_non_torch", m["non_torch_gib"]),
                 ("sv_cuda_graph", m["cuda_graphs_gib"]),
                 *((("sv_state_pool", m["hybrid"]["state_pool_gib"]),) if "state_pool_gib" in m.get("hybrid", {})
                   else ()), ("sv_kv_budget", m["kv_cache_gib"]))
        slots = str(m.get("hybrid", {}).get("state_slots", ""))
        names = [tr(k, lang).replace("{fmt}", str(doc.get("weights_format"))).replace("{n}", slots) for k, _ in parts]
        budget = m["total_gpu_gib"] * m["memory_fraction"]
        d.chart(svg.stacked_bars(w("r_sv_mem", lang), [str(doc.get("gpu"))], [(n, [v]) for n, (_, v) in
                                                                                zip(names, parts)], "GiB",
                                 (tr("sv_budget", lang).format(frac=m["memory_fraction"], total=m["total_gpu_gib"]),
                                  budget)))
        d.table([tr("part", lang), "GiB"], [[n, f"{v:.2f}"] for n, (_, v) in zip(names, parts)]
                + [[tr("sv_kv_tokens", lang), f"{m['kv_cache_tokens']:,}"]])
        d.p(tr("sv_fits", lang) if doc.get("fits") else tr("sv_not_fit", lang), "ok" if doc.get("fits") else "bad")
        d.items([localize(str(x), lang) for x in doc.get("warnings") or []])
        d.h(tr("assumptions", lang)).items([localize(str(a), lang) for a in doc.get("assumptions") or []])
    rows = doc.get("rows") or doc.get("options") or []
    if rows:
        labels = [f"{r.get('gpu')} · {str(r.get('instance') or '').split('/')[-1].removeprefix('ecs.')}" for r in rows]
        d.chart(svg.hbars(tr("sv_h_tps", lang), labels, [r.get("output_tokens_per_s") if r.get("fits") else None
                                                          for r in rows], "tokens/s"))
        by_cur: dict[str, list] = {}
        for label, r in zip(labels, rows):
            if r.get("fits") and r.get("cost_per_m_output_tokens") is not None:
                by_cur.setdefault(r.get("currency") or "", []).append((label, r["cost_per_m_output_tokens"]))
        for cur in sorted(by_cur):
            d.chart(svg.hbars(f"{tr('sv_cost_m', lang)} ({cur})", [a for a, _ in by_cur[cur]],
                              [b for _, b in by_cur[cur]], cur, "{:,.2f}"))
        keys = [k for k in ("gpu", "instance", "tp", "fits", "kv_cache_tokens", "output_tokens_per_s", "ttft_ms",
                            "tpot_ms", "cost_per_hour", "cost_per_m_output_tokens", "currency") if k in rows[0]]
        d.table([w("r_sv_col_" + k, lang) for k in keys],
                [[_cell(r.get(k), lang) for k in keys] for r in rows])
    return d


def _cell(value, lang: str):
    """A value of a serving row as the table shows it: — for none, and in Chinese 是/否 for booleans."""
    if value is None:
        return "—"
    if isinstance(value, bool) and lang != "en":
        return tr("yes", lang) if value else tr("no", lang)
    return value
