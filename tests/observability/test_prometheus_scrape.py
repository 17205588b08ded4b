"""A real Prometheus server scrapes a process that ran a known workload through the metrics
facade; its HTTP API must return exactly the values the workload implies.

The exporter is a separate Python process (as a shard worker or gateway would be), serving
``/metrics`` with :func:`serve_metrics` on the default registry.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .prometheus import PrometheusServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("prometheus_installed"),
]

# A shard "1" with two threads and four partitions, plus a gateway, in one exporter process.
WORKLOAD = r"""
import sys
from groupcoord.observability.gateway_metrics import GatewayMetrics
from groupcoord.observability.metrics_endpoint import serve_metrics
from groupcoord.observability.shard_metrics import ShardMetrics

shard = ShardMetrics("1", window_s=3600)
gateway = GatewayMetrics()
shard.add_thread("0"); shard.add_thread("1")
shard.set_partition_states({0: "active", 1: "active", 2: "active", 3: "loading"})
shard.set_group_counts(0, consumer={"stable": 3, "assigning": 1}, classic={"empty": 1})
shard.set_group_counts(1, consumer={"stable": 2}, classic={"stable": 4, "preparing_rebalance": 2}, share={"stable": 2, "empty": 1})
shard.set_event_queue_size(2, 9)
for _ in range(120):
    shard.observe_request("ConsumerGroupHeartbeat", 0.003, partition=0, group="g")
    gateway.observe_request("ConsumerGroupHeartbeat", 0.004, shard="1")
for _ in range(30):
    shard.observe_request("OffsetCommit", 0.02, partition=1, group="h")
    gateway.observe_request("OffsetCommit", 0.03, shard="1")
shard.record_offset_commits(30 * 4)
for _ in range(7):
    shard.record_rebalance("consumer")
for _ in range(2):
    shard.record_rebalance("classic")
shard.record_offset_expirations(5)
shard.record_offset_deletions(3)
for _ in range(10):
    shard.observe_event(0.0002, 0.001)
shard.observe_partition_load(0, 0.5)
shard.observe_partition_load(1, 1.5)
for records in (1, 4, 10):
    shard.observe_state_write(0, 0.004, records)
server, _ = serve_metrics(0, addr="127.0.0.1")
print(server.server_port, flush=True)
sys.stdin.read()  # run until the test closes our stdin
"""


@pytest.fixture
def exporter() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKLOAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"127.0.0.1:{port}"
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)


def scalar(result: list[dict]) -> float:
    assert len(result) == 1, result
    return float(result[0]["value"][1])


def by_label(result: list[dict], label: str) -> dict[str, float]:
    return {r["metric"][label]: float(r["value"][1]) for r in result}


def test_prometheus_scrapes_known_workload(exporter: str, tmp_path: Path) -> None:
    with PrometheusServer([exporter], tmp_path) as prom:
        prom.wait_for('groupcoord_group_count{shard="1"}')
        assert by_label(prom.query('groupcoord_group_count{shard="1"}'), "protocol") == {
            "consumer": 6.0,
            "classic": 7.0,
            "share": 3.0,
            "streams": 0.0,
        }
        share = by_label(prom.query('groupcoord_share_group_count{shard="1"}'), "state")
        assert share == {"empty": 1, "stable": 2, "dead": 0}
        consumer = by_label(prom.query('groupcoord_consumer_group_count{shard="1"}'), "state")
        assert consumer == {"empty": 0, "assigning": 1, "reconciling": 0, "stable": 5, "dead": 0}
        classic = by_label(prom.query('groupcoord_classic_group_count{shard="1"}'), "state")
        assert classic["stable"] == 4 and classic["preparing_rebalance"] == 2 and classic["empty"] == 1
        partitions = by_label(prom.query('groupcoord_partition_count{shard="1"}'), "state")
        assert partitions == {"active": 3, "loading": 1, "failed": 0, "standby": 0}
        assert scalar(prom.query('groupcoord_event_queue_size{shard="1",partition="2"}')) == 9
        latency = prom.query('sum by (component, api) (groupcoord_request_latency_seconds_count{shard="1"})')
        counts = {(r["metric"]["component"], r["metric"]["api"]): float(r["value"][1]) for r in latency}
        assert counts == {
            ("shard", "ConsumerGroupHeartbeat"): 120,
            ("gateway", "ConsumerGroupHeartbeat"): 120,
            ("shard", "OffsetCommit"): 30,
            ("gateway", "OffsetCommit"): 30,
        }
        # Every heartbeat took 3 ms at the shard: all 120 fall in the 5 ms bucket, none in 2.5 ms.
        assert (
            scalar(
                prom.query(
                    'groupcoord_request_latency_seconds_bucket{component="shard",api="ConsumerGroupHeartbeat",le="0.005"}'
                )
            )
            == 120
        )
        assert (
            scalar(
                prom.query(
                    'groupcoord_request_latency_seconds_bucket{component="shard",api="ConsumerGroupHeartbeat",le="0.0025"}'
                )
            )
            == 0
        )
        assert by_label(prom.query('groupcoord_rebalance_total{shard="1"}'), "protocol") == {
            "consumer": 7,
            "classic": 2,
            "share": 0,
            "streams": 0,
        }
        assert scalar(prom.query('groupcoord_offset_commit_total{shard="1"}')) == 120
        assert scalar(prom.query('groupcoord_offset_expiration_total{shard="1"}')) == 5
        assert scalar(prom.query('groupcoord_offset_deletion_total{shard="1"}')) == 3
        assert scalar(prom.query('groupcoord_event_queue_time_seconds_count{shard="1"}')) == 10
        assert scalar(prom.query('groupcoord_partition_load_time_seconds_max{shard="1"}')) == 1.5
        assert scalar(prom.query('groupcoord_partition_load_time_seconds_avg{shard="1"}')) == 1.0
        assert scalar(prom.query('groupcoord_state_write_batch_records_sum{shard="1",partition="0"}')) == 15
        assert scalar(prom.query('groupcoord_state_write_batch_records_count{shard="1",partition="0"}')) == 3
        idle = scalar(prom.query('groupcoord_thread_idle_ratio_min{shard="1"}'))
        assert 0.0 <= idle <= 1.0
        # No series carries a group or member label (bounded cardinality).
        labels = {k for r in prom.query('{__name__=~"groupcoord_.*"}') for k in r["metric"]}
        assert not labels & {"group", "group_id", "member", "member_id"}
