

def _api_estimate():
    from ..api import estimate

    return estimate


# `trainfit.estimate(...)` is the API function (trainfit/__init__.py says why this package is callable).
from .. import callable_module  # noqa: E402

callable_module(__name__, _api_estimate)
