"""Tables that stay readable at any terminal width and when piped: no value is ever cut or dropped.

`Fit(table)` wraps a rich Table and lays it out when it is printed, for the width it is given (the console's):
  1. the whole table, when every column fits side by side (columns get explicit widths, so rich never shrinks one
     below its content): a no_wrap column's cells stay on one line (names, numbers); other columns wrap their text
     at spaces, never inside a word (but for a word longer than WORD_CAP in an overflow="fold" column: a URL);
     headers wrap at spaces;
  2. else, for a table with key columns (the row's name), at most `max_parts` tables, each repeating the keys;
  3. else a vertical layout: one block per row, a "label: value" line per column.
`fit_tables` builds such a table from plain rows; `terminal_width` is the width output is laid out for."""

from __future__ import annotations

import copy
import os
import sys
from dataclasses import dataclass

PIPED_WIDTH = 120  # output that goes to a pipe or a file (no terminal) and no COLUMNS: wide enough for most tables
WRAP_FLOOR = 24  # a column that wraps its text is never narrower than this (or its longest line, if less)
WORD_CAP = 40  # ... and its longest word stays whole up to this length (a longer one, a URL, folds)


@dataclass(frozen=True)
class Col:
    header: str
    justify: str = "left"
    fold: bool = False  # long free text (a URL, a note): may wrap at spaces


def terminal_width(width: int | None = None) -> int:
    """`width` if given, else COLUMNS (when a positive number), else the terminal's width when stdout is a terminal,
    else (piped, redirected) PIPED_WIDTH."""
    if width:
        return width
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        if sys.stdout is not None and sys.stdout.isatty():
            return os.get_terminal_size(sys.stdout.fileno()).columns or PIPED_WIDTH
    except (AttributeError, OSError, ValueError):
        pass
    return PIPED_WIDTH


def _wraps(column) -> bool:
    """A column whose cells may wrap at spaces (not no_wrap); a no_wrap column's cells stay whole, on one line."""
    return not column.no_wrap


def _word(column, longest_word: int) -> int:
    """The narrowest a wrapping column may be for its longest word: the word whole, unless the column folds
    (overflow="fold") and the word is longer than WORD_CAP."""
    return min(longest_word, WORD_CAP) if column.overflow == "fold" else longest_word


def _plain(console, renderable) -> str:
    from rich.text import Text

    if isinstance(renderable, Text):
        return renderable.plain
    if isinstance(renderable, str):
        return console.render_str(renderable).plain
    return ""


