"""The operator's gauges: shards by state and partitions without a Ready leader (what the
chart's ShardNotReady and PartitionsWithoutLeader alerts read)."""

from __future__ import annotations

from prometheus_client import REGISTRY

from groupcoord.controlplane.placement import Assignment
from groupcoord_operator import metrics


def value(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def test_a_partition_led_by_a_shard_that_is_not_ready_counts_as_without_leader() -> None:
    placement = {
        0: Assignment(leader=0, epoch=1),
        1: Assignment(leader=1, epoch=1),
        2: Assignment(leader=1, epoch=1),
    }
    states = {0: "Ready", 1: "Failed", 2: "Starting"}
    metrics.export("kafka", "orders", 4, placement, states)  # partition 3 has no leader at all
    assert (
        value("groupcoord_operator_partitions_without_leader", namespace="kafka", coordinator="orders") == 3
    )
    for state in ("Ready", "Failed", "Starting"):
        assert value("groupcoord_operator_shards", namespace="kafka", coordinator="orders", state=state) == 1

    metrics.export("kafka", "orders", 3, {p: Assignment(leader=0, epoch=2) for p in range(3)}, {0: "Ready"})
    assert (
        value("groupcoord_operator_partitions_without_leader", namespace="kafka", coordinator="orders") == 0
    )
    assert value("groupcoord_operator_shards", namespace="kafka", coordinator="orders", state="Failed") == 0

    metrics.forget("kafka", "orders")
    assert (
        value("groupcoord_operator_partitions_without_leader", namespace="kafka", coordinator="orders")
        is None
    )
