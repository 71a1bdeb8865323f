"""What every part of train.py shares: the one-line setup error and the JSON log line.

train.py is trainfit/train/runner.py; `trainfit generate` writes it and its modules (runner.JOB_MODULES, this one
among them) side by side into the job folder, where they import one another as top-level modules (standard library
only at module level, as in the package)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["SetupError", "log"]


class SetupError(Exception):
    """A problem with the inputs, reported in one line before any training starts."""


def log(dist: Any, record: dict, path: str | None = None) -> None:
    """One JSON line from the main process (`dist`: train_launch.Dist, which imports this module)."""
    if not dist.main:
        return
    line = json.dumps(record, sort_keys=True)
    print(line, flush=True)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
