import os
import sys

import pytest

os.environ.setdefault("TRAINFIT_LANG", "en")


def pytest_configure(config):
    # Tests build models on the meta device or run tiny ones on the CPU; keep torch's threads modest.
    os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture
def run_cli(capsys):
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    from trainfit.cli.main import main

    def _run(*argv: str):
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return _run


def python_exe() -> str:
    return sys.executable
