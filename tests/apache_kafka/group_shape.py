"""One group shape built on Kafka 4.4's own coordinator and on groupcoord in front of the same
Kafka, and ``kafka-consumer-groups.sh`` (``ConsumerGroupCommand``) run against both with the
outputs compared (tests/apache_kafka/test_consumer_group_command*.py).

The same group shape is built on both sides, under the same names: one set of topics (the
gateway forwards topics to the very Kafka it fronts, so log-end offsets, timestamps and topic ids
are the same), and on each coordinator the same groups with the same committed offsets — an empty
group, a classic group and a KIP-848 consumer group each with one live confluent-kafka member, and
groups kept for resetting, deleting and deleting offsets. Each command is run against both and
the outputs are compared after normalising only what must differ: the bootstrap address and the
members' ids (client-chosen uuids). Lines of groups other modules made on the shared Kafka and
gateway are left out of the listings.
"""


from __future__ import annotations

import contextlib
import datetime
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .conftest import CONSUMER_GROUP_COMMAND, run_tool

RECORDS = 10  # per partition, one an hour, the first 10 hours ago (for --to-datetime, --by-duration)
HOUR_MS = 3_600_000
ORDERS_PARTITIONS = 3


@dataclass
class Side:
    """One coordinator (Kafka's own, or groupcoord through the gateway) with its live members."""

    name: str
    bootstrap: str
    client: Mapping[str, Any]  # confluent-kafka settings of the listener (security)
    members: dict[str, str] = field(default_factory=dict)  # member id -> placeholder
    consumers: list[Consumer] = field(default_factory=list)


@dataclass
class Shape:
    prefix: str
    sides: tuple[Side, Side]
    datetime: str  # an instant between the 5th and 6th record of every partition
    workdir: Path
    tool: tuple[str, ...] = ()  # arguments of every tool run besides (--command-config)

    def group(self, role: str) -> str:
        return f"{self.prefix}-{role}"

    def topic(self, role: str) -> str:
        return f"{self.prefix}-{role}"


def _commit(side: Side, group: str, offsets: list[tuple[str, int, int]]) -> None:
    """Offsets committed as an admin tool commits them: no member, generation -1."""
    consumer = Consumer({"bootstrap.servers": side.bootstrap, **side.client, "group.id": group, "enable.auto.commit": False})
    try:
        _commit_retrying(consumer, offsets)
    finally:
        consumer.close()


_NOT_READY = (
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
)


