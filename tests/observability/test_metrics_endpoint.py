"""The /metrics endpoint serves the registry, and the Grafana dashboard queries only series it exports."""

from __future__ import annotations

import urllib.request

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from groupcoord.observability.gateway_metrics import GatewayMetrics
from groupcoord.observability.metrics_endpoint import serve_metrics
from groupcoord.observability.shard_metrics import ShardMetrics

from .exposition import exposition


def test_serve_metrics_exposes_the_registry_over_http() -> None:
    r = CollectorRegistry()
    m = ShardMetrics("9", r)
    m.record_offset_commits(42)
    server, _ = serve_metrics(0, r, addr="127.0.0.1")
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=5).read()
    finally:
        server.shutdown()
    assert 'groupcoord_offset_commit_total{shard="9"} 42.0' in body.decode()


def test_grafana_dashboard_queries_only_metrics_we_export() -> None:
    """Every series name the chart's dashboard queries is exported by a shard worker, the
    gateway or the operator, once each has seen some activity."""
    import json
    import re
    from pathlib import Path

    from prometheus_client import REGISTRY

    from groupcoord.gateway.groups.leadership import LeadershipTable
    from groupcoord.observability.consumer_lag import ConsumerLagCollector
    from groupcoord_operator import metrics as operator_metrics

    r = CollectorRegistry()
    m = ShardMetrics("0", r)
    gateway = GatewayMetrics(r)
    gateway.observe_request("JoinGroup", 0.01)
    gateway.watch_leadership(table := LeadershipTable(4))
    m.observe_request("JoinGroup", 0.01)
    m.observe_event(0.001, 0.001)
    m.observe_partition_load(0, 1.0)
    m.set_event_queue_size(0, 1)
    m.observe_state_write(0, 0.01, 2)
    m.record_state_write_error(0)
    lag = ConsumerLagCollector("0")
    r.register(lag)
    lag.update({"g": {"t": {0: 5}}}, {("t", 0): 9})
    lag.update({"g": {"t": {0: 6}}}, {("t", 0): 9})  # a second report gives lag seconds
    operator_metrics.export("ns", "gc", 1, {}, {0: "Ready"})
    exported = {
        s.name
        for registry in (r, REGISTRY)
        for fam in text_string_to_metric_families(exposition(registry))
        for s in fam.samples
    }
    dashboard = Path(__file__).parents[2] / "helm" / "groupcoord" / "dashboards" / "groupcoord.json"
    exprs = [t["expr"] for p in json.loads(dashboard.read_text())["panels"] for t in p["targets"]]
    used = {name for e in exprs for name in re.findall(r"groupcoord_[a-z_]+", e)}
    assert used and used <= exported, used - exported
    assert table.partitions == 4
