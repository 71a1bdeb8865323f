"""`trainfit prices`: list the prices every command uses (with dates and sources), add your own quotes, refresh
them through the providers' official APIs."""

from __future__ import annotations

import argparse

from .common import add_output_flags, add_prices_flag, apply_prices, console, lang_of, print_json

HELP = "price catalog: list (dates, sources, stale), set your own quotes, refresh through provider APIs"
EXAMPLES = """examples:
  trainfit prices list --gpu a10
  trainfit prices list --provider alibaba --region cn-wulanchabu --billing spot
  trainfit prices age                        # per provider: how many prices, oldest and newest date, how many stale
  trainfit prices set my-quotes.csv          # your quotes, merged over the catalog for every later command
  trainfit prices refresh --provider alibaba --region cn-hangzhou,cn-wulanchabu
  trainfit prices refresh --provider azure   # Azure's retail price API needs no credentials
"""


def add_parser(sub) -> None:
    p = sub.add_parser("prices", help=HELP, description=HELP, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(run=lambda args: _help(p))
    ps = p.add_subparsers(dest="prices_command", metavar="ACTION")
    q = ps.add_parser("list", help="prices with date, age, source and origin (catalog / live / user)")
    q.add_argument("--provider", help="alibaba | aws | gcp | azure")
    q.add_argument("--region", help="only this region")
    q.add_argument("--gpu", help="only instances with this GPU")
    q.add_argument("--billing", help="payg | subscription_month | spot")
    q.add_argument("--all", action="store_true", help="include vGPU slices and instances without a known GPU")
    add_prices_flag(q)
    add_output_flags(q)
    q.set_defaults(run=run_list)
    q = ps.add_parser("age", help="how old the prices are: per provider and origin, rows, oldest/newest date, stale")
    q.add_argument("--provider", help="alibaba | aws | gcp | azure")
    add_prices_flag(q)
    add_output_flags(q)
    q.set_defaults(run=run_age)
    q = ps.add_parser("set", help="merge FILE (the catalog's CSV format) into your quotes (provenance 'user')")
    q.add_argument("file", help="CSV with provider,instance_type,region,billing,price,currency,price_date[,...]")
    add_output_flags(q)
    q.set_defaults(run=run_set)
    q = ps.add_parser("refresh", help="fetch current prices through the provider's official API into the cache")
    q.add_argument("--provider", required=True, help="alibaba | azure | aws | gcp")
    q.add_argument("--region", help="comma-separated regions (default: the provider's GPU regions)")
    q.add_argument("--instance", help="comma-separated instance types (default: every GPU type in the catalog)")
    add_output_flags(q)
    q.set_defaults(run=run_refresh)


def _plain(value):
    """A value for a rich table or line, its text shown literally (`[/bold]` in a price file is text, not a style)."""
    from rich.markup import escape

    if isinstance(value, str):
        return escape(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _help(p: argparse.ArgumentParser) -> int:
    """`trainfit prices` without an action: its own help, exit code 2 (as for a missing command)."""
    p.print_help()
    return 2


def run_list(args: argparse.Namespace) -> int:
    from ..catalog.prices import listing
    from ..report.prices import prices_dict, render_prices

    lang = lang_of(args)
    apply_prices(args)
    rows = listing(args.provider, args.region, args.gpu, args.billing, args.all)
    if args.json:
        print_json(prices_dict(rows))
    else:
        console().print(render_prices([_plain(r) for r in rows], lang))
    return 0


def run_age(args: argparse.Namespace) -> int:
    from ..catalog.prices import age_summary, listing, today
    from ..report.prices import age_dict, render_age

    lang = lang_of(args)
    apply_prices(args)
    summary = age_summary(listing(args.provider, include_all=True))
    on = today().isoformat()
    if args.json:
        print_json(age_dict(summary, on))
    else:
        console().print(render_age([_plain(s) for s in summary], on, lang))
    return 0


def run_set(args: argparse.Namespace) -> int:
    from ..catalog.prices import store_user_prices
    from ..i18n import t

    lang = lang_of(args)
    path, n = store_user_prices(args.file)
    if args.json:
        print_json({"user_prices": str(path), "rows": n})
    else:
        console().print(t("prices_set_done", lang).format(n=n, path=_plain(str(path))))
    return 0


def run_refresh(args: argparse.Namespace) -> int:
    from ..catalog.live import refresh
    from ..i18n import t

    lang = lang_of(args)
    split = lambda text: [x.strip() for x in text.split(",") if x.strip()] if text else None  # noqa: E731
    result = refresh(args.provider, split(args.region), split(args.instance))
    if args.json:
        print_json(result.to_dict())
    else:
        console().print(t("refresh_done", lang).format(provider=result.provider, n=len(result.prices),
                                                       path=_plain(str(result.path)), date=result.date))
        for note in result.notes:
            console().print(f"  - {_plain(str(note))}")
    return 0
