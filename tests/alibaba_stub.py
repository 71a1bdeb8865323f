"""A stand-in for the Alibaba ECS SDK client that replays the recorded responses in data/prices (built from the
API documentation), as the SDK's own response objects. It fails on any request it has no recording for."""

import json
from pathlib import Path

RECORDED = Path(__file__).parent / "data" / "prices" / "alibaba_recorded.json"


class ReplayClient:
    def __init__(self, region: str, recorded: dict | None = None):
        self.region = region
        self.data = (recorded or json.loads(RECORDED.read_text()))[region]
        self.calls: list[tuple[str, str]] = []

    def _reply(self, model_name: str, body: dict):
        from alibabacloud_ecs20140526 import models

        return getattr(models, model_name)().from_map({"headers": {}, "statusCode": 200, "body": body})

    def describe_available_resource(self, req):
        assert req.region_id == self.region and req.destination_resource == "InstanceType"
        self.calls.append(("DescribeAvailableResource", ""))
        return self._reply("DescribeAvailableResourceResponse", self.data["DescribeAvailableResource"])

    def describe_price(self, req):
        assert req.region_id == self.region and req.resource_type == "instance"
        key = f"{req.instance_type}/{req.price_unit}"
        self.calls.append(("DescribePrice", key))
        return self._reply("DescribePriceResponse", self.data["DescribePrice"][key])

    def describe_spot_price_history(self, req):
        assert req.region_id == self.region and req.network_type == "vpc"
        self.calls.append(("DescribeSpotPriceHistory", req.instance_type))
        return self._reply("DescribeSpotPriceHistoryResponse", self.data["DescribeSpotPriceHistory"][req.instance_type])
