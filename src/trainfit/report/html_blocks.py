"""Report documents (report/document.py blocks + report/svg.py charts) for estimate, compare and plan."""

from __future__ import annotations

from ..advise import overflow_terms
from ..estimate.memory import PARTS
from ..i18n import t as tr
from ..i18n.notes import localize
from ..units import GiB
from . import svg
from .document import Doc
from .words import w


def memory_chart(est, lang: str) -> str:
    """Stacked bars of memory per GPU by part for each phase of the step, with the usable-memory line."""
    mem = est.memory
    overheads: dict[str, float] = {}
    for key, value in mem.overheads:
        part = key.split("/", 1)[0]
        overheads[part] = overheads.get(part, 0.0) + value
    series = []
    for part in PARTS:
        vals = [(ph.parts()[part] + overheads.get(part, 0.0)) / GiB for ph in mem.phases]
        if any(v > 0 for v in vals):
            series.append((tr(part, lang), vals))
    return svg.stacked_bars(w("r_mem_chart", lang), [phase_name(ph.name, lang) for ph in mem.phases], series, "GiB",
                            (tr("usable", lang), mem.usable / GiB))


def phase_name(name: str, lang: str) -> str:
    """A moment of the step (forward_end, ...) in words, or its name where it has none."""
    text = tr("phase_" + name, lang)
    return name if text == "phase_" + name else text


def estimate_doc(est, alternatives, lang: str) -> Doc:
    mem, s, t = est.memory, est.strategy, est.training
    title = (f"{est.model.name} · {t.method.value} · {t.task.value} · seq {t.seq_len} × mb {t.micro_batch} · "
             f"{est.gpu.name} · {s.label()}")
    doc = Doc(f"{w('r_estimate', lang)}: {title}", lang)
    verdict = w("r_verdict_fits" if mem.fits else "r_verdict_not", lang, used=mem.device / GiB,
                usable=mem.usable / GiB)
    doc.p(verdict, "ok verdict" if mem.fits else "bad verdict")
    doc.p(f"{tr('params', lang)}: {est.split.total:,} · {tr('trainable', lang)}: {est.split.trainable:,}")
    doc.h(tr("memory_per_gpu", lang) + f" ({tr('peak_phase', lang)} {phase_name(mem.peak_phase, lang)})")
    doc.chart(memory_chart(est, lang))
    doc.p(w("r_phase_note", lang), "dim chart-note")
    doc.table([tr("part", lang), "GiB"], [[tr(p, lang), f"{mem.parts[p] / GiB:.2f}"] for p in PARTS]
              + [[tr("total", lang), f"{mem.device / GiB:.2f}"], [tr("usable", lang), f"{mem.usable / GiB:.2f}"]])
    doc.h(tr("speed", lang))
    doc.table(["", w("r_value", lang)], [
        [tr("step_time", lang), f"{est.step_time_s:.3f} s"], [tr("tokens_per_s", lang), f"{est.tokens_per_s:,.0f}"],
        [tr("tokens_per_s_per_gpu", lang), f"{est.tokens_per_s_per_gpu:,.0f}"], [tr("mfu", lang), f"{est.mfu:.1%}"],
        [tr("bottleneck", lang), tr(est.bottleneck, lang)]])
    parts = [(k, v) for k, v in sorted(est.time.parts.items()) if v > 0]
    if parts:
        doc.chart(svg.hbars(w("r_time_chart", lang), [k for k, _ in parts], [v for _, v in parts],
                            w("r_seconds", lang), "{:.3f}"))
    if not mem.fits:
        doc.items([localize(x, lang) for x in overflow_terms(est)])
    if alternatives:  # it does not fit, or fits above the out-of-memory risk plan and compare accept
        doc.h(tr("what_fits", lang))
        doc.table([w("r_change", lang), "GiB", "tokens/s"],
                  [[localize(a.change, lang), f"{a.estimate.memory.device / GiB:.1f}",
                    f"{a.estimate.tokens_per_s:,.0f}"] for a in alternatives])
    if est.warnings:
        doc.h(tr("warnings", lang)).items([localize(x, lang) for x in est.warnings])
    doc.h(tr("assumptions", lang)).items([localize(x, lang) for x in est.assumptions])
    effs = ", ".join(f"{k}={v['value']:g}" for k, v in sorted(est.efficiencies.items()))
    doc.p(f"{tr('efficiencies', lang)}: {effs}", "dim")
    return doc


def _row_label(d) -> str:
    where = d["instance"].removeprefix("ecs.") if d.get("instance") else "—"
    used = f" {d['gpus_used']}" if d.get("gpus_used") else ""
    return f"{d['gpu']} · {where}{used}"


