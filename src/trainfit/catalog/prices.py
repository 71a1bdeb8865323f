"""Prices in layers: the shipped snapshot (prices.csv), the live cache (`trainfit prices refresh`), the user's own
quotes (`trainfit prices set`, `--prices FILE`). A later layer replaces an earlier one's row for the same
(provider, instance type, region, billing); every row keeps its date, its sources and where it came from.

The cache lives in `$XDG_CACHE_HOME/trainfit/prices/` (default `~/.cache/trainfit/prices/`): one `<provider>.csv` per
refreshed provider and `user.csv` for `prices set`.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import io
import math
import os
import re
import shlex
import stat
import time
from collections import defaultdict
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from ..errors import CatalogError, PriceFileError
from ..safe_write import write_text_atomic
from ..spec.hardware import Price
from ._io import items, num, read_text

PROVIDERS = ("alibaba", "aws", "gcp", "azure")
BILLINGS = ("payg", "subscription_month", "spot")
CURRENCIES = ("CNY", "USD")
STOCKS = ("", "available", "sold_out")
ORIGINS = ("catalog", "live", "user")  # shipped snapshot < refreshed through an API < the user's quotes
STALE_DAYS = 180  # a price older than this is marked stale wherever it is shown
COLUMNS = ("provider", "instance_type", "region", "billing", "price", "currency", "price_date", "includes",
           "unverified", "sources", "note", "stock")
REQUIRED = ("provider", "instance_type", "region", "billing", "price", "currency", "price_date")
TEXT_COLUMNS = ("provider", "instance_type", "region", "billing", "currency", "price_date", "includes", "unverified",
                "sources", "note", "stock")
MAX_BYTES = 16 * 1024 * 1024  # a price file larger than this is refused before it is read
MAX_ROWS = 100_000  # ... and one with more rows than this (reading stops there)
LOCK_TIMEOUT_S = 60.0  # how long `prices set` / `prices refresh` wait for another run's write of the same file
# control characters (tab allowed), DEL, and the bidirectional overrides/isolates that reorder what a terminal shows
_BAD_CHARS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\u202a-\u202e\u2066-\u2069]")
# what rich reads as a style tag ([bold], [/bold], [link=...], [#ff0000], [@click]): never allowed in a price file
_MARKUP = re.compile(r"\[[a-z#/@][^\[]*?\]")

_extra_files: tuple[str, ...] = ()


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "trainfit" / "prices"


def use_price_files(paths: list[str] | tuple[str, ...]) -> None:
    """Layer these CSV files (the user's quotes, provenance 'user') over everything else for this process."""
    global _extra_files
    if tuple(paths) == _extra_files:
        return
    for path in paths:
        if not os.path.isfile(path):
            raise PriceFileError("pf_no_file", where=path)
    _extra_files = tuple(paths)
    clear_cache()


def clear_cache() -> None:
    all_prices.cache_clear()
    _layers.cache_clear()


def _enum(row: dict[str, str], col: str, allowed: tuple[str, ...], where: str) -> str:
    value = (row.get(col) or "").strip()
    if value not in allowed:
        raise PriceFileError("pf_bad_value", where=where, col=col, value=value, allowed=", ".join(allowed))
    return value


def parse_date(text: str) -> dt.date | None:
    """'2026-11-30' or '2026-11' (first of the month); None for anything else (undated)."""
    text = text.strip()
    for fmt in ("%Y-%m-%d", "%Y-%m"):
        try:
            return dt.datetime.strptime(text, fmt).date()
        except ValueError:
            continue
    return None


def check_text(col: str, value: str, where: str) -> None:
    """A text field shown in a terminal: no control or bidi-override character, nothing rich reads as markup."""
    bad = _BAD_CHARS.search(value)
    if bad:
        raise PriceFileError("pf_control", where=where, col=col, char=f"U+{ord(bad.group()):04X}")
    tag = _MARKUP.search(value)
    if tag:
        raise PriceFileError("pf_markup", where=where, col=col, tag=tag.group())


def check_price_value(price: float | None, text: str, where: str) -> float:
    if price is None or not math.isfinite(price) or price <= 0:
        raise PriceFileError("pf_price_bad", where=where, value=text)
    return price


def price_from_row(row: dict[str, str], origin: str, where: str, line: int | None = None) -> Price:
    where = f"{where}{f' line {line}' if line else ''} row {row.get('instance_type')!r}/{row.get('region')!r}"
    for col in TEXT_COLUMNS:
        value = row.get(col)
        if isinstance(value, str):
            check_text(col, value, where)
    missing = [c for c in REQUIRED if not (row.get(c) or "").strip()]
    if missing:
        raise PriceFileError("pf_missing", where=where, cols=", ".join(missing))
    price = check_price_value(num(row, "price", where), (row.get("price") or "").strip(), where)
    date = row["price_date"].strip()
    if origin != "catalog" and parse_date(date) is None:
        raise PriceFileError("pf_date", where=where, value=date)
    return Price(
        provider=_enum(row, "provider", PROVIDERS, where), instance_type=row["instance_type"].strip(),
        region=row["region"].strip(), billing=_enum(row, "billing", BILLINGS, where), price=price,
        currency=_enum(row, "currency", CURRENCIES, where), price_date=date,
        includes=(row.get("includes") or "instance").strip(), unverified="price" in items(row, "unverified"),
        sources=items(row, "sources") or ((origin,) if origin == "user" else ()), note=(row.get("note") or "").strip(),
        origin=origin, stock=_enum({"stock": row.get("stock") or ""}, "stock", STOCKS, where),
    )


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} bytes"  # pragma: no cover


