"""Named efficiencies and overheads (efficiency.yaml), with calibration and user overrides.

`Efficiencies.for_gpu(gpu)` gives a view that resolves each name for one GPU and records what it used, so every
estimate can print the values behind it.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache, wraps
from typing import Any

from ..errors import CatalogError, SpecError, did_you_mean
from ..i18n import say
from ..spec.hardware import GpuSpec
from ._io import read_yaml


@lru_cache(maxsize=1)
def _shipped() -> dict[str, dict]:
    data = read_yaml("efficiency.yaml")
    values = data.get("values") if isinstance(data, dict) else None
    if not isinstance(values, dict):
        raise CatalogError("efficiency.yaml: missing 'values'")
    return values


def merge_tables(base: dict[str, dict], over: dict[str, dict]) -> dict[str, dict]:
    """Overlay `over` (same schema, any subset) on `base`; unknown names are rejected."""
    out = copy.deepcopy(base)
    for name, entry in over.items():
        if name not in out:
            raise SpecError(say("ei_unknown_efficiency", name=name, dym=did_you_mean(name, out)))
        if not isinstance(entry, dict):
            entry = {"default": entry}
        for key, value in entry.items():
            if isinstance(value, dict):
                out[name].setdefault(key, {}).update(value)
            else:
                out[name][key] = value
    return out


@dataclass(frozen=True, eq=False)
class Efficiencies:
    """The table of named values after calibration and user overrides (compared and hashed by identity)."""

    table: dict[str, dict]
    origin: str = "shipped"
    framework: str | None = None  # training stack of a measured run (validation): selects by_framework values
    _resolved: dict = field(default_factory=dict, repr=False)

    @classmethod
    def default(cls) -> "Efficiencies":
        """efficiency.yaml overlaid with the shipped calibration (calibration.yaml, made by `make calibrate`)."""
        return _default()

    @classmethod
    def shipped(cls) -> "Efficiencies":
        """efficiency.yaml alone: the prior that `trainfit calibrate` starts from."""
        return _prior()

    def with_overrides(self, overrides: dict[str, Any], origin: str = "user") -> "Efficiencies":
        """`overrides`: {name: value} (applies everywhere) or {name: {by_gpu: {...}, ...}}. Every number is checked
        against the value's `valid` interval in efficiency.yaml (SpecError naming the value and where it came from)."""
        if not isinstance(overrides, dict):
            raise SpecError(f"{origin}: efficiency overrides must be a mapping of names to values")
        table = merge_tables(self.table, overrides)
        for name, value in overrides.items():
            check_value(name, value, table[name].get("valid"), origin)
        for name, value in overrides.items():
            if not isinstance(value, dict):  # a plain value replaces every per-GPU/architecture variant
                for key in ("by_gpu", "by_architecture", "by_memory_type", "by_link", "by_framework", "by_provider"):
                    if key in table[name]:
                        table[name][key] = {k: value for k in table[name][key]}
        return Efficiencies(table, origin=f"{self.origin}+{origin}", framework=self.framework)

    def for_framework(self, framework: str | None) -> "Efficiencies":
        """The same table, resolving `by_framework` entries for this training stack (memoised per stack)."""
        if framework == self.framework:
            return self
        key = ("framework", framework)
        hit = self._resolved.get(key)
        if hit is None:
            hit = self._resolved[key] = Efficiencies(self.table, self.origin, framework)
        return hit

    def names(self) -> list[str]:
        return sorted(self.table)

    def describe(self, name: str) -> dict:
        return self.table[name]

    def for_gpu(self, gpu: GpuSpec) -> "EfficiencyView":
        return EfficiencyView(self, gpu)

    def shared_view(self, gpu: GpuSpec) -> "EfficiencyView":
        """One long-lived view per GPU for memoised inner functions (its `used` is the union of their lookups)."""
        key = ("view", gpu.id, gpu.memory_bytes)
        view = self._resolved.get(key)
        if view is None:
            view = self._resolved[key] = EfficiencyView(self, gpu)
        return view


def parse_interval(text: str) -> tuple[float, float, bool, bool]:
    """'(0, 1]' -> (0.0, 1.0, low open, high closed) as (low, high, low_open, high_open)."""
    text = str(text).strip()
    if len(text) < 5 or text[0] not in "[(" or text[-1] not in "])" or "," not in text:
        raise CatalogError(f"efficiency.yaml: malformed interval {text!r}")
    low, high = (float(x) for x in text[1:-1].split(","))
    return low, high, text[0] == "(", text[-1] == ")"


