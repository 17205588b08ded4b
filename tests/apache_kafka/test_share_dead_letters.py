"""Share groups' dead-letter queues (KIP-1191) against Kafka 4.4's own: Kafka's Java share
consumer (``VerifiableShareConsumer``) acknowledges by a pattern, accepting one record, releasing
the next until its delivery count limit archives it, and rejecting the third. With
``errors.deadletterqueue.topic.name`` set, every rejected and every exhausted record is written
once to the DLQ topic, with Kafka's ``__dlq.errors.*`` headers (and, with
``errors.deadletterqueue.copy.record.enable``, the record's key and value; Kafka 4.4 does not
copy its headers): the same
DLQ contents through the gateway as from Kafka 4.4's share coordinator. A DLQ topic the operator
did not allow (its topic config not enabling it) gets nothing, and the records are archived all
the same."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

from .test_verifiable_share_consumer import DELIVERY_COUNT_LIMIT, quiet_after, run_share_consumers

RECORDS = 30
DeadLetter = tuple[tuple[tuple[str, bytes], ...], bytes | None, bytes | None]


def source_topic(kafka: ApacheKafka) -> str:
    """One partition of RECORDS records, each with a key, a value and a header of its own."""
    topic = f"dlqsrc-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(RECORDS):
        producer.produce(topic, value=f"v{i}".encode(), key=f"k{i}".encode(), headers=[("app", f"h{i}".encode())])
    assert producer.flush(30) == 0
    return topic


def dlq_topic(kafka: ApacheKafka, name: str, *, enabled: bool) -> None:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    configs = {"errors.deadletterqueue.group.enable": "true" if enabled else "false"}
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(30)


def set_group_configs(bootstrap: str, group: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
            for name, value in configs.items()
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)


def dead_letters(kafka: ApacheKafka, topic: str, expected: int, timeout_s: float = 60) -> list[DeadLetter]:
    """The DLQ topic's records (headers, key, value), read until ``expected`` came and 2 s more
    brought none (a duplicate would come late)."""
    consumer = Consumer(
        {"bootstrap.servers": kafka.bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    out: list[DeadLetter] = []
    deadline = time.monotonic() + timeout_s
    quiet_until = None
    try:
        while time.monotonic() < deadline and (quiet_until is None or time.monotonic() < quiet_until):
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            out.append((tuple(message.headers() or ()), message.key(), message.value()))
            if len(out) >= expected:
                quiet_until = time.monotonic() + 2
    finally:
        consumer.close()
    return sorted(out, key=lambda d: int(dict(d[0])["__dlq.errors.offset"]))


def expected_dead_letters(topic: str, group: str, *, copied: bool) -> list[DeadLetter]:
    """What Kafka 4.4 writes for the pattern accept, release, reject (offset o gets o % 3)."""
    out: list[DeadLetter] = []
    for o in range(RECORDS):
        if o % 3 == 0:
            continue
        rejected = o % 3 == 2
        headers = (
            ("__dlq.errors.topic", topic.encode()),
            ("__dlq.errors.partition", b"0"),
            ("__dlq.errors.offset", str(o).encode()),
            ("__dlq.errors.group", group.encode()),
            ("__dlq.errors.delivery.count", b"1" if rejected else str(DELIVERY_COUNT_LIMIT).encode()),
            (
                "__dlq.errors.message",
                b"Offset rejected by client." if rejected else b"Offset delivery count exceeded the threshold.",
            ),
        )
        if copied:  # the key and value; Kafka 4.4 leaves the record's own headers out
            out.append((headers, f"k{o}".encode(), f"v{o}".encode()))
        else:
            out.append((headers, None, None))
    return out


def test_rejected_and_exhausted_records_land_in_the_dlq_as_on_kafka(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster, tmp_path: Path
) -> None:
    """With copy.record (without it, the headers alone: the failover test of
    tests/e2e/test_share_group_failover.py reads those)."""
    copied = True
    topic = source_topic(kafka)
    group = f"jsg-dlq-{uuid.uuid4().hex[:6]}"
    delivered = {o: DELIVERY_COUNT_LIMIT if o % 3 == 1 else 1 for o in range(RECORDS)}
    contents = {}
    for side, bootstrap in (("kafka", kafka.bootstrap), ("groupcoord", kafka_cluster.bootstrap)):
        dlq = f"dlq.{side}-{uuid.uuid4().hex[:6]}"
        dlq_topic(kafka, dlq, enabled=True)
        set_group_configs(
            bootstrap,
            group,
            errors_deadletterqueue_topic_name=dlq,
            errors_deadletterqueue_copy_record_enable="true" if copied else "false",
        )
        consumed, _ = run_share_consumers(
            bootstrap, topic, tmp_path, "--acknowledgement-mode", "sync", "--ack-pattern", "accept,release,reject",
            consumers=1, done=quiet_after(sum(delivered.values())), group=group,
        )  # fmt: skip
        assert {o: n for (_, o), n in consumed.items()} == delivered, side
        contents[side] = dead_letters(kafka, dlq, expected=20)
    assert contents["kafka"] == expected_dead_letters(topic, group, copied=copied)
    assert contents["groupcoord"] == contents["kafka"]


def test_a_dlq_topic_that_does_not_enable_it_gets_nothing_and_the_group_goes_on(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster, tmp_path: Path
) -> None:
    topic = source_topic(kafka)
    group = f"jsg-dlq-{uuid.uuid4().hex[:6]}"
    dlq = f"dlq.closed-{uuid.uuid4().hex[:6]}"
    dlq_topic(kafka, dlq, enabled=False)
    set_group_configs(kafka_cluster.bootstrap, group, errors_deadletterqueue_topic_name=dlq)
    consumed, _ = run_share_consumers(
        kafka_cluster.bootstrap, topic, tmp_path, "--acknowledgement-mode", "sync", "--ack-pattern", "reject",
        consumers=1, done=quiet_after(RECORDS), group=group,
    )  # fmt: skip
    assert set(consumed.values()) == {1} and len(consumed) == RECORDS, "each rejected record once, then done"
    assert dead_letters(kafka, dlq, expected=1, timeout_s=5) == []
