"""Issue 40 acceptance: groupcoord put in front of a cluster already in use.

A platform team's applications committed on the brokers' own coordinator. Moved to the gateway,
a group resumes exactly where it committed, on every partition (imported once, into the state
topic: also after a kill -9 of the shard that imported it). While the upstream's coordinator
still has live members of the group, the gateway holds the moved instances back instead of
forming a second group with the same id; the moment the last upstream member leaves, they
resume from its last commit: no record consumed twice, none skipped.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord_testing import BackgroundCluster

from .consumers import ConfluentConsumer
from .failover import PARTITIONS as FAILOVER_PARTITIONS
from .failover import KeepProducing, failover_cluster
from .test_consumer_groups import assert_no_double_ownership, progress, wait_until

pytestmark = [pytest.mark.broker, pytest.mark.upstreams("tansu", "kafka-4.4", "kafka-3.9")]
PARTITIONS = 3
RECORDS = 30  # per partition


def upstream_name(broker: Any) -> str:
    return str(getattr(broker, "upstream_name", "tansu"))


def direct(broker: Any) -> str:
    return f"{broker.host}:{broker.port}"


def topic_with_records(bootstrap: str) -> str:
    topic = f"adopt-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        fut.result(15)
    producer = Producer({"bootstrap.servers": bootstrap})
    for p in range(PARTITIONS):
        for i in range(RECORDS):
            producer.produce(topic, f"{p}:{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    return topic


def consume(consumer: Consumer, until: Any, timeout_s: float = 60.0) -> list[tuple[int, int]]:
    """(partition, offset) of what ``consumer`` receives until ``until(records)`` holds."""
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout_s
    while not until(got):
        assert time.monotonic() < deadline, f"consumed only {len(got)} records: {sorted(got)[:10]}..."
        for m in consumer.consume(100, timeout=0.5):
            if m.error() is None:
                got.append((m.partition(), m.offset()))
    return got


def commit_on_the_upstream(broker: Any, client: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """A member of ``group`` on the brokers' own coordinator consumes and commits ``offsets``
    (partition -> next offset), then leaves: the application before the move."""
    if client == "kafka-python":
        from kafka import KafkaConsumer  # noqa: PLC0415
        from kafka import TopicPartition as KpPartition  # noqa: PLC0415
        from kafka.structs import OffsetAndMetadata  # noqa: PLC0415

        # an application that assigns its partitions itself (a "simple" group on the coordinator)
        kc = KafkaConsumer(bootstrap_servers=direct(broker), group_id=group, enable_auto_commit=False)
        kc.assign([KpPartition(topic, p) for p in offsets])
        kc.commit({KpPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
        kc.close()
        return
    protocol = {"librdkafka-classic": "classic", "librdkafka-consumer": "consumer"}[client]
    consumer = Consumer(
        {
            "bootstrap.servers": direct(broker),
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    consume(consumer, lambda got: len(got) >= 1)
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    consumer.close()


def gateway_consumer(bootstrap: str, group: str, topic: str, protocol: str = "classic") -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    return consumer


def resumes_at_its_offsets(broker: Any, cluster: BackgroundCluster, client: str) -> None:
    """A group committed on the upstream by ``client``, moved to the gateway: it resumes at the
    committed offsets on every partition, each record once."""
    topic = topic_with_records(direct(broker))
    group = f"adopt-{client}-{uuid.uuid4().hex[:6]}"
    committed = {0: 7, 1: 19, 2: 30}  # one partition wholly consumed
    commit_on_the_upstream(broker, client, group, topic, committed)

    protocol = "consumer" if client == "librdkafka-consumer" else "classic"
    moved = gateway_consumer(cluster.bootstrap, group, topic, protocol)
    try:
        expected = {(p, o) for p in range(PARTITIONS) for o in range(committed[p], RECORDS)}
        got = consume(moved, lambda got: len(got) >= len(expected))
        time.sleep(1.0)
        got += [(m.partition(), m.offset()) for m in moved.consume(100, timeout=1.0) if m.error() is None]
        assert sorted(got) == sorted(expected)  # from the committed offsets, each record once
        starts = {p: min(o for q, o in got if q == p) for p in range(PARTITIONS) if committed[p] < RECORDS}
        assert starts == {p: o for p, o in committed.items() if o < RECORDS}
    finally:
        moved.close()


@pytest.mark.parametrize("client", ["librdkafka-classic", "kafka-python"])
def test_a_group_committed_on_the_upstream_resumes_through_the_gateway_at_its_offsets(
    broker: Any, cluster: BackgroundCluster, client: str
) -> None:
    resumes_at_its_offsets(broker, cluster, client)


@pytest.mark.upstreams("kafka-4.4")  # KIP-848 on the upstream's own coordinator
def test_a_kip848_group_committed_on_kafka_resumes_through_the_gateway_at_its_offsets(
    broker: Any, cluster: BackgroundCluster
) -> None:
    resumes_at_its_offsets(broker, cluster, "librdkafka-consumer")


def test_imported_offsets_survive_a_kill_of_the_shard_that_imported_them(broker: Any, tmp_path: Any) -> None:
    """The import is records in the state topic: the shard's successor replays them."""
    topic = topic_with_records(direct(broker))
    group = f"adopt-kill-{uuid.uuid4().hex[:6]}"
    committed = {0: 3, 1: 11, 2: 25}
    commit_on_the_upstream(broker, "librdkafka-classic", group, topic, committed)
    with failover_cluster(broker, tmp_path, "adopt") as fc:
        reader = Consumer({"bootstrap.servers": fc.bootstrap, "group.id": group})
        try:  # an OffsetFetch through the gateway: the group's first touch imports it
            seen = reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
        finally:
            reader.close()
        assert {tp.partition: tp.offset for tp in seen} == committed
        fc.kill_leader(fc.state_partition(group))
        moved = gateway_consumer(fc.bootstrap, group, topic)
        try:
            expected = {(p, o) for p in range(PARTITIONS) for o in range(committed[p], RECORDS)}
            got = consume(moved, lambda got: len(got) >= len(expected), timeout_s=90)
            assert sorted(got) == sorted(expected)
        finally:
            moved.close()


