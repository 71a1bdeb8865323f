"""`trainfit monitor`: sample the GPUs while a command runs (or now), then say what bounds the job."""

from __future__ import annotations

import argparse
import json
import subprocess
import time

from .common import add_output_flags, console, lang_of, print_json

HELP = "watch GPU utilisation, memory, power and clocks while a job runs; summarise what bounds it"
EXAMPLES = """examples:
  trainfit monitor -- ./launch.sh                  # sample while the command runs, then the verdict
  trainfit monitor --duration 60                   # attach to whatever runs now, for a minute
  trainfit monitor --record samples.json -- python train.py ...
  trainfit monitor --replay samples.json --json    # summarise a recorded series
"""


def add_parser(sub) -> None:
    p = sub.add_parser("monitor", help=HELP, description=HELP, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--interval", type=float, default=0.5, help="seconds between samples (default 0.5)")
    p.add_argument("--duration", type=float, default=None, help="stop after this many seconds (no command)")
    p.add_argument("--record", help="write the samples to this JSON file")
    p.add_argument("--replay", help="summarise samples recorded earlier instead of sampling")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ...: the job to run and watch")
    add_output_flags(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import SpecError
    from ..monitor import nvml as mon

    lang_of(args)
    if args.interval <= 0:
        raise SpecError("--interval must be positive")
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.replay:
        from .. import userjson

        # size checked before reading (64 MB), strict UTF-8 and JSON, no duplicate keys, bounded depth
        text = userjson.read_text(args.replay, "monitor record")
        from ..errors import sentence_of
        from ..i18n import say

        where = say("ei_samples_where", path=args.replay)
        doc = userjson.loads(text, where)
        try:
            samples = mon.samples_from_dicts(doc["samples"])
        except (ValueError, KeyError, TypeError) as exc:
            raise SpecError(say("ei_in_file", where=where, message=sentence_of(exc))) from None
        return _report(args, mon.summarize(samples), None)
    sampler = mon.Sampler(args.interval)  # raises NoGpu (one line, exit 2) without a GPU or NVML
    sampler.start()
    code = None
    try:
        code = _watch(args, command, sampler)
    except KeyboardInterrupt:
        pass
    samples = sampler.stop()
    if args.record:
        with open(args.record, "w", encoding="utf-8") as fh:
            json.dump({"samples": mon.samples_to_dicts(samples)}, fh)
    _report(args, mon.summarize(samples), code)
    return 0 if code in (None, 0) else code


def _watch(args: argparse.Namespace, command: list[str], sampler) -> int | None:
    from rich.live import Live

    proc = subprocess.Popen(command) if command else None
    start = time.time()
    with Live(_table(sampler.samples), refresh_per_second=2, console=console(), transient=True) as live:
        while True:
            if proc is not None and proc.poll() is not None:
                return proc.returncode
            if proc is None and args.duration is not None and time.time() - start >= args.duration:
                return None
            time.sleep(args.interval)
            live.update(_table(sampler.samples))


def _table(samples):
    from rich.table import Table

    table = Table(title="GPUs (latest sample)")
    for col in ("GPU", "util", "mem busy", "memory GiB", "power W", "SM MHz", "PCIe tx/rx MB/s"):
        table.add_column(col, justify="right")
    latest = {}
    for s in samples:
        latest[s.gpu] = s
    for g, s in sorted(latest.items()):
        pcie = f"{s.pcie_tx_mb_s or 0:,.0f}/{s.pcie_rx_mb_s or 0:,.0f}" if s.pcie_tx_mb_s is not None else "—"
        table.add_row(str(g), f"{s.util:.0%}", f"{s.mem_util:.0%}", f"{s.mem_used_gib:.1f}/{s.mem_total_gib:.1f}",
                      f"{s.power_w or 0:.0f}/{s.power_limit_w or 0:.0f}", f"{s.sm_clock_mhz or 0:.0f}", pcie)
    return table


def _report(args: argparse.Namespace, summary: dict, code: int | None) -> int:
    if code is not None:
        summary["command_exit_code"] = code
    if args.json:
        print_json(summary)
        return 0
    c = console()
    c.print(f"verdict: [bold]{summary['verdict']}[/bold] ({summary.get('samples', 0)} samples, "
            f"{summary.get('seconds', 0)} s)")
    for g, stats in summary.get("gpus", {}).items():
        c.print(f"  GPU {g}: {stats['verdict']} — {stats['why']}")
    return 0
