"""The CLI must stay fast and torch-free (DESIGN.md rule 2)."""

import subprocess
import sys

HEAVY = ("torch", "transformers", "peft", "deepspeed", "accelerate", "matplotlib")


def _loaded_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_import_cli_imports_no_heavy_module():
    assert _loaded_after("import trainfit.cli.main") == []


def test_estimate_and_compare_run_without_heavy_modules():
    code = ("import contextlib, io\nfrom trainfit.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['estimate', '--model', 'qwen2-7b', '--gpu', 'a10', '--json'])\n"
            "    main(['compare', '--model', 'llama-2-7b', '--method', 'lora', '--json'])")
    assert _loaded_after(code) == []
