"""The runtime's publisher on a real broker (the embedded tansu): what a shard's Publish asks —
the operator's rule before anything is written, copies of source records, and no copy written
twice when a new leader resumes what its predecessor may have written."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.coordinator.core.contract import OutboundRecord, Publication, TopicRule
from groupcoord.coordinator.runtime.publisher import Publisher
from groupcoord.coordinator.runtime.statelog import StateLogWriter
from groupcoord.embedded_broker import EmbeddedBroker

pytestmark = pytest.mark.broker
IDENTITY = ("id",)


def topic(broker: EmbeddedBroker, prefix: str, partitions: int = 1) -> str:
    name = f"{prefix}{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def records_of(
    broker: EmbeddedBroker, name: str, expected: int, partitions: int = 1
) -> list[tuple[bytes | None, bytes | None, dict]]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": uuid.uuid4().hex})
    consumer.assign([TopicPartition(name, p, OFFSET_BEGINNING) for p in range(partitions)])
    out = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and len(out) < expected:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                out.append((m.key(), m.value(), dict(m.headers() or ())))
        time.sleep(0.5)
        while (m := consumer.poll(0.5)) is not None:  # anything beyond what was expected
            if not m.error():
                out.append((m.key(), m.value(), dict(m.headers() or ())))
    finally:
        consumer.close()
    return out


def letter(n: int, copy_of: tuple[str, int, int] | None = None) -> OutboundRecord:
    return OutboundRecord(None, None, (("id", str(n).encode()),), copy_of)


async def test_copies_take_the_source_records_and_a_resumed_publication_writes_nothing_twice(
    broker: EmbeddedBroker,
) -> None:
    source = topic(broker, "src-")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        producer.produce(source, value=f"v{i}".encode(), key=f"k{i}".encode())
    assert producer.flush(30) == 0
    dlq = topic(broker, "dlq.", partitions=2)
    writer = StateLogWriter(broker.bootstrap, "unused")
    await writer.start()
    publisher = Publisher(broker.bootstrap, writer)
    rule = TopicRule(required_prefix="dlq.")
    try:
        since = int(time.time() * 1000)
        first = Publication(dlq, 3, (letter(0, (source, 0, 1)), letter(1)), rule, IDENTITY)
        outcome = await publisher(first)
        assert (outcome.written, outcome.error) == (2, None)
        # the new leader resumes 0, 1 (written) and 2 (not yet): only 2 is written
        resumed = Publication(dlq, 3, (letter(0, (source, 0, 1)), letter(1), letter(2)), rule, IDENTITY, since)
        assert (await publisher(resumed)).error is None
    finally:
        await publisher.close()
        await writer.stop()
    written = records_of(broker, dlq, 3, partitions=2)
    assert sorted(r[2]["id"] for r in written) == [b"0", b"1", b"2"], "each once"
    assert (written[0][0], written[0][1]) == (b"k1", b"v1"), "the copy has the source record's key and value"


async def test_the_operators_rule_comes_before_any_write(broker: EmbeddedBroker) -> None:
    writer = StateLogWriter(broker.bootstrap, "unused")
    await writer.start()
    publisher = Publisher(broker.bootstrap, writer, forbidden_topics=("our-state",))
    try:
        elsewhere = topic(broker, "other-")
        for name, rule, why in (
            ("", TopicRule(), "no topic configured"),
            ("our-state", TopicRule(), "our-state is internal"),
            ("__consumer_offsets", TopicRule(), "__consumer_offsets is internal"),
            (elsewhere, TopicRule(required_prefix="dlq."), "does not start with the required prefix dlq."),
            (f"dlq.missing-{uuid.uuid4().hex[:6]}", TopicRule(), "does not exist"),
        ):
            outcome = await publisher(Publication(name, 0, (letter(0),), rule, IDENTITY))
            assert outcome.written == 0 and outcome.error is not None and why in outcome.error, outcome
        assert records_of(broker, elsewhere, 0) == []
        # allowed to create it: created (tansu knows no errors.deadletterqueue.group.enable)
        created = f"dlq.new-{uuid.uuid4().hex[:6]}"
        rule = TopicRule(required_config=("errors.deadletterqueue.group.enable", "true"), create_if_missing=True)
        outcome = await publisher(Publication(created, 5, (letter(7),), rule, IDENTITY))
        assert outcome.error is None and outcome.written == 1, outcome
        assert [r[2]["id"] for r in records_of(broker, created, 1)] == [b"7"]
    finally:
        await publisher.close()
        await writer.stop()
