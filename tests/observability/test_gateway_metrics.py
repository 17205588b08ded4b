"""The gateway's metrics facade: request latency shares one family with the shards', and the
api label stays bounded."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from groupcoord.observability.families import MAX_APIS, OTHER_API
from groupcoord.observability.gateway_metrics import GatewayMetrics
from groupcoord.observability.shard_metrics import ShardMetrics

from .exposition import exposition, value


def test_request_latency_at_shard_and_gateway_share_one_family() -> None:
    r = CollectorRegistry()
    shard = ShardMetrics("0", r)
    gateway = GatewayMetrics(r)
    for s in (0.002, 0.004, 0.3):
        shard.observe_request("OffsetCommit", s, partition=1, group="g")
    gateway.observe_request("OffsetCommit", 0.5, shard="0")
    gateway.observe_request("Metadata", 0.01)
    name = "groupcoord_request_latency_seconds"
    assert value(r, f"{name}_count", component="shard", shard="0", api="OffsetCommit") == 3
    assert value(r, f"{name}_sum", component="shard", shard="0", api="OffsetCommit") == pytest.approx(0.306)
    assert value(r, f"{name}_bucket", component="shard", shard="0", api="OffsetCommit", le="0.005") == 2
    assert value(r, f"{name}_count", component="gateway", shard="0", api="OffsetCommit") == 1
    assert value(r, f"{name}_count", component="gateway", shard="", api="Metadata") == 1


def test_api_label_is_capped() -> None:
    r = CollectorRegistry()
    g = GatewayMetrics(r)
    for i in range(MAX_APIS + 10):
        g.observe_request(f"Api{i}", 0.001)
    apis = {
        s.labels["api"]
        for fam in text_string_to_metric_families(exposition(r))
        if fam.name == "groupcoord_request_latency_seconds"
        for s in fam.samples
    }
    assert len(apis) == MAX_APIS + 1 and OTHER_API in apis
    assert (
        value(r, "groupcoord_request_latency_seconds_count", component="gateway", shard="", api=OTHER_API)
        == 10
    )
