"""What a job pays: whole instances, at the offer's price, for the billed time. `plan` and `compare` both price
through these functions, so a GPU's cost per token and a plan's total never disagree about what is billed.

A job on n GPUs of an m-GPU instance pays for all m: the cost follows the instance's price and the job's
throughput, never a per-GPU share of a price the provider does not sell.
"""

from __future__ import annotations

import math

from ..catalog.efficiency import Efficiencies
from ..units import HOUR
from .space import HOURS_PER_MONTH, Offer


def hourly_rate(offer: Offer, nodes: int) -> float:
    """Request currency per wall-clock hour for `nodes` whole instances of this offer."""
    return offer.price.per_hour * nodes * offer.fx


def cost_per_tokens(offer: Offer, nodes: int, tokens_per_s: float, tokens: float) -> float:
    """Request currency to process `tokens` at `tokens_per_s` on `nodes` whole instances (no rounding of time)."""
    return hourly_rate(offer, nodes) * tokens / tokens_per_s / HOUR


def billed_hours(offer: Offer, hours: float, eff: Efficiencies) -> float:
    """Pay-as-you-go and spot time rounded up to the provider's billing granularity, at least its minimum."""
    entry = eff.describe("billing_granularity_s")
    provider = offer.instance.provider
    gran = float(entry.get("by_provider", {}).get(provider, entry.get("default", 3600)))
    minimum = float(entry.get("minimum_s", {}).get(provider, 0))
    return max(minimum, math.ceil(hours * HOUR / gran) * gran) / HOUR


def job_cost(offer: Offer, hours: float, nodes: int, eff: Efficiencies) -> tuple[float, float]:
    """(billed hours, cost in the request currency) of a job that runs `hours` on `nodes` instances of `offer`."""
    if offer.price.billing == "subscription_month":
        months = math.ceil(hours / HOURS_PER_MONTH)
        return months * HOURS_PER_MONTH, months * offer.price.price * nodes * offer.fx
    billed = billed_hours(offer, hours, eff)
    return billed, billed * hourly_rate(offer, nodes)