def _commit_retrying(consumer: Consumer, offsets: list[tuple[str, int, int]]) -> None:
    """A synchronous commit, sent again while the coordinator is not ready: a Kafka started a
    moment ago answers NOT_COORDINATOR until it has created and loaded __consumer_offsets, and
    librdkafka hands that to the caller of a synchronous commit."""
    deadline = time.monotonic() + 60
    while True:
        try:
            consumer.commit(offsets=[TopicPartition(t, p, o) for t, p, o in offsets], asynchronous=False)
            return
        except KafkaException as exc:
            if exc.args[0].code() not in _NOT_READY or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _member(side: Side, group: str, protocol: str, topics: list[str], committed: list[tuple[str, int, int]]) -> None:
    """One live member of ``group`` (``protocol`` classic or consumer) owning every partition of
    ``topics``, which commits ``committed`` under its generation."""
    consumer = Consumer(
        {
            "bootstrap.servers": side.bootstrap,
            **side.client,
            "group.id": group,
            "group.protocol": protocol,
            "client.id": f"{protocol}-client",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    side.consumers.append(consumer)
    consumer.subscribe(topics)
    deadline = time.monotonic() + 60
    while len(consumer.assignment()) < ORDERS_PARTITIONS and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert len(consumer.assignment()) >= ORDERS_PARTITIONS, f"{side.name}: {group} got no assignment"
    _commit_retrying(consumer, committed)
    side.members[consumer.memberid()] = f"<{protocol}-member>"


@contextlib.contextmanager
def group_shape(
    kafka: str, gateway: str, workdir: Path, client: Mapping[str, Any] | None = None, tool: tuple[str, ...] = ()
) -> Iterator[Shape]:
    """The shape on Kafka 4.4 at ``kafka`` and on groupcoord at ``gateway`` (in front of it);
    ``client`` the confluent-kafka settings of both listeners (security), ``tool`` the
    arguments every ConsumerGroupCommand run gets besides (``--command-config``)."""
    settings = dict(client or {})
    prefix = f"cgc{uuid.uuid4().hex[:6]}"
    orders, audit = f"{prefix}-orders", f"{prefix}-audit"
    admin = AdminClient({"bootstrap.servers": kafka, **settings})
    for future in admin.create_topics([NewTopic(orders, ORDERS_PARTITIONS, 1), NewTopic(audit, 1, 1)]).values():
        future.result(60)
    now_ms = int(time.time() * 1000)
    first_ms = now_ms - RECORDS * HOUR_MS
    producer = Producer({"bootstrap.servers": kafka, **settings})
    for topic, partitions in ((orders, ORDERS_PARTITIONS), (audit, 1)):
        for partition in range(partitions):
            for i in range(RECORDS):
                producer.produce(topic, b"r", partition=partition, timestamp=first_ms + i * HOUR_MS + HOUR_MS // 2)
    assert producer.flush(30) == 0
    at = datetime.datetime.fromtimestamp((first_ms + 5 * HOUR_MS) / 1000, datetime.UTC)

    sides = (Side("kafka", kafka, settings), Side("groupcoord", gateway, settings))
    committed = [(orders, 0, 3), (orders, 1, 4), (orders, 2, 5), (audit, 0, 2)]
    for side in sides:
        for role in ("empty", "reset", "delete"):
            _commit(side, f"{prefix}-{role}", committed)
        _commit(side, f"{prefix}-offsets", [(orders, 0, 1), (orders, 1, 1), (audit, 0, 1)])
        live = [(orders, p, p + 1) for p in range(ORDERS_PARTITIONS)]
        _member(side, f"{prefix}-classic", "classic", [orders], live)
        _member(side, f"{prefix}-consumer", "consumer", [orders, audit], live)

    # librdkafka's members stay in their groups as long as they are polled (max.poll.interval.ms)
    stop = threading.Event()
    consumers = [c for side in sides for c in side.consumers]

    def poll() -> None:
        while not stop.is_set():
            for consumer in consumers:
                consumer.poll(0.05)

    poller = threading.Thread(target=poll, name="cgc-members", daemon=True)
    poller.start()
    try:
        yield Shape(prefix, sides, at.strftime("%Y-%m-%dT%H:%M:%S.000Z"), workdir, tool)
    finally:
        stop.set()
        poller.join(10)
        for consumer in consumers:
            consumer.close()


def _normalised(side: Side, stdout: str, stderr: str) -> str:
    """What the tool printed, with the side's bootstrap address and its members' ids replaced,
    trailing blanks and the JVM's own logging dropped."""
    text = stdout + "\n".join(line for line in stderr.splitlines() if not line.startswith("SLF4J"))
    text = text.replace(side.bootstrap, "<bootstrap>")
    for member_id, placeholder in side.members.items():
        text = text.replace(member_id, placeholder)
    return "\n".join(line.rstrip() for line in text.splitlines()).strip()


def _ours(shape: Shape, text: str) -> list[str]:
    """The lines of a listing that name this module's groups (the shared Kafka and gateway hold
    other modules' groups too), sorted: Kafka lists groups in no particular order. Their spaces
    are folded: the tool pads a column to the longest name listed, and other modules' groups
    differ between the two sides (CI: a gateway that had served longer group names)."""
    return sorted(" ".join(line.split()) for line in text.splitlines() if shape.prefix in line)


def run_both(shape: Shape, *args: str) -> tuple[str, str]:
    """``kafka-consumer-groups.sh --bootstrap-server <side> args`` against Kafka and through the
    gateway (both at once), each output normalised."""

    def run(side: Side) -> str:
        done = run_tool(CONSUMER_GROUP_COMMAND, "--bootstrap-server", side.bootstrap, *shape.tool, *args)
        return f"exit {done.returncode}\n" + _normalised(side, done.stdout, done.stderr)

    with ThreadPoolExecutor(2) as pool:
        kafka, ours = pool.map(run, shape.sides)
    return kafka, ours


def assert_same(shape: Shape, *args: str, listing: bool = False, rows_in_any_order: bool = False) -> str:
    """The command's output through the gateway is Kafka's; returns Kafka's (for the caller to
    check it says what the test expects, so two equally broken outputs cannot pass).

    ``rows_in_any_order`` is for the outputs the tool prints from a ``HashMap`` of partitions
    (--reset-offsets, --delete-offsets): two partitions that share a hash bucket come out in the
    order the coordinator's OffsetFetch answer listed them, and Kafka's coordinator answers in
    its own hash table's order, which no contract fixes. The same lines must be there."""
    kafka, ours = run_both(shape, *args)
    if listing:
        kafka_lines, our_lines = _ours(shape, kafka), _ours(shape, ours)
        assert our_lines == kafka_lines, f"{' '.join(args)}\n--- Kafka 4.4:\n{kafka}\n--- groupcoord:\n{ours}"
        return kafka
    if rows_in_any_order:
        assert sorted(ours.splitlines()) == sorted(kafka.splitlines()), (
            f"{' '.join(args)}\n--- Kafka 4.4:\n{kafka}\n--- groupcoord:\n{ours}"
        )
        return kafka
    assert ours == kafka, f"{' '.join(args)}\n--- Kafka 4.4:\n{kafka}\n--- groupcoord:\n{ours}"
    return kafka
