"""Tables that stay readable at any terminal width: names are never cut; when the columns do not fit side by side,
the table becomes several, each repeating its key columns (the row's name), rather than squeezing cells."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

_EDGE = 3  # a column's border and padding in a rich box table


@dataclass(frozen=True)
class Col:
    header: str
    justify: str = "left"
    fold: bool = False  # long free text (a URL, a note): may wrap, inside its own table if need be


def terminal_width(width: int | None = None) -> int:
    return width or shutil.get_terminal_size((100, 24)).columns


def _natural(col: Col, cells: list[str]) -> int:
    from rich.cells import cell_len

    lines = [line for cell in cells for line in str(cell).split("\n")]
    header = cell_len(col.header) if not col.fold else max((cell_len(w) for w in col.header.split()), default=1)
    return max([cell_len(x) for x in lines] + [header, 1])


def fit_tables(title: str, cols: list[Col], rows: list[tuple], width: int | None = None, keys: int = 1) -> list:
    """rich Tables for `rows`: one when every column fits in `width`, else the first `keys` columns repeated in
    each of as many tables as needed. Columns never wrap their cells (names stay whole) unless marked `fold`."""
    from rich.table import Table
    from rich.text import Text

    width = terminal_width(width)
    natural = [_natural(c, [r[i] for r in rows]) for i, c in enumerate(cols)]
    key_cols = list(range(keys))
    key_w = sum(natural[i] + _EDGE for i in key_cols) + 1
    groups: list[list[int]] = []
    current: list[int] = []
    used = key_w
    for i in range(keys, len(cols)):
        need = natural[i] + _EDGE
        if current and used + need > width:
            groups.append(current)
            current, used = [], key_w
        current.append(i)
        used += need
    if current or not groups:
        groups.append(current)
    tables = []
    for n, group in enumerate(groups):
        # titles and cells are text, never markup: a model, instance or region name is the user's and shown as is
        t = Table(title=Text(title) if n == 0 and isinstance(title, str) else title if n == 0 else None,
                  pad_edge=False)
        for i in key_cols + group:
            c = cols[i]
            if c.fold:
                t.add_column(c.header, justify=c.justify, overflow="fold")
            else:
                t.add_column(c.header, justify=c.justify, no_wrap=True, min_width=natural[i])
        for r in rows:
            t.add_row(*[r[i] if isinstance(r[i], Text) else Text(str(r[i])) for i in key_cols + group])
        tables.append(t)
    return tables
