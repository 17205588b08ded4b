"""Real clients through the gateway against a real broker: produce and consume 10,000 records
in a consumer group (served by our coordinator shards), and never see an upstream broker address."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord_testing import BackgroundCluster

RECORDS = 10_000
pytestmark = pytest.mark.broker


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(timeout=15)


def test_metadata_lists_only_gateway_addresses(gateway: BackgroundCluster, broker: EmbeddedBroker) -> None:
    md = AdminClient({"bootstrap.servers": gateway.bootstrap}).list_topics(timeout=10)
    addresses = {f"{b.host}:{b.port}" for b in md.brokers.values()}
    assert addresses == {gateway.bootstrap}
    assert broker.bootstrap not in addresses


def test_confluent_kafka_produces_and_consumes_in_a_group(cluster: BackgroundCluster) -> None:
    gateway = cluster
    topic, group = unique("ck"), unique("ck-group")
    create_topic(gateway.bootstrap, topic)
    producer = Producer({"bootstrap.servers": gateway.bootstrap, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, value=str(i).encode())
        producer.poll(0)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": gateway.bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    seen: set[int] = set()
    deadline = time.monotonic() + 90
    try:
        while len(seen) < RECORDS and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                assert msg.error() is None, msg.error()
                seen.add(int(msg.value()))
    finally:
        consumer.close()
    assert seen == set(range(RECORDS))


def test_kafka_python_produces_and_consumes_in_a_group(cluster: BackgroundCluster) -> None:
    gateway = cluster
    from kafka import KafkaConsumer, KafkaProducer  # noqa: PLC0415

    topic, group = unique("kp"), unique("kp-group")
    create_topic(gateway.bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=gateway.bootstrap, linger_ms=5)
    for i in range(RECORDS):
        producer.send(topic, str(i).encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        topic, bootstrap_servers=gateway.bootstrap, group_id=group, auto_offset_reset="earliest"
    )
    seen: set[int] = set()
    deadline = time.monotonic() + 90
    try:
        while len(seen) < RECORDS and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500, max_records=2000).values():
                seen.update(int(r.value) for r in records)
        brokers = {f"{b.host}:{b.port}" for b in consumer._client.cluster.brokers()}
    finally:
        consumer.close()
    assert seen == set(range(RECORDS))
    assert brokers == {gateway.bootstrap}


def test_aiokafka_produces_and_consumes_in_a_group(cluster: BackgroundCluster) -> None:
    gateway = cluster
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: PLC0415

    topic, group = unique("aio"), unique("aio-group")
    create_topic(gateway.bootstrap, topic)

    async def scenario() -> set[int]:
        producer = AIOKafkaProducer(bootstrap_servers=gateway.bootstrap, linger_ms=5)
        await producer.start()
        try:
            futures = [await producer.send(topic, str(i).encode()) for i in range(RECORDS)]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=gateway.bootstrap, group_id=group, auto_offset_reset="earliest"
        )
        await consumer.start()
        seen: set[int] = set()
        try:
            deadline = time.monotonic() + 90
            while len(seen) < RECORDS and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500, max_records=2000)
                for records in batches.values():
                    seen.update(int(r.value) for r in records)
        finally:
            await consumer.stop()
        return seen

    assert asyncio.run(scenario()) == set(range(RECORDS))
