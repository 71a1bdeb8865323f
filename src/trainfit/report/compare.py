"""Rendering of `compare` rows."""

from __future__ import annotations

from typing import Any

from ..catalog.prices import STALE_DAYS
from ..i18n import t as tr
from ..i18n.errors import localize_error
from ..i18n.notes import localize

# the notes under the table, one catalog entry each (i18n); --json carries them in English
NOTE_KEYS = ("compare_note_layout", "compare_note_rank", "compare_note_cost", "compare_note_stale",
             "compare_note_hours")


def notes(lang: str) -> list[str]:
    from ..compare import COMPARE_MAX_NODES

    return [tr(key, lang).format(days=STALE_DAYS, nodes=COMPARE_MAX_NODES) for key in NOTE_KEYS]


def compare_dict(model: str, rows) -> dict[str, Any]:
    return {"model": model, "rows": [r.to_dict() for r in rows], "notes": notes("en")}


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


def render_compare(model: str, rows, lang: str, width: int | None = None):
    """One table where the width allows; narrower, the fit/speed columns, the Alibaba offer and the offer elsewhere
    become up to three tables, then one block per GPU (report/tables.py Fit), so that no value is ever cut."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from .tables import Fit

    speed_cols = ((tr("gpu", lang), "left"), (tr("fits", lang), "right"), ("GiB", "right"), ("tokens/s", "right"),
                  ("MFU", "right"), (tr("hours_per_b", lang), "right"))
    ali_cols = ((tr("alibaba_instance", lang), "left"), ("CNY/GPU-h", "right"), ("CNY/1B", "right"))
    other_cols = ((tr("other_instance", lang), "left"), ("USD/GPU-h", "right"), ("USD/1B", "right"))
    footnotes: list[str] = []
    speed, ali_rows, other_rows = [], [], []
    for r in rows:
        d = r.to_dict()
        if r.estimate is None:
            speed.append((r.gpu.id, "—", "", "", "", ""))
            footnotes.append(f"[{len(footnotes) + 1}] {r.gpu.id}: {localize_error(r.error, lang) if r.error else ''}")
            speed[-1] = (f"{r.gpu.id} [{len(footnotes)}]",) + speed[-1][1:]
            ali_rows.append((r.gpu.id, "", "", ""))
            other_rows.append((r.gpu.id, "", "", ""))
            continue
        e = r.estimate
        mark = ""
        if r.changes:
            footnotes.append(f"[{len(footnotes) + 1}] {r.gpu.id}: " + "; ".join(localize(c, lang) for c in r.changes))
            mark = f" [{len(footnotes)}]"
        if r.would_fit is not None:
            footnotes.append(f"[{len(footnotes) + 1}] {r.gpu.id}: "
                             + tr("would_fit_with", lang).format(change=localize(r.would_fit.change, lang)))
            mark += f" [{len(footnotes)}]"
        ali, other = d["alibaba"], d["cheapest_other"]
        if ali:
            where = _where(ali)
        else:
            where = tr("unpriced_short", lang) if r.alibaba_instances else tr("not_sold_short", lang)
        hours = d["hours_per_billion_tokens"]
        label = (f"{r.rank}. " if r.rank else "") + r.gpu.id + ("" if r.like_for_like else " ≠")
        speed.append((label + mark, tr("yes", lang) if e.fits else tr("no", lang), f"{d['memory_gib_total']:.1f}",
                      f"{e.tokens_per_s:,.0f}" if e.fits else "—", f"{e.mfu:.0%}" if e.fits else "—",
                      f"{hours:,.1f}" if hours else "—"))
        ali_rows.append((r.gpu.id, where, _money(ali, "price_per_gpu_hour"), _money(ali, "cost_per_billion_tokens")))
        other_rows.append((r.gpu.id, _where(other), _money(other, "price_per_gpu_hour"),
                           _money(other, "cost_per_billion_tokens")))

    # one table; Fit lays it out for the width at print time: whole, or split into the speed columns, the Alibaba
    # offer and the offer elsewhere (each with the GPU), or one block per GPU. Every cell stays whole (no_wrap).
    cols = speed_cols + ali_cols + other_cols
    out = Table(title=Text(model), pad_edge=False)  # text, not markup
    for col, justify in cols:
        out.add_column(col, justify=justify, no_wrap=True)
    for s, a, o in zip(speed, ali_rows, other_rows):
        out.add_row(*[c if isinstance(c, Text) else Text(str(c)) for c in s + a[1:] + o[1:]])
    n_speed, n_ali = len(speed_cols), len(ali_cols)
    units = [list(range(1, n_speed)), list(range(n_speed, n_speed + n_ali)),
             list(range(n_speed + n_ali, len(cols)))]
    parts = [Fit(out, keys=1, units=units, width=width)]
    shown = notes(lang) + [tr("flag_note_short", lang), tr("unpriced_note", lang)]
    return Group(*parts, Text("\n".join(footnotes), style="yellow"), Text("\n".join("· " + n for n in shown),
                                                                            style="dim"))
