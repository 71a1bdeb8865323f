"""PlanRequest: what the user wants trained, on which clouds, by when and for how much.

Built from CLI flags or a YAML/TOML request file with the same names (`dataset-tokens` or `dataset_tokens`);
unknown keys are rejected with a "did you mean".
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields
from typing import Any

from ..errors import SpecError, did_you_mean
from ..units import parse_count, parse_duration

METHODS = ("full", "lora", "qlora", "freeze", "auto")
PROVIDERS = ("alibaba", "aws", "gcp", "azure", "all")
OBJECTIVES = ("cheapest", "fastest")
PRICING = ("payg", "subscription", "spot")
CURRENCIES = ("CNY", "USD")


@dataclass(frozen=True)
class PlanRequest:
    model: str
    method: str = "auto"
    dataset_tokens: float | None = None
    samples: float | None = None
    avg_len: float | None = None
    epochs: float = 1.0
    global_batch: int | None = None  # sequences per optimizer step (DPO: pairs)
    global_batch_tokens: int | None = None
    deadline: float | None = None  # seconds
    budget: float | None = None
    currency: str | None = None
    usd_cny: float | None = None  # exchange rate to compare offers in both currencies
    provider: str = "alibaba"
    region: str | None = None
    gpu: tuple[str, ...] = ()
    max_nodes: int = 8
    pricing: str = "payg"
    objective: str = "cheapest"
    top: int = 5
    # The job's fields that the user gives and the search keeps (spec/job.py, the request door: task, seq_len,
    # precision, optimizer, LoRA rank and targets, ...), as (name, value) pairs of converted values.
    job: tuple[tuple[str, Any], ...] = ()

    def job_value(self, name: str) -> Any:
        return dict(self.job).get(name)

    @property
    def task(self) -> Any:  # default: sft, classification for encoders
        return self.job_value("task")

    @property
    def seq_len(self) -> int | None:  # default: 2048 capped by the model; classification: fits avg_len
        return self.job_value("seq_len")

    @property
    def attention(self) -> str:
        value = self.job_value("attention")
        return value.value if value is not None else "sdpa"

    def __post_init__(self) -> None:
        _one_of("method", self.method, METHODS)
        _one_of("provider", self.provider, PROVIDERS)
        _one_of("objective", self.objective, OBJECTIVES)
        _one_of("pricing", self.pricing, PRICING)
        if self.currency is not None:
            _one_of("currency", self.currency, CURRENCIES)
        if self.dataset_tokens is None and (self.samples is None or self.avg_len is None):
            raise SpecError("give the dataset size: --dataset-tokens 200M, or --samples 50k with --avg-len 900")
        for name in ("dataset_tokens", "samples", "avg_len", "epochs", "deadline", "budget", "usd_cny"):
            value = getattr(self, name)
            if value is not None and (not math.isfinite(value) or value <= 0):
                raise SpecError(f"--{name.replace('_', '-')} must be positive, got {value!r}")
        for name in ("dataset_tokens", "samples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise SpecError(f"--{name.replace('_', '-')} must be at least 1, got {value:g}")
        if self.epochs > 1000:
            raise SpecError(f"--epochs {self.epochs:g} is absurd (at most 1000)")
        if self.dataset_tokens is not None and self.dataset_tokens > 1e15:
            raise SpecError("--dataset-tokens above 10^15 is absurd")
        for name, high in (("max_nodes", 512), ("top", 100)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= high:
                raise SpecError(f"--{name.replace('_', '-')} must be an integer in [1, {high}], got {value!r}")
        for name in ("global_batch", "global_batch_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise SpecError(f"--{name.replace('_', '-')} must be a positive integer, got {value!r}")
        if self.provider == "all" and self.usd_cny is None:
            raise SpecError("--provider all compares offers priced in CNY and in USD: give the rate with --usd-cny "
                            "(CNY per USD, e.g. 7.1); without it AWS/GCP/Azure offers could not be compared")
        if self.global_batch and self.global_batch_tokens:
            raise SpecError("give --global-batch (sequences) or --global-batch-tokens, not both")

    @property
    def budget_currency(self) -> str:
        if self.currency:
            return self.currency
        return "USD" if self.provider in ("aws", "gcp", "azure") else "CNY"

    @property
    def providers(self) -> tuple[str, ...]:
        return ("alibaba", "aws", "gcp", "azure") if self.provider == "all" else (self.provider,)


def _one_of(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise SpecError(f"invalid --{name} {value!r} (choose from: {', '.join(allowed)})")


_COUNT_FIELDS = ("dataset_tokens", "samples", "budget")
_INT_FIELDS = ("global_batch", "global_batch_tokens", "max_nodes", "top")
_FLOAT_FIELDS = ("avg_len", "epochs", "usd_cny")


def _convert(name: str, value: Any) -> Any:
    if value is None:
        return None
    try:
        if name in _COUNT_FIELDS:
            return parse_count(value)
        if name == "deadline":
            return parse_duration(value)
        if name in _INT_FIELDS:
            number = parse_count(value)
            if number != int(number):
                raise ValueError(f"not an integer: {value!r}")
            return int(number)
        if name in _FLOAT_FIELDS:
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):  # `epochs: true` is no number
                raise ValueError(f"not a number: {value!r}")
            return float(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise SpecError(f"--{name.replace('_', '-')}: {exc}") from None
    if name == "gpu":
        items = value.split(",") if isinstance(value, str) else list(value)
        return tuple(dict.fromkeys(str(x).strip() for x in items if str(x).strip()))  # each name once
    if name == "currency":
        return str(value).upper()
    return value


def request_from_mapping(data: dict[str, Any], where: str = "request") -> PlanRequest:
    """Build a PlanRequest from a dict (request file or CLI); keys may use '-' or '_'. The job's fields are the
    declared ones that pass the request door (spec/job.py)."""
    from .job import REQUEST, through

    job_fields = {f.name: f for f in through(REQUEST)}
    known = {f.name for f in fields(PlanRequest)} - {"job"}
    values: dict[str, Any] = {}
    job: dict[str, Any] = {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name in job_fields:
            if value is not None:
                try:
                    job[name] = job_fields[name].convert(value)
                except SpecError as exc:
                    raise SpecError(f"{where}: {exc}") from None
            continue
        if name not in known:
            raise SpecError(f"{where}: unknown key {key!r}{did_you_mean(name, known | set(job_fields))}")
        values[name] = _convert(name, value)
    if "model" not in values or not values["model"]:
        raise SpecError(f"{where}: 'model' is required")
    for name, value in values.items():
        if name in ("model", "method", "objective", "provider", "region", "pricing", "currency") \
                and value is not None and not isinstance(value, str):
            raise SpecError(f"{where}: {name!r} must be a name (text), got {type(value).__name__} {value!r}")
    order = list(job_fields)
    return PlanRequest(**{k: v for k, v in values.items() if v is not None or k == "model"},
                       job=tuple(sorted(job.items(), key=lambda kv: order.index(kv[0]))))


def load_request_file(path: str) -> dict[str, Any]:
    """A YAML (.yaml/.yml) or TOML (.toml) request file -> dict."""
    if not os.path.isfile(path):
        raise SpecError(f"request file not found: {path}")
    from ..userfiles import UserFileError, check_depth, load_user_yaml, read_user_text

    text = read_user_text(path, "request file")  # size checked before reading, strict UTF-8, no NUL bytes
    try:
        if path.endswith(".toml"):
            import tomllib

            data = check_depth(tomllib.loads(text), path)  # TOML has no aliases and refuses duplicate keys
        else:
            data = load_user_yaml(text, path)  # no anchors/aliases, no duplicate keys, bounded nesting
    except UserFileError:
        raise
    except Exception as exc:  # noqa: BLE001 - any parse error becomes one clear line
        raise SpecError(f"cannot read {path}: {exc}".splitlines()[0]) from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping of request keys")
    return data
