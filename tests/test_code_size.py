"""Code split along its ideas (issue 38): no module over 800 lines and no function over 80 lines in src/, so a change
to one idea (a memory term, the training loop's checkpointing) reads and edits one small unit."""

import ast
import os

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80  # from `def` to its last line; decorators not counted


def oversized(root: str) -> list[str]:
    """'path: N lines' for each module and 'path:line name: N lines' for each function over the limits."""
    out = []
    for folder, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            text = open(path, encoding="utf-8").read()
            rel = os.path.relpath(path, root)
            lines = len(text.splitlines())
            if lines > MAX_MODULE_LINES:
                out.append(f"{rel}: {lines} lines")
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        out.append(f"{rel}:{node.lineno} {node.name}: {length} lines")
    return out


def test_no_module_or_function_over_its_limit():
    found = oversized(SRC)
    assert not found, "over the limits (module 800 lines, function 80):\n" + "\n".join(found)


def test_the_limits_are_measured(tmp_path):
    """The check sees an oversized function and module."""
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "big.py").write_text("def long():\n" + body + "\n" + "\n" * MAX_MODULE_LINES)
    (tmp_path / "small.py").write_text("def short():\n    return 1\n")
    found = oversized(str(tmp_path))
    assert found == ["big.py: 881 lines", "big.py:1 long: 81 lines"]