def _read_rows(lines, origin: str, where: str) -> list[Price]:
    """Parse CSV lines (any iterable of lines), stopping with an error after MAX_ROWS rows."""
    reader = csv.DictReader(lines)
    try:
        fieldnames = reader.fieldnames
        missing = [c for c in REQUIRED if c not in (fieldnames or ())]
        if missing:
            raise PriceFileError("pf_columns", where=where, cols=", ".join(missing))
        out = []
        for row in reader:
            if len(out) >= MAX_ROWS:
                raise PriceFileError("pf_too_many_rows", where=where, cap=f"{MAX_ROWS:,}")
            out.append(price_from_row(row, origin, where, reader.line_num))
        return out
    except csv.Error as exc:
        raise PriceFileError("pf_csv", where=where, reason=str(exc)) from None


def read_price_text(text: str, origin: str, where: str) -> list[Price]:
    return _read_rows(io.StringIO(text), origin, where)


def _bounded_lines(fh, where: str):
    """The lines of a text file, refused once more than MAX_BYTES (UTF-8) were read: a pipe or a file that grows
    while it is read is bounded too (a regular file is checked by its size before it is opened)."""
    total = 0
    while True:
        line = fh.readline(MAX_BYTES - total + 1)
        if not line:
            return
        total += len(line.encode("utf-8", "surrogatepass"))
        if total > MAX_BYTES:
            raise PriceFileError("pf_too_big", where=where, size=f"more than {_size(MAX_BYTES)}",
                                 cap=_size(MAX_BYTES))
        yield line


def read_price_file(path: str | Path, origin: str) -> list[Price]:
    """A price CSV, read line by line; refused (PriceFileError) above MAX_BYTES or MAX_ROWS before it is all read."""
    where = str(path)
    try:
        st = os.stat(path)
        if stat.S_ISREG(st.st_mode) and st.st_size > MAX_BYTES:
            raise PriceFileError("pf_too_big", where=where, size=_size(st.st_size), cap=_size(MAX_BYTES))
        with open(path, encoding="utf-8", newline="") as fh:
            if stat.S_ISREG(st.st_mode):  # rows counted by the C parser first: a long file is refused in a blink,
                import csv                # not after checking 100,000 rows one by one (3 s)

                if sum(1 for _ in csv.reader(fh)) > MAX_ROWS + 1:
                    raise PriceFileError("pf_too_many_rows", where=where, cap=f"{MAX_ROWS:,}")
                fh.seek(0)
            return _read_rows(_bounded_lines(fh, where), origin, where)
    except OSError as exc:
        raise PriceFileError("pf_unreadable", where=where, reason=exc.strerror or str(exc)) from None
    except UnicodeDecodeError as exc:
        raise PriceFileError("pf_not_utf8", where=where, reason=f"byte {exc.start}: {exc.reason}") from None


class CachedPriceFileError(PriceFileError):
    """A file of the user cache that does not read: what is wrong with it, and how to remove it (in every language)."""

    def __init__(self, inner: CatalogError, path: Path):
        self.inner = inner
        super().__init__("pf_cache_bad", detail=str(inner), path=shlex.quote(str(path)))

    def message(self, lang: str) -> str:
        from ..i18n import t

        inner = self.inner.message(lang) if isinstance(self.inner, PriceFileError) else str(self.inner)
        return t(self.key, lang).format(**{**self.values, "detail": inner})


