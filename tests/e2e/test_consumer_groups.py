"""Issue 5 acceptance, per client: three consumers of one group on a 12-partition topic,
through the gateway and our coordinator shards, against the real broker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord_testing import BackgroundCluster

from .consumers import CLIENTS, ConsumerThread

pytestmark = [pytest.mark.broker, pytest.mark.upstreams("tansu", "kafka-4.4", "kafka-3.9")]
PARTITIONS = 12
PER_PARTITION = 50


def wait_until(
    predicate: Callable[[], bool],
    timeout: float = 60,
    what: str = "condition",
    detail: Callable[[], str] = str,
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {detail()}")
        time.sleep(0.1)


def produce(bootstrap: str, topic: str, start: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.produce(topic, value=f"{start + i}".encode(), partition=p)
    assert producer.flush(30) == 0


def progress(consumers: list[ConsumerThread]) -> str:
    """Who owns what, how many records each partition gave, and the clients' errors."""
    per_partition: dict[int, int] = {}
    for c in consumers:
        for p, _ in list(c.history.records):  # a copy: the consumer's thread adds to it
            per_partition[p] = per_partition.get(p, 0) + 1
    return "; ".join(
        [f"records per partition {dict(sorted(per_partition.items()))}"]
        + [f"{c.history.name} owns {sorted(c.history.owned)} errors {c.history.errors[-3:]}" for c in consumers]
    )


def disjoint_cover(consumers: list[ConsumerThread]) -> bool:
    owned = [c.history.owned for c in consumers]
    union = frozenset().union(*owned)
    return union == frozenset(range(PARTITIONS)) and sum(len(o) for o in owned) == PARTITIONS


def three_consumers(bootstrap: str, client: str) -> tuple[str, str, list[ConsumerThread]]:
    """(topic, group, consumers): a fresh topic of PARTITIONS partitions with PER_PARTITION
    records each, and three started ``client`` consumers of a fresh group subscribed to it."""
    kind, config = CLIENTS[client]
    topic, group = f"e2e-{client}-{uuid.uuid4().hex[:6]}", f"g-{client}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        fut.result(15)
    produce(bootstrap, topic, 0)
    consumers = [kind(bootstrap, topic, group, f"{client}-{i}", **config) for i in range(3)]
    for c in consumers:
        c.start()
    return topic, group, consumers


@pytest.mark.parametrize("client", list(CLIENTS))
def test_three_consumers_share_take_over_and_keep_offsets(cluster: BackgroundCluster, client: str) -> None:
    bootstrap = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic, group, consumers = three_consumers(bootstrap, client)
    try:
        # given three members, then the assignments converge to disjoint sets covering all 12
        wait_until(
            lambda: disjoint_cover(consumers) and all(c.history.owned for c in consumers), what="3-way split"
        )
        # and every record is consumed
        wait_until(
            lambda: len(set().union(*(c.history.records for c in consumers))) == PARTITIONS * PER_PARTITION,
            what="all records consumed",
            detail=lambda: progress(consumers),
        )
        # admin describe/list through the gateway sees the group and its members
        listed = admin.list_consumer_groups().result(15)
        assert group in {g.group_id for g in listed.valid}
        described = admin.describe_consumer_groups([group])[group].result(15)
        assert len(described.members) == 3
        assert {tp.partition for m in described.members for tp in m.assignment.topic_partitions} == set(
            range(PARTITIONS)
        )

        # when one consumer leaves, the two others take over its partitions
        consumers[2].stop()
        wait_until(lambda: disjoint_cover(consumers[:2]), what="2-way split after a leave")
        produce(bootstrap, topic, PER_PARTITION)
        total = 2 * PARTITIONS * PER_PARTITION
        wait_until(
            lambda: len(set().union(*(c.history.records for c in consumers))) == total,
            what="second batch consumed",
        )
        wait_until(
            lambda: all(
                sum(
                    1
                    for c in consumers
                    for _, batch in c.history.commits
                    if batch.get(p) == 2 * PER_PARTITION
                )
                > 0
                for p in range(PARTITIONS)
            ),
            what="final commits acknowledged",
        )
    finally:
        for c in consumers:
            c.stop()
    assert all(not c.history.errors for c in consumers), [c.history.errors for c in consumers]
    # no partition was ever owned by two consumers at once (sampled at each consumer's changes)
    assert_no_double_ownership(consumers)

    # then the committed offsets survive the consumers: a new member starts where they stopped
    fresh = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = fresh.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=15)
    finally:
        fresh.close()
    assert {tp.partition: tp.offset for tp in committed} == dict.fromkeys(
        range(PARTITIONS), 2 * PER_PARTITION
    )


def assert_no_double_ownership(consumers: list[ConsumerThread]) -> None:
    """Replay every consumer's ownership changes in time order; a partition may only be
    claimed by one consumer at a time (a consumer reports it lost before another reports it
    gained, because revocation precedes reassignment in both protocols)."""
    events = sorted((t, c.name, owned) for c in consumers for t, owned in c.history.assignments)
    current: dict[str, frozenset[int]] = {}
    for _, name, owned in events:
        current[name] = owned
        seen: set[int] = set()
        for parts in current.values():
            overlap = seen & parts
            assert not overlap, f"partitions {sorted(overlap)} owned twice"
            seen |= parts
