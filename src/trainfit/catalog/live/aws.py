"""AWS EC2 prices through boto3: the Price List API (`pricing.get_products`, served from us-east-1) for on-demand
Linux shared-tenancy prices, and `ec2.describe_spot_price_history` (Linux/UNIX, newest per zone, cheapest zone) for
spot. Credentials: boto3's standard chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE,
~/.aws/credentials, instance roles)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from ...errors import CredentialsMissing, MissingDependency, PriceSourceError
from ...spec.hardware import Price

DEFAULT_REGIONS = ("us-east-1", "us-east-2", "us-west-2")
SOURCE = "AWS-PRICE-LIST-API"
SPOT_SOURCE = "AWS-SPOT-HISTORY-API"


def make_client(service: str, region: str):
    try:
        import boto3
    except ImportError:
        raise MissingDependency("`trainfit prices refresh --provider aws` needs boto3: pip install 'trainfit[cloud]'"
                                ) from None
    session = boto3.session.Session()
    if session.get_credentials() is None:
        raise CredentialsMissing("no_credentials_aws")
    return session.client(service, region_name=region)


def _filters(instance_type: str, region: str) -> list[dict]:
    fields = {"instanceType": instance_type, "regionCode": region, "operatingSystem": "Linux", "tenancy": "Shared",
              "preInstalledSw": "NA", "capacitystatus": "Used"}
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in fields.items()]


def _call(fn, what: str, **kwargs):
    try:
        return fn(**kwargs)
    except Exception as exc:  # botocore ClientError / EndpointConnectionError / NoCredentialsError
        code = getattr(exc, "response", {}).get("Error", {}).get("Code") or type(exc).__name__
        if code in ("NoCredentialsError", "UnrecognizedClientException", "InvalidClientTokenId"):
            raise CredentialsMissing("no_credentials_aws") from None
        raise PriceSourceError("api_error", provider="aws", what=what, code=code) from None


def on_demand(pricing, instance_type: str, region: str) -> float | None:
    """USD per hour of the on-demand Linux price, or None when the Price List has no such product."""
    resp = _call(pricing.get_products, f"GetProducts {instance_type} {region}", ServiceCode="AmazonEC2",
                 Filters=_filters(instance_type, region), MaxResults=10)
    for doc in resp.get("PriceList", []):
        product = json.loads(doc) if isinstance(doc, str) else doc
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dim in term.get("priceDimensions", {}).values():
                usd = float(dim.get("pricePerUnit", {}).get("USD", 0))
                if dim.get("unit") == "Hrs" and usd > 0:
                    return usd
    return None


def spot(ec2, instance_type: str, now: dt.datetime) -> float | None:
    resp = _call(ec2.describe_spot_price_history, f"DescribeSpotPriceHistory {instance_type}",
                 InstanceTypes=[instance_type], ProductDescriptions=["Linux/UNIX"], StartTime=now)
    newest: dict[str, tuple[Any, float]] = {}
    for h in resp.get("SpotPriceHistory", []):
        zone = h["AvailabilityZone"]
        if zone not in newest or h["Timestamp"] > newest[zone][0]:
            newest[zone] = (h["Timestamp"], float(h["SpotPrice"]))
    return min(v for _, v in newest.values()) if newest else None


def fetch(instances: list, regions: list[str], date: str, client: Any = None) -> tuple[list[Price], list[str]]:
    """`client`: a callable (service, region) -> boto3 client (tests pass stubbed clients)."""
    factory = client or make_client
    pricing = factory("pricing", "us-east-1")
    now = dt.datetime.now(dt.timezone.utc)
    out: list[Price] = []
    for region in regions:
        ec2 = factory("ec2", region)
        for inst in instances:
            od = on_demand(pricing, inst.instance_type, region)
            if od is None:
                continue  # not sold in this region
            out.append(_price(inst.instance_type, region, "payg", od, date, SOURCE, "Price List API, on-demand Linux"))
            sp = spot(ec2, inst.instance_type, now)
            if sp is not None:
                out.append(_price(inst.instance_type, region, "spot", sp, date, SPOT_SOURCE,
                                  "DescribeSpotPriceHistory Linux/UNIX, newest, cheapest zone"))
    return out, [f"{len(out)} prices for {len(instances)} instance types in {', '.join(regions)}"]


def _price(itype: str, region: str, billing: str, value: float, date: str, source: str, note: str) -> Price:
    return Price(provider="aws", instance_type=itype, region=region, billing=billing, price=value, currency="USD",
                 price_date=date, includes="instance (Linux)", unverified=False, sources=(source,), note=note,
                 origin="live")
