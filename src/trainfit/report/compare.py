"""Rendering of `compare` rows."""

from __future__ import annotations

from typing import Any

from ..i18n import t as tr


def compare_dict(model: str, rows) -> dict[str, Any]:
    return {"model": model, "rows": [r.to_dict() for r in rows],
            "notes": ["cost = hours x pay-as-you-go price of the cheapest instance with enough of that GPU "
                      "(the whole instance is paid); prices are catalog snapshots, see price_date",
                      "hours per billion tokens at the estimated throughput, no start-up or checkpoint time"]}


def render_compare(model: str, rows, lang: str):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"{model}", pad_edge=False)
    cols = (tr("gpu", lang), tr("fits", lang), "GiB", "tokens/s", "MFU", tr("hours_per_b", lang), "CNY/1B",
            tr("instance", lang), "USD/1B")
    for col in cols:
        table.add_column(col, justify="left" if col in (tr("gpu", lang), tr("instance", lang)) else "right",
                         overflow="fold")
    footnotes: list[str] = []
    for r in rows:
        d = r.to_dict()
        if r.estimate is None:
            table.add_row(r.gpu.id, "—", "", "", "", "", "", r.error or "", "")
            continue
        e = r.estimate
        mark = ""
        if r.changes:
            footnotes.append(f"[{len(footnotes) + 1}] {r.gpu.id}: " + "; ".join(r.changes))
            mark = f" [{len(footnotes)}]"
        ali = d["alibaba"]
        if ali:
            inst = ali["instance_type"].replace("ecs.", "") + ("*" if ali["price_unverified"] or ali["gpu_inferred"]
                                                               else "")
        else:
            inst = tr("no_alibaba_price", lang) if r.alibaba_instances else tr("not_on_alibaba", lang)
        hours = d["hours_per_billion_tokens"]
        table.add_row(r.gpu.id + mark, "yes" if e.fits else "no", f"{d['memory_gib_total']:.1f}",
                      f"{e.tokens_per_s:,.0f}" if e.fits else "—", f"{e.mfu:.0%}" if e.fits else "—",
                      f"{hours:,.1f}" if hours else "—",
                      f"{d['cny_per_billion_tokens']:,.0f}" if d["cny_per_billion_tokens"] else "—", inst,
                      f"{d['other_cost_per_billion_tokens']:,.0f}" if d["other_cost_per_billion_tokens"] else "—")
    notes = compare_dict(model, rows)["notes"] + ["* GPU model inferred or price unverified (see --json)"]
    return Group(table, Text("\n".join(footnotes), style="yellow"), Text("\n".join("· " + n for n in notes), style="dim"))
