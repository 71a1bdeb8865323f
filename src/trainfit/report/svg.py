"""Small hand-written SVG charts for the HTML reports and the web calculator.

Why not matplotlib: three chart kinds (stacked bars, horizontal bars, scatter) need ~150 lines of SVG, while
matplotlib adds a 40 MB dependency, ~0.5 s of import time and 30-60 KB of path data per plot; its SVG is
deterministic only with `svg.hashsalt` and `metadata={"Date": None}` set. Hand-written SVG is small, has no
dependency, is identical for identical input (every number is formatted with a fixed precision) and keeps text as
text, so the reports are searchable and translatable and the browser tests can read the labels.
"""

from __future__ import annotations

import math
from html import escape
from typing import Sequence

# Okabe-Ito palette: distinguishable with colour-vision deficiencies
COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999")
W, H = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 36, 56


def _f(x: float) -> str:
    """A coordinate with one decimal, no trailing zeros: deterministic and short."""
    s = f"{x:.1f}"
    return s[:-2] if s.endswith(".0") else s


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About n round tick values covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks, v = [], start
    while v <= hi + step * 1e-9:
        ticks.append(round(v, 10))
        v += step
    if ticks[-1] < hi:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def _num(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def _open(title: str, kind: str, width: int = W, height: int = H) -> list[str]:
    return [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart chart-{kind}" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}" '
            'font-family="sans-serif" font-size="11">',
            f'<title>{escape(title)}</title>',
            f'<text x="{width / 2:g}" y="18" text-anchor="middle" font-size="13" font-weight="bold">{escape(title)}'
            '</text>']


def _y_axis(out: list[str], ticks: list[float], y, label: str, x0: float, x1: float) -> None:
    for v in ticks:
        yy = _f(y(v))
        out.append(f'<line x1="{x0}" x2="{_f(x1)}" y1="{yy}" y2="{yy}" stroke="#ddd"/>')
        out.append(f'<text x="{x0 - 4}" y="{yy}" text-anchor="end" dominant-baseline="middle">{_num(v)}</text>')
    out.append(f'<text transform="translate(14 {_f((TOP + H - BOTTOM) / 2)}) rotate(-90)" text-anchor="middle">'
               f'{escape(label)}</text>')


def _legend(out: list[str], labels: Sequence[str], x: float, y: float) -> None:
    for i, label in enumerate(labels):
        yy = y + 14 * i
        out.append(f'<rect x="{_f(x)}" y="{_f(yy - 8)}" width="10" height="10" fill="{COLORS[i % len(COLORS)]}"/>')
        out.append(f'<text x="{_f(x + 14)}" y="{_f(yy + 1)}">{escape(label)}</text>')


def stacked_bars(title: str, categories: Sequence[str], series: Sequence[tuple[str, Sequence[float]]],
                 ylabel: str, limit: tuple[str, float] | None = None) -> str:
    """Vertical bars, one per category, stacked by series; an optional horizontal limit line (usable memory)."""
    width = W + 240
    totals = [sum(vals[i] for _, vals in series) for i in range(len(categories))]
    top = max(totals + [limit[1] if limit else 0.0, 1e-9])
    ticks = nice_ticks(0.0, top)
    x0, x1, y0, y1 = LEFT, W - RIGHT, H - BOTTOM, TOP
    y = lambda v: y0 - (v / ticks[-1]) * (y0 - y1)  # noqa: E731
    out = _open(title, "stacked", width)
    _y_axis(out, ticks, y, ylabel, x0, x1)
    slot = (x1 - x0) / max(len(categories), 1)
    bw = min(slot * 0.6, 90)
    for i, cat in enumerate(categories):
        cx = x0 + slot * (i + 0.5)
        base = 0.0
        for k, (name, vals) in enumerate(series):
            v = vals[i]
            if v <= 0:
                continue
            out.append(f'<rect class="bar" x="{_f(cx - bw / 2)}" y="{_f(y(base + v))}" width="{_f(bw)}" '
                       f'height="{_f(y(base) - y(base + v))}" fill="{COLORS[k % len(COLORS)]}">'
                       f'<title>{escape(cat)} · {escape(name)}: {v:.2f}</title></rect>')
            base += v
        out.append(f'<text x="{_f(cx)}" y="{_f(y(base) - 4)}" text-anchor="middle">{totals[i]:.1f}</text>')
        out.append(f'<text x="{_f(cx)}" y="{y0 + 16}" text-anchor="middle">{escape(cat)}</text>')
    if limit:
        yy = _f(y(limit[1]))
        out.append(f'<line class="limit" x1="{x0}" x2="{_f(x1)}" y1="{yy}" y2="{yy}" stroke="#D55E00" '
                   'stroke-width="2" stroke-dasharray="6 3"/>')
        out.append(f'<text x="{_f(x1)}" y="{_f(y(limit[1]) - 4)}" text-anchor="end" fill="#D55E00">'
                   f'{escape(limit[0])} {limit[1]:.1f}</text>')
    out.append(f'<line x1="{x0}" x2="{_f(x1)}" y1="{y0}" y2="{y0}" stroke="#333"/>')
    _legend(out, [name for name, _ in series], W + 4, TOP + 10)
    out.append("</svg>")
    return "\n".join(out)


def grouped_bars(title: str, categories: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]],
                 ylabel: str) -> str:
    """Vertical bars side by side per category, one colour per series (trace vs analytic)."""
    width = W + 170
    top = max([v for _, vals in series for v in vals if v] + [1e-9])
    ticks = nice_ticks(0.0, top)
    x0, x1, y0, y1 = LEFT, W - RIGHT, H - BOTTOM, TOP
    y = lambda v: y0 - (v / ticks[-1]) * (y0 - y1)  # noqa: E731
    out = _open(title, "grouped", width)
    _y_axis(out, ticks, y, ylabel, x0, x1)
    slot = (x1 - x0) / max(len(categories), 1)
    bw = min(slot * 0.8 / max(len(series), 1), 40)
    for i, cat in enumerate(categories):
        cx = x0 + slot * (i + 0.5)
        for k, (name, vals) in enumerate(series):
            v = vals[i]
            bx = cx + (k - len(series) / 2) * bw
            if v:
                out.append(f'<rect class="bar s{k}" x="{_f(bx)}" y="{_f(y(v))}" width="{_f(bw - 1)}" '
                           f'height="{_f(y0 - y(v))}" fill="{COLORS[k % len(COLORS)]}">'
                           f'<title>{escape(cat)} · {escape(name)}: {v:.3f}</title></rect>')
        out.append(f'<text x="{_f(cx)}" y="{y0 + 16}" text-anchor="middle">{escape(cat)}</text>')
    out.append(f'<line x1="{x0}" x2="{_f(x1)}" y1="{y0}" y2="{y0}" stroke="#333"/>')
    _legend(out, [name for name, _ in series], W + 4, TOP + 10)
    out.append("</svg>")
    return "\n".join(out)


