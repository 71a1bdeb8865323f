"""trainfit: will a Transformer training job fit on a GPU, how fast, how much, and how to launch it.

The Python API is the primary interface; the `trainfit` command is a thin shell over it. Heavy dependencies
(torch, transformers, peft, deepspeed) are imported lazily by the parts that need them.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["estimate", "compare", "resolve_model", "get_gpu", "__version__"]


def __getattr__(name: str):
    if name == "estimate":
        from .api import estimate

        return estimate
    if name == "compare":
        from .compare import compare

        return compare
    if name == "resolve_model":
        from .catalog import resolve_model

        return resolve_model
    if name == "get_gpu":
        from .catalog import get_gpu

        return get_gpu
    raise AttributeError(f"module 'trainfit' has no attribute {name!r}")
