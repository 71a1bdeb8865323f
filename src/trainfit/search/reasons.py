"""Why the search set an option aside: a typed reason (an enum and the values it carries), counted by the search
and worded by report/ in the chosen language (report.words: `reason_text`). No sentence is built here."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Reason(str, Enum):
    # instance types not searched at all
    NOT_TRAINING_INSTANCE = "not_training_instance"
    NO_PRICE = "no_price"  # values: region, pricing
    OTHER_CURRENCY = "other_currency"  # values: currency, target
    # layouts and settings
    MORE_GPUS_THAN_BATCH = "more_gpus_than_batch"
    GPUS_DO_NOT_DIVIDE_BATCH = "gpus_do_not_divide_batch"
    MICRO_BATCH_DOES_NOT_DIVIDE = "micro_batch_does_not_divide"  # a pinned --micro-batch; values: micro_batch
    PINNED_LAYOUT = "pinned_layout"  # an instance without the GPUs a pinned --gpus needs; values: gpus
    INCOMPATIBLE = "incompatible"  # values: rule (the spec's own message)
    LAYOUT = "layout"  # a model-parallel layout that cannot run this model; values: rule (parallel3d.Reason value)
    NO_FIT = "no_fit"
    NO_FIT_HEADROOM = "no_fit_headroom"
    OOM_RISK = "oom_risk"
    DOMINATED_MICRO_BATCH = "dominated_micro_batch"
    # slower than the same layout with lighter activation checkpointing or less CPU offload, kept at a micro-batch
    # at least as large
    DOMINATED_HEAVIER = "dominated_heavier"
    OFFLOAD_HOST_RAM = "offload_host_ram"
    HOST_RAM = "host_ram"  # loading the model (and CPU offload) needs more RAM than the instance has
    # the request's constraints
    TOO_SLOW = "too_slow"
    OVER_BUDGET = "over_budget"


@dataclass(frozen=True)
class Rejection:
    """One counted reason: `Reason` and its values as (name, value) pairs (hashable, a Counter key)."""

    reason: Reason
    values: tuple[tuple[str, object], ...] = ()

    @classmethod
    def of(cls, reason: Reason, **values: object) -> "Rejection":
        return cls(reason, tuple(sorted((k, v) for k, v in values.items() if v is not None)))

    def get(self, name: str, default: object = None) -> object:
        return dict(self.values).get(name, default)

    def to_dict(self, count: int) -> dict:
        return {"reason": self.reason.value, **dict(self.values), "count": count}
