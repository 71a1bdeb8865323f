"""A report as a list of blocks (heading, paragraph, table, list, chart), rendered to one self-contained HTML file
or to Markdown. Nothing here computes: the blocks are built by report/html_blocks.py from the results."""

from __future__ import annotations

import os

import datetime as _dt
from dataclasses import dataclass, field
from html import escape
from typing import Sequence

from .words import w

DATE_MARK = "trainfit-date"  # the one line that changes between runs (snapshot tests drop it)


@dataclass
class Doc:
    title: str
    lang: str
    blocks: list[tuple] = field(default_factory=list)

    def h(self, text: str) -> "Doc":
        self.blocks.append(("h", text))
        return self

    def p(self, text: str, cls: str = "") -> "Doc":
        self.blocks.append(("p", text, cls))
        return self

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> "Doc":
        self.blocks.append(("table", list(headers), [[str(c) for c in r] for r in rows]))
        return self

    def items(self, lines: Sequence[str]) -> "Doc":
        if lines:
            self.blocks.append(("list", list(lines)))
        return self

    def chart(self, svg: str) -> "Doc":
        self.blocks.append(("svg", svg))
        return self


CSS = """body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}td,th{border:1px solid #ccc;padding:3px 8px}
th{background:#f4f4f4}td.n{text-align:right}.ok{color:#087a2e;font-weight:bold}.bad{color:#b00020;font-weight:bold}
.dim{color:#666;font-size:.85em}svg{max-width:100%;height:auto;display:block;margin:.5em 0}"""


def _is_num(s: str) -> bool:
    return bool(s) and s.replace(",", "").replace(".", "").replace("%", "").replace("-", "").strip().isdigit()


def body_html(doc: Doc) -> str:
    """The blocks as an HTML fragment (the web calculator shows the same fragment)."""
    out: list[str] = []
    for b in doc.blocks:
        kind = b[0]
        if kind == "h":
            out.append(f"<h2>{escape(b[1])}</h2>")
        elif kind == "p":
            cls = f' class="{b[2]}"' if b[2] else ""
            out.append(f"<p{cls}>{escape(b[1])}</p>")
        elif kind == "list":
            out.append("<ul>" + "".join(f"<li>{escape(x)}</li>" for x in b[1]) + "</ul>")
        elif kind == "table":
            head = "".join(f"<th>{escape(x)}</th>" for x in b[1])
            rows = "".join("<tr>" + "".join(f'<td{" class=n" if _is_num(c) else ""}>{escape(c)}</td>' for c in r)
                           + "</tr>" for r in b[2])
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif kind == "svg":
            out.append(b[1])
    return "\n".join(out)


def to_html(doc: Doc, today: str | None = None) -> str:
    """One self-contained HTML file: inline CSS and SVG, no script, no network."""
    today = today or _dt.date.today().isoformat()
    return (f'<!DOCTYPE html>\n<html lang="{"zh-CN" if doc.lang == "zh" else "en"}">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{escape(doc.title)}</title>\n<style>\n{CSS}\n</style>\n</head>\n<body>\n"
            f"<h1>{escape(doc.title)}</h1>\n{body_html(doc)}\n"
            f'<p class="dim" id="{DATE_MARK}">{escape(w("r_generated", doc.lang))} {today}</p>\n</body>\n</html>\n')


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def to_markdown(doc: Doc, today: str | None = None) -> str:
    """The same blocks as Markdown; charts are left out (they are in the HTML report)."""
    today = today or _dt.date.today().isoformat()
    out = [f"# {doc.title}", ""]
    for b in doc.blocks:
        kind = b[0]
        if kind == "h":
            out += [f"## {b[1]}", ""]
        elif kind == "p" and "chart-note" not in b[2]:  # a chart's legend: the chart is in the HTML only
            out += [b[1], ""]
        elif kind == "list":
            out += [f"- {x}" for x in b[1]] + [""]
        elif kind == "table":
            out.append("| " + " | ".join(_cell(x) for x in b[1]) + " |")
            out.append("|" + "|".join("---:" if any(_is_num(r[i]) for r in b[2]) else "---"
                                      for i in range(len(b[1]))) + "|")
            out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in b[2]] + [""]
    out += [f"<!-- {DATE_MARK} --> {w('r_generated', doc.lang)} {today}", ""]
    return "\n".join(out)


def write_report(doc: Doc, html_path: str | None, md_path: str | None) -> list[str]:
    written = []
    for path, text in ((html_path, to_html(doc) if html_path else ""), (md_path, to_markdown(doc) if md_path else "")):
        if path:
            from ..safe_write import write_text_atomic

            folder = os.path.dirname(os.path.abspath(path))
            os.makedirs(folder, exist_ok=True)  # --html newdir/p.html: checked creatable before the work, made now
            write_text_atomic(path, text)  # temp + rename: never half a report, never written through a symlink
            written.append(path)
    return written
