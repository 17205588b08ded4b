"""KIP-1263's assignor offload with real KIP-848 clients: every target assignment of a local
cluster runs off its partitions' loops (``GROUPCOORD_GROUP_CONSUMER_GROUP_ASSIGNOR_OFFLOAD_MIN_SIZE``
0, which the shard processes inherit), and librdkafka consumers (``group.protocol=consumer``)
still split a topic, take over a leaver's partitions and never own a partition twice: the
members learn their offloaded targets from the heartbeats that follow."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord_testing import BackgroundCluster

from .test_consumer_groups import (
    PARTITIONS,
    PER_PARTITION,
    assert_no_double_ownership,
    disjoint_cover,
    progress,
    three_consumers,
    wait_until,
)

pytestmark = [pytest.mark.broker, pytest.mark.upstreams("tansu")]


@pytest.fixture
def offloading(broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch) -> Iterator[BackgroundCluster]:
    monkeypatch.setenv("GROUPCOORD_GROUP_CONSUMER_GROUP_ASSIGNOR_OFFLOAD_MIN_SIZE", "0")
    with BackgroundCluster((broker.host, broker.port)) as cluster:
        yield cluster


def test_kip848_consumers_converge_on_offloaded_assignments(offloading: BackgroundCluster) -> None:
    _, _, consumers = three_consumers(offloading.bootstrap, "confluent-consumer-protocol")
    try:
        wait_until(
            lambda: disjoint_cover(consumers) and all(c.history.owned for c in consumers),
            what="3-way split",
            detail=lambda: progress(consumers),
        )
        wait_until(
            lambda: len(set().union(*(c.history.records for c in consumers))) == PARTITIONS * PER_PARTITION,
            what="all records consumed",
            detail=lambda: progress(consumers),
        )
        consumers[2].stop()
        wait_until(
            lambda: disjoint_cover(consumers[:2]), what="2-way split after a leave", detail=lambda: progress(consumers)
        )
    finally:
        for c in consumers:
            c.stop()
    assert all(not c.history.errors for c in consumers), [c.history.errors for c in consumers]
    assert_no_double_ownership(consumers)
