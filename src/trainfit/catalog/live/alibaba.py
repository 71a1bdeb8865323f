"""Alibaba Cloud ECS prices through the official SDK (alibabacloud-ecs20140526):

- `DescribeAvailableResource` (DestinationResource=InstanceType): which GPU types a region sells now, and whether
  they are in stock (StatusCategory WithStock / WithoutStock);
- `DescribePrice` (ResourceType=instance): pay-as-you-go per hour (PriceUnit=Hour) and subscription per month
  (PriceUnit=Month, Period=1); the instance part is read from DetailInfos (Resource=instanceType), so disk and image
  are not counted;
- `DescribeSpotPriceHistory` (NetworkType=vpc): the newest spot price per zone; the cheapest zone is kept.

Credentials: the SDK's default chain (ALIBABA_CLOUD_ACCESS_KEY_ID / ALIBABA_CLOUD_ACCESS_KEY_SECRET,
~/.alibabacloud/credentials.ini, ALIBABA_CLOUD_CREDENTIALS_FILE, RAM role variables).
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from ...errors import CredentialsMissing, MissingDependency, PriceSourceError
from ...spec.hardware import Price

# GPU regions in mainland China, the cheaper inland ones included (cn-wulanchabu, cn-heyuan)
DEFAULT_REGIONS = ("cn-hangzhou", "cn-shanghai", "cn-beijing", "cn-shenzhen", "cn-zhangjiakou", "cn-wulanchabu",
                   "cn-heyuan", "cn-chengdu")
SOURCE = "ALI-API"
ENV_KEYS = (("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET"),
            ("ALICLOUD_ACCESS_KEY", "ALICLOUD_SECRET_KEY"))
OTHER_ENV = ("ALIBABA_CLOUD_CREDENTIALS_FILE", "ALIBABA_CLOUD_ROLE_ARN", "ALIBABA_CLOUD_ECS_METADATA",
             "ALIBABA_CLOUD_CREDENTIALS_URI")


def has_credentials(environ=os.environ, home: str | None = None) -> bool:
    """Whether the SDK's default chain has something to read (checked only for presence, never read here)."""
    if any(environ.get(a) and environ.get(b) for a, b in ENV_KEYS) or any(environ.get(k) for k in OTHER_ENV):
        return True
    home = home or os.path.expanduser("~")
    return any(os.path.isfile(os.path.join(home, *p)) for p in ((".alibabacloud", "credentials.ini"),
                                                                (".alibabacloud", "credentials"),
                                                                (".aliyun", "config.json")))


def make_client(region: str):
    """An ECS client for one region (the SDK reads the credentials itself)."""
    if not has_credentials():
        raise CredentialsMissing("no_credentials_alibaba")
    try:
        from alibabacloud_credentials.client import Client as CredentialClient
        from alibabacloud_ecs20140526.client import Client
        from alibabacloud_tea_openapi.utils_models import Config
    except ImportError:
        raise MissingDependency("`trainfit prices refresh --provider alibaba` needs the Alibaba Cloud SDK: "
                                "pip install 'trainfit[cloud]' (alibabacloud-ecs20140526)") from None
    return Client(Config(credential=CredentialClient(), region_id=region, endpoint=f"ecs.{region}.aliyuncs.com"))


def _models():
    from alibabacloud_ecs20140526 import models

    return models


FATAL_CODES = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden", "NoPermission", "IncompleteSignature",
               "InvalidSecurityToken")


class ItemSkipped(Exception):
    """The API refused one price (e.g. no subscription for this type in this region): skip it, keep the rest."""


def _call(fn, request, what: str, region: str):
    try:
        return fn(request).body
    except Exception as exc:  # the SDK raises its own exception types (TeaException, network errors)
        code = getattr(exc, "code", None)
        if code and not str(code).startswith(FATAL_CODES):
            raise ItemSkipped(f"{what} {region}: {code}") from None
        raise PriceSourceError("api_error", provider="alibaba", what=f"{what} {region}",
                               code=code or type(exc).__name__) from None


