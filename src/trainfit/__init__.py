"""trainfit: will a Transformer training job fit on a GPU, how fast, how much, and how to launch it.

The Python API is the primary interface; the `trainfit` command is a thin shell over it. Heavy dependencies
(torch, transformers, peft, deepspeed) are imported lazily by the parts that need them.
"""

from __future__ import annotations

import importlib
import sys
import types

__version__ = "0.1.0"

__all__ = ["estimate", "compare", "plan", "job_fields", "resolve_model", "get_gpu", "__version__"]

# `trainfit.estimate` (a subpackage), `trainfit.compare` and `trainfit.plan` (modules) are callable: calling them calls the API
# function of the same name. Python records an imported submodule as an attribute of its package, so a plain function
# of that name would be replaced by the module after its first import; a callable module is the same object either
# way, and `import trainfit.compare as m` / `from trainfit.estimate import core` keep working.


def __getattr__(name: str):
    if name in ("estimate", "compare", "plan"):
        return importlib.import_module(f"{__name__}.{name}")
    if name in ("resolve_model", "get_gpu"):
        from . import catalog

        return getattr(catalog, name)
    if name == "job_fields":
        from .api import job_fields

        return job_fields
    raise AttributeError(f"module 'trainfit' has no attribute {name!r}")


def callable_module(module_name: str, function):
    """Make the module `module_name` callable: calling it calls `function()` (a thunk, so nothing heavy is imported
    before the first call)."""

    class _CallableModule(types.ModuleType):
        def __call__(self, *args, **kwargs):
            return function()(*args, **kwargs)

    sys.modules[module_name].__class__ = _CallableModule
