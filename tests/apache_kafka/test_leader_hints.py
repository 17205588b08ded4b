"""Kafka 4.x names a moved partition leader's address in Produce and Fetch answers (KIP-951);
a client that followed it would leave the gateway. Found against Kafka 4.4: librdkafka's first
Produce to a new topic met NOT_LEADER_OR_FOLLOWER with a leader hint, connected to the broker
itself, dropped that connection at the next Metadata and resent the batch — 50 records twice in
about one run of two. The gateway advertises Fetch below KIP-951 and rewrites the leader hints
of Produce answers (up to v12, which transactions V2 need) to its own listeners
(FORWARDED_CEILINGS)."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.gateway.proxy.upstream import fetch_upstream_versions
from groupcoord.gateway.transport.api_versions import FORWARDED_CEILINGS
from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

PARTITIONS, PER_PARTITION, ROUNDS = 12, 50, 8


def test_the_gateway_offers_produce_and_fetch_below_kafka_4_4s_versions(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster
) -> None:
    theirs = kafka_cluster.run(fetch_upstream_versions((kafka.host, kafka.port)))
    host, port = kafka_cluster.gateway.bootstrap_address
    ours = kafka_cluster.run(fetch_upstream_versions((host, port)))
    for key, ceiling in FORWARDED_CEILINGS.items():
        assert theirs[key][1] > ceiling  # Kafka 4.4 has later versions...
        assert ours[key][1] == ceiling  # ...the gateway does not offer them
    assert set(FORWARDED_CEILINGS) == {ApiKey.PRODUCE, ApiKey.FETCH}


def test_the_first_records_of_new_topics_are_written_once(kafka: ApacheKafka, kafka_cluster: BackgroundCluster) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap})
    reader = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"hints-{uuid.uuid4().hex[:6]}"})
    try:
        for _ in range(ROUNDS):
            topic = f"hints-{uuid.uuid4().hex[:6]}"
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
            producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap, "linger.ms": 5})
            for p in range(PARTITIONS):
                for i in range(PER_PARTITION):
                    producer.produce(topic, f"{i}".encode(), partition=p)
            assert producer.flush(30) == 0
            ends = [reader.get_watermark_offsets(TopicPartition(topic, p), 15)[1] for p in range(PARTITIONS)]
            assert ends == [PER_PARTITION] * PARTITIONS, f"records written twice: {ends}"
    finally:
        reader.close()
