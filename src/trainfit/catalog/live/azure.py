"""Azure VM prices through the public Azure Retail Prices API (https://prices.azure.com/api/retail/prices; no
credentials). Linux consumption prices per hour: Windows meters (productName ending in 'Windows'), Low Priority
and Dev/Test are dropped; 'Spot' meters give the spot price. Paged with NextPageLink."""

from __future__ import annotations

from typing import Any

from ...errors import MissingDependency, PriceSourceError
from ...spec.hardware import Price

API = "https://prices.azure.com/api/retail/prices"
API_VERSION = "2023-01-01-preview"
DEFAULT_REGIONS = ("eastus", "eastus2", "southcentralus", "westus2", "westus3", "westeurope", "northeurope")
SOURCE = "AZURE-RETAIL-API"
MAX_PAGES = 20


def _session():
    try:
        import requests
    except ImportError:
        raise MissingDependency("`trainfit prices refresh --provider azure` needs requests: "
                                "pip install 'trainfit[cloud]'") from None
    return requests.Session()


def items(sku: str, session: Any) -> list[dict]:
    """Every retail price item of one ARM SKU (all regions, all meters), following NextPageLink."""
    import requests

    url: str | None = API
    params: dict | None = {"api-version": API_VERSION, "$filter": f"serviceName eq 'Virtual Machines' and "
                           f"armSkuName eq '{sku}' and priceType eq 'Consumption'"}
    out: list[dict] = []
    for _ in range(MAX_PAGES):
        try:
            r = session.get(url, params=params, timeout=30)
            r.raise_for_status()
            doc = r.json()
        except requests.RequestException as exc:
            raise PriceSourceError("network_error", provider="azure", url=API, reason=type(exc).__name__) from None
        except ValueError:
            raise PriceSourceError("api_error", provider="azure", what=sku, code="not JSON") from None
        out += doc.get("Items", [])
        url, params = doc.get("NextPageLink"), None
        if not url:
            break
    return out


def billing_of(item: dict) -> str | None:
    """'payg', 'spot', or None for meters trainfit does not use."""
    if item.get("type") != "Consumption" or item.get("unitOfMeasure") != "1 Hour":
        return None
    if item.get("productName", "").endswith("Windows") or "Low Priority" in item.get("skuName", ""):
        return None
    return "spot" if "Spot" in item.get("skuName", "") else "payg"


def fetch(instances: list, regions: list[str], date: str, client: Any = None) -> tuple[list[Price], list[str]]:
    session = client or _session()
    wanted = set(regions)
    out: list[Price] = []
    for inst in instances:
        best: dict[tuple[str, str], float] = {}
        for it in items(inst.instance_type, session):
            billing = billing_of(it)
            region = it.get("armRegionName")
            if billing is None or region not in wanted or it.get("currencyCode", "USD") != "USD":
                continue
            price = float(it["retailPrice"])
            if price > 0 and ((region, billing) not in best or price < best[(region, billing)]):
                best[(region, billing)] = price
        out += [Price(provider="azure", instance_type=inst.instance_type, region=region, billing=billing,
                      price=price, currency="USD", price_date=date, includes="instance (Linux)", unverified=False,
                      sources=(SOURCE,), note="Azure Retail Prices API, Linux consumption meter", origin="live")
                for (region, billing), price in sorted(best.items())]
    return out, [f"{len(out)} prices for {len(instances)} VM sizes in {', '.join(regions)}"]
