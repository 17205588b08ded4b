"""DeleteGroups side by side with Kafka 4.4, at v2 and at v3 (Kafka 4.4's newest: each result
may carry an error message): the same groups — one never seen, an empty name, a classic group
with a member, one whose members left (its offsets remain), a KIP-848 group with a member —
deleted through the gateway and on Kafka's own coordinator get the same answers."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest as DeleteGroupsV2

from groupcoord.common.kafka_wire.exchange import exchange
from groupcoord.common.kafka_wire.schemas_after_kio import DeleteGroupsRequest as DeleteGroupsV3
from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka


def consume_once(bootstrap: str, group: str, topic: str, **config: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest", **config})
    consumer.subscribe([topic])
    for _ in range(60):
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            break
    consumer.commit(asynchronous=False)
    return consumer


def answers(cluster: BackgroundCluster, bootstrap: str, address: tuple[str, int], topic: str, request: Any) -> list:
    tag = uuid.uuid4().hex[:6]
    busy = consume_once(bootstrap, f"busy-{tag}", topic)
    consume_once(bootstrap, f"idle-{tag}", topic).close()
    modern = consume_once(bootstrap, f"kip848-{tag}", topic, **{"group.protocol": "consumer"})
    try:
        names = ("never-seen", "", f"busy-{tag}", f"idle-{tag}", f"kip848-{tag}")
        response = cluster.run(exchange(address, request(groups_names=names), "delete-groups", 15), 20)
        return sorted(
            (r.group_id.replace(tag, "*"), r.error_code.name, getattr(r, "error_message", "v2: none"))
            for r in response.results
        )
    finally:
        busy.close()
        modern.close()


@pytest.mark.parametrize("request_type", [DeleteGroupsV2, DeleteGroupsV3], ids=["v2", "v3"])
def test_delete_groups_is_answered_as_kafka_answers(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster, request_type: Any
) -> None:
    topic = f"dg-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    producer.produce(topic, b"x")
    assert producer.flush(30) == 0
    theirs = answers(kafka_cluster, kafka.bootstrap, (kafka.host, kafka.port), topic, request_type)
    ours = answers(kafka_cluster, kafka_cluster.bootstrap, kafka_cluster.gateway.bootstrap_address, topic, request_type)
    assert ours == theirs
