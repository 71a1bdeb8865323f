"""Live prices through the providers' official APIs (never scraped pages), written to the user's price cache.

Each provider module has `fetch(instances, regions, client=None) -> (prices, notes)`; SDKs are imported lazily
(install with `pip install trainfit[cloud]`). Credentials come from each SDK's standard environment variables or
files; trainfit never reads them itself beyond checking that one is configured, never prints and never writes them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from ...errors import LocalizedError, SpecError
from ...spec.hardware import Price
from ..instances import all_instances
from ..prices import PROVIDERS, store_live_prices, today

MODULES = {"alibaba": "alibaba", "azure": "azure", "aws": "aws", "gcp": "gcp"}


@dataclass
class RefreshResult:
    provider: str
    prices: list[Price]
    path: str
    date: str
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"provider": self.provider, "cache_file": self.path, "date": self.date, "rows": len(self.prices),
                "prices": [{"instance_type": p.instance_type, "region": p.region, "billing": p.billing,
                            "price": p.price, "currency": p.currency, "stock": p.stock or None,
                            "sources": list(p.sources)} for p in self.prices],
                "notes": self.notes}


def provider_module(provider: str):
    if provider not in PROVIDERS:
        from ...i18n import say

        raise SpecError(say("ec_provider_one_of", choices=", ".join(PROVIDERS), value=provider))
    return importlib.import_module(f"{__name__}.{MODULES[provider]}")


def targets(provider: str, instance_types: list[str] | None) -> list:
    """The provider's GPU instance types in the catalog (or the named ones)."""
    insts = [i for i in all_instances().values() if i.provider == provider and i.trainable]
    if instance_types:
        wanted = set(instance_types) | {f"ecs.{t}" for t in instance_types}
        insts = [i for i in insts if i.instance_type in wanted]
        if not insts:
            raise SpecError(f"--instance: none of {', '.join(instance_types)} is a {provider} GPU instance type in "
                            f"the catalog; `trainfit instances --provider {provider}` lists them")
    return insts


def refresh(provider: str, regions: list[str] | None = None, instance_types: list[str] | None = None,
            client: Any = None) -> RefreshResult:
    mod = provider_module(provider)
    insts = targets(provider, instance_types)
    date = today().isoformat()
    prices, notes = mod.fetch(insts, regions or list(mod.DEFAULT_REGIONS), date, client=client)
    if not prices:
        raise LocalizedError("refresh_nothing", provider=provider)
    path = store_live_prices(provider, prices)
    return RefreshResult(provider, prices, str(path), date, notes)
