"""Training stacks (frameworks.yaml): their defaults, and the name a user states with --framework."""

from __future__ import annotations

from functools import lru_cache

from ..errors import unknown_name
from ..i18n import say
from ._io import read_yaml

# A stack the catalog does not describe (ms-swift, LLaMA-Factory, Axolotl, one's own loop): estimated as eager
# Hugging Face code, with the band of a stack the calibration has not seen.
OTHER = "other"


@lru_cache(maxsize=1)
def framework_defaults() -> dict[str, dict]:
    """{stack: {param_dtype, kbit_fp32_upcast, kbit_keeps_inputs, basis}} from frameworks.yaml."""
    return (read_yaml("frameworks.yaml") or {}).get("frameworks", {})


def stack_param_dtype(stack: dict, method) -> str:
    """The weights' dtype a stack trains in for a method: its `param_dtype_<method>` where it names one (ms-swift's
    full fine-tuning keeps the dtype the model was loaded in), else its `param_dtype` (fp32 by default)."""
    name = getattr(method, "value", method) or "full"  # the job's default method
    return str(stack.get(f"param_dtype_{name}") or stack.get("param_dtype", "fp32"))


def framework_names() -> list[str]:
    return sorted(framework_defaults()) + [OTHER]


def check_framework(name: str | None) -> str | None:
    """A stated training stack, checked against the catalog (SpecError with did-you-mean); None stays None."""
    if name is None:
        return None
    key = str(name).strip().lower()
    if key not in framework_names():
        raise unknown_name(say("ei_kind_framework"), str(name), framework_names(),
                           say("ei_hint_frameworks", names=", ".join(framework_names()), other=OTHER))
    return key


def with_framework(eff, framework: str | None):
    """The efficiencies for a stated training stack (its by_framework values); unchanged when none is stated."""
    name = check_framework(framework)
    return eff if name is None else eff.for_framework(name)

