"""Makes tests/data/lmdeploy_serve_args.json: every option of LMDeploy's own `lmdeploy serve api_server` parser
(lmdeploy/cli/serve.py `SubCliServe.add_parser_api_server`, built from lmdeploy/cli/utils.py `ArgumentHelper`),
read from the parser object itself at a pinned release.

The lmdeploy wheel is on PyPI, but `import lmdeploy` pulls torch and transformers (lmdeploy/__init__.py,
lmdeploy/utils.py, lmdeploy/messages.py), which are not installable here without CUDA downloads. The CLI modules
themselves need none of it at parser-building time, so this script loads the wheel's own lmdeploy/cli/{cli,utils,
serve}.py, lmdeploy/version.py and lmdeploy/pytorch/disagg/config.py (pydantic only) with the package __init__
bypassed, and stubs what they import lazily while building the parser: `lmdeploy.utils.get_max_batch_size` (called
only when serving), `lmdeploy.messages.QuantPolicy` (its members are read from the wheel's messages.py with `ast`,
not copied) and the tool/reasoning parser registries (only their names enter help texts). To remake it:

    pip download lmdeploy==0.18.0 --no-deps -d /tmp/lmd && cd /tmp/lmd && unzip -q lmdeploy-0.18.0-*.whl 'lmdeploy/*'
    LMDEPLOY_SRC=/tmp/lmd python tests/data/lmdeploy_serve_args_extract.py > tests/data/lmdeploy_serve_args.json

With `--validate ARGV...` it runs that real parser's parse_args on ARGV (`lmdeploy serve api_server ...`) instead.
"""

import argparse
import ast
import enum
import importlib.util
import json
import os
import sys
import types

VERSION = "0.18.0"
WHEEL = "lmdeploy-0.18.0-cp311-cp311-manylinux_2_28_x86_64.whl"


def _module(name: str, path: str | None = None, **attrs) -> types.ModuleType:
    if path:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    else:
        mod = types.ModuleType(name)
        sys.modules[name] = mod
    for k, v in attrs.items():
        setattr(mod, k, v)
    return mod


def _quant_policy(src: str) -> type:
    """QuantPolicy as the wheel's messages.py declares it (class body read with ast)."""
    tree = ast.parse(open(os.path.join(src, "lmdeploy", "messages.py"), encoding="utf-8").read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "QuantPolicy")
    members = {t.targets[0].id: ast.literal_eval(t.value) for t in cls.body
               if isinstance(t, ast.Assign) and isinstance(t.targets[0], ast.Name)}
    return enum.IntEnum("QuantPolicy", members)


def api_server_parser(src: str) -> argparse.ArgumentParser:
    root = os.path.join(src, "lmdeploy")
    pkg = _module("lmdeploy")
    pkg.__path__ = [root]
    for sub in ("pytorch", "pytorch.disagg", "serve", "serve.parsers", "cli"):
        _module(f"lmdeploy.{sub}").__path__ = [os.path.join(root, *sub.split("."))]
    _module("lmdeploy.version", os.path.join(root, "version.py"))
    _module("lmdeploy.pytorch.disagg.config", os.path.join(root, "pytorch", "disagg", "config.py"))
    _module("lmdeploy.utils", get_max_batch_size=lambda device: 128)
    _module("lmdeploy.messages", QuantPolicy=_quant_policy(src))
    registry = types.SimpleNamespace(module_dict={})
    _module("lmdeploy.serve.parsers.reasoning_parser", ReasoningParserManager=registry,
            LEGACY_REASONING_PARSER_NAMES=())
    _module("lmdeploy.serve.parsers.tool_parser", ToolParserManager=registry)
    _module("lmdeploy.cli.utils", os.path.join(root, "cli", "utils.py"))
    _module("lmdeploy.cli.cli", os.path.join(root, "cli", "cli.py"))
    serve = _module("lmdeploy.cli.serve", os.path.join(root, "cli", "serve.py"))
    serve.SubCliServe.add_parser_api_server()
    return serve.SubCliServe.subparsers.choices["api_server"]


def _describe(action: argparse.Action) -> dict:
    typ = action.type
    name = getattr(typ, "__name__", None) if typ is not None else None
    return {"options": list(action.option_strings), "dest": action.dest, "action": type(action).__name__,
            "nargs": action.nargs, "const": action.const, "type": name, "choices": action.choices,
            "default": action.default if isinstance(action.default, (int, float, str, bool, type(None))) else None}


def main() -> None:
    src = os.environ.get("LMDEPLOY_SRC", "/tmp/lmd")
    parser = api_server_parser(src)
    if sys.argv[1:2] == ["--validate"]:
        argv = sys.argv[2:]
        assert argv[:3] == ["lmdeploy", "serve", "api_server"], argv[:3]
        print(json.dumps(vars(parser.parse_args(argv[3:])), default=str))
        return
    from lmdeploy.version import __version__

    assert __version__ == VERSION, __version__
    doc = {"source": "https://pypi.org/project/lmdeploy/0.18.0/", "wheel": WHEEL, "version": __version__,
           "files": ["lmdeploy/cli/serve.py", "lmdeploy/cli/utils.py"],
           "function": "SubCliServe.add_parser_api_server", "prog": "lmdeploy serve api_server",
           "quant_policy_values": sorted(int(p) for p in sys.modules["lmdeploy.messages"].QuantPolicy),
           "arguments": [_describe(a) for a in parser._actions if not isinstance(a, argparse._HelpAction)]}
    args = doc.pop("arguments")
    head = json.dumps(doc)[:-1]
    print(head + ', "arguments": [\n' + ",\n".join(json.dumps(a) for a in args) + "\n]}")


if __name__ == "__main__":
    main()