class Fit:
    """A rich renderable: `table` laid out for the width at print time, never cutting a cell (see the module)."""

    def __init__(self, table, keys: int = 0, units: list[list[int]] | None = None, max_parts: int = 3,
                 width: int | None = None):
        self.table = table
        self.keys = keys  # the first `keys` columns name the row: repeated in each part of a split table
        self.units = units  # groups of columns to keep in one part when splitting (default: each column alone)
        self.max_parts = max_parts
        self.width = width  # an upper bound on the width (else the console's)
        self._measured: list | None = None

    # -- measuring
    def _ranges(self, console, options) -> list[tuple[int, int, int, int]]:
        """(narrowest, natural) width of each column (header and cells), then of its cells alone; no padding."""
        from rich.measure import Measurement

        opts = options.update_width(10_000)
        out = []
        for col in self.table.columns:
            if col.width is not None:
                out.append((col.width, col.width, col.width, col.width))
                continue
            lo = hi = 1
            if self.table.show_header:
                m = Measurement.get(console, opts, col.header)
                lo, hi = max(lo, m.minimum), max(hi, m.maximum)
            wraps = _wraps(col)
            cell_lo = cell_hi = 1
            for cell in col.cells:
                m = Measurement.get(console, opts, cell)
                cell_lo = max(cell_lo, m.minimum if wraps else m.maximum)
                cell_hi = max(cell_hi, m.maximum)
            if wraps:
                cell_lo = max(_word(col, cell_lo), min(cell_hi, WRAP_FLOOR))
            lo = max(lo, cell_lo, col.min_width or 0)
            out.append((lo, max(hi, cell_hi, lo), cell_lo, cell_hi))
        return out

    def _part(self, idx: list[int], ranges, width: int, first: bool, last: bool, console=None):
        """A table of the columns `idx` laid out in `width`, or None when they do not fit side by side."""
        t = copy.copy(self.table)
        t.columns = []
        for n, i in enumerate(idx):
            c = copy.copy(self.table.columns[i])
            c._index = n
            t.columns.append(c)
        if not first:
            t.title = None
        if not last:
            t.caption = None
        pads = [t._get_padding_width(n) for n in range(len(idx))]
        lo = [ranges[i][0] + p for i, p in zip(idx, pads)]
        hi = [ranges[i][1] + p for i, p in zip(idx, pads)]
        room = width - t._extra_width
        if sum(lo) > room:
            return None
        widths = list(hi)
        excess = sum(widths) - room
        while excess > 0:  # narrow the widest column that can wrap, never below its narrowest
            n = max((k for k in range(len(widths)) if widths[k] > lo[k]), key=lambda k: widths[k])
            widths[n] -= 1
            excess -= 1
        for c, w, p in zip(t.columns, widths, pads):
            c.width = w - p
            c.min_width = c.max_width = None
            c.no_wrap, c.overflow = False, "fold"  # headers wrap at spaces; whole cells fit their width
        t.expand, t.width, t.min_width = False, None, None
        if t.title is not None and console is not None:  # a title's longest word never folds
            from rich.measure import Measurement

            need = Measurement.get(console, console.options.update_width(10_000), t.title).minimum
            if need > sum(widths) + t._extra_width:
                t.min_width = min(need, width)
        return t

    def _split(self, console, ranges, width: int) -> list | None:
        keys = list(range(self.keys))
        units = self.units or [[i] for i in range(self.keys, len(self.table.columns))]
        groups: list[list[int]] = []
        current: list[int] = []
        pending = [list(u) for u in units]
        while pending:
            unit = pending.pop(0)
            if self._part(keys + current + unit, ranges, width, True, True) is not None:
                current += unit
                continue
            if current:
                groups.append(current)
                current = []
                pending.insert(0, unit)
            elif len(unit) > 1:  # a unit too wide alone: its columns one by one
                pending[:0] = [[i] for i in unit]
            else:
                return None
        if current or not groups:
            groups.append(current)
        if len(groups) > self.max_parts:
            return None
        return [self._part(keys + g, ranges, width, n == 0, n == len(groups) - 1, console)
                for n, g in enumerate(groups)]

    # -- the vertical layout
    def _vertical(self, console, width: int):
        """One block per row, a line per (non-empty) cell: its column's header, then the value beside it where it
        fits whole, else on the lines below, indented."""
        from rich.cells import cell_len
        from rich.console import Group
        from rich.measure import Measurement
        from rich.padding import Padding
        from rich.table import Table
        from rich.text import Text

        t = self.table
        opts = console.options.update_width(10_000)
        labels = [" ".join(_plain(console, c.header).split()) if t.show_header else "" for c in t.columns]
        label_w = max([cell_len(x) + 1 for x in labels if x] + [1])  # and its ':'
        cells = [list(c.cells) for c in t.columns]
        value_w = width - label_w - 2
        items: list = []
        if t.title is not None:
            items.append(console.render_str(t.title, style="bold") if isinstance(t.title, str) else t.title)
        pending: list = []  # (label, cell, width) lines side by side, printed as one grid

        def flush():
            if pending:
                grid = Table.grid(padding=(0, 2, 0, 0))
                grid.add_column(width=label_w, no_wrap=True)
                grid.add_column(width=max(w for _, _, w in pending), overflow="fold")
                for label, cell, _ in pending:
                    grid.add_row(label, cell)
                items.append(grid)
                pending.clear()

        for r in range(len(t.rows)):
            pending.append((Text(""), Text(""), 1))
            for n, col in enumerate(t.columns):
                cell = cells[n][r] if r < len(cells[n]) else ""
                if isinstance(cell, (str, Text)) and not _plain(console, cell).strip():
                    continue  # an empty cell: nothing to show
                label = Text(labels[n] + ":" if labels[n] else "", style="bold" if n < max(self.keys, 1) else "dim")
                m = Measurement.get(console, opts, cell)
                if (_word(col, m.minimum) if _wraps(col) else m.maximum) <= value_w:
                    pending.append((label, cell, min(m.maximum, value_w)))
                else:  # too wide beside its label: below it
                    flush()
                    items += [label, Padding(cell, (0, 0, 0, 2))]
        flush()
        if t.caption is not None:
            items.append(console.render_str(t.caption, style="dim") if isinstance(t.caption, str) else t.caption)
        return Group(*items)

    def layout(self, console, options) -> list:
        """What is printed for this width: [table], [table, table, ...] or [vertical group]."""
        width = min(options.max_width, self.width) if self.width else options.max_width
        if self._measured is None:  # the content's widths do not depend on the width it is laid out in
            self._measured = self._ranges(console, options)
        ranges = self._measured
        whole = self._part(list(range(len(self.table.columns))), ranges, width, True, True, console)
        if whole is not None:
            return [whole]
        if self.keys and len(self.table.columns) > self.keys:
            parts = self._split(console, ranges, width)
            if parts:
                return parts
        return [self._vertical(console, width)]

    def __rich_console__(self, console, options):
        width = min(options.max_width, self.width) if self.width else options.max_width
        yield from (p for p in self.layout(console, options.update_width(width)))

    def __rich_measure__(self, console, options):
        from rich.measure import Measurement

        return Measurement(min(options.max_width, 20), options.max_width)


