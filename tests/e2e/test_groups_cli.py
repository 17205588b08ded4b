"""Issue 15: ``groupcoord groups`` (kafka-consumer-groups.sh's commands) against the running
cluster, with real clients, and librdkafka's Admin APIs — the calls kafka-consumer-groups.sh
makes — against the gateway.

* describe shows, per partition, the committed offset, the log end, the lag and the member
  that owns it, in both group protocols;
* reset-offsets on a group with members is refused with Kafka's message and moves nothing;
* on the empty group it prints the plan (dry run), commits it (--execute), and a consumer of the
  group resumes exactly there;
* delete refuses a group with members (NON_EMPTY_GROUP) and deletes an empty one.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.cli import main as groupcoord
from groupcoord.testing import BackgroundCluster

from .test_consumer_groups import wait_until

pytestmark = pytest.mark.broker
PARTITIONS = 2


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``groupcoord ARGV`` in this process: (exit status, stdout, stderr)."""
    try:
        status = groupcoord(list(argv))
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    out, err = capsys.readouterr()
    return status, out, err


def rows(out: str) -> list[list[str]]:
    """The table's data lines, split into cells (the header dropped)."""
    lines = [line.split() for line in out.splitlines() if line.strip()]
    start = next(i for i, cells in enumerate(lines) if cells[0] == "GROUP")
    return lines[start + 1 :]


def produce(bootstrap: str, topic: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        for p in range(PARTITIONS):
            producer.produce(topic, f"{i}".encode(), partition=p)
    assert producer.flush(15) == 0


def consumer_of(bootstrap: str, group: str, topic: str, protocol: str, client_id: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "client.id": client_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    wait_until(
        lambda: bool(consumer.poll(0.2) or True) and len(consumer.assignment()) == PARTITIONS,
        what="an assignment",
    )
    return consumer


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    result = admin.list_consumer_group_offsets([request])[group].result(15)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


@pytest.fixture
def topic(cluster: BackgroundCluster) -> Iterator[str]:
    """A fresh two-partition topic with 10 records on each partition."""
    name = f"cli-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for fut in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        fut.result(15)
    produce(cluster.bootstrap, name, 10)
    yield name


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_describe_shows_lag_and_owner_and_a_live_group_is_neither_reset_nor_deleted(
    cluster: BackgroundCluster, topic: str, protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap, group = cluster.bootstrap, f"cli-live-{uuid.uuid4().hex[:6]}"
    consumer = consumer_of(bootstrap, group, topic, protocol, client_id="orders-app")
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, 4) for p in range(PARTITIONS)], asynchronous=False)
        member_id = consumer.memberid()

        status, out, _ = run(capsys, "groups", "list", "--bootstrap", bootstrap)
        assert status == 0 and group in out.split()

        status, out, _ = run(capsys, "groups", "--bootstrap", bootstrap, "describe", group)
        assert status == 0
        assert rows(out) == [
            [group, topic, str(p), "4", "10", "6", member_id, "127.0.0.1", "orders-app"]
            for p in range(PARTITIONS)
        ]

        status, _, err = run(
            capsys,
            "groups",
            "reset-offsets",
            group,
            "--topic",
            topic,
            "--to-earliest",
            "--execute",
            "--bootstrap",
            bootstrap,
        )
        assert status != 0
        assert (
            f"Assignments can only be reset if the group '{group}' is inactive, but the current state is Stable."
            in err
        )
        assert committed(bootstrap, group, topic) == {0: 4, 1: 4}

        status, _, err = run(capsys, "groups", "delete", group, "--bootstrap", bootstrap)
        assert status == 1 and "NON_EMPTY_GROUP" in err
    finally:
        consumer.close()


