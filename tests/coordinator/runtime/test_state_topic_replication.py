"""The state topic's replication: Kafka's offsets-topic defaults (3 / 2), fitted to the cluster.

The pure rule is checked case by case; then a real broker (tansu, one node) gets a state topic
asked for with 3 / 2, which it could not host, and the topic is created with 1 / 1.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from groupcoord.common.topic_replication import Replication, fit_replication
from groupcoord.coordinator.runtime.statelog import ensure_topic


@pytest.mark.parametrize(
    ("asked", "brokers", "expected"),
    [
        ((3, 2), None, (3, 2, False)),  # broker count unknown: as asked
        ((3, 2), 5, (3, 2, False)),
        ((3, 2), 3, (3, 2, False)),
        ((3, 2), 2, (2, 1, True)),  # keeps one replica of margin: a restarting broker blocks nothing
        ((3, 2), 1, (1, 1, True)),
        ((3, 3), 2, (2, 2, True)),  # no margin asked, none given
        ((2, 5), 3, (2, 2, False)),  # min ISR never above the factor
    ],
)
def test_replication_is_fitted_to_the_broker_count(asked, brokers, expected):
    fitted = fit_replication(*asked, brokers)
    assert (fitted.replication_factor, fitted.min_insync_replicas, fitted.clamped) == expected
    if fitted.clamped:
        assert f"replication factor {asked[0]} clamped to {expected[0]}" in fitted.message


def test_nonsense_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        fit_replication(0, 1, 3)


def test_a_one_broker_cluster_gets_a_state_topic_it_can_host(broker):
    topic = f"state-{uuid.uuid4().hex[:8]}"

    async def run() -> tuple[Replication, int]:
        fitted = await ensure_topic(broker.bootstrap, topic, 2, 3, 2)
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            (described,) = await admin.describe_topics([topic])
        finally:
            await admin.close()
        return fitted, len(described["partitions"][0]["replicas"])

    fitted, replicas = asyncio.run(run())
    assert (fitted.replication_factor, fitted.min_insync_replicas, fitted.clamped) == (1, 1, True)
    assert replicas == 1