def stock(client, region: str) -> dict[str, str]:
    """instance type -> 'available' if any zone has it with stock, else 'sold_out' (types sold in the region)."""
    m = _models()
    req = m.DescribeAvailableResourceRequest(region_id=region, destination_resource="InstanceType",
                                             instance_charge_type="PostPaid")
    body = _call(client.describe_available_resource, req, "DescribeAvailableResource", region)
    out: dict[str, str] = {}
    zones = body.available_zones.available_zone if body.available_zones else []
    for zone in zones or []:
        for res in (zone.available_resources.available_resource if zone.available_resources else []) or []:
            for sup in (res.supported_resources.supported_resource if res.supported_resources else []) or []:
                ok = sup.status == "Available" and sup.status_category == "WithStock"
                if ok or sup.value not in out:
                    out[sup.value] = "available" if ok else "sold_out"
    return out


def instance_price(client, region: str, instance_type: str, unit: str) -> tuple[float, str] | None:
    """(price of the instance alone, currency) per hour (unit 'Hour') or per month ('Month')."""
    m = _models()
    req = m.DescribePriceRequest(region_id=region, resource_type="instance", instance_type=instance_type,
                                 price_unit=unit, period=1, instance_network_type="vpc")
    body = _call(client.describe_price, req, f"DescribePrice {instance_type} {unit}", region)
    price = body.price_info.price if body and body.price_info else None
    if price is None:
        return None
    details = price.detail_infos.detail_info if price.detail_infos else []
    for d in details or []:
        if d.resource == "instanceType" and d.trade_price is not None:
            return float(d.trade_price), price.currency or "CNY"
    return (float(price.trade_price), price.currency or "CNY") if price.trade_price is not None else None


def spot_price(client, region: str, instance_type: str) -> float | None:
    """The newest spot price in the cheapest zone (per hour)."""
    m = _models()
    req = m.DescribeSpotPriceHistoryRequest(region_id=region, instance_type=instance_type, network_type="vpc")
    body = _call(client.describe_spot_price_history, req, f"DescribeSpotPriceHistory {instance_type}", region)
    newest: dict[str, tuple[str, float]] = {}
    for sp in (body.spot_prices.spot_price_type if body.spot_prices else []) or []:
        if sp.spot_price is None:
            continue
        if sp.zone_id not in newest or sp.timestamp > newest[sp.zone_id][0]:
            newest[sp.zone_id] = (sp.timestamp, float(sp.spot_price))
    return min(v for _, v in newest.values()) if newest else None


def fetch(instances: list, regions: list[str], date: str, client: Any = None) -> tuple[list[Price], list[str]]:
    """Prices of the catalog's GPU types in each region that sells them. `client`: a callable region -> client
    (tests pass one that replays recorded responses)."""
    factory = client or make_client
    out: list[Price] = []
    notes: list[str] = []
    by_region: dict[str, int] = defaultdict(int)
    for region in regions:
        c = factory(region)
        sold = stock(c, region)
        for inst in instances:
            state = sold.get(inst.instance_type)
            if state is None:
                continue  # not sold in this region
            out += _prices_of(c, region, inst.instance_type, date, state, notes)
            by_region[region] += 1
    notes.append("types priced per region: " + ", ".join(f"{r} {n}" for r, n in by_region.items()))
    return out, notes


def _prices_of(c, region: str, itype: str, date: str, state: str, notes: list[str]) -> list[Price]:
    out: list[Price] = []
    for billing, unit in (("payg", "Hour"), ("subscription_month", "Month"), ("spot", "spot")):
        try:
            if billing == "spot":
                spot = spot_price(c, region, itype)
                got = (spot, "CNY") if spot else None
            else:
                got = instance_price(c, region, itype, unit)
        except ItemSkipped as skip:
            notes.append(f"skipped {skip}")
            continue
        if got:
            out.append(_price(itype, region, billing, got[0], got[1], date, state, unit))
    return out


def _price(instance_type: str, region: str, billing: str, value: float, currency: str, date: str, state: str,
           how: str) -> Price:
    api = {"Hour": "DescribePrice PriceUnit=Hour", "Month": "DescribePrice PriceUnit=Month Period=1",
           "spot": "DescribeSpotPriceHistory, newest, cheapest zone"}[how]
    return Price(provider="alibaba", instance_type=instance_type, region=region, billing=billing, price=value,
                 currency=currency, price_date=date, includes="instance", unverified=False, sources=(SOURCE,),
                 note=f"Alibaba Cloud ECS API {api}", origin="live", stock=state)