def in_interval(value: float, interval: str) -> bool:
    low, high, low_open, high_open = parse_interval(interval)
    above = value > low if low_open else value >= low
    below = value < high if high_open else value <= high
    return above and below


def check_value(name: str, value: Any, interval: str | None, origin: str) -> None:
    """A number (or every number in a by_gpu/by_architecture/... mapping) inside `interval`."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key in ("basis", "description", "unit", "valid", "fitted", "note"):
                continue
            check_value(f"{name}.{key}", inner, interval, origin)
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(say("ei_eff_number", origin=origin, name=name, value=value))
    if value != value or value in (float("inf"), float("-inf")):
        raise SpecError(say("ei_eff_not_finite", origin=origin, name=name, value=value))
    if interval and not in_interval(float(value), interval):
        raise SpecError(say("ei_eff_range", origin=origin, name=name, value=value, interval=interval))


@lru_cache(maxsize=1)
def _prior() -> Efficiencies:
    return Efficiencies(_shipped())


def shipped_calibration() -> dict | None:
    """The packaged calibration document (None when the package carries none)."""
    try:
        doc = read_yaml("calibration.yaml")
    except FileNotFoundError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("values"), dict):
        raise CatalogError("calibration.yaml: missing 'values'")
    return doc


@lru_cache(maxsize=1)
def _default() -> Efficiencies:
    doc = shipped_calibration()
    if doc is None:
        return _prior()
    return Efficiencies(merge_tables(_shipped(), doc["values"]), origin="shipped+calibration")


# What one estimate asked (its `used`): the views it reads are shared and long-lived (memoised inner functions read
# them), so their `used` is the union of every lookup in the process; a recording collects (view id, key) of the
# lookups made while it is open, and `recorded_cache` replays into it what a memoised function asked when it ran
_RECORDINGS: ContextVar[tuple[set, ...]] = ContextVar("efficiency_recordings", default=())


@contextmanager
def recording():
    """Collect the (id(view), key) of every efficiency value asked inside the block, memoised work included."""
    keys: set = set()
    token = _RECORDINGS.set((*_RECORDINGS.get(), keys))
    try:
        yield keys
    finally:
        _RECORDINGS.reset(token)


def note_asked(keys) -> None:
    """Tell the open recordings about values asked earlier (a memoised result's)."""
    for keys_of in _RECORDINGS.get():
        keys_of.update(keys)


def recorded_cache(maxsize: int):
    """lru_cache for a function that reads efficiency views, whose results also say what they asked: the values a
    call asked are learnt the first time it runs under an open recording (the function runs then, inside the
    recording) and replayed into the open recordings on later calls (so an estimate's `used` is its own, whatever
    ran before). With no recording open (the search) it is the plain lru_cache."""
    def decorate(fn):
        cached = lru_cache(maxsize=maxsize)(fn)
        asked: dict = {}

        @wraps(fn)
        def wrapper(*args):
            if not _RECORDINGS.get():
                return cached(*args)
            keys = asked.get(args)
            if keys is None:
                with recording() as seen:
                    result = fn(*args)
                if len(asked) >= maxsize:
                    asked.clear()
                asked[args] = frozenset(seen)
                return result
            note_asked(keys)
            return cached(*args)

        def cache_clear() -> None:
            cached.cache_clear()
            asked.clear()

        wrapper.cache_clear = cache_clear
        wrapper.cache_info = cached.cache_info
        return wrapper
    return decorate


def used_by(view: "EfficiencyView", keys: set) -> dict[str, dict]:
    """The entries of `view.used` a recording saw asked of that view."""
    vid = id(view)
    return {k: view.used[k] for v, k in sorted(keys, key=lambda x: x[1]) if v == vid and k in view.used}


@dataclass
class EfficiencyView:
    eff: Efficiencies
    gpu: GpuSpec
    used: dict[str, dict] = field(default_factory=dict)

    def __call__(self, name: str, link: str | None = None) -> float:
        key = name if link is None else f"{name}[{link}]"
        recordings = _RECORDINGS.get()
        if recordings:
            for keys in recordings:
                keys.add((id(self), key))
        hit = self.used.get(key)
        if hit is not None:
            return hit["value"]
        entry = self.eff.table.get(name)
        if entry is None:
            raise KeyError(f"efficiency {name!r} is not defined in efficiency.yaml")
        value, level = self._resolve(name, entry, link)
        self.used[key] = {"value": value, "from": level, "unit": entry.get("unit", ""), "basis": entry.get("basis", "")}
        return value

    def _resolve(self, name: str, entry: dict, link: str | None) -> tuple[float, str]:
        key = (self.gpu.id, self.gpu.architecture, self.gpu.memory_type, id(entry), link, self.eff.framework)
        hit = self.eff._resolved.get(key)
        if hit is None:
            hit = self.eff._resolved[key] = self._lookup(name, entry, link)
        return hit

    def _lookup(self, name: str, entry: dict, link: str | None) -> tuple[float, str]:
        """The value by PRECEDENCE; an uncalibrated by_gpu value is a ratio to its architecture's (see there)."""
        g = self.gpu
        candidates = [("by_link", link), ("by_framework", self.eff.framework), ("by_gpu", g.id),
                      ("by_architecture", g.architecture), ("by_memory_type", g.memory_type)]
        for key, sub in candidates:
            table = entry.get(key)
            if sub is not None and isinstance(table, dict) and sub in table:
                if key == "by_gpu":
                    relative = _relative_to_architecture(name, entry, g)
                    if relative is not None:
                        return relative
                return float(table[sub]), f"{key}[{sub}]"
        if "default" in entry:
            return float(entry["default"]), "default"
        raise KeyError(f"no value for {sub!r} and no default")


def load_calibration(path: str) -> dict:
    """The `values` of a calibration file (efficiency.yaml schema) as overrides."""
    from ..userfiles import read_user_yaml

    # size checked before reading, strict UTF-8 without NUL bytes, no YAML anchors/aliases (a 300-byte "billion
    # laughs" file), no duplicate keys, bounded nesting: each a one-line error
    doc = read_user_yaml(path, "calibration file")
    if not isinstance(doc, dict) or not isinstance(doc.get("values"), dict):
        raise SpecError(say("ei_not_calibration", path=path))
    return doc["values"]


def user_calibration_path() -> str | None:
    """A user's calibration from the environment or the config directory, when there is one.

    $TRAINFIT_CALIBRATION names a file; otherwise $XDG_CONFIG_HOME/trainfit/calibration.yaml (default
    ~/.config/trainfit/calibration.yaml) is used when it exists.
    """
    import os

    env = os.environ.get("TRAINFIT_CALIBRATION")
    if env:
        return env
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    path = os.path.join(base, "trainfit", "calibration.yaml")
    return path if os.path.isfile(path) else None


def load_efficiencies(overrides: dict | None = None, calibration: str | None = None) -> Efficiencies:
    """Shipped efficiencies and calibration, then a user's calibration (--calibration FILE, or the config
    directory), then explicit overrides."""
    eff = Efficiencies.default()
    calibration = calibration or user_calibration_path()
    if calibration:
        eff = eff.with_overrides(load_calibration(calibration), origin=f"calibration:{calibration}")
    if overrides:
        eff = eff.with_overrides(overrides, origin="--set")
    return eff


# How a named value is chosen for one GPU, first match wins (printed by `trainfit efficiencies`).
PRECEDENCE = (
    say("va_prec_set"),
    say("va_prec_link"),
    say("va_prec_framework"),
    say("va_prec_gpu_set"),
    say("va_prec_gpu_yaml"),
    say("va_prec_arch"),
    "by_memory_type[type]",
    "default",
)


def _relative_to_architecture(name: str, entry: dict, g: GpuSpec) -> tuple[float, str] | None:
    """An uncalibrated by_gpu value (equal to efficiency.yaml's) as its ratio to efficiency.yaml's architecture
    value, times the architecture's current value (calibrated or not), kept inside the valid range; None when the
    by_gpu value was calibrated or set, or there is no architecture value to be relative to."""
    prior = _shipped().get(name) or {}
    own = float(entry["by_gpu"][g.id])
    prior_gpu = (prior.get("by_gpu") or {}).get(g.id)
    prior_arch = (prior.get("by_architecture") or {}).get(g.architecture, prior.get("default"))
    arch = (entry.get("by_architecture") or {}).get(g.architecture)
    if prior_gpu is None or float(prior_gpu) != own or not prior_arch or arch is None:
        return None
    value = own * float(arch) / float(prior_arch)
    if entry.get("valid"):
        low, high, low_open, high_open = parse_interval(entry["valid"])
        value = min(max(value, low), high)
    return value, f"by_architecture[{g.architecture}] x by_gpu[{g.id}]/by_architecture (efficiency.yaml ratio)"
