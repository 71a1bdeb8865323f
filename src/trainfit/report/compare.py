"""Rendering of `compare` rows."""

from __future__ import annotations

from typing import Any

from ..catalog.prices import STALE_DAYS
from ..i18n import t as tr

NOTES = ("cost = hours x pay-as-you-go price of the whole instance: for each GPU, the instance (and the number of its "
         "GPUs used, data-parallel) with the lowest cost per token; the same cost function as `plan`",
         f"every price carries its date (price_date, price_age_days); prices older than {STALE_DAYS} days are "
         "marked stale — `trainfit prices refresh` or `--prices FILE`",
         "hours per billion tokens at the estimated throughput, no start-up or checkpoint time")


def compare_dict(model: str, rows) -> dict[str, Any]:
    return {"model": model, "rows": [r.to_dict() for r in rows], "notes": list(NOTES)}


def _where(c: dict[str, Any] | None) -> str:
    """'gn7i-c8g1.2xlarge 1/1' (GPUs used / GPUs of the instance); * = GPU inferred or price unverified."""
    if not c:
        return ""
    flag = "*" if c["price_unverified"] or c["gpu_inferred"] else ""
    return f"{c['instance_type'].removeprefix('ecs.')}{flag} {c['gpus_used']}/{c['gpus_per_instance']}"


def _money(c: dict[str, Any] | None, key: str) -> str:
    """A price with its staleness mark (†)."""
    if not c:
        return "—"
    return f"{c[key]:,.2f}" if key.endswith("hour") else f"{c[key]:,.0f}" + ("†" if c["price_stale"] else "")


def render_compare(model: str, rows, lang: str):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"{model}", pad_edge=False)
    cols = ((tr("gpu", lang), "left"), (tr("fits", lang), "right"), ("GiB", "right"), ("tokens/s", "right"),
            ("MFU", "right"), (tr("hours_per_b", lang), "right"), (tr("alibaba_instance", lang), "left"),
            ("CNY/GPU-h", "right"), ("CNY/1B", "right"), (tr("other_instance", lang), "left"),
            ("USD/GPU-h", "right"), ("USD/1B", "right"))
    for col, justify in cols:
        table.add_column(col, justify=justify, overflow="fold")
    footnotes: list[str] = []
    for r in rows:
        d = r.to_dict()
        if r.estimate is None:
            table.add_row(r.gpu.id, "—", "", "", "", "", r.error or "", "", "", "", "", "")
            continue
        e = r.estimate
        mark = ""
        if r.changes:
            footnotes.append(f"[{len(footnotes) + 1}] {r.gpu.id}: " + "; ".join(r.changes))
            mark = f" [{len(footnotes)}]"
        ali, other = d["alibaba"], d["cheapest_other"]
        if ali:
            where = _where(ali)
        else:
            where = tr("no_alibaba_price", lang) if r.alibaba_instances else tr("not_on_alibaba", lang)
        hours = d["hours_per_billion_tokens"]
        table.add_row(r.gpu.id + mark, tr("yes", lang) if e.fits else tr("no", lang), f"{d['memory_gib_total']:.1f}",
                      f"{e.tokens_per_s:,.0f}" if e.fits else "—", f"{e.mfu:.0%}" if e.fits else "—",
                      f"{hours:,.1f}" if hours else "—", where, _money(ali, "price_per_gpu_hour"),
                      _money(ali, "cost_per_billion_tokens"), _where(other), _money(other, "price_per_gpu_hour"),
                      _money(other, "cost_per_billion_tokens"))
    notes = [tr("compare_note_cost", lang), tr("compare_note_stale", lang).format(days=STALE_DAYS),
             tr("compare_note_hours", lang), tr("flag_note_short", lang)]
    return Group(table, Text("\n".join(footnotes), style="yellow"), Text("\n".join("· " + n for n in notes), style="dim"))
