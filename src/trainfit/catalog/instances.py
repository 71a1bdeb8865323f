"""Cloud instance catalog (instances.csv) and prices (prices.csv)."""

from __future__ import annotations

from ..errors import unknown_name
from ..i18n import say
from ..spec.hardware import InstanceSpec, Price
from ._io import norm_name
from .instance_table import INTERCONNECTS, PROVIDERS, RDMA_KINDS, all_instances  # noqa: F401 - re-exported
from .prices import BILLINGS, CURRENCIES, all_prices  # noqa: F401 - re-exported: prices used to live here


def get_instance(name: str, provider: str | None = None) -> InstanceSpec:
    """By 'provider/type' or just the type ('ecs.gn7i-c8g1.2xlarge', 'gn7i-c8g1.2xlarge', 'p4d.24xlarge')."""
    wanted = norm_name(name.split("/", 1)[-1])
    for inst in all_instances().values():
        if provider and inst.provider != provider:
            continue
        if norm_name(inst.instance_type) in (wanted, "ecs" + wanted, norm_name("ecs." + name)):
            return inst
    raise unknown_name(say("ei_kind_instance_type"), name, [i.instance_type for i in all_instances().values()],
                       hint=say("ei_hint_instances"))


def instances_for_gpu(gpu_id: str, provider: str | None = None) -> list[InstanceSpec]:
    return [i for i in all_instances().values()
            if i.gpu == gpu_id and i.trainable and (provider is None or i.provider == provider)]


def prices_for(inst: InstanceSpec, region: str | None = None, billing: str = "payg",
               in_stock: bool = False) -> list[Price]:
    """Prices of an instance, cheapest first; region None = any region; in_stock drops regions a live query found
    sold out."""
    prices = [p for p in all_prices().get(inst.key, ()) if p.billing == billing
              and (region is None or p.region == region) and not (in_stock and p.stock == "sold_out")]
    return sorted(prices, key=lambda p: p.per_hour)


def cheapest_price(inst: InstanceSpec, region: str | None = None, billing: str = "payg",
                   in_stock: bool = False) -> Price | None:
    prices = prices_for(inst, region, billing, in_stock)
    return prices[0] if prices else None
