"""The outputs the docs show, produced by the code as it is: `make docs` rewrites them, `--check` finds stale ones.

    python tools/docs.py                  # rerun every marked block in README.md and docs/**/*.md, rewrite its output,
                                          # and regenerate docs/reference.md from the CLI's argparse parser
    python tools/docs.py --check          # change nothing; exit 1 naming each block whose shown output differs from
                                          # what its command prints now (and a stale docs/reference.md)
    python tools/docs.py --check FILE...  # only these Markdown files (the reference is then not checked)

A marked block is an HTML comment naming one command, or several (one per line; a trailing backslash continues a line),
followed by a fenced block:

    <!-- output: trainfit estimate --model qwen2-7b --gpu a10 --method lora --seq-len 2048 --grad-ckpt full -->
    ```console
    (rewritten: "$ COMMAND" and what it printed, for each command)
    ```

Each block runs in a fresh temporary directory (the repository's data/ and benchmarks/ linked into it, so commands that
read them work and commands that write files write there), its commands one after the other through bash, with the
virtual environment's bin first on PATH (`trainfit` is the environment's console script, `python` its interpreter),
stdout and stderr together, and a fixed environment: COLUMNS=120 (a command may set another, `COLUMNS=200 trainfit
...`), no colour, English, TRAINFIT_TODAY pinned (price ages), empty config and cache directories (the shipped catalog
and calibration only, never a developer's refreshed prices or own calibration), shown as a user's own (~/.cache,
~/.config, the working folder). Trailing spaces are dropped from every line. Only deterministic outputs are marked:
timings stay prose with their command and date. A marker `<!-- output[slow]: ... -->` (a command of more than a few
seconds) is rerun by `make docs` and by `--check --slow`, not by a plain `--check` (the test suite's), which names it
as not rerun.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference.md"
TODAY = "2026-11-30"  # the day price ages are counted from in every shown output (the test suite's day too)
COLUMNS = "120"
LINKED = ("data", "benchmarks")  # repository folders a block's commands may read, linked into its directory
TIMEOUT_S = 600.0  # one command
MARKER = re.compile(r"^<!--\s*output(?:\[(?P<flags>[a-z, ]*)\])?:(?P<body>.*?)-->[ \t]*$", re.S | re.M)
FLAGS = {"slow"}  # output[slow]: rerun by `make docs` and `--check --slow`, not by a plain --check (the test suite's)
FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")


def _venv_python() -> str | None:
    """The virtual environment's interpreter when this one cannot import trainfit (python3 tools/docs.py)."""
    try:
        import trainfit  # noqa: F401
        return None
    except ImportError:
        candidate = ROOT / ".venv" / "bin" / "python"
        return str(candidate) if candidate.exists() and Path(sys.executable) != candidate else None


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the marker
    commands: list[str]
    start: int  # offsets in the file's text of the fenced block's content (after the opening fence's newline)
    end: int  # ... up to the closing fence
    shown: str
    slow: bool = False
    fence: str = "```"
    output: str | None = None
    error: str | None = None
    seconds: float = 0.0
    log: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        try:
            rel = self.path.resolve().relative_to(ROOT)
        except ValueError:
            rel = self.path
        return f"{rel}:{self.line}"


class MarkupError(Exception):
    pass


def _commands(body: str) -> list[str]:
    """The commands of a marker: one per line, a trailing backslash joining the next line."""
    commands, current = [], ""
    for raw in body.strip().splitlines():
        line = raw.strip()
        if line.endswith("\\"):
            current += line[:-1].rstrip() + " "
            continue
        current += line
        if current.strip():
            commands.append(current.strip())
        current = ""
    if current.strip():
        commands.append(current.strip())
    return commands