def fitted(obj):
    """`obj` with every bare rich Table in it (itself, or a member of a Group) laid out by Fit, the first column as
    the key when there are more than two: what `FitConsole` prints."""
    from rich.console import Group
    from rich.table import Table

    if isinstance(obj, Table) and obj.show_header:  # (a grid without headers is left as it is)
        return Fit(obj, keys=1 if len(obj.columns) > 2 else 0)
    if isinstance(obj, Group):
        return Group(*[fitted(r) for r in obj.renderables], fit=obj.fit)
    return obj


def fit_console(**kwargs):
    """A rich Console (made on first use: rich loads only when a table is printed) whose print lays out every
    table with Fit, so that no command's table cuts a value, whichever module built it."""
    from rich.console import Console

    class FitConsole(Console):
        def print(self, *objects, **kw):
            return super().print(*[fitted(o) for o in objects], **kw)

    return FitConsole(**kwargs)


def fit_tables(title: str, cols: list[Col], rows: list[tuple], width: int | None = None, keys: int = 1) -> list:
    """[Fit] for `rows`: one table when every column fits, else the first `keys` columns repeated in each of up to
    three tables, else one block per row. Cells stay whole (names, numbers) unless their column is marked `fold`."""
    from rich.table import Table
    from rich.text import Text

    # titles and cells are text, never markup: a model, instance or region name is the user's and shown as is
    t = Table(title=Text(title) if isinstance(title, str) else title, pad_edge=False)
    for c in cols:
        if c.fold:
            t.add_column(c.header, justify=c.justify, overflow="fold")
        else:
            t.add_column(c.header, justify=c.justify, no_wrap=True)
    for r in rows:
        t.add_row(*[x if isinstance(x, Text) else Text(str(x)) for x in r])
    return [Fit(t, keys=keys, width=width)]


def fit(table, keys: int = 0, units: list[list[int]] | None = None, width: int | None = None) -> Fit:
    """`table` laid out for the width it is printed in (see Fit)."""
    return Fit(table, keys=keys, units=units, width=width)
