"""The state topic's replication: Kafka's offsets-topic defaults (3 / 2), fitted to the cluster.

The pure rule is checked case by case; then a real broker (tansu, one node) gets a state topic
asked for with 3 / 2, which it could not host, and the topic is created with 1 / 1.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from groupcoord.common.topic_replication import Replication, existing_topic_problems, fit_replication
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


@pytest.mark.parametrize(
    ("replicas", "configs", "wrong"),
    [
        (3, {"cleanup.policy": "compact", "min.insync.replicas": "2"}, []),
        (3, {"cleanup.policy": "compact,delete", "min.insync.replicas": "3"}, []),
        (3, {"min.insync.replicas": "2"}, ["cleanup.policy is 'delete'"]),  # Kafka's default
        (3, {"cleanup.policy": "delete", "min.insync.replicas": "2"}, ["cleanup.policy is 'delete'"]),
        (2, {"cleanup.policy": "compact", "min.insync.replicas": "2"}, ["replication factor 2, below the 3"]),
        (3, {"cleanup.policy": "compact"}, ["min.insync.replicas 1, below the 2"]),  # default 1
    ],
)
def test_an_existing_state_topic_is_checked_against_what_is_asked(replicas, configs, wrong):
    problems = existing_topic_problems("st", Replication(3, 2), replicas, configs, check_min_isr=True)
    assert len(problems) == len(wrong)
    for problem, expected in zip(problems, wrong, strict=True):
        assert problem.startswith("state topic st: ") and expected in problem


def test_a_misconfigured_existing_state_topic_is_reported_and_used(broker, caplog):
    topic = f"state-{uuid.uuid4().hex[:8]}"

    async def run() -> Replication:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, 2, 1, topic_configs={"cleanup.policy": "delete"})])
        finally:
            await admin.close()
        return await ensure_topic(broker.bootstrap, topic, 2, 3, 2)

    with caplog.at_level(logging.WARNING):
        fitted = asyncio.run(run())
    # one broker: 1 replica and min ISR 1 are what is asked once fitted; only the policy is wrong
    assert len(fitted.problems) == 1 and "cleanup.policy is 'delete', not compact" in fitted.problems[0]
    assert fitted.problems[0] in caplog.text
    assert asyncio.run(ensure_topic(broker.bootstrap, f"state-{uuid.uuid4().hex[:8]}", 1)).problems == ()