def hbars(title: str, labels: Sequence[str], values: Sequence[float | None], xlabel: str,
          fmt: str = "{:,.0f}") -> str:
    """Horizontal bars, one per labelled row (None = no bar, shown as a dash)."""
    height = TOP + 24 * len(labels) + 40
    lw = 230
    x0, x1 = lw, W + 100 - RIGHT - 50
    top = max([v for v in values if v] + [1e-9])
    ticks = nice_ticks(0.0, top, 4)
    x = lambda v: x0 + (v / ticks[-1]) * (x1 - x0)  # noqa: E731
    out = _open(title, "hbars", W + 100, height)
    yb = TOP + 24 * len(labels)
    for v in ticks:
        out.append(f'<line x1="{_f(x(v))}" x2="{_f(x(v))}" y1="{TOP}" y2="{yb}" stroke="#ddd"/>')
        out.append(f'<text x="{_f(x(v))}" y="{yb + 14}" text-anchor="middle">{_num(v)}</text>')
    out.append(f'<text x="{_f((x0 + x1) / 2)}" y="{yb + 32}" text-anchor="middle">{escape(xlabel)}</text>')
    for i, (label, v) in enumerate(zip(labels, values)):
        yy = TOP + 24 * i
        out.append(f'<text x="{x0 - 6}" y="{yy + 12}" text-anchor="end" dominant-baseline="middle">'
                   f'{escape(label)}</text>')
        if v:
            out.append(f'<rect class="bar" x="{x0}" y="{yy + 4}" width="{_f(x(v) - x0)}" height="16" '
                       f'fill="{COLORS[0]}"><title>{escape(label)}: {fmt.format(v)}</title></rect>')
            out.append(f'<text x="{_f(x(v) + 4)}" y="{yy + 12}" dominant-baseline="middle">{fmt.format(v)}</text>')
        else:
            out.append(f'<text x="{x0 + 4}" y="{yy + 12}" dominant-baseline="middle">—</text>')
    out.append("</svg>")
    return "\n".join(out)


