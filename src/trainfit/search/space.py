"""The candidate space of a plan: priced offers (instance x region price) and the named axes searched over them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from ..catalog import all_instances, get_gpu
from ..catalog.instances import prices_for
from ..spec.hardware import InstanceSpec, Price
from ..spec.request import PlanRequest
from ..spec.training import Fsdp, GradCkpt, Method, Offload, Strategy
from .reasons import Reason, Rejection

HOURS_PER_MONTH = 730.0
# prices a plan may use: a subscription only pays off for long jobs, so pay-as-you-go stays on offer beside it
# (the search keeps whichever is cheaper for the job); spot is offered on its own (it can be reclaimed)
BILLINGS_BY_PRICING = {"payg": ("payg",), "subscription": ("subscription_month", "payg"), "spot": ("spot",)}


@dataclass(frozen=True)
class Offer:
    """An instance type at one price (pay-as-you-go per hour, or a monthly subscription)."""

    instance: InstanceSpec
    price: Price
    fx: float = 1.0  # multiply the price by this to get the request's currency

    @property
    def currency(self) -> str:
        return self.price.currency

    @property
    def gpu_count(self) -> int:
        return self.instance.gpu_count or 0


def offers(req: PlanRequest, instances: dict[str, InstanceSpec] | None = None,
           price_lookup=prices_for) -> tuple[list[Offer], Counter]:
    """Offers matching the request's providers, GPUs, region and pricing mode; skipped ones counted by reason."""
    skipped: Counter = Counter()
    wanted_gpus = {get_gpu(g).id for g in req.gpu} if req.gpu else None
    wanted_types = None
    if req.instance:
        from ..catalog.instances import get_instance

        wanted_types = {get_instance(name).instance_type for name in req.instance}
    billings = BILLINGS_BY_PRICING[req.pricing]
    out: list[Offer] = []
    for inst in (instances or all_instances()).values():
        if inst.provider not in req.providers:
            continue
        if not inst.trainable:
            skipped[Rejection.of(Reason.NOT_TRAINING_INSTANCE)] += 1
            continue
        if wanted_gpus is not None and inst.gpu not in wanted_gpus:
            continue
        if wanted_types is not None and inst.instance_type not in wanted_types:
            continue
        found = [(b, price_lookup(inst, req.region, b, True)) for b in billings]
        found = [(b, ps[0]) for b, ps in found if ps]  # cheapest region in stock (or the requested one)
        if not found:
            skipped[Rejection.of(Reason.NO_PRICE, region=req.region,
                                 pricing=None if req.pricing == "payg" else req.pricing)] += 1
            continue
        for _, price in found:
            fx = _fx(price.currency, req)
            if fx is None:
                skipped[Rejection.of(Reason.OTHER_CURRENCY, currency=price.currency, target=req.budget_currency)] += 1
                continue
            out.append(Offer(inst, price, fx))
    return out, skipped


def _fx(currency: str, req: PlanRequest) -> float | None:
    target = req.budget_currency
    if currency == target:
        return 1.0
    if req.usd_cny is None:
        return None
    return req.usd_cny if (currency, target) == ("USD", "CNY") else 1.0 / req.usd_cny


def layouts(offer: Offer, max_nodes: int) -> list[tuple[int, int]]:
    """(GPUs used per node, nodes): 1..all GPUs of one instance; whole instances across 2..max_nodes nodes."""
    count = offer.gpu_count
    out = [(g, 1) for g in range(1, count + 1)]
    if offer.instance.inter_node_bytes_per_s:
        out += [(count, n) for n in range(2, max_nodes + 1)]
    return out


