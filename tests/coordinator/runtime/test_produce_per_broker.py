"""One Produce request in flight per broker (runtime/produce_per_broker.py), on the embedded
tansu broker: the state writes of several partitions queued while a request is out share the
next request, each partition's batches land in order, and every batch learns its own offset."""

from __future__ import annotations

import asyncio
import uuid

from aiokafka.client import AIOKafkaClient
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client import CollectorRegistry

from groupcoord.coordinator.runtime.produce_per_broker import ProducePerBroker
from groupcoord.coordinator.runtime.statelog import StateLogWriter
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.observability.shard_metrics import ShardMetrics

PARTITIONS = 8


def new_topic(broker: EmbeddedBroker) -> str:
    topic = f"ppb-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(10)
    return topic


def read_values(broker: EmbeddedBroker, topic: str, partition: int, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"ppb-{uuid.uuid4().hex[:6]}"})
    consumer.assign([TopicPartition(topic, partition, 0)])
    values: list[bytes] = []
    try:
        while len(values) < count:
            message = consumer.poll(10)
            assert message is not None, f"{len(values)} of {count} read back"
            values.append(message.value())
    finally:
        consumer.close()
    return values


async def test_writes_of_every_partition_queued_meanwhile_share_one_request(broker: EmbeddedBroker) -> None:
    """Eight partitions writing at once, ten writes each, each write after the one before
    (as a partition's pipeline writes): far fewer requests than batches, and every partition
    holds its records in the order written, at the offsets the writes were told."""
    topic = new_topic(broker)
    registry = CollectorRegistry()
    metrics = ShardMetrics("0", registry)
    writer = StateLogWriter(broker.bootstrap, topic, on_produce_request=metrics.record_state_produce_request)
    await writer.start()
    try:
        async def partition_writes(partition: int) -> list[tuple[int, int]]:
            return [
                (await writer.append(partition, [(b"k", f"{partition}-{i}".encode())], tag=None))[0]
                for i in range(10)
            ]

        spans = await asyncio.gather(*(partition_writes(p) for p in range(PARTITIONS)))
    finally:
        await writer.stop()
    # as an operator reads them: the shard's counters of Produce requests and their batches
    requests = registry.get_sample_value("groupcoord_state_produce_requests_total", {"shard": "0"})
    batches = registry.get_sample_value("groupcoord_state_produce_batches_total", {"shard": "0"})
    assert batches == PARTITIONS * 10
    assert requests <= batches // 2, f"{requests} requests for {batches} batches"
    for partition, written in enumerate(spans):
        assert written == [(i, i) for i in range(10)]
        assert read_values(broker, topic, partition, 10) == [f"{partition}-{i}".encode() for i in range(10)]


async def test_a_write_larger_than_a_batch_lands_in_order_in_several(broker: EmbeddedBroker) -> None:
    topic = new_topic(broker)
    writer = StateLogWriter(broker.bootstrap, topic)
    await writer.start()
    try:
        value = b"x" * 300_000
        entries = [(f"k{i}".encode(), value + str(i).encode()) for i in range(7)]
        spans = await writer.append(0, entries, tag=b"t")
    finally:
        await writer.stop()
    assert len(spans) > 1 and spans[0][0] == 0 and spans[-1][1] == 6
    assert all(b[0] == a[1] + 1 for a, b in zip(spans, spans[1:], strict=False))
    assert read_values(broker, topic, 0, 7) == [e[1] for e in entries]


async def test_a_refused_batch_fails_its_own_sender_only(broker: EmbeddedBroker) -> None:
    """A batch for a partition the topic does not have fails (after its retries) without
    holding up or failing the batches beside it."""
    topic = new_topic(broker)
    writer = StateLogWriter(broker.bootstrap, topic)
    await writer.start()
    client = AIOKafkaClient(bootstrap_servers=broker.bootstrap)
    await client.bootstrap()
    produce = ProducePerBroker(client, delivery_timeout_s=1.0)
    try:
        good = asyncio.ensure_future(writer.append(1, [(b"k", b"v")], tag=None))
        bad = asyncio.ensure_future(produce.send(topic, PARTITIONS + 3, b"not a batch"))
        assert (await good) == [(0, 0)]
        results = await asyncio.gather(bad, return_exceptions=True)
        assert isinstance(results[0], Exception)
    finally:
        await produce.close()
        await client.close()
        await writer.stop()
