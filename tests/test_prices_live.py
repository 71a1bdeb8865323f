"""Live refresh for Azure (HTTP replayed with `responses`) and AWS (botocore Stubber), from responses built from the
providers' documented formats (not captured live; synthetic numbers, no credentials)."""

import datetime as dt
import json
from pathlib import Path

import pytest

from trainfit.catalog import prices as P

DATA = Path(__file__).parent / "data" / "prices"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    P.clear_cache()
    yield tmp_path / "cache" / "trainfit" / "prices"
    P.clear_cache()


def test_azure_refresh_keeps_linux_consumption_and_spot(run_cli, cache):
    responses = pytest.importorskip("responses")
    from trainfit.catalog.live import azure

    pages = json.loads((DATA / "azure_recorded.json").read_text())
    with responses.RequestsMock() as rsps:
        rsps.add(responses.GET, azure.API, json=pages["page1"])
        rsps.add(responses.GET, pages["page1"]["NextPageLink"], json=pages["page2"])
        code, out, err = run_cli("prices", "refresh", "--provider", "azure", "--instance", "Standard_NC24ads_A100_v4",
                                 "--region", "eastus", "--json")
        assert code == 0, err
        assert "armSkuName eq 'Standard_NC24ads_A100_v4'" in rsps.calls[0].request.url.replace("%27", "'").replace(
            "+", " ").replace("%20", " ")
    got = {(p["region"], p["billing"]): p["price"] for p in json.loads(out)["prices"]}
    assert got == {("eastus", "payg"): 4.1, ("eastus", "spot"): 1.2}  # not Windows, not Low Priority, not japaneast
    rows = [r for r in P.listing(provider="azure") if r["instance_type"] == "Standard_NC24ads_A100_v4"
            and r["region"] == "eastus" and r["billing"] == "payg"]
    assert rows[0]["price"] == 4.1 and rows[0]["price_origin"] == "live"


def test_azure_network_failure_is_one_line_and_writes_nothing(run_cli, cache):
    responses = pytest.importorskip("responses")
    from requests.exceptions import ConnectionError as RequestsConnectionError

    from trainfit.catalog.live import azure

    with responses.RequestsMock() as rsps:
        rsps.add(responses.GET, azure.API, body=RequestsConnectionError("unreachable"))
        code, out, err = run_cli("prices", "refresh", "--provider", "azure", "--instance", "Standard_NC24ads_A100_v4")
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and "unreachable" in lines[0] and not cache.exists()


def _aws_product(usd: str) -> str:
    # the shape of one Price List entry (docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_GetProducts.html)
    return json.dumps({"product": {"productFamily": "Compute Instance", "attributes": {
        "instanceType": "p5.4xlarge", "regionCode": "us-east-1", "operatingSystem": "Linux", "tenancy": "Shared"}},
        "serviceCode": "AmazonEC2", "terms": {"OnDemand": {"SKU1.TERM1": {"effectiveDate": "2025-06-01T00:00:00Z",
            "priceDimensions": {"SKU1.TERM1.DIM1": {"unit": "Hrs", "pricePerUnit": {"USD": usd},
                                                     "description": "synthetic test value"}}}}},
        "version": "test", "publicationDate": "2026-11-30T00:00:00Z"})


def test_aws_refresh_reads_on_demand_and_spot(cache):
    boto3 = pytest.importorskip("boto3")
    from botocore.stub import ANY, Stubber

    from trainfit.catalog.live import aws, refresh

    pricing = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="testing",
                           aws_secret_access_key="testing")
    ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
    with Stubber(pricing) as sp, Stubber(ec2) as se:
        sp.add_response("get_products", {"PriceList": [_aws_product("7.5000000000")], "FormatVersion": "aws_v1"},
                        {"ServiceCode": "AmazonEC2", "Filters": aws._filters("p5.4xlarge", "us-east-1"),
                         "MaxResults": 10})
        t = dt.datetime(2026, 11, 30, tzinfo=dt.timezone.utc)
        se.add_response("describe_spot_price_history", {"SpotPriceHistory": [
            {"AvailabilityZone": "us-east-1a", "InstanceType": "p5.4xlarge", "ProductDescription": "Linux/UNIX",
             "SpotPrice": "3.100000", "Timestamp": t - dt.timedelta(hours=5)},
            {"AvailabilityZone": "us-east-1a", "InstanceType": "p5.4xlarge", "ProductDescription": "Linux/UNIX",
             "SpotPrice": "2.900000", "Timestamp": t},
            {"AvailabilityZone": "us-east-1b", "InstanceType": "p5.4xlarge", "ProductDescription": "Linux/UNIX",
             "SpotPrice": "3.000000", "Timestamp": t}]},
            {"InstanceTypes": ["p5.4xlarge"], "ProductDescriptions": ["Linux/UNIX"], "StartTime": ANY})
        res = refresh("aws", ["us-east-1"], ["p5.4xlarge"],
                      client=lambda service, region: {"pricing": pricing, "ec2": ec2}[service])
    got = {p.billing: p.price for p in res.prices}
    assert got == {"payg": 7.5, "spot": 2.9}
    assert (cache / "aws.csv").is_file() and "testing" not in (cache / "aws.csv").read_text()


def test_aws_without_credentials_is_one_clear_line(run_cli, cache, monkeypatch, tmp_path):
    pytest.importorskip("boto3")
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    code, out, err = run_cli("prices", "refresh", "--provider", "aws", "--instance", "p5.4xlarge")
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and "AWS_ACCESS_KEY_ID" in lines[0]


def test_gcp_refresh_sums_gpu_core_and_ram_skus(cache, monkeypatch):
    responses = pytest.importorskip("responses")
    from trainfit.catalog.live import gcp, refresh

    monkeypatch.setenv("GOOGLE_API_KEY", "scrubbed-test-key")
    page = json.loads((DATA / "gcp_recorded.json").read_text())["page"]
    with responses.RequestsMock() as rsps:
        rsps.add(responses.GET, gcp.API, json=page)
        res = refresh("gcp", ["us-central1"], ["a2-highgpu-1g"])
        assert "key=scrubbed-test-key" in rsps.calls[0].request.url
    got = {p.billing: p.price for p in res.prices}
    # a2-highgpu-1g: 1 GPU, 12 vCPU, 85 GiB (instances.csv)
    assert got["payg"] == pytest.approx(1 * 2.5 + 12 * 0.03 + 85 * 0.004)
    assert got["spot"] == pytest.approx(1 * 1.0 + 12 * 0.01 + 85 * 0.001)
    assert "scrubbed-test-key" not in (cache / "gcp.csv").read_text()


def test_gcp_without_api_key_is_one_clear_line(run_cli, cache, monkeypatch):
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GCP_API_KEY", raising=False)
    code, out, err = run_cli("prices", "refresh", "--provider", "gcp")
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and "GOOGLE_API_KEY" in lines[0]