# (zero stage, fsdp, offload): DDP / ZeRO-1/2/3 / FSDP, with and without CPU offload
STRATEGIES_ONE_GPU = ((0, Fsdp.NONE, Offload.NONE), (2, Fsdp.NONE, Offload.OPTIMIZER), (3, Fsdp.NONE, Offload.ALL))
STRATEGIES_MANY = (
    (0, Fsdp.NONE, Offload.NONE), (1, Fsdp.NONE, Offload.NONE), (2, Fsdp.NONE, Offload.NONE),
    (3, Fsdp.NONE, Offload.NONE), (0, Fsdp.FULL_SHARD, Offload.NONE), (0, Fsdp.SHARD_GRAD_OP, Offload.NONE),
    (2, Fsdp.NONE, Offload.OPTIMIZER), (3, Fsdp.NONE, Offload.OPTIMIZER), (3, Fsdp.NONE, Offload.ALL),
    (0, Fsdp.FULL_SHARD, Offload.ALL),
)


# Each engine's lighter siblings: the same sharding with less offloaded to the CPU (offloading only adds work: the
# CPU's optimizer step and the copies over PCIe; tests/test_properties.py: a step is never faster with more
# offloaded). The search sets a heavier one aside where a lighter one already kept as large a micro-batch. Only
# siblings of one engine: on one GPU the plain run (fp32 weights under autocast) is no lighter sibling of DeepSpeed's
# ZeRO-2 with the optimizer offloaded (a 16-bit module): GPT-2's step is 2% faster on an A10 under the latter
# (Hypothesis found it).
LIGHTER_ONE_GPU = {(3, Fsdp.NONE, Offload.ALL): ((2, Fsdp.NONE, Offload.OPTIMIZER),)}
LIGHTER_MANY = {(2, Fsdp.NONE, Offload.OPTIMIZER): ((2, Fsdp.NONE, Offload.NONE),),
                (3, Fsdp.NONE, Offload.OPTIMIZER): ((3, Fsdp.NONE, Offload.NONE),),
                (3, Fsdp.NONE, Offload.ALL): ((3, Fsdp.NONE, Offload.NONE), (3, Fsdp.NONE, Offload.OPTIMIZER)),
                (0, Fsdp.FULL_SHARD, Offload.ALL): ((0, Fsdp.FULL_SHARD, Offload.NONE),)}


def engine_of(s: Strategy) -> tuple:
    """(ZeRO stage, FSDP, offload): a data-parallel strategy's engine, as STRATEGIES_* and LIGHTER_* name it."""
    return s.zero_stage, s.fsdp, s.offload


def lighter_engines(s: Strategy) -> tuple[tuple, ...]:
    """The engine of `s` and its lighter siblings (LIGHTER_ONE_GPU / LIGHTER_MANY)."""
    table = LIGHTER_ONE_GPU if s.gpus == 1 else LIGHTER_MANY
    own = engine_of(s)
    return (own, *table.get(own, ()))


@lru_cache(maxsize=4096)
def strategies(gpus_per_node: int, nodes: int) -> tuple[Strategy, ...]:
    axes = STRATEGIES_ONE_GPU if gpus_per_node * nodes == 1 else STRATEGIES_MANY
    return tuple(Strategy(gpus_per_node=gpus_per_node, nodes=nodes, zero_stage=z, fsdp=f, offload=o)
                 for z, f, o in axes)


def methods(req: PlanRequest) -> list[Method]:
    if req.method == "auto":
        return [Method.FULL, Method.LORA, Method.QLORA]
    return [Method(req.method)]


def checkpointing(attention: str) -> list[GradCkpt]:
    """Selective checkpointing only differs from none when attention materialises the s x s matrix (eager)."""
    if attention == "eager":
        return [GradCkpt.NONE, GradCkpt.SELECTIVE, GradCkpt.FULL]
    return [GradCkpt.NONE, GradCkpt.FULL]


@lru_cache(maxsize=4096)
def micro_batches(per_gpu_sequences: int) -> tuple[int, ...]:
    """The micro-batches that split the sequences each GPU handles per step exactly (micro-batch x accumulation =
    per-GPU sequences, so the global batch stays what was asked): its divisors, ascending."""
    n = per_gpu_sequences
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return tuple(sorted(set(small + [n // d for d in small])))
