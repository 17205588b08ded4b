"""Kafka 4.4's own ``kafka-consumer-groups.sh`` (``ConsumerGroupCommand``) prints the same thing
through the gateway as it prints against Kafka 4.4's own group coordinator, for the same groups.

The same group shape is built on both sides, under the same names: one set of topics (the
gateway forwards topics to the very Kafka it fronts, so log-end offsets, timestamps and topic ids
are the same), and on each coordinator the same groups with the same committed offsets — an empty
group, a classic group and a KIP-848 consumer group each with one live confluent-kafka member, and
groups kept for resetting, deleting and deleting offsets. Each command is run against both and
the outputs are compared after normalising only what must differ: the bootstrap address and the
members' ids (client-chosen uuids). Lines of groups other modules made on the shared Kafka and
gateway are left out of the listings.

Reference: ``tools/src/main/java/org/apache/kafka/tools/consumer/group/ConsumerGroupCommand.java``
and Kafka's ``ConsumerGroupCommandTest``/``ResetConsumerGroupOffsetTest``/``DeleteOffsetsConsumerGroupCommandIntegrationTest``.
"""

from __future__ import annotations

import datetime
import re
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.testing import BackgroundCluster
from groupcoord.testing.apache_kafka import ApacheKafka

from .conftest import CONSUMER_GROUP_COMMAND, run_tool

