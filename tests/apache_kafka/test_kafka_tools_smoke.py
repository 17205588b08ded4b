"""Kafka 4.4's own ``kafka-consumer-groups.sh`` reaches groups through the gateway as it reaches
them on Kafka: the smallest proof the Java tools run here at all."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

from .conftest import CONSUMER_GROUP_COMMAND, run_tool


def test_consumer_group_command_lists_a_group_committed_through_the_gateway(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster
) -> None:
    topic, group = f"tools-{uuid.uuid4().hex[:6]}", f"tools-g-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap})
    producer.produce(topic, b"x")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": kafka_cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    consumer.close()

    listed = run_tool(CONSUMER_GROUP_COMMAND, "--bootstrap-server", kafka_cluster.bootstrap, "--list")
    assert listed.returncode == 0, listed.stderr
    assert group in listed.stdout.split()

    described = run_tool(
        CONSUMER_GROUP_COMMAND, "--bootstrap-server", kafka_cluster.bootstrap, "--describe", "--group", group
    )
    assert described.returncode == 0, described.stderr
    row = next(line.split() for line in described.stdout.splitlines() if line.startswith(group))
    assert row[1:4] == [topic, "0", "1"], described.stdout
