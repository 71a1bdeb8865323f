"""trainfit: will a Transformer training job fit on a GPU, how fast, how much, and how to launch it.

The Python API is the primary interface; the `trainfit` command is a thin shell over it. Heavy dependencies
(torch, transformers, peft, deepspeed) are imported lazily by the parts that need them.
"""

from __future__ import annotations

import importlib
import sys
import types

__version__ = "0.1.0"

__all__ = ["estimate", "compare", "resolve_model", "get_gpu", "__version__"]

# name -> (module, function). `trainfit.estimate` and `trainfit.compare` are also the names of a subpackage and a
# module; Python records an imported submodule as an attribute of its package, which would replace the function
# after its first call. The package's attribute lookup therefore always answers these names with the functions.
_API = {"estimate": ("api", "estimate"), "compare": ("compare", "compare"),
        "resolve_model": ("catalog", "resolve_model"), "get_gpu": ("catalog", "get_gpu")}


class _Package(types.ModuleType):
    def __getattribute__(self, name: str):
        target = _API.get(name)
        if target is not None:
            return getattr(importlib.import_module(f"{__name__}.{target[0]}"), target[1])
        return super().__getattribute__(name)


sys.modules[__name__].__class__ = _Package