def _read_cached(path: Path, origin: str) -> list[Price]:
    """A file of the user cache: one that no longer reads (edited by hand, written by an older trainfit) is named with
    the command that removes it, instead of breaking every command."""
    try:
        return read_price_file(path, origin)
    except CatalogError as exc:
        raise CachedPriceFileError(exc, path) from None


def price_text_ok(p: Price, where: str) -> None:
    """The checks of a read row, on a Price about to be written (a refreshed price never poisons the cache)."""
    where = f"{where} row {p.instance_type!r}/{p.region!r}"
    check_price_value(p.price, repr(p.price), where)
    for col, value in (("provider", p.provider), ("instance_type", p.instance_type), ("region", p.region),
                       ("billing", p.billing), ("currency", p.currency), ("price_date", p.price_date),
                       ("includes", p.includes), ("note", p.note), ("stock", p.stock),
                       ("sources", ";".join(p.sources))):
        check_text(col, value, where)


def write_price_file(path: Path, prices: list[Price]) -> None:
    """Write rows in the catalog's format, atomically: a temporary file unique to this call in the same folder, then
    os.replace (a half-written cache is never read, and parallel writers never share a temporary file). Callers that merge
    into an existing file hold `locked(path)` around the read and this write."""
    if len(prices) > MAX_ROWS:
        raise PriceFileError("pf_too_many_rows", where=str(path), cap=f"{MAX_ROWS:,}")
    for p in prices:
        price_text_ok(p, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for p in prices:
        w.writerow({"provider": p.provider, "instance_type": p.instance_type, "region": p.region,
                    "billing": p.billing, "price": f"{p.price:.6g}", "currency": p.currency,
                    "price_date": p.price_date, "includes": p.includes, "unverified": "price" if p.unverified else "",
                    "sources": ";".join(p.sources), "note": p.note, "stock": p.stock})
    write_text_atomic(str(path), buf.getvalue())  # a unique O_EXCL temporary beside it, fsync, os.replace


@contextlib.contextmanager
def locked(path: Path):
    """An exclusive lock (fcntl.flock on `<file>.lock` beside it) for a read-merge-write of `path`: parallel
    `prices set` / `prices refresh` runs merge one after the other, and none loses another's rows."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise PriceFileError("pf_locked", where=str(path), s=int(LOCK_TIMEOUT_S)) from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def cache_files() -> list[tuple[Path, str]]:
    """(file, origin) of the user cache, in layer order: refreshed providers, then the user's own quotes."""
    d = cache_dir()
    out = [(d / f"{p}.csv", "live") for p in PROVIDERS]
    out.append((d / "user.csv", "user"))
    return [(f, o) for f, o in out if f.is_file()]


@lru_cache(maxsize=1)
def _layers() -> tuple[tuple[str, tuple[Price, ...]], ...]:
    layers = [("prices.csv", tuple(read_price_text(read_text("prices.csv"), "catalog", "prices.csv")))]
    for path, origin in cache_files():
        layers.append((str(path), tuple(_read_cached(path, origin))))
    for path in _extra_files:
        layers.append((path, tuple(check_known(read_price_file(path, "user"), path))))
    return tuple(layers)


def check_known(prices: list[Price], where: str) -> list[Price]:
    """A quote for an instance type the catalog does not know cannot be planned on: say so, with a suggestion."""
    from ..errors import unknown_name
    from .instance_table import all_instances

    known = all_instances()
    for p in prices:
        if f"{p.provider}/{p.instance_type}" not in known:
            names = [i.instance_type for i in known.values() if i.provider == p.provider]
            err = unknown_name(f"{p.provider} instance type", p.instance_type, names,
                               hint="`trainfit instances` lists the catalog")
            raise PriceFileError("pf_unknown_instance", where=where, detail=str(err))
    return prices


def merged(layers) -> list[Price]:
    by_key: dict[tuple, Price] = {}
    for _, prices in layers:
        for p in prices:
            by_key[(p.provider, p.instance_type, p.region, p.billing)] = p
    return list(by_key.values())


@lru_cache(maxsize=1)
def all_prices() -> dict[str, tuple[Price, ...]]:
    """'provider/instance_type' -> its prices, the layers merged."""
    by_key: dict[str, list[Price]] = defaultdict(list)
    for p in merged(_layers()):
        by_key[f"{p.provider}/{p.instance_type}"].append(p)
    return {k: tuple(v) for k, v in by_key.items()}


def today() -> dt.date:
    """Today in UTC; TRAINFIT_TODAY=YYYY-MM-DD pins it (reproducible tests and reports)."""
    pinned = os.environ.get("TRAINFIT_TODAY")
    return parse_date(pinned) if pinned and parse_date(pinned) else dt.datetime.now(dt.timezone.utc).date()


def age_days(p: Price, on: dt.date | None = None) -> int | None:
    d = parse_date(p.price_date)
    return None if d is None else max(0, ((on or today()) - d).days)


def is_stale(p: Price, on: dt.date | None = None) -> bool:
    """Older than STALE_DAYS, or undated."""
    age = age_days(p, on)
    return age is None or age > STALE_DAYS


def provenance(p: Price) -> dict:
    """What every displayed price carries: date, age, staleness, where it came from."""
    return {"price_date": p.price_date, "price_age_days": age_days(p), "price_stale": is_stale(p),
            "price_origin": p.origin, "price_sources": list(p.sources), "price_unverified": p.unverified}


def store_user_prices(path: str) -> tuple[Path, int]:
    """`prices set FILE`: validate FILE and merge it into the cache's user.csv; (user.csv, rows now in it)."""
    new = check_known(read_price_file(path, "user"), path)
    target = cache_dir() / "user.csv"
    with locked(target):
        old = _read_cached(target, "user") if target.is_file() else []
        rows = merged([("old", old), ("new", new)])
        write_price_file(target, rows)
    clear_cache()
    return target, len(rows)


def store_live_prices(provider: str, prices: list[Price]) -> Path:
    """Merge refreshed prices into `<provider>.csv` of the cache (rows of other regions/types are kept)."""
    target = cache_dir() / f"{provider}.csv"
    with locked(target):
        old = _read_cached(target, "live") if target.is_file() else []
        write_price_file(target, merged([("old", old), ("new", [replace(p, origin="live") for p in prices])]))
    clear_cache()
    return target


def listing(provider: str | None = None, region: str | None = None, gpu: str | None = None,
            billing: str | None = None, include_all: bool = False) -> list[dict]:
    """Every known price matching the filters, as plain rows (cheapest per GPU-hour first within a GPU); vGPU
    slices and instances without a known GPU only with include_all."""
    from .gpus import get_gpu
    from .instance_table import all_instances

    gpu_id = get_gpu(gpu).id if gpu else None
    if provider and provider not in PROVIDERS:
        from ..i18n import say

        raise CatalogError(say("ec_provider_one_of", choices=", ".join(PROVIDERS), value=provider))
    if billing and billing not in BILLINGS:
        raise CatalogError(f"--billing must be one of {', '.join(BILLINGS)}, got {billing!r}")
    rows = []
    for key, prices in all_prices().items():
        inst = all_instances().get(key)
        if inst is None or (provider and inst.provider != provider) or (gpu_id and inst.gpu != gpu_id):
            continue
        if not include_all and not inst.trainable:
            continue
        for p in prices:
            if (region and p.region != region) or (billing and p.billing != billing):
                continue
            per_gpu = p.per_hour / inst.gpu_count if inst.gpu_count else None
            rows.append({"provider": p.provider, "instance_type": p.instance_type, "gpu": inst.gpu,
                         "gpu_count": inst.gpu_count, "region": p.region, "billing": p.billing, "price": p.price,
                         "currency": p.currency, "price_per_hour": round(p.per_hour, 4),
                         "price_per_gpu_hour": None if per_gpu is None else round(per_gpu, 4),
                         "includes": p.includes, "stock": p.stock or None, "note": p.note, **provenance(p)})
    rows.sort(key=lambda r: (r["gpu"] or "", r["provider"], r["billing"], r["price_per_gpu_hour"] or 0))
    return rows


def age_summary(rows: list[dict]) -> list[dict]:
    """How old the prices are, per (provider, origin): row counts (by billing), oldest and newest dated price, how
    many are younger than STALE_DAYS, stale, undated. `rows` as `listing` returns them."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["provider"], r["price_origin"])].append(r)
    out = []
    for (provider, origin), rs in sorted(groups.items(), key=lambda kv: (PROVIDERS.index(kv[0][0]), kv[0][1])):
        dated = sorted((parse_date(r["price_date"]), r["price_date"]) for r in rs if parse_date(r["price_date"]))
        out.append({
            "provider": provider, "origin": origin, "rows": len(rs),
            "by_billing": {b: n for b in BILLINGS if (n := sum(r["billing"] == b for r in rs))},
            "oldest": dated[0][1] if dated else None, "newest": dated[-1][1] if dated else None,
            "fresh": sum(not r["price_stale"] for r in rs), "stale": sum(bool(r["price_stale"]) for r in rs),
            "undated": len(rs) - len(dated),
            "sources": sorted({s for r in rs for s in r["price_sources"]}),
        })
    return out
