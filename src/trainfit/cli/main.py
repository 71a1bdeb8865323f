"""The `trainfit` command: a thin shell over the Python API. Subcommands live in one small module each."""

from __future__ import annotations

import argparse
import sys

from ..errors import TrainfitError

DESCRIPTION = ("trainfit: will my Transformer training job fit on this GPU, how long will it take, what will it cost, "
               "and how should I launch it?")


def build_parser() -> argparse.ArgumentParser:
    from . import bench, calibrate, catalog_cmds, compare, estimate, generate, monitor, plan, trace, validate

    parser = argparse.ArgumentParser(prog="trainfit", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"trainfit {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    estimate.add_parser(sub)
    compare.add_parser(sub)
    plan.add_parser(sub)
    generate.add_parser(sub)
    trace.add_parser(sub)
    bench.add_parser(sub)
    monitor.add_parser(sub)
    validate.add_parser(sub)
    calibrate.add_parser(sub)
    catalog_cmds.add_parsers(sub)
    return parser


def _version() -> str:
    from .. import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    try:
        return args.run(args)
    except TrainfitError as exc:
        print(f"trainfit: error: {exc}", file=sys.stderr)
        if getattr(args, "json", False):  # scripts reading stdout get the error as JSON too
            import json

            print(json.dumps({"error": str(exc), "kind": type(exc).__name__}))
        return 2
    except KeyboardInterrupt:
        print("trainfit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
