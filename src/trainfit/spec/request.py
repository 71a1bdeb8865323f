"""PlanRequest: what the user wants trained, on which clouds, by when and for how much.

Built from CLI flags or a YAML/TOML request file with the same names (`dataset-tokens` or `dataset_tokens`);
unknown keys are rejected with a "did you mean".
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields
from typing import Any

from ..errors import SpecError, did_you_mean, sentence_of
from ..i18n import Msg, say
from ..units import currency_code, parse_count, parse_duration, parse_money

METHODS = ("full", "lora", "qlora", "freeze", "auto")
PROVIDERS = ("alibaba", "aws", "gcp", "azure", "usd", "all")  # usd: every provider priced in USD (AWS, GCP, Azure)
USD_PROVIDERS = ("aws", "gcp", "azure")
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
    instance: tuple[str, ...] = ()  # only these instance types (the catalog's names, 'ecs.' optional)
    max_nodes: int = 8
    pricing: str = "payg"
    objective: str = "cheapest"
    top: int = 5
    # The job's fields that the user gives and the search keeps (spec/job.py, the request door: task, seq_len,
    # precision, optimizer, LoRA rank and targets, ...), as (name, value) pairs of converted values.
    job: tuple[tuple[str, Any], ...] = ()
    # what resolving the request decided for the user (the providers a named GPU took the search to), said in the
    # plan's assumptions; not a request key
    notes: tuple[str, ...] = ()

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
            raise SpecError(say("ec_give_dataset_size"))
        for name in ("dataset_tokens", "samples", "avg_len", "epochs", "deadline", "budget", "usd_cny"):
            value = getattr(self, name)
            if value is not None and (not math.isfinite(value) or value <= 0):
                raise SpecError(say("ec_positive", option=name.replace('_', '-'), value=value))
        for name in ("dataset_tokens", "samples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise SpecError(say("ec_at_least_1", option=name.replace('_', '-'), value=value))
        if self.epochs > 1000:
            raise SpecError(say("ec_epochs_absurd", epochs=self.epochs))
        self._check_dataset_size()
        for name, high in (("max_nodes", 512), ("top", 100)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= high:
                raise SpecError(say("ei_int_in_range", what="--" + name.replace("_", "-"), low=1, high=high,
                                    value=value))
        for name in ("global_batch", "global_batch_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise SpecError(say("ec_positive_integer", option=name.replace('_', '-'), value=value))
        if self.provider == "all" and self.usd_cny is None:
            raise SpecError(say("ec_provider_all_rate"))
        if self.global_batch and self.global_batch_tokens:
            raise SpecError(say("ec_global_batch_both"))

    def _check_dataset_size(self) -> None:
        """One dataset size (issue 33): --samples beside --dataset-tokens must agree with it (x --avg-len), and no
        more tokens than any published training run used (the largest pre-training runs: about 36T = 3.6e13)."""
        if self.dataset_tokens is not None and self.samples is not None:
            if self.avg_len is None:
                raise SpecError(say("ei_dataset_size_twice", tokens=self.dataset_tokens, samples=self.samples))
            if not math.isclose(self.samples * self.avg_len, self.dataset_tokens, rel_tol=0.01):
                raise SpecError(say("ei_dataset_size_disagree", tokens=self.dataset_tokens, samples=self.samples,
                                    avg_len=self.avg_len, total=self.samples * self.avg_len))
        given = self.dataset_tokens is not None
        tokens, what = (self.dataset_tokens, "--dataset-tokens") if given else (self.samples * self.avg_len,
                                                                                "--samples x --avg-len")
        for what, value in ((what, tokens), (f"{what} x --epochs", tokens * self.epochs)):
            if value > MAX_TRAINING_TOKENS:
                raise SpecError(say("ei_tokens_absurd", what=what, value=value))

    @property
    def budget_currency(self) -> str:
        if self.currency:
            return self.currency
        return home_currency(self.provider) or "CNY"

    @property
    def providers(self) -> tuple[str, ...]:
        if self.provider == "all":
            return ("alibaba", *USD_PROVIDERS)
        return USD_PROVIDERS if self.provider == "usd" else (self.provider,)


def home_currency(provider: str) -> str | None:
    """The currency a provider's prices are in (`usd`: AWS, GCP and Azure together); None for `all` (both)."""
    return "USD" if provider in (*USD_PROVIDERS, "usd") else "CNY" if provider == "alibaba" else None


def _one_of(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise SpecError(say("ei_invalid_choice", what="--" + name, value=value, choices=", ".join(allowed), dym=""))


_COUNT_FIELDS = ("dataset_tokens", "samples", "avg_len")  # avg_len a mean: '1.5k' is 1500 (seq_len's k is 1024)
_INT_FIELDS = ("global_batch", "global_batch_tokens", "max_nodes", "top")
_FLOAT_FIELDS = ("epochs", "usd_cny")
# More tokens than any published training run (the largest pre-training runs are about 36T = 3.6e13 tokens).
MAX_TRAINING_TOKENS = 1e14


def _convert(name: str, value: Any) -> Any:
    if value is None:
        return None
    try:
        if name in _COUNT_FIELDS:
            return parse_count(value)
        if name == "budget":  # the amount, the currency it names (3000元, $500) or None, and the text as given
            return (*parse_money(value), value)
        if name == "deadline":
            return parse_duration(value)
        if name in _INT_FIELDS:
            number = parse_count(value)
            if number != int(number):
                raise ValueError(f"not an integer: {value!r}")
            return int(number)
        if name in _FLOAT_FIELDS:
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):  # `epochs: true` is no number
                raise ValueError(say("ei_not_a_number", value=value))
            try:
                return float(value)
            except ValueError:  # (a str: Python's own words for it, as a sentence of the table)
                raise ValueError(say("ec_not_a_float", text=value)) from None
    except (TypeError, ValueError, OverflowError) as exc:
        message = sentence_of(exc)  # a sentence of the table (not a count: ...) stays one in the option's sentence
        raise SpecError(say("ec_option_detail", option=name.replace('_', '-'), message=message)
                        if isinstance(message, Msg) else f"--{name.replace('_', '-')}: {exc}") from None
    if name in ("gpu", "instance"):
        items = value.split(",") if isinstance(value, str) else list(value)
        return tuple(dict.fromkeys(str(x).strip() for x in items if str(x).strip()))  # each name once
    if name == "currency":
        return currency_code(value)  # RMB, 元, ¥ -> CNY; $ -> USD
    return value