def find_blocks(path: Path) -> list[Block]:
    """Every marked block of a Markdown file, with the offsets of its fenced block's content."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for m in MARKER.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        commands = _commands(m.group("body"))
        if not commands:
            raise MarkupError(f"{path}:{line}: an output marker without a command")
        flags = {f.strip() for f in (m.group("flags") or "").split(",") if f.strip()}
        if flags - FLAGS:
            raise MarkupError(f"{path}:{line}: unknown flag(s) {sorted(flags - FLAGS)} (known: {sorted(FLAGS)})")
        pos = m.end() + 1
        lines_after = text[pos:].split("\n")
        skipped = 0
        while lines_after and lines_after[0].strip() == "" and skipped < 2:
            pos += len(lines_after.pop(0)) + 1
            skipped += 1
        opener = FENCE.match(lines_after[0]) if lines_after else None
        if not opener:
            raise MarkupError(f"{path}:{line}: an output marker must be followed by a fenced block (```)")
        fence = opener.group("fence")
        start = pos + len(lines_after[0]) + 1
        close = re.compile(r"^%s%s*[ \t]*$" % (re.escape(fence[0]) * len(fence), re.escape(fence[0])), re.M)
        end_match = close.search(text, start)
        if not end_match:
            raise MarkupError(f"{path}:{line}: the fenced block after the output marker is not closed")
        blocks.append(Block(path, line, commands, start, end_match.start(), text[start:end_match.start()],
                            slow="slow" in flags, fence=fence))
    return blocks


def _display(command: str, width: int = 116) -> str:
    """`$ command`, broken before a word outside quotes with ` \\` where it is longer than `width`."""
    words, word, quote = [], "", None
    for ch in command:
        if quote:
            word += ch
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
            word += ch
        elif ch == " ":
            if word:
                words.append(word)
            word = ""
        else:
            word += ch
    if word:
        words.append(word)
    units = []  # an option stays on the line of its value
    for w in words:
        if units and units[-1].startswith("-") and " " not in units[-1] and not w.startswith(("-", "|")):
            units[-1] += " " + w
        else:
            units.append(w)
    words = units
    lines, current = [], "$"
    for w in words:
        if len(current) + 1 + len(w) > width and current.strip() not in ("$", ""):
            lines.append(current + " \\")
            current = "   "
        current += " " + w
    lines.append(current)
    return "\n".join(lines)


def _clean(output: str) -> str:
    return "\n".join(line.rstrip() for line in output.replace("\r\n", "\n").split("\n")).strip("\n")


def _environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("FORCE_COLOR", "CLICOLOR_FORCE", "TRAINFIT_CALIBRATION", "TRAINFIT_DEBUG", "PYTHONPATH")}
    bindir = str(Path(sys.executable).parent)
    env.update({
        "PATH": bindir + os.pathsep + env.get("PATH", "/usr/bin:/bin"),
        "COLUMNS": COLUMNS, "LINES": "50", "NO_COLOR": "1", "TERM": "dumb", "TTY_COMPATIBLE": "0",
        "TRAINFIT_LANG": "en", "TRAINFIT_TODAY": TODAY, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
        "XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache"),
        "TRAINFIT_CACHE_DIR": str(home / "structures"), "OMP_NUM_THREADS": "1",
    })
    return env


class _Running:
    """One block's commands, one after the other, in its own directory."""

    def __init__(self, block: Block, base: Path, index: int):
        self.block = block
        self.dir = base / f"block{index:03d}"
        (self.dir / "work").mkdir(parents=True)
        for name in LINKED:
            if (ROOT / name).exists():
                os.symlink(ROOT / name, self.dir / "work" / name)
        self.env = _environment(self.dir)
        self.next = 0
        self.proc: subprocess.Popen | None = None
        self.started = 0.0
        self.began = time.monotonic()
        self.out_file = None
        self.parts: list[str] = []

    def start_next(self) -> bool:
        if self.next >= len(self.block.commands):
            return False
        command = self.block.commands[self.next]
        self.out_file = open(self.dir / f"out{self.next}.txt", "w+b")
        self.proc = subprocess.Popen(["bash", "-c", command], cwd=self.dir / "work", env=self.env,
                                     stdin=subprocess.DEVNULL, stdout=self.out_file, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.started = time.monotonic()
        return True

    def poll(self) -> bool:
        """True when the block is done (all commands run, or one timed out)."""
        if self.proc is None:
            return not self.start_next() and self._finish()
        code = self.proc.poll()
        if code is None:
            if time.monotonic() - self.started > TIMEOUT_S:
                self._kill()
                self.block.error = f"timed out after {TIMEOUT_S:.0f} s: {self.block.commands[self.next]}"
                return self._finish()
            return False
        self.out_file.seek(0)
        printed = self._as_a_user_sees_it(self.out_file.read().decode("utf-8", errors="replace"))
        self.out_file.close()
        command = self.block.commands[self.next]
        self.parts.append(_display(command) + ("\n" + _clean(printed) if _clean(printed) else ""))
        self.block.log.append(f"{time.monotonic() - self.started:6.2f} s  exit {code}  {command}")
        self.proc = None
        self.next += 1
        if not self.start_next():
            return self._finish()
        return False

    def _as_a_user_sees_it(self, printed: str) -> str:
        """The block's temporary directories as a user's own (~/.cache, ~/.config, the working folder): the same
        text in every run, whichever temporary directory it ran in."""
        for path, shown in ((self.dir / "structures", "~/.cache/trainfit/structures"), (self.dir / "cache", "~/.cache"),
                            (self.dir / "config", "~/.config"), (self.dir / "work", "."), (ROOT, ".")):
            printed = printed.replace(str(path) + "/", shown + "/").replace(str(path), shown)
        return printed

    def _kill(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 15)
                self.proc.wait(5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, 9)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        if self.out_file:
            self.out_file.close()

    def _finish(self) -> bool:
        output = "\n".join(self.parts)
        if self.block.error is None and re.search(r"^%s" % re.escape(self.block.fence), output, re.M):
            self.block.error = f"the output holds a line starting with {self.block.fence}: use a longer fence"
        if self.block.error is None:
            self.block.output = output
        self.block.seconds = time.monotonic() - self.began
        return True


def run_blocks(blocks: list[Block], jobs: int) -> None:
    """Run every block, up to `jobs` at once (each block's commands in order), from this one thread."""
    # the longest first: scripts (python ...) before single trainfit commands
    pending = sorted(enumerate(blocks), key=lambda ib: not any(c.startswith("python") for c in ib[1].commands))
    base = Path(tempfile.mkdtemp(prefix="trainfit-docs-"))
    running: list[_Running] = []
    try:
        while pending or running:
            while pending and len(running) < jobs:
                index, block = pending.pop(0)
                r = _Running(block, base, index)
                if not r.start_next():
                    r._finish()
                    continue
                running.append(r)
            running = [r for r in running if not r.poll()]
            if running:
                time.sleep(0.02)
    finally:
        for r in running:
            r._kill()
        shutil.rmtree(base, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------------------------
# The command reference, from the parser itself

def _md_text(text: str) -> str:
    """Help text as Markdown table-cell text: code spans kept, Markdown's special characters escaped elsewhere."""
    out = []
    for i, part in enumerate(re.split(r"(`[^`]*`)", " ".join(text.split()))):
        if i % 2:  # a code span; one holding a pipe as HTML, which a table cell cannot split
            out.append("<code>" + _html(part[1:-1]) + "</code>" if "|" in part else part)
        else:
            out.append(re.sub(r"([\\*_\[\]|<>])", lambda m: {"<": "&lt;", ">": "&gt;", "|": "&#124;"}.get(
                m.group(1), "\\" + m.group(1)), part))
    return "".join(out)


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "&#124;")


def _option_cell(action: argparse.Action) -> str:
    if not action.option_strings:
        name = action.metavar or action.dest
        return f"`{name}`"
    nargs0 = action.nargs == 0
    metavar = ""
    if not nargs0:
        mv = action.metavar or action.dest.upper()
        if isinstance(mv, tuple):
            mv = " ".join(mv)
        metavar = f" {mv}"
        if action.nargs in ("*", "?"):
            metavar = f" [{mv}]"
        elif action.nargs == "+":
            metavar = f" {mv} [{mv} ...]"
    return ", ".join(f"`{s}{metavar}`" for s in action.option_strings)


def _help_of(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = parser._get_formatter()
    help_text = formatter._expand_help(action) if action.help else ""
    if getattr(action, "required", False) and action.option_strings:
        help_text = (help_text + " (required)").strip()
    return help_text


def _subparsers(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            seen = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:
                    continue
                seen.add(id(sub))
                yield name, sub, helps.get(name)


def _command_section(lines: list[str], words: list[str], parser: argparse.ArgumentParser, short: str | None,
                     level: int) -> None:
    title = "trainfit " + " ".join(words)
    lines += [f"{'#' * level} `{title}`", ""]
    about = parser.description or short
    if about:
        lines += [_md_text(about), ""]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if a.help != argparse.SUPPRESS
                   and not isinstance(a, argparse._SubParsersAction) and not isinstance(a, argparse._HelpAction)]
        if not actions:
            continue
        heading = (group.title or "options").rstrip(":")
        lines += [f"**{_md_text(heading[:1].upper() + heading[1:])}**", "", "| option | what it sets |", "|---|---|"]
        for a in actions:
            lines.append(f"| {_option_cell(a)} | {_md_text(_help_of(parser, a)) or '&nbsp;'} |")
        lines.append("")
    subs = list(_subparsers(parser))
    if subs:
        lines += ["| action | what it does |", "|---|---|"]
        lines += [f"| [`{name}`](#{_slug(title + ' ' + name)}) | {_md_text(help_ or '')} |" for name, _, help_ in subs]
        lines.append("")
    if parser.epilog:
        lines += ["```text", parser.epilog.strip("\n"), "```", ""]
    for name, sub, help_ in subs:
        _command_section(lines, words + [name], sub, help_, level + 1)


def _slug(title: str) -> str:
    """Python-Markdown's toc slug of a heading (what mkdocs links to)."""
    import unicodedata

    value = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    value = re.sub(r"[^\w\s-]", "", value).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


def reference_markdown() -> str:
    """docs/reference.md: every command of `trainfit` and every option with its help, from build_parser()."""
    os.environ["COLUMNS"] = COLUMNS  # argparse wraps usage lines to the terminal's width
    from trainfit.cli.main import COMMANDS, build_parser

    parser = build_parser(None)
    commands = list(_subparsers(parser))
    lines = [
        "# Command reference",
        "",
        "<!-- Generated by tools/docs.py from trainfit's argparse parser (src/trainfit/cli/main.py, build_parser); "
        "do not edit: `make docs` rewrites it and `python tools/docs.py --check` fails when it is stale. -->",
        "",
        f"Every command of `trainfit` ({len(commands)}) and every option, with the help text `trainfit COMMAND --help`"
        " prints, generated from the parser itself (`src/trainfit/cli/main.py`: `COMMANDS`, `build_parser`) by "
        "`make docs`. Every command takes `--json` (keys in English) and `--lang zh|en`, also before the command.",
        "",
        "| command | what it answers |",
        "|---|---|",
    ]
    lines += [f"| [`trainfit {name}`](#{_slug('trainfit ' + name)}) | {_md_text(help_ or sub.description or '')} |"
              for name, sub, help_ in commands]
    lines += ["", "## `trainfit`", "", _md_text(parser.description or ""), "",
              "```text", parser.format_usage().strip(), "```", ""]
    lines += ["| option | what it sets |", "|---|---|"]
    for a in parser._actions:
        if a.option_strings and not isinstance(a, argparse._HelpAction) and a.help != argparse.SUPPRESS:
            lines.append(f"| {_option_cell(a)} | {_md_text(_help_of(parser, a))} |")
    lines.append("")
    assert {name for name, _, _ in commands} == set(COMMANDS), "build_parser(None) did not add every command"
    for name, sub, help_ in commands:
        _command_section(lines, [name], sub, help_, 2)
    _job_fields_section(lines)
    return "\n".join(lines).rstrip("\n") + "\n"


DOORS = {"cli": "CLI flag", "api": "API keyword", "request": "request file", "config": "web form / config",
         "plan": "plan.json", "case": "validation case"}


def _job_fields_section(lines: list[str]) -> None:
    """Every job field of the one schema (src/trainfit/spec/job.py, `trainfit.job_fields()`): its flag, API keyword,
    default, range or choices, the doors it comes through, and its help in English and Chinese."""
    from trainfit.api import job_fields

    zh = {f["name"]: f["help"] for f in job_fields("zh")}
    fields = job_fields("en")
    lines += ["## Job fields", "",
              f"The {len(fields)} fields of a training job, from the one schema (`src/trainfit/spec/job.py`, "
              "`trainfit.job_fields()`): the same name as a CLI flag, an API keyword (`trainfit.estimate(..., "
              "name=value)`), a key of a request file or the web form, and a key of plan.json, where its door is "
              "listed.", "",
              "| field | flag | default | values | doors | what it sets | 说明 |", "|---|---|---|---|---|---|---|"]
    for f in fields:
        values = " &#124; ".join(f"`{c}`" for c in f["choices"]) if f["choices"] else (
            f"{f['low']}–{f['high']}" if f["low"] is not None or f["high"] is not None else "")
        if f["unit"]:
            values = f"{values} {f['unit']}".strip()
        default = "" if f["default"] is None else f"`{f['default']}`"
        doors = ", ".join(DOORS.get(d, d) for d in f["doors"])
        lines.append(f"| `{f['name']}` | `{f['flag']}` | {default} | {_md_text(values) if not f['choices'] else values}"
                     f" | {doors} | {_md_text(f['help'])} | {_md_text(zh.get(f['name'], ''))} |")
    lines.append("")


# ---------------------------------------------------------------------------------------------------------------------

def markdown_files() -> list[Path]:
    return [ROOT / "README.md"] + sorted(p for p in (ROOT / "docs").rglob("*.md") if p != REFERENCE)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 when a shown output is stale")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="blocks run at once (default 2)")
    ap.add_argument("--slow", action="store_true", help="with --check: also rerun the blocks marked output[slow]")
    ap.add_argument("--verbose", "-v", action="store_true", help="print each command's time and exit status")
    ap.add_argument("files", nargs="*", type=Path, help="Markdown files (default: README.md and docs/**/*.md)")
    args = ap.parse_args(argv)
    files = [f.resolve() for f in args.files] or markdown_files()
    began = time.monotonic()
    try:
        blocks = [b for f in files for b in find_blocks(f)]
    except (MarkupError, OSError) as exc:
        print(f"docs.py: {exc}", file=sys.stderr)
        return 2
    skipped = [b for b in blocks if b.slow and args.check and not args.slow]
    blocks = [b for b in blocks if b not in skipped]
    run_blocks(blocks, max(1, args.jobs))
    stale, failed = [], []
    for b in blocks:
        if args.verbose:
            print(f"{b.where}  {b.seconds:.2f} s", *("    " + entry for entry in b.log), sep="\n")
        if b.error:
            failed.append(b)
        elif _clean(b.shown) != b.output if args.check else b.shown.rstrip("\n") != b.output:
            stale.append(b)
    reference_stale = False
    if not args.files:
        reference = reference_markdown()
        reference_stale = not REFERENCE.exists() or REFERENCE.read_text(encoding="utf-8") != reference
        if reference_stale and not args.check:
            REFERENCE.write_text(reference, encoding="utf-8")
    for b in failed:
        print(f"{b.where}: could not produce the output: {b.error}", file=sys.stderr)
    if args.check:
        for b in stale:
            print(f"{b.where}: stale output of `{' && '.join(b.commands)}` (the block differs from what it prints "
                  "now; `make docs` rewrites it)")
            diff = difflib.unified_diff(_clean(b.shown).split("\n"), b.output.split("\n"), "shown", "now", n=0,
                                        lineterm="")
            print("\n".join("    " + d for d in list(diff)[:12]))
        if reference_stale:
            print(f"{REFERENCE.relative_to(ROOT)}: stale (generated from the argparse parser; `make docs` rewrites it)")
        n_bad = len(stale) + int(reference_stale)
        for b in skipped:
            print(f"{b.where}: not rerun (output[slow]; --slow reruns it): `{' && '.join(b.commands)}`",
                  file=sys.stderr)
        print(f"docs.py --check: {len(blocks)} marked blocks rerun in {len(files)} files, {n_bad} stale, {len(failed)} "
              f"failed, {len(skipped)} slow not rerun ({time.monotonic() - began:.1f} s)", file=sys.stderr)
        return 1 if (stale or reference_stale or failed) else 0
    by_file: dict[Path, list[Block]] = {}
    for b in stale:
        by_file.setdefault(b.path, []).append(b)
    for path, changed in by_file.items():
        text = path.read_text(encoding="utf-8")
        for b in sorted(changed, key=lambda b: -b.start):  # from the end: earlier offsets stay valid
            text = text[:b.start] + b.output + "\n" + text[b.end:]
        path.write_text(text, encoding="utf-8")
        print(f"rewrote {len(changed)} block(s) in {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    if reference_stale:
        print(f"rewrote {REFERENCE.relative_to(ROOT)}")
    print(f"docs.py: {len(blocks)} marked blocks in {len(files)} files, {len(stale)} rewritten, {len(failed)} failed "
          f"({time.monotonic() - began:.1f} s)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    venv = _venv_python()
    if venv:  # python3 tools/docs.py: the virtual environment's interpreter, which imports trainfit
        os.execv(venv, [venv, *sys.argv])
    sys.exit(main())
