"""Online migration with real clients: one group, classic and KIP-848 consumers side by side.

Given a classic group (eager: librdkafka and kafka-python "range"; or librdkafka
cooperative-sticky members), when a
librdkafka consumer with group.protocol=consumer joins, the group converts to a consumer group
and the classic members keep working through JoinGroup/SyncGroup/Heartbeat translation; when
that consumer leaves, the group converts back and the classic members rebalance. Throughout,
no partition is owned twice, every record is consumed, and committed offsets carry over.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord_testing import BackgroundCluster

from .consumers import ConfluentConsumer, KafkaPythonConsumer
from .test_consumer_groups import (
    PARTITIONS,
    PER_PARTITION,
    assert_no_double_ownership,
    disjoint_cover,
    produce,
    progress,
    wait_until,
)

pytestmark = [pytest.mark.broker, pytest.mark.upstreams("tansu", "kafka-4.4", "kafka-3.9")]


CLASSIC_PAIRS = {
    # eager "range": librdkafka and kafka-python share the protocol name
    "eager": lambda b, t, g: [
        ConfluentConsumer(b, t, g, "confluent-range", **{"partition.assignment.strategy": "range"}),
        KafkaPythonConsumer(b, t, g, "kafka-python-range"),
    ],
    # KIP-429 incremental cooperative rebalancing
    "cooperative": lambda b, t, g: [
        ConfluentConsumer(
            b, t, g, f"cooperative-{i}", **{"partition.assignment.strategy": "cooperative-sticky"}
        )
        for i in range(2)
    ],
}


@pytest.mark.parametrize("classic", list(CLASSIC_PAIRS))
def test_classic_and_consumer_protocol_members_share_one_group(
    cluster: BackgroundCluster, classic: str
) -> None:
    bootstrap = cluster.bootstrap
    topic, group = f"migrate-{uuid.uuid4().hex[:6]}", f"g-migrate-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        fut.result(15)
    produce(bootstrap, topic, 0)

    consumers = CLASSIC_PAIRS[classic](bootstrap, topic, group)
    upgraded = ConfluentConsumer(bootstrap, topic, group, "upgraded", **{"group.protocol": "consumer"})
    try:
        # given a classic group of two members
        for c in consumers:
            c.start()
        wait_until(
            lambda: disjoint_cover(consumers) and all(c.history.owned for c in consumers),
            what="classic split",
        )

        # when a KIP-848 consumer joins, the group converts and all three share the partitions
        upgraded.start()
        everyone = [*consumers, upgraded]
        wait_until(
            lambda: disjoint_cover(everyone) and all(c.history.owned for c in everyone),
            timeout=90,
            what="3-way split across both protocols",
        )
        wait_until(
            lambda: len(set().union(*(c.history.records for c in everyone))) == PARTITIONS * PER_PARTITION,
            what="all records consumed",
            detail=lambda: progress(everyone),
        )
        described = admin.describe_consumer_groups([group])[group].result(15)
        assert described.type == ConsumerGroupType.CONSUMER
        assert len(described.members) == 3

        # when it leaves, the group converts back and the classic members take everything over
        upgraded.stop()
        wait_until(lambda: disjoint_cover(consumers), timeout=90, what="classic split after the downgrade")
        described = admin.describe_consumer_groups([group])[group].result(15)
        assert described.type == ConsumerGroupType.CLASSIC
        assert len(described.members) == 2
        produce(bootstrap, topic, PER_PARTITION)
        wait_until(
            lambda: (
                len(set().union(*(c.history.records for c in everyone))) == 2 * PARTITIONS * PER_PARTITION
            ),
            what="second batch consumed",
        )
        wait_until(
            lambda: all(
                any(batch.get(p) == 2 * PER_PARTITION for c in everyone for _, batch in c.history.commits)
                for p in range(PARTITIONS)
            ),
            what="final commits acknowledged",
        )
    finally:
        for c in (upgraded, *consumers):
            c.stop()
    for c in (upgraded, *consumers):
        assert not c.history.errors, (c.name, c.history.errors)
    assert_no_double_ownership([upgraded, *consumers])
