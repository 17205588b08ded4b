"""Issue 23: a state topic someone created with the wrong configuration is reported, not
silently used: ``groupcoord up`` on a state topic that is not compacted starts and serves, and
every shard's status (``groupcoord status``) carries the problem."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord import status
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.local_cluster import ClusterOptions
from groupcoord_testing import BackgroundCluster

from .test_consumer_groups import wait_until

pytestmark = pytest.mark.broker


def test_a_state_topic_that_is_not_compacted_is_in_every_shards_status(
    broker: EmbeddedBroker, tmp_path
) -> None:
    topic = f"__wrong_{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": f"{broker.host}:{broker.port}"})
    (created,) = admin.create_topics([NewTopic(topic, 2, 1, config={"cleanup.policy": "delete"})]).values()
    created.result(15)
    options = ClusterOptions(
        port=0, partitions=2, shards=2, metrics=False, state_topic=topic, log_dir=tmp_path
    )
    with BackgroundCluster((broker.host, broker.port), options) as cluster:
        control = cluster.cluster.control

        def status_rows() -> list[dict]:
            return asyncio.run(status.collect(control.describe()))

        wait_until(
            lambda: any(row.get("state") == "active" for row in status_rows()), what="a partition served"
        )
        rows = status_rows()
    problems = {row["shard"]: row["state_topic_problems"] for row in rows if "state_topic_problems" in row}
    assert set(problems) == {"0", "1"}
    for found in problems.values():
        assert len(found) == 1 and f"state topic {topic}: cleanup.policy is 'delete', not compact" in found[0]