RECORDS = 10  # per partition, one an hour, the first 10 hours ago (for --to-datetime, --by-duration)
HOUR_MS = 3_600_000
ORDERS_PARTITIONS = 3
# The KIP-848 group's epochs: Kafka 4.4 answers librdkafka's first heartbeat of a new group with
# group epoch 2 where groupcoord answers 1 (both then stay put): the one known difference, named
# in the report, so these columns are compared as "some epoch", equal across the member's columns.
EPOCH_COLUMNS = ("GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "CURRENT-EPOCH", "TARGET-EPOCH")


@dataclass
class Side:
    """One coordinator (Kafka's own, or groupcoord through the gateway) with its live members."""

    name: str
    bootstrap: str
    members: dict[str, str] = field(default_factory=dict)  # member id -> placeholder
    consumers: list[Consumer] = field(default_factory=list)


@dataclass
class Shape:
    prefix: str
    sides: tuple[Side, Side]
    datetime: str  # an instant between the 5th and 6th record of every partition
    workdir: Path

    def group(self, role: str) -> str:
        return f"{self.prefix}-{role}"

    def topic(self, role: str) -> str:
        return f"{self.prefix}-{role}"


def _commit(bootstrap: str, group: str, offsets: list[tuple[str, int, int]]) -> None:
    """Offsets committed as an admin tool commits them: no member, generation -1."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
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


@pytest.fixture(scope="module")
def shape(kafka: ApacheKafka, kafka_cluster: BackgroundCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shape]:
    prefix = f"cgc{uuid.uuid4().hex[:6]}"
    orders, audit = f"{prefix}-orders", f"{prefix}-audit"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for future in admin.create_topics([NewTopic(orders, ORDERS_PARTITIONS, 1), NewTopic(audit, 1, 1)]).values():
        future.result(60)
    now_ms = int(time.time() * 1000)
    first_ms = now_ms - RECORDS * HOUR_MS
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for topic, partitions in ((orders, ORDERS_PARTITIONS), (audit, 1)):
        for partition in range(partitions):
            for i in range(RECORDS):
                producer.produce(topic, b"r", partition=partition, timestamp=first_ms + i * HOUR_MS + HOUR_MS // 2)
    assert producer.flush(30) == 0
    at = datetime.datetime.fromtimestamp((first_ms + 5 * HOUR_MS) / 1000, datetime.UTC)

    sides = (Side("kafka", kafka.bootstrap), Side("groupcoord", kafka_cluster.bootstrap))
    committed = [(orders, 0, 3), (orders, 1, 4), (orders, 2, 5), (audit, 0, 2)]
    for side in sides:
        for role in ("empty", "reset", "delete"):
            _commit(side.bootstrap, f"{prefix}-{role}", committed)
        _commit(side.bootstrap, f"{prefix}-offsets", [(orders, 0, 1), (orders, 1, 1), (audit, 0, 1)])
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
        yield Shape(prefix, sides, at.strftime("%Y-%m-%dT%H:%M:%S.000Z"), tmp_path_factory.mktemp("cgc"))
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


def _without_epochs(text: str) -> str:
    """``text`` with the numbers in the KIP-848 epoch columns (EPOCH_COLUMNS) replaced by
    "<epoch>", whitespace kept, after checking that a row's epochs agree with each other."""
    out: list[str] = []
    header: list[str] = []
    for line in text.splitlines():
        # "COORDINATOR (ID)" is one column of two words, its values ("host:port  (1)") two tokens
        tokens = list(re.finditer(r"\S+", line))
        words = [t.group() for t in tokens]
        if words[:1] == ["GROUP"]:
            header = line.replace("COORDINATOR (ID)", "COORDINATOR-(ID)").split()
        elif header and len(words) == len(header) + ("COORDINATOR-(ID)" in header):
            shift = int("COORDINATOR-(ID)" in header)
            columns = [header.index(c) for c in EPOCH_COLUMNS if c in header]
            at = [i + shift if i > 1 else i for i in columns]
            epochs = {words[i] for i in at} - {"-"}
            assert len(epochs) <= 1, f"a stable member's epochs differ: {line}"
            for i in sorted(at, reverse=True):
                if words[i] != "-":
                    line = line[: tokens[i].start()] + "<epoch>" + line[tokens[i].end() :]
        elif not words:
            header = []
        out.append(line)
    return "\n".join(out)


def _ours(shape: Shape, text: str) -> list[str]:
    """The lines of a listing that name this module's groups (the shared Kafka and gateway hold
    other modules' groups too), sorted: Kafka lists groups in no particular order."""
    return sorted(line for line in text.splitlines() if shape.prefix in line)


def run_both(shape: Shape, *args: str) -> tuple[str, str]:
    """``kafka-consumer-groups.sh --bootstrap-server <side> args`` against Kafka and through the
    gateway (both at once), each output normalised."""

    def run(side: Side) -> str:
        done = run_tool(CONSUMER_GROUP_COMMAND, "--bootstrap-server", side.bootstrap, *args)
        return f"exit {done.returncode}\n" + _normalised(side, done.stdout, done.stderr)

    with ThreadPoolExecutor(2) as pool:
        kafka, ours = pool.map(run, shape.sides)
    return kafka, ours


def assert_same(shape: Shape, *args: str, listing: bool = False) -> str:
    """The command's output through the gateway is Kafka's; returns Kafka's (for the caller to
    check it says what the test expects, so two equally broken outputs cannot pass)."""
    kafka, ours = run_both(shape, *args)
    if listing:
        kafka_lines, our_lines = _ours(shape, kafka), _ours(shape, ours)
        assert our_lines == kafka_lines, f"{' '.join(args)}\n--- Kafka 4.4:\n{kafka}\n--- groupcoord:\n{ours}"
        return kafka
    kafka, ours = _without_epochs(kafka), _without_epochs(ours)
    assert ours == kafka, f"{' '.join(args)}\n--- Kafka 4.4:\n{kafka}\n--- groupcoord:\n{ours}"
    return kafka


def test_list_groups_with_states_and_types(shape: Shape) -> None:
    g = shape.group
    listed = assert_same(shape, "--list", listing=True)
    assert {g("empty"), g("classic"), g("consumer")} <= set(listed.split())
    states = assert_same(shape, "--list", "--state", listing=True)
    assert re.search(rf"{g('classic')}\s+Stable", states) and re.search(rf"{g('empty')}\s+Empty", states), states
    stable = assert_same(shape, "--list", "--state", "Stable", listing=True)
    assert g("consumer") in stable and g("empty") not in stable
    types = assert_same(shape, "--list", "--state", "--type", listing=True)
    assert re.search(rf"{g('consumer')}\s+Consumer\s+Stable", types), types
    assert re.search(rf"{g('classic')}\s+Classic\s+Stable", types), types
    consumer_only = assert_same(shape, "--list", "--type", "consumer", listing=True)
    assert g("consumer") in consumer_only and g("classic") not in consumer_only


@pytest.mark.parametrize("role", ["classic", "consumer"])
def test_describe_a_group_with_a_live_member(shape: Shape, role: str) -> None:
    group = shape.group(role)
    offsets = assert_same(shape, "--describe", "--group", group)
    assert re.search(rf"{group}\s+{shape.topic('orders')}\s+2\s+3\s+10\s+7\s+<{role}-member>\s+/127\.0\.0\.1\s", offsets), offsets
    assert_same(shape, "--describe", "--group", group, "--offsets", "--verbose")
    members = assert_same(shape, "--describe", "--group", group, "--members", "--verbose")
    assert "CURRENT-ASSIGNMENT" in members and f"{shape.topic('orders')}:0,1,2" in members, members
    state = assert_same(shape, "--describe", "--group", group, "--state", "--verbose")
    assert "<bootstrap>" in state and "Stable" in state, state


def test_describe_an_empty_and_a_missing_group(shape: Shape) -> None:
    empty = assert_same(shape, "--describe", "--group", shape.group("empty"))
    assert f"Consumer group '{shape.group('empty')}' has no active members." in empty, empty
    assert_same(shape, "--describe", "--group", shape.group("empty"), "--members")
    state = assert_same(shape, "--describe", "--group", shape.group("empty"), "--state")
    assert "Empty" in state, state
    missing = assert_same(shape, "--describe", "--group", shape.group("missing"))
    assert f"GroupIdNotFoundException: Group {shape.group('missing')} not found." in missing, missing


def test_reset_offsets_every_scope_and_option(shape: Shape) -> None:
    reset = ("--reset-offsets", "--group", shape.group("reset"))
    orders, audit = shape.topic("orders"), shape.topic("audit")
    plan = shape.workdir / "plan.csv"
    plan.write_text(f"{orders},0,2\n{orders},1,6\n{audit},0,9\n")
    steps: list[tuple[tuple[str, ...], str]] = [
        # (arguments, a line Kafka's output must hold)
        (("--all-topics", "--to-earliest"), "WARN: No action will be performed"),
        (("--all-topics", "--to-earliest", "--dry-run"), f"{orders} 0 0"),
        (("--all-topics", "--to-earliest", "--execute"), f"{audit} 0 0"),
        (("--topic", orders, "--to-latest", "--execute"), f"{orders} 2 10"),
        (("--topic", f"{orders}:0,1", "--to-offset", "4", "--execute"), f"{orders} 1 4"),
        (("--topic", f"{orders}:2", "--to-offset", "40", "--execute"), f"{orders} 2 10"),
        (("--all-topics", "--to-current", "--dry-run"), f"{orders} 0 4"),
        (("--all-topics", "--shift-by", "-2", "--execute"), f"{orders} 2 8"),
        (("--all-topics", "--shift-by", "-20", "--dry-run"), f"{orders} 2 0"),
        (("--topic", audit, "--to-datetime", shape.datetime, "--execute"), f"{audit} 0 5"),
        (("--all-topics", "--by-duration", "PT2H", "--execute"), f"{orders} 1 8"),
        (("--from-file", str(plan), "--execute"), f"{audit} 0 9"),
        (("--all-topics", "--to-earliest", "--dry-run", "--export"), f"{orders},1,0"),
        (("--topic", shape.topic("absent"), "--to-earliest", "--execute"), "Error"),
    ]
    for args, expected in steps:
        out = assert_same(shape, *reset, *args)
        assert expected in " ".join(out.split()) or expected in out, f"{args}: {out}"
    final = assert_same(shape, "--describe", "--group", shape.group("reset"), "--offsets", "--verbose")
    assert re.search(rf"{orders}\s+1\s+-\s+6\s+10\s+4", final), final

    for live in ("classic", "consumer"):
        refused = assert_same(shape, "--reset-offsets", "--group", shape.group(live), "--all-topics", "--to-earliest", "--execute")
        assert (
            f"Assignments can only be reset if the group '{shape.group(live)}' is inactive, but the current state is Stable."
            in refused
        ), refused
    assert_same(shape, "--reset-offsets", "--group", shape.group("missing"), "--all-topics", "--to-earliest", "--execute")
    every = assert_same(shape, "--reset-offsets", "--all-groups", "--all-topics", "--to-latest", "--dry-run", listing=True)
    assert re.search(rf"{shape.group('empty')}\s+{audit}\s+0\s+10", every), every


def test_delete_groups(shape: Shape) -> None:
    g = shape.group
    for live in ("classic", "consumer"):
        refused = assert_same(shape, "--delete", "--group", g(live))
        assert "The group is not empty." in refused, refused
    missing = assert_same(shape, "--delete", "--group", g("missing"))
    assert "The group id does not exist." in missing, missing
    deleted = assert_same(shape, "--delete", "--group", g("delete"))
    assert f"Deletion of requested consumer groups ('{g('delete')}') was successful." in deleted, deleted
    assert_same(shape, "--describe", "--group", g("delete"))
    assert_same(shape, "--delete", "--group", g("delete"), "--group", g("classic"))


def test_delete_offsets(shape: Shape) -> None:
    group, orders, audit = shape.group("offsets"), shape.topic("orders"), shape.topic("audit")
    done = assert_same(shape, "--delete-offsets", "--group", group, "--topic", audit)
    assert "Request succeeded for deleting offsets" in done and re.search(rf"{audit}\s+0\s+Successful", done), done
    left = assert_same(shape, "--describe", "--group", group)
    assert audit not in left and orders in left, left
    # a partition the topic does not have: Kafka's request handler refuses it, the rest is deleted
    partial = assert_same(shape, "--delete-offsets", "--group", group, "--topic", f"{orders}:0,5")
    assert "UnknownTopicOrPartitionException" in partial and re.search(rf"{orders}\s+0\s+Successful", partial), partial
    assert_same(shape, "--delete-offsets", "--group", group, "--topic", shape.topic("absent"))
    subscribed = assert_same(shape, "--delete-offsets", "--group", shape.group("classic"), "--topic", orders)
    assert "GroupSubscribedToTopicException" in subscribed, subscribed
    assert_same(shape, "--delete-offsets", "--group", shape.group("consumer"), "--topic", f"{orders}:1")
    assert_same(shape, "--delete-offsets", "--group", shape.group("missing"), "--topic", orders)