def test_moved_instances_wait_while_the_upstream_still_serves_the_group(
    broker: Any, cluster: BackgroundCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rolling move, halfway: one instance still on the brokers, one already on the gateway.
    The gateway's instance consumes nothing (it would otherwise be a second group with the same
    id, reading the same partitions) until the brokers' instance leaves; then it starts exactly
    after that instance's last commit."""
    topic = topic_with_records(direct(broker))
    group = f"adopt-live-{uuid.uuid4().hex[:6]}"
    old = Consumer(
        {
            "bootstrap.servers": direct(broker),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    old.subscribe([topic])
    old_got: list[tuple[int, int]] = []
    deadline = time.monotonic() + 60
    while len(old_got) < 20:  # part of the topic, each record committed as it is consumed
        assert time.monotonic() < deadline, f"the upstream's member consumed {len(old_got)} records"
        for m in old.consume(20 - len(old_got), timeout=1):
            if m.error() is None:
                old_got.append((m.partition(), m.offset()))
                old.commit(message=m, asynchronous=False)
    old.pause(old.assignment())  # consumes nothing more, and stays a member
    # the moved instance, while the old one stays a live member (it polls, so it keeps its
    # assignment: librdkafka heartbeats in the background)
    moved = gateway_consumer(cluster.bootstrap, group, topic)
    stop = threading.Event()
    early: list[tuple[int, int]] = []

    def poll_moved() -> None:
        while not stop.is_set():
            early.extend((m.partition(), m.offset()) for m in moved.consume(100, timeout=0.3) if m.error() is None)

    poller = threading.Thread(target=poll_moved, daemon=True)
    poller.start()
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        assert old.poll(0.2) is None
    where = ("--bootstrap", cluster.bootstrap, "--upstream", direct(broker))
    status, described = run_cli(capsys, "groups", "describe", group, *where)
    (seen,) = described["groups"]
    assert (seen["upstream"]["adoption"], seen["upstream"]["members"]) == ("upstream-served", 1), seen
    stop.set()
    poller.join(10)
    assert early == [], "the gateway formed a second group while the upstream's was live"
    old.close()  # the last upstream instance leaves; its commits are the group's positions
    expected_rest = {(p, o) for p in range(PARTITIONS) for o in range(RECORDS)} - set(old_got)
    try:
        got = consume(moved, lambda got: len(got) >= len(expected_rest), timeout_s=90)
        assert not set(got) & set(old_got), "records consumed on both sides"
        assert sorted(got) == sorted(expected_rest)
        status, described = run_cli(capsys, "groups", "describe", group, *where)
        (seen,) = described["groups"]
        assert (status, seen["upstream"]["adoption"], seen["upstream"]["members"]) == (0, "ours", 0), seen
    finally:
        moved.close()


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    """``groupcoord ARGV --output json`` in this process: (exit status, its document)."""
    from groupcoord.cli import main as groupcoord  # noqa: PLC0415

    try:
        status = groupcoord([*argv, "--output", "json"])
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    out, _err = capsys.readouterr()
    return int(status or 0), json.loads(out) if out.strip() else {}


def committed_at(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        seen = reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        reader.close()
    return {tp.partition: tp.offset for tp in seen if tp.offset >= 0}


def test_import_then_export_leaves_the_application_where_it_committed_through_the_gateway(
    broker: Any, cluster: BackgroundCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """The way in and the way back: ``groups import`` (dry run, then --execute) copies the
    upstream's positions; the application commits through the gateway; ``groups export``
    writes those back, and the application, bootstrapped to the brokers again, resumes there."""
    topic = topic_with_records(direct(broker))
    group = f"adopt-cli-{uuid.uuid4().hex[:6]}"
    commit_on_the_upstream(broker, "librdkafka-classic", group, topic, {0: 4, 1: 5, 2: 6})
    where = ("--bootstrap", cluster.bootstrap, "--upstream", direct(broker))
    status, plan = run_cli(capsys, "groups", "import", group, *where)
    assert status == 0 and not plan["executed"]
    assert {o["partition"]: o["offset"] for o in plan["groups"][0]["offsets"]} == {0: 4, 1: 5, 2: 6}
    status, done = run_cli(capsys, "groups", "import", group, *where, "--execute")
    assert status == 0 and done["executed"]
    assert committed_at(cluster.bootstrap, group, topic) == {0: 4, 1: 5, 2: 6}

    moved = gateway_consumer(cluster.bootstrap, group, topic)
    try:  # the application, now through the gateway, consumes ten more of partition 0 and commits
        got = consume(moved, lambda got: sum(1 for p, _ in got if p == 0) >= 10)
        moved.commit(offsets=[TopicPartition(topic, 0, 14)], asynchronous=False)
    finally:
        moved.close()
    assert got
    status, plan = run_cli(capsys, "groups", "export", group, *where)  # dry run: nothing written
    assert status == 0 and committed_at(direct(broker), group, topic)[0] == 4
    status, done = run_cli(capsys, "groups", "export", group, *where, "--execute")
    assert status == 0, done
    back = committed_at(direct(broker), group, topic)
    assert back == committed_at(cluster.bootstrap, group, topic) and back[0] == 14

    # a live group is refused, on either side, and nothing moves
    member = gateway_consumer(cluster.bootstrap, group, topic)
    try:
        consume(member, lambda got: len(got) >= 1)
        status, refused = run_cli(capsys, "groups", "export", group, *where, "--execute")
        assert status == 1 and "inactive" not in (refused["groups"][0]["error"] or "")
        assert "commit there" in refused["groups"][0]["error"]
    finally:
        member.close()


def test_a_rolling_move_of_four_instances_skips_nothing_and_never_owns_a_partition_twice(
    broker: Any, cluster: BackgroundCluster
) -> None:
    """An application of four librdkafka instances (both protocols where the upstream has
    KIP-848) moved from the brokers to the gateway one instance at a time while a producer runs:
    every record is consumed, duplicates are counted (the records in flight at one
    rebalance at most), no partition is owned by two instances at any moment across both
    coordinators, and no moved instance owns anything before the last one left the brokers."""
    protocols = ["classic", "consumer"] * 2 if upstream_name(broker) == "kafka-4.4" else ["classic"] * 4
    topic, group = f"roll-{uuid.uuid4().hex[:6]}", f"roll-g-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": direct(broker)})
    admin.create_topics([NewTopic(topic, FAILOVER_PARTITIONS, 1)])[topic].result(15)
    producer = KeepProducing(direct(broker), topic)
    producer.start()
    # tansu's coordinator holds a JoinGroup until every member rejoined, so a leaving
    # instance's LeaveGroup waits behind its own JoinGroup and times out: the brokers' group
    # then empties only when the sessions expire, so they are kept short there
    on_brokers = {} if upstream_name(broker) == "kafka-4.4" else {"session.timeout.ms": 10000}
    olds = [
        ConfluentConsumer(direct(broker), topic, group, f"old-{i}", **{"group.protocol": p}, **on_brokers)
        for i, p in enumerate(protocols)
    ]
    news: list[ConfluentConsumer] = []
    everyone = list(olds)
    try:
        # The instances come up one after another, as a deployment rolls them out: four members
        # of both protocols joining a new group at one moment made Kafka 4.4's own coordinator
        # answer two KIP-848 members UNKNOWN_SERVER_ERROR (fatal to librdkafka) once in CI.
        for n, c in enumerate(olds, 1):
            c.start()
            wait_until(
                lambda n=n: frozenset().union(*(c.history.owned for c in olds[:n]))
                == frozenset(range(FAILOVER_PARTITIONS))
                and all(c.history.owned and c.history.records for c in olds[:n]),
                timeout=60,
                what=f"{n} instance(s) consuming on the brokers",
                detail=lambda: progress(olds),
            )
        last_left = 0.0
        for i, protocol in enumerate(protocols):
            olds[i].stop()
            if i == len(protocols) - 1:
                last_left = time.monotonic()
            new = ConfluentConsumer(cluster.bootstrap, topic, group, f"new-{i}", **{"group.protocol": protocol})
            news.append(new)
            everyone.append(new)
            new.start()
            time.sleep(4)  # the instances still on the brokers rebalance and keep consuming
        wait_until(
            lambda: frozenset().union(*(c.history.owned for c in news)) == frozenset(range(FAILOVER_PARTITIONS)),
            timeout=90,
            what="the moved application owning every partition",
            detail=lambda: progress(everyone),
        )
        time.sleep(2)
    finally:
        producer.stop.set()
        producer.join(60)
    ends = {}
    probe = Consumer({"bootstrap.servers": direct(broker), "group.id": f"probe-{uuid.uuid4().hex[:6]}"})
    for p in range(FAILOVER_PARTITIONS):
        ends[p] = probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
    probe.close()
    produced = {(p, o) for p, end in ends.items() for o in range(end)}
    try:
        wait_until(
            lambda: produced <= set().union(*(c.history.records for c in everyone)),
            timeout=90,
            what="every produced record consumed",
            detail=lambda: progress(everyone),
        )
    finally:
        for c in news:
            c.stop()
    for c in olds:
        c.stop()
    consumed = [c.history.records for c in everyone]
    duplicates = sum(len(r) for r in consumed) - len(set().union(*consumed))
    print(f"rolling move ({', '.join(protocols)}): {len(produced)} records, {duplicates} consumed twice")
    assert duplicates <= 500, f"{duplicates} records consumed twice"
    assert_no_double_ownership(everyone)
    early = [(c.name, t) for c in news for t, owned in c.history.assignments if owned and t < last_left]
    assert not early, f"moved instances owned partitions while the brokers still served the group: {early}"
    assert all(not c.history.errors for c in everyone), [c.history.errors for c in everyone]