def request_from_mapping(data: dict[str, Any], where: str = "request") -> PlanRequest:
    """Build a PlanRequest from a dict (request file or CLI); keys may use '-' or '_'. The job's fields are the
    declared ones that pass the request door (spec/job.py)."""
    from .job import REQUEST, through

    job_fields = {f.name: f for f in through(REQUEST)}
    # a pinned layout may be written as its flag or API keyword too (gpus: 4, zero: 3)
    aliases = {f.keyword: f.name for f in through(REQUEST) if f.keyword != f.name}
    aliases.update({f.cli_flag.lstrip("-").replace("-", "_"): f.name for f in through(REQUEST)})
    known = {f.name for f in fields(PlanRequest)} - {"job", "notes"}
    values: dict[str, Any] = {}
    job: dict[str, Any] = {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name not in known and aliases.get(name, name) in job_fields:
            name = aliases.get(name, name)
        if name in job_fields:
            if value is not None:
                try:
                    job[name] = job_fields[name].convert(value)
                except SpecError as exc:  # the field's own sentence after the file's name
                    raise SpecError(say("ei_in_file", where=where, message=sentence_of(exc))) from None
            continue
        if name not in known:
            raise SpecError(say("ec_request_unknown_key", where=where, key=key,
                                close=did_you_mean(name, known | set(job_fields))))
        values[name] = _convert(name, value)
    if "model" not in values or not values["model"]:
        raise SpecError(say("ec_request_model_required", where=where))
    for name, value in values.items():
        if name in ("model", "method", "objective", "provider", "region", "pricing", "currency") \
                and value is not None and not isinstance(value, str):
            raise SpecError(say("ec_request_name_text", where=where, name=name, kind=type(value).__name__, value=value))
    _budget_currency(values)
    notes = _providers_of_named_gpus(values)
    order = list(job_fields)
    return PlanRequest(**{k: v for k, v in values.items() if v is not None or k == "model"},
                       job=tuple(sorted(job.items(), key=lambda kv: order.index(kv[0]))), notes=notes)


def _providers_of_named_gpus(values: dict[str, Any]) -> tuple[str, ...]:
    """A GPU named without a provider that the default provider (Alibaba Cloud) does not rent takes the search to the
    providers whose catalog rents it (`--gpu h100-sxm`: AWS, GCP and Azure, in USD), said in the plan's assumptions.
    A provider, an instance type or a currency given keeps the request as it is."""
    gpus = values.get("gpu")
    if values.get("provider") is not None or values.get("instance") or values.get("currency") or not gpus:
        return ()
    from ..catalog import all_instances, get_gpu
    from ..catalog.instances import prices_for

    try:
        wanted = {get_gpu(g).id for g in gpus}
    except SpecError:
        return ()  # an unknown GPU: the search says so with its did-you-mean
    renting = sorted({i.provider for i in all_instances().values()
                      if i.gpu in wanted and i.trainable and prices_for(i)})
    if not renting or "alibaba" in renting or not set(renting) <= set(USD_PROVIDERS):
        return ()
    values["provider"] = renting[0] if len(renting) == 1 else "usd"
    return (say("pl_provider_from_gpu", gpus=", ".join(sorted(wanted)), providers=", ".join(renting)),)


def _budget_currency(values: dict[str, Any]) -> None:
    """A budget that names its currency (3000元, ¥3,000, $500, 500 USD) sets --currency when none is given and must
    agree with the one given; in the other currency than the provider's prices it needs --usd-cny (issue 33)."""
    budget = values.get("budget")
    if not isinstance(budget, tuple):
        return
    values["budget"], named, text = budget
    if named is None:
        return
    given, provider = values.get("currency"), values.get("provider") or "alibaba"
    if given is not None and given != named:
        raise SpecError(say("ei_budget_currency", text=text, named=named, given=given))
    home = home_currency(provider) if isinstance(provider, str) else None
    if given is None and home not in (None, named) and values.get("usd_cny") is None:
        raise SpecError(say("ei_budget_home_currency", text=text, named=named, provider=provider, home=home))
    values["currency"] = named


def load_request_file(path: str) -> dict[str, Any]:
    """A YAML (.yaml/.yml) or TOML (.toml) request file -> dict."""
    if not os.path.isfile(path):
        raise SpecError(say("ec_request_missing", path=path))
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
        text, msg = f"cannot read {path}: {exc}".splitlines()[0], say("ei_cannot_read", path=path,
                                                                      why=(str(exc).splitlines() or [""])[0])
        raise SpecError(msg if msg == text else text) from None
    if not isinstance(data, dict):
        raise SpecError(say("ec_request_not_mapping", path=path))
    return data
