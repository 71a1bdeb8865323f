"""`trainfit prices list` as JSON and as a table; every price with its date, age, source and staleness."""

from __future__ import annotations

from typing import Any

from ..catalog.prices import STALE_DAYS, cache_dir
from ..i18n import t as tr


def prices_dict(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"prices": rows, "stale_after_days": STALE_DAYS, "cache_dir": str(cache_dir())}


def render_prices(rows: list[dict[str, Any]], lang: str):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from .tables import fit

    table = Table(title=tr("prices_title", lang))
    for col in ("provider", tr("instance_col", lang), "GPU", tr("region", lang), tr("billing", lang),
                tr("price", lang), tr("per_gpu_hour", lang), tr("price_date", lang), tr("age_days", lang),
                tr("origin", lang), tr("source", lang)):
        # every cell whole (names, prices, dates); the sources may wrap at "; "
        table.add_column(col, overflow="fold", no_wrap=col != tr("source", lang))
    for r in rows:
        stale = f" {tr('stale', lang)}" if r["price_stale"] else ""
        age = "?" if r["price_age_days"] is None else str(r["price_age_days"])
        unit = {"payg": "/h", "spot": "/h", "subscription_month": "/mo"}[r["billing"]]
        flag = "*" if r["price_unverified"] else ""
        sold = f" ({tr('sold_out', lang)})" if r["stock"] == "sold_out" else ""
        table.add_row(r["provider"], r["instance_type"], f"{r['gpu'] or '?'} x{r['gpu_count'] or '?'}",
                      r["region"] + sold, r["billing"], f"{r['price']:,.4g} {r['currency']}{unit}{flag}",
                      "" if r["price_per_gpu_hour"] is None else f"{r['price_per_gpu_hour']:,.3f}",
                      r["price_date"], age + stale, r["price_origin"], "; ".join(r["price_sources"]))
    note = tr("prices_note", lang).format(days=STALE_DAYS, cache=cache_dir())
    return Group(fit(table, keys=2), Text(note, style="dim"))


def age_dict(summary: list[dict[str, Any]], on: str) -> dict[str, Any]:
    return {"as_of": on, "stale_after_days": STALE_DAYS, "providers": summary,
            "total": {"rows": sum(s["rows"] for s in summary), "fresh": sum(s["fresh"] for s in summary),
                      "stale": sum(s["stale"] for s in summary), "undated": sum(s["undated"] for s in summary)}}


def render_age(summary: list[dict[str, Any]], on: str, lang: str):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from .tables import fit

    table = Table(title=tr("prices_age_title", lang).format(date=on))
    for col in ("provider", tr("origin", lang), tr("rows", lang), tr("billing", lang), tr("oldest", lang),
                tr("newest", lang), tr("fresh", lang).format(days=STALE_DAYS), tr("stale", lang),
                tr("undated", lang), tr("source", lang)):
        # counts, dates and names whole; the billing counts and sources may wrap at spaces
        table.add_column(col, overflow="fold", no_wrap=col not in (tr("billing", lang), tr("source", lang)))
    for s in summary:
        table.add_row(s["provider"], s["origin"], str(s["rows"]),
                      " ".join(f"{b} {n}" for b, n in s["by_billing"].items()), s["oldest"] or "—",
                      s["newest"] or "—", str(s["fresh"]), str(s["stale"]), str(s["undated"]),
                      "; ".join(s["sources"]))
    d = age_dict(summary, on)["total"]
    note = tr("prices_age_note", lang).format(rows=d["rows"], fresh=d["fresh"], stale=d["stale"],
                                              undated=d["undated"], days=STALE_DAYS)
    return Group(fit(table, keys=1), Text(note, style="dim"))
