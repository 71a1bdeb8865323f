"""Google Cloud prices through the Cloud Billing Catalog API (services/6F81-5844-456A = Compute Engine, /skus),
with an API key in GOOGLE_API_KEY. Accelerator-optimized machine types are billed as separate SKUs for the GPUs,
the vCPUs and the memory, so a machine type's hourly price is summed: GPUs x GPU SKU + vCPUs x core SKU + GiB x RAM
SKU, from the SKUs whose serviceRegions include the region. 'OnDemand' SKUs give pay-as-you-go, 'Preemptible'
(Spot) ones the spot price. An A3 High shape with fewer than 8 GPUs is priced only for spot."""

from __future__ import annotations

import os
import re
from typing import Any

from ...errors import CredentialsMissing, MissingDependency, PriceSourceError
from ...spec.hardware import Price

API = "https://cloudbilling.googleapis.com/v1/services/6F81-5844-456A/skus"
DEFAULT_REGIONS = ("us-central1", "us-east4", "europe-west4", "asia-southeast1")
SOURCE = "GCP-BILLING-API"
MAX_PAGES = 50
# catalog GPU id -> the GPU name in Compute Engine SKU descriptions ("Nvidia Tesla A100 GPU running in Americas")
GPU_SKU_NAMES = {"a100-sxm4-40gb": "Tesla A100", "a100-sxm4-80gb": "Tesla A100 80GB", "h100-sxm": "H100 80GB",
                 "l4": "L4", "t4": "Tesla T4", "v100-sxm2-16gb": "Tesla V100"}
ON_DEMAND_ONLY_FULL = {"a3-highgpu"}  # 1/2/4-GPU A3 High shapes: spot (or flex-start) only


def _session():
    try:
        import requests
    except ImportError:
        raise MissingDependency("`trainfit prices refresh --provider gcp` needs requests: pip install 'trainfit[cloud]'"
                                ) from None
    return requests.Session()


def skus(session: Any, key: str) -> list[dict]:
    import requests

    out: list[dict] = []
    token = ""
    for _ in range(MAX_PAGES):
        params = {"key": key, "currencyCode": "USD", "pageSize": 5000}
        if token:
            params["pageToken"] = token
        try:
            r = session.get(API, params=params, timeout=60)
            if r.status_code in (400, 401, 403):
                raise PriceSourceError("api_error", provider="gcp", what="services.skus.list",
                                       code=f"HTTP {r.status_code} (API key rejected or API not enabled)")
            r.raise_for_status()
            doc = r.json()
        except requests.RequestException as exc:
            raise PriceSourceError("network_error", provider="gcp", url=API, reason=type(exc).__name__) from None
        out += doc.get("skus", [])
        token = doc.get("nextPageToken") or ""
        if not token:
            break
    return out


def unit_price(sku: dict) -> float:
    """USD per usage unit (h, or GiBy.h) of the newest pricing, top tier."""
    rate = sku["pricingInfo"][-1]["pricingExpression"]["tieredRates"][-1]["unitPrice"]
    return int(rate.get("units") or 0) + rate.get("nanos", 0) / 1e9


def _pick(skus_: list[dict], region: str, usage: str, pattern: re.Pattern) -> float | None:
    for s in skus_:
        cat = s.get("category", {})
        if cat.get("usageType") == usage and region in s.get("serviceRegions", []) and pattern.search(
                s.get("description", "")):
            return unit_price(s)
    return None


def machine_price(inst, region: str, usage: str, skus_: list[dict]) -> float | None:
    """Summed hourly price of a machine type, or None when a part is not priced in this region."""
    series = inst.instance_type.split("-")[0].upper()  # a2, a3, g2
    gpu_name = GPU_SKU_NAMES.get(inst.gpu)
    if gpu_name is None or not inst.vcpu or not inst.ram_gib:
        return None
    gpu = _pick(skus_, region, usage, re.compile(rf"(^|\s)Nvidia {re.escape(gpu_name)} GPU running in"))
    core = _pick(skus_, region, usage, re.compile(rf"(^|\s){series} Instance Core running in"))
    ram = _pick(skus_, region, usage, re.compile(rf"(^|\s){series} Instance Ram running in"))
    if None in (gpu, core, ram):
        return None
    return inst.gpu_count * gpu + inst.vcpu * core + inst.ram_gib * ram


def fetch(instances: list, regions: list[str], date: str, client: Any = None) -> tuple[list[Price], list[str]]:
    key = os.environ.get("GOOGLE_API_KEY") or os.environ.get("GCP_API_KEY")
    if not key:
        raise CredentialsMissing("no_credentials_gcp")
    all_skus = skus(client or _session(), key)
    out: list[Price] = []
    for region in regions:
        for inst in instances:
            for billing, usage in (("payg", "OnDemand"), ("spot", "Preemptible")):
                if billing == "payg" and inst.family in ON_DEMAND_ONLY_FULL and inst.gpu_count < 8:
                    continue
                price = machine_price(inst, region, usage, all_skus)
                if price:
                    out.append(Price(provider="gcp", instance_type=inst.instance_type, region=region, billing=billing,
                                     price=round(price, 6), currency="USD", price_date=date, includes="instance",
                                     unverified=False, sources=(SOURCE,), origin="live",
                                     note="Cloud Billing Catalog API: GPU + vCPU + RAM SKUs summed"))
    return out, [f"{len(out)} prices from {len(all_skus)} Compute Engine SKUs"]