def scatter(title: str, points: Sequence[tuple[float, float, int, str]], xlabel: str, ylabel: str,
            groups: Sequence[str], line: Sequence[tuple[float, float]] = (), diagonal: bool = False,
            log: bool = False) -> str:
    """Points (x, y, group, tooltip); `groups` names each group in the legend (group 0 small grey dots, others
    larger); `line` joins the given points (a Pareto front); `diagonal` draws y = x (predicted vs measured)."""
    width = W + 170
    xs = [p[0] for p in points] or [0.0, 1.0]
    ys = [p[1] for p in points] or [0.0, 1.0]
    tx = _log_ticks if log else (lambda lo, hi: nice_ticks(lo, hi))
    if diagonal:
        lo, hi = min(xs + ys + [0.0]), max(xs + ys)
        xt = yt = nice_ticks(lo, hi)
    else:
        xt, yt = tx(min(xs), max(xs)), tx(min(ys), max(ys))
    x0, x1, y0, y1 = LEFT, W - RIGHT, H - BOTTOM, TOP
    fx, fy = (math.log10 if log else float), (math.log10 if log else float)
    sx = lambda v: x0 + (fx(v) - fx(xt[0])) / (fx(xt[-1]) - fx(xt[0])) * (x1 - x0)  # noqa: E731
    sy = lambda v: y0 - (fy(v) - fy(yt[0])) / (fy(yt[-1]) - fy(yt[0])) * (y0 - y1)  # noqa: E731
    out = _open(title, "scatter", width)
    _y_axis(out, yt, sy, ylabel, x0, x1)
    for v in xt:
        out.append(f'<line x1="{_f(sx(v))}" x2="{_f(sx(v))}" y1="{y1}" y2="{y0}" stroke="#eee"/>')
        out.append(f'<text x="{_f(sx(v))}" y="{y0 + 14}" text-anchor="middle">{_num(v)}</text>')
    out.append(f'<text x="{_f((x0 + x1) / 2)}" y="{y0 + 34}" text-anchor="middle">{escape(xlabel)}</text>')
    if diagonal:
        out.append(f'<line class="diagonal" x1="{_f(sx(xt[0]))}" y1="{_f(sy(yt[0]))}" x2="{_f(sx(xt[-1]))}" '
                   f'y2="{_f(sy(yt[-1]))}" stroke="#999" stroke-dasharray="4 3"/>')
    if line:
        pts = " ".join(f"{_f(sx(a))},{_f(sy(b))}" for a, b in line)
        out.append(f'<polyline class="front" points="{pts}" fill="none" stroke="{COLORS[5]}" stroke-width="1.5"/>')
    for a, b, g, tip in sorted(points, key=lambda p: p[2]):
        r, color = (2.5, "#bbb") if g == 0 else (4 + g, COLORS[(g - 1) % len(COLORS)])
        out.append(f'<circle class="pt g{g}" cx="{_f(sx(a))}" cy="{_f(sy(b))}" r="{r:g}" fill="{color}" '
                   f'fill-opacity="0.85"><title>{escape(tip)}</title></circle>')
    for i, name in enumerate(groups):
        if not name:
            continue
        yy = TOP + 10 + 16 * i
        color = "#bbb" if i == 0 else COLORS[(i - 1) % len(COLORS)]
        out.append(f'<circle cx="{W + 9}" cy="{yy - 3}" r="4" fill="{color}"/>')
        out.append(f'<text x="{W + 18}" y="{yy + 1}">{escape(name)}</text>')
    out.append(f'<line x1="{x0}" x2="{_f(x1)}" y1="{y0}" y2="{y0}" stroke="#333"/>')
    out.append("</svg>")
    return "\n".join(out)


def _log_ticks(lo: float, hi: float) -> list[float]:
    lo, hi = max(lo, 1e-9), max(hi, 1e-9)
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if a == b:
        b += 1
    out = []
    for e in range(a, b + 1):
        for m in (1, 2, 5):
            v = m * 10.0 ** e
            if 10.0 ** a <= v <= 10.0 ** b:
                out.append(float(f"{v:.6g}"))
    return out
