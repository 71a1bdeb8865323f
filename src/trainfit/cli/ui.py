"""`trainfit ui`: the local web calculator (FastAPI + one static page, over the Python API)."""

from __future__ import annotations

import argparse
import sys

HELP = "a local web calculator: estimate, what would fit, compare, plan, plots, plan.json and setup downloads"
EXAMPLES = """examples:
  trainfit ui                       # http://127.0.0.1:8765
  trainfit ui --port 9000
  trainfit ui --host 0.0.0.0        # reachable by others on the network (a warning says so)
"""


def add_parser(sub) -> None:
    p = sub.add_parser("ui", help=HELP, description=HELP, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only; there is no authentication)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import SpecError

    if not 0 < args.port < 65536:
        raise SpecError(f"--port must be between 1 and 65535, got {args.port}")
    try:
        from ..ui.app import serve
        import fastapi, uvicorn  # noqa: F401, E401
    except ImportError as exc:
        raise SpecError(f"trainfit ui needs the 'ui' extra: pip install 'trainfit[ui]' ({exc.name} missing)") from None
    from ..i18n import default_lang
    from ..ui.guard import bind, exposure_warning

    sock = bind(args.host, args.port)  # a port in use: one error line (exit 2) before anything else is printed
    warning = exposure_warning(args.host, args.port, default_lang())
    if warning:
        print(warning, file=sys.stderr)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"trainfit ui: http://{shown}:{args.port}/ (Ctrl-C to stop)", file=sys.stderr)
    try:
        serve(args.host, args.port, sock=sock)
    finally:
        sock.close()
    return 0