def test_reset_an_empty_group_then_a_consumer_resumes_there_and_delete_removes_it(
    cluster: BackgroundCluster, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap, group = cluster.bootstrap, f"cli-empty-{uuid.uuid4().hex[:6]}"
    consumer = consumer_of(bootstrap, group, topic, "classic", client_id="batch")
    consumer.commit(offsets=[TopicPartition(topic, p, 8) for p in range(PARTITIONS)], asynchronous=False)
    consumer.close()
    time.sleep(1.1)  # records produced from here on are after `middle`
    middle = datetime.now(UTC)
    time.sleep(0.1)
    produce(bootstrap, topic, 5)  # offsets 10..14 on each partition

    status, out, _ = run(capsys, "groups", "describe", group, "--bootstrap", bootstrap)
    assert status == 0 and f"Consumer group '{group}' has no active members." in out
    assert [r[:6] for r in rows(out)] == [[group, topic, str(p), "8", "15", "7"] for p in range(PARTITIONS)]

    # a dry run prints the plan and moves nothing
    status, out, err = run(
        capsys,
        "groups",
        "reset-offsets",
        group,
        "--topic",
        topic,
        "--to-datetime",
        middle.isoformat(),
        "--bootstrap",
        bootstrap,
    )
    assert status == 0 and "No action will be performed" in err
    assert rows(out) == [[group, topic, str(p), "10"] for p in range(PARTITIONS)]
    assert committed(bootstrap, group, topic) == {0: 8, 1: 8}

    for argv, expected in [
        (("--shift-by", "-5", "--topic", f"{topic}:1"), {0: 8, 1: 3}),
        (("--shift-by", "-100", "--topic", f"{topic}:0"), {0: 0, 1: 3}),  # clamped to the log start
        (("--to-latest", "--topic", topic), {0: 15, 1: 15}),
        (("--to-datetime", middle.isoformat(), "--topic", topic), {0: 10, 1: 10}),
    ]:
        status, out, err = run(
            capsys, "groups", "reset-offsets", group, *argv, "--execute", "--bootstrap", bootstrap
        )
        assert status == 0, err
        assert committed(bootstrap, group, topic) == expected, argv

    # a consumer of the group (KIP-848 protocol this time) resumes where the reset put it
    resumed = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
        }
    )
    resumed.subscribe([topic])
    first: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 60
        while len(first) < PARTITIONS and time.monotonic() < deadline:
            msg = resumed.poll(0.5)
            if msg is not None and msg.error() is None:
                first.setdefault(msg.partition(), msg.offset())
    finally:
        resumed.close()
    assert first == {0: 10, 1: 10}

    status, out, err = run(capsys, "groups", "delete", group, "--bootstrap", bootstrap)
    assert status == 0 and f"Deletion of requested consumer groups ('{group}') was successful." in out
    status, out, _ = run(capsys, "groups", "list", "--bootstrap", bootstrap)
    assert group not in out.split()
    status, _, err = run(capsys, "groups", "describe", group, "--bootstrap", bootstrap)
    assert status == 1 and f"Consumer group '{group}' does not exist." in err


def test_bad_input_is_one_line(
    cluster: BackgroundCluster, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = cluster.bootstrap
    for argv, message in [
        (("--topic", "no-such-topic", "--to-earliest"), "Topic 'no-such-topic' does not exist"),
        (("--topic", f"{topic}:7", "--to-earliest"), f"Topic '{topic}' has 2 partitions; no partition 7"),
        (("--topic", topic, "--to-datetime", "yesterday"), "is not ISO 8601"),
        (("--topic", topic, "--shift-by", "1"), "since there is no current committed offset"),
    ]:
        status, _, err = run(
            capsys,
            "groups",
            "reset-offsets",
            f"nobody-{uuid.uuid4().hex[:4]}",
            *argv,
            "--bootstrap",
            bootstrap,
        )
        assert status != 0 and message in err, (argv, err)
        assert "Traceback" not in err


def test_the_installed_command_runs(cluster: BackgroundCluster) -> None:
    """The console script, as an operator runs it."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "groupcoord.cli",
            "groups",
            "list",
            "--state",
            "--bootstrap",
            cluster.bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:2] == ["GROUP", "STATE"]


def test_librdkafka_admin_apis_that_kafka_consumer_groups_uses(
    cluster: BackgroundCluster, topic: str
) -> None:
    """list_consumer_groups, describe_consumer_groups, list/alter_consumer_group_offsets (the
    Admin calls kafka-consumer-groups.sh makes for --list, --describe and --reset-offsets)."""
    bootstrap, group = cluster.bootstrap, f"cli-rdk-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    consumer = consumer_of(bootstrap, group, topic, "consumer", client_id="rdk-app")
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, 3) for p in range(PARTITIONS)], asynchronous=False)
        listed = admin.list_consumer_groups().result(15)
        assert group in {g.group_id for g in listed.valid}
        description = admin.describe_consumer_groups([group])[group].result(15)
        assert str(description.state).endswith("STABLE")
        assert [m.client_id for m in description.members] == ["rdk-app"]
        assert sorted(tp.partition for tp in description.members[0].assignment.topic_partitions) == [0, 1]
        assert committed(bootstrap, group, topic) == {0: 3, 1: 3}
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(topic, p, 1) for p in range(PARTITIONS)]
        )
        refused = admin.alter_consumer_group_offsets([request])[group].result(15)  # a live group
        assert {tp.error.code() if tp.error else None for tp in refused.topic_partitions} == {
            KafkaError.UNKNOWN_MEMBER_ID
        }
        assert committed(bootstrap, group, topic) == {0: 3, 1: 3}
    finally:
        consumer.close()
    wait_until(
        lambda: str(admin.describe_consumer_groups([group])[group].result(15).state).endswith("EMPTY"),
        what="the group to empty",
    )
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p, 1) for p in range(PARTITIONS)])
    altered = admin.alter_consumer_group_offsets([request])[group].result(15)
    assert all(tp.error is None for tp in altered.topic_partitions)
    assert committed(bootstrap, group, topic) == {0: 1, 1: 1}