def compare_doc(model: str, rows, lang: str) -> Doc:
    doc = Doc(f"{w('r_compare', lang)}: {model}", lang)
    dicts = [r.to_dict() for r in rows]
    labels = [_row_label(d) for d in dicts]
    doc.chart(svg.hbars(w("r_tps_chart", lang), labels,
                        [d.get("tokens_per_s_per_gpu") if d["fits"] else None for d in dicts], "tokens/s"))
    by_cur: dict[str, list[tuple[str, float | None]]] = {}
    for d, label in zip(dicts, labels):
        c = d["alibaba"] or d["cheapest_other"]
        if c:
            by_cur.setdefault(c["currency"], []).append((label, c["cost_per_billion_tokens"]))
    for cur in sorted(by_cur):
        items = by_cur[cur]
        doc.chart(svg.hbars(w("r_cost_chart", lang, cur=cur), [a for a, _ in items], [b for _, b in items], cur))
    head = [tr("gpu", lang), tr("fits", lang), "GiB", "tokens/s", "MFU", tr("hours_per_b", lang),
            tr("instance_col", lang), "/GPU-h", "/1B"]
    table = []
    for d in dicts:
        c = d["alibaba"] or d["cheapest_other"]
        table.append([d["gpu"], tr("yes", lang) if d["fits"] else tr("no", lang),
                      f"{d['memory_gib_total']:.1f}" if "memory_gib_total" in d else "—",
                      f"{d['tokens_per_s']:,.0f}" if d["fits"] else "—", f"{d['mfu']:.0%}" if d["fits"] else "—",
                      f"{d['hours_per_billion_tokens']:,.1f}" if d["hours_per_billion_tokens"] else "—",
                      c["instance_type"] if c else (d.get("unpriced") or d.get("error") or "—"),
                      f"{c['price_per_gpu_hour']:,.2f} {c['currency']}" if c else "—",
                      f"{c['cost_per_billion_tokens']:,.0f} {c['currency']}" if c else "—"])
    doc.h(w("r_details", lang)).table(head, table)
    from .compare import STALE_DAYS

    doc.items([tr("compare_note_cost", lang), tr("compare_note_stale", lang).format(days=STALE_DAYS),
               tr("compare_note_hours", lang)])
    return doc


def plan_chart(plan, lang: str) -> str:
    """Cost-time scatter of every layout that fits, the Pareto front joined, the recommendation marked."""
    from ..plan import best_per_layout

    layouts = best_per_layout(plan.result.fitting, "cheapest")
    front = {id(c) for c in plan.pareto}
    best = plan.recommendations[0] if plan.recommendations else None
    points = []
    for c in layouts:
        g = 2 if c is best else 1 if id(c) in front else 0
        tip = (f"{c.offer.instance.instance_type} ×{c.estimate.strategy.nodes} · {c.estimate.training.method.value}"
               f" · {c.hours:,.1f} h · {c.cost:,.0f} {plan.currency}")
        points.append((c.hours, c.cost, g, tip))
    if best is not None and all(c is not best for c in layouts):
        points.append((best.hours, best.cost, 2, f"{best.offer.instance.instance_type} {best.hours:,.1f} h"))
    line = [(c.hours, c.cost) for c in sorted(plan.pareto, key=lambda c: c.hours)]
    return svg.scatter(w("r_scatter", lang), points, w("r_hours", lang), w("r_cost_cur", lang, cur=plan.currency),
                       [w("r_candidate", lang), w("r_front", lang), w("r_recommended", lang)], line, log=True)


def plan_doc(plan, lang: str) -> Doc:
    from .plan import _ram_cell, _settings, _where, constraint_text

    req, wl = plan.request, plan.workload
    doc = Doc(f"{w('r_plan', lang)}: {plan.model.name} · {wl.task.value} · "
              f"{wl.processed_tokens / 1e9:,.2f}B tokens", lang)
    if plan.result.fitting:
        doc.chart(plan_chart(plan, lang))
        doc.p(w("r_scatter_note", lang), "dim chart-note")
    if plan.recommendations:
        doc.h(tr("recommendations", lang))
        doc.table(["#", tr("instance_col", lang), tr("settings", lang), "GiB", tr("host_ram_col", lang), "tok/s",
                   tr("hours", lang), tr("cost", lang)],
                  [[i + 1, _where(c), _settings(c), f"{c.estimate.memory.device / GiB:,.1f}", _ram_cell(c),
                    f"{c.estimate.tokens_per_s:,.0f}", f"{c.hours:,.1f}", f"{c.cost:,.0f} {plan.currency}"]
                   for i, c in enumerate(plan.recommendations)])
        for i, lines in enumerate(plan.why[:3]):
            doc.p(f"#{i + 1} {tr('why', lang)}:").items([localize(x, lang) for x in lines])
    else:
        b = plan.binding or {}
        doc.p(f"{tr('no_plan', lang)} ({tr('binding', lang)}: {constraint_text(b.get('constraint'), lang)})", "bad")
        doc.p(localize(b.get("explanation", ""), lang))
        doc.items([tr("relax", lang) + ": " + localize(x, lang) for x in b.get("relax", [])])
    if plan.pareto:
        doc.h(tr("pareto", lang)).table([tr("instance_col", lang), tr("settings", lang), tr("hours", lang),
                                         tr("cost", lang)],
                                        [[_where(c), _settings(c), f"{c.hours:,.1f}", f"{c.cost:,.0f}"]
                                         for c in plan.pareto[:12]])
    if plan.excluded:
        doc.h(tr("excluded", lang)).items([f"{g}: {localize(r, lang)}" for g, r in plan.excluded.items()])
    from .plan import plan_dict

    doc.h(tr("assumptions", lang)).items([localize(x, lang) for x in plan_dict(plan)["assumptions"]])
    return doc
