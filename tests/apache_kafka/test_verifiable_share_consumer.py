"""Kafka's own share consumer (the Java ``KafkaShareConsumer``, in Kafka 4.4's
``VerifiableShareConsumer`` tool) through the gateway in front of Kafka 4.4: two consumers of
one share group read a 2-partition topic, acknowledging synchronously or implicitly (the
tool's ``auto``: each poll acknowledges what the one before delivered), and every record
produced is consumed and acknowledged exactly once between them; a consumer acknowledging by
a pattern (accept, release or renew, reject) gets each record as often as Kafka 4.4's own
coordinator gives it, a released one up to the delivery count limit."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from queue import Empty, Queue
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

from .conftest import start_tool

VERIFIABLE_SHARE_CONSUMER = "org.apache.kafka.tools.VerifiableShareConsumer"
RECORDS = 1_000
Deliveries = Counter[tuple[int, int]]  # (partition, offset): how often


def topic_with_records(kafka: ApacheKafka, partitions: int, records: int) -> str:
    topic = f"jqueue-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(records):
        producer.produce(topic, str(i).encode(), partition=i % partitions)
    assert producer.flush(30) == 0
    return topic


def run_share_consumers(
    bootstrap: str,
    topic: str,
    tmp_path: Path,
    *args: str,
    consumers: int,
    done: Callable[[Deliveries, Deliveries], bool],
    timeout_s: float = 120,
    group: str | None = None,
) -> tuple[Deliveries, Deliveries]:
    """(consumed, acknowledged) by ``consumers`` VerifiableShareConsumers of a share group (a
    new one unless ``group`` is given) on ``topic``, read from their events until ``done`` says
    so or ``timeout_s`` passed."""
    group = group or f"jsg-{uuid.uuid4().hex[:6]}"
    tools = [
        start_tool(
            VERIFIABLE_SHARE_CONSUMER,
            "--topic", topic, "--group-id", group, "--bootstrap-server", bootstrap,
            "--offset-reset-strategy", "earliest", "--verbose", *args,
            log=tmp_path / f"{group}-{n}.log",
        )
        for n in range(consumers)
    ]  # fmt: skip
    events: list[dict[str, Any]] = []
    queue: Queue[dict[str, Any]] = Queue()

    def read(tool: subprocess.Popen[str]) -> None:  # each tool's events, as they come
        assert tool.stdout is not None
        for line in tool.stdout:
            if line.startswith("{"):
                queue.put(json.loads(line))

    for tool in tools:
        threading.Thread(target=read, args=(tool,), daemon=True).start()
    consumed: Deliveries = Counter()
    acknowledged: Deliveries = Counter()
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not done(consumed, acknowledged):
            try:
                event = queue.get(timeout=1)
            except Empty:
                continue
            events.append(event)
            if event.get("name") == "record_data":
                consumed[(event["partition"], event["offset"])] += 1
            elif event.get("name") == "offsets_acknowledged" and event.get("success"):
                for p in event["partitions"]:
                    acknowledged.update((p["partition"], o) for o in p["offsets"])
        print(Counter(e.get("name") for e in events))
    finally:
        for tool in tools:
            tool.terminate()
        for tool in tools:
            try:
                tool.wait(30)
            except subprocess.TimeoutExpired:
                tool.kill()
    for n in range(consumers):  # shown if the test fails
        print((tmp_path / f"{group}-{n}.log").read_text()[-2000:])
    return consumed, acknowledged


@pytest.mark.parametrize("mode", ["sync", "auto"])
def test_two_java_share_consumers_read_every_record_once(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster, tmp_path: Path, mode: str
) -> None:
    topic = topic_with_records(kafka, 2, RECORDS)
    consumed, acknowledged = run_share_consumers(
        kafka_cluster.bootstrap, topic, tmp_path, "--acknowledgement-mode", mode,
        consumers=2, done=lambda c, a: len(c) >= RECORDS and len(a) >= RECORDS,
    )  # fmt: skip
    assert len(consumed) == RECORDS, f"{len(consumed)} of {RECORDS} consumed"
    assert set(consumed.values()) == {1}, "a record was consumed twice"
    assert len(acknowledged) == RECORDS and set(acknowledged.values()) == {1}, "each acknowledged once"


PATTERN_RECORDS = 30


def quiet_after(deliveries: int, quiet_s: float = 3.0) -> Callable[[Deliveries, Deliveries], bool]:
    """Done once ``deliveries`` records came and ``quiet_s`` more brought no other."""
    since: list[tuple[int, float]] = []

    def done(consumed: Deliveries, _acknowledged: Deliveries) -> bool:
        total = consumed.total()
        if total < deliveries:
            return False
        if not since or since[-1][0] != total:
            since.append((total, time.monotonic()))
        return time.monotonic() - since[-1][1] > quiet_s

    return done
DELIVERY_COUNT_LIMIT = 5  # share.delivery.count.limit, Kafka's default


@pytest.mark.parametrize(
    ("pattern", "second_delivered"),
    [("accept,release,reject", DELIVERY_COUNT_LIMIT), ("accept,renew,reject", 2)],
)
def test_a_java_share_consumer_acknowledging_by_pattern_gets_what_kafka_gives(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster, tmp_path: Path, pattern: str, second_delivered: int
) -> None:
    """The tool acknowledges offset n with the pattern's entry n % 3: the first and third kinds
    are delivered once (accepted, rejected); a released record is delivered again up to the
    delivery count limit, then archived; a renewed one (KIP-1222: its lock extended, the record
    kept) comes back in the next poll and takes the entry after, here a rejection. On Kafka
    4.4's own coordinator and through the gateway alike."""
    topic = topic_with_records(kafka, 1, PATTERN_RECORDS)
    expected = {(0, o): second_delivered if o % 3 == 1 else 1 for o in range(PATTERN_RECORDS)}
    deliveries = {}
    for side, bootstrap in (("kafka", kafka.bootstrap), ("groupcoord", kafka_cluster.bootstrap)):
        deliveries[side], _ = run_share_consumers(
            bootstrap, topic, tmp_path, "--acknowledgement-mode", "sync", "--ack-pattern", pattern,
            consumers=1, done=quiet_after(sum(expected.values())),
        )  # fmt: skip
    assert deliveries["kafka"] == expected, deliveries["kafka"]
    assert deliveries["groupcoord"] == deliveries["kafka"]
