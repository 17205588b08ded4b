"""A share group through a shard failover and through a threadsPerShard change (KIP-932, issue
24): two share consumers read and accept records while the shard process leading the group's
state partition is killed (SIGKILL), or while both shards are rolled from one worker process to
two, one at a time (the group's state partition moves to another shard and back, to a worker
that did not exist before). Nothing is lost and nothing acknowledged comes back: every record
produced is delivered, and a record whose acknowledgement the consumer saw succeed is never
delivered again — the delivery state (locks, delivery counts, what is done) is in the state
topic and whoever takes the partition over replays it. A record in flight at the move may come
again, after its lock, with a higher delivery count: at least once, as Kafka promises.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from groupcoord.rpc.v1 import shard_control_pb2 as sc

from .failover import FailoverCluster, failover_cluster
from .test_consumer_groups import wait_until
from .test_threads_change import NEW_THREADS, STATE_PARTITIONS, odd_partition_group

RECORDS, PARTITIONS = 2_000, 4


class Member(threading.Thread):
    """A share consumer that accepts what it gets; ``delivered`` is every delivery in order
    (partition, offset, delivery count), ``confirmed`` what it saw acknowledged successfully,
    with when."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        log: list[tuple[Any, ...]],
        lock: threading.Lock,
        ack: AcknowledgeType = AcknowledgeType.ACCEPT,
    ) -> None:
        super().__init__(daemon=True)
        self.ack = ack
        self.consumer = ShareConsumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
        )
        self.topic, self.log, self.lock = topic, log, lock
        self.stop = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        self.consumer.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                got = [m for m in self.consumer.poll(0.2) if m.error() is None]
                for m in got:
                    with self.lock:
                        self.log.append(("delivered", m.partition(), m.offset(), m.delivery_count()))
                    self.consumer.acknowledge(m, self.ack)
                if not got:
                    continue
                try:
                    results = self.consumer.commit_sync(30)
                except Exception as e:  # noqa: BLE001 - a failed commit is allowed, not a success
                    self.errors.append(repr(e))
                    continue
                with self.lock:
                    for m in got:
                        ok = any(tp.partition == m.partition() and err is None for tp, err in results.items())
                        if ok:
                            self.log.append(("confirmed", m.partition(), m.offset(), m.delivery_count()))
        finally:
            self.consumer.close()


def test_a_shard_killed_under_share_consumers_loses_nothing_and_redelivers_nothing_acknowledged(
    broker: Any, tmp_path: Path
) -> None:
    with failover_cluster(broker, tmp_path, "sgfo") as fo:
        group = f"sgfo-g-{uuid.uuid4().hex[:6]}"
        read_through(fo, group, lambda: fo.kill_leader(fo.state_partition(group)))


def test_share_state_follows_its_partition_to_a_new_worker_when_shards_roll_to_more_workers(
    broker: Any, tmp_path: Path
) -> None:
    with failover_cluster(broker, tmp_path, "sgtc", partitions=STATE_PARTITIONS, threads=1) as fo:
        group = odd_partition_group()  # worker 1's partition once shards run two workers

        def roll() -> None:
            for shard in (0, 1):  # the operator's rolling replacement, one shard at a time
                fo.cluster.run(fo.control.set_threads(shard, NEW_THREADS), timeout=90)

        read_through(fo, group, roll)
        state_partition = fo.state_partition(group)
        served = [
            (st.shard_id, p.worker)
            for st in fo.cluster.run(fo.control.status())
            for p in st.partitions
            if p.partition == state_partition and p.state == sc.PARTITION_STATE_ACTIVE
        ]
        assert served == [(str(fo.control.placement[state_partition].leader), 1)], served


DEAD_LETTERS = 400


def set_group_configs(bootstrap: str, group: str, **configs: str) -> None:
    """The share group reads from the earliest offset, with 15 s locks, and ``configs``
    (``errors_deadletterqueue_topic_name`` for ``errors.deadletterqueue.topic.name``)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group)
    every = {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "15000"}
    for name, value in (every | {k.replace("_", "."): v for k, v in configs.items()}).items():
        resource.add_incremental_config(ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET))
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result(30)


@contextmanager
def share_members(
    bootstrap: str, group: str, topic: str, ack: AcknowledgeType = AcknowledgeType.ACCEPT
) -> Iterator[tuple[Callable[[], set[tuple[int, int]]], list[tuple[Any, ...]], threading.Lock]]:
    """Two members of ``group`` acknowledging what they get with ``ack``, for the duration:
    (what was delivered so far, their log, the log's lock)."""
    log: list[tuple[Any, ...]] = []
    lock = threading.Lock()
    members = [Member(bootstrap, group, topic, log, lock, ack) for _ in range(2)]
    for m in members:
        m.start()

    def delivered() -> set[tuple[int, int]]:
        with lock:
            return {(p, o) for kind, p, o, _ in log if kind == "delivered"}

    try:
        yield delivered, log, lock
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(60)


def test_records_rejected_across_a_shard_kill_land_in_the_dead_letter_queue_once_each(
    broker: Any, tmp_path: Path
) -> None:
    """KIP-1191 through a failover: two share consumers reject every record of a group with a
    DLQ topic while the shard process leading its state partition is killed (SIGKILL). Each
    record is in the DLQ topic exactly once: a record ARCHIVING when the shard died is written
    by the next leader, unless its copy is there already (read back from the DLQ partition)."""
    with failover_cluster(broker, tmp_path, "sgdlq") as fo:
        group = f"sgdlq-g-{uuid.uuid4().hex[:6]}"
        topic, dlq = f"sgd-{uuid.uuid4().hex[:6]}", f"dlq.sgd-{uuid.uuid4().hex[:6]}"
        fo.create_topics(topic, partitions=PARTITIONS)
        admin = AdminClient({"bootstrap.servers": fo.bootstrap})
        # Kafka 4.4 wants the topic to opt in; older clusters and tansu know no such config
        kafka_4_4 = str(getattr(broker, "version", "")).startswith("4.4")
        opt_in = {"errors.deadletterqueue.group.enable": "true"} if kafka_4_4 else {}
        admin.create_topics([NewTopic(dlq, 1, 1, config=opt_in)])[dlq].result(30)
        producer = Producer({"bootstrap.servers": fo.bootstrap, "linger.ms": 5})
        for i in range(DEAD_LETTERS):
            producer.produce(topic, str(i).encode(), partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        set_group_configs(fo.bootstrap, group, errors_deadletterqueue_topic_name=dlq)
        with share_members(fo.bootstrap, group, topic, AcknowledgeType.REJECT) as (delivered, _log, _lock):
            wait_until(lambda: len(delivered()) >= DEAD_LETTERS // 4, 60, "a quarter delivered")
            fo.kill_leader(fo.state_partition(group))
            wait_until(lambda: len(delivered()) >= DEAD_LETTERS, 120, "every record delivered")
        reader = Consumer(
            {"bootstrap.servers": fo.bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"}
        )
        reader.subscribe([dlq])
        seen: Counter[tuple[int, int]] = Counter()
        deadline = time.monotonic() + 90
        quiet = None
        try:
            while time.monotonic() < deadline and (quiet is None or time.monotonic() < quiet):
                message = reader.poll(0.5)
                if message is None or message.error():
                    continue
                headers = dict(message.headers() or ())
                assert headers["__dlq.errors.group"] == group.encode()
                assert (message.key(), message.value()) == (None, None), "headers only, without copy.record"
                assert headers["__dlq.errors.message"] == b"Offset rejected by client."
                seen[(int(headers["__dlq.errors.partition"]), int(headers["__dlq.errors.offset"]))] += 1
                if len(seen) >= DEAD_LETTERS and quiet is None:
                    quiet = time.monotonic() + 3  # a duplicate would come late
        finally:
            reader.close()
        expected = {(i % PARTITIONS, i // PARTITIONS) for i in range(DEAD_LETTERS)}
        assert set(seen) == expected, f"{len(expected - set(seen))} missing"
        assert set(seen.values()) == {1}, f"written twice: {[k for k, n in seen.items() if n > 1][:10]}"


def read_through(fo: FailoverCluster, group: str, disrupt: Callable[[], None]) -> None:
    """Two share consumers of ``group`` read and accept RECORDS records; ``disrupt`` runs once a
    quarter is delivered, and RECORDS more are produced after it. Then: every record delivered,
    none acknowledged delivered again (a share-partition whose state was lost would start over
    from the earliest offset)."""
    topic = f"sg-{uuid.uuid4().hex[:6]}"
    fo.create_topics(topic, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": fo.bootstrap, "linger.ms": 5})

    def produce() -> None:
        for i in range(RECORDS):
            producer.produce(topic, str(i).encode(), partition=i % PARTITIONS)
        assert producer.flush(30) == 0

    produce()
    set_group_configs(fo.bootstrap, group)
    with share_members(fo.bootstrap, group, topic) as (delivered, log, lock):
        wait_until(lambda: len(delivered()) >= RECORDS // 4, 60, "a quarter delivered")
        disrupt()
        produce()  # and as many after: read from where the state that moved says
        wait_until(lambda: len(delivered()) >= 2 * RECORDS, 120, "every record delivered", lambda: f"{len(delivered())}")
        time.sleep(2)  # anything acknowledged but delivered again would show now
    with lock:
        events = list(log)
    confirmed_at: dict[tuple[int, int], int] = {}
    for i, (kind, p, o, _) in enumerate(events):
        if kind == "confirmed":
            confirmed_at.setdefault((p, o), i)
    again = [
        (p, o, count) for i, (kind, p, o, count) in enumerate(events)
        if kind == "delivered" and (p, o) in confirmed_at and i > confirmed_at[(p, o)]
    ]  # fmt: skip
    assert again == [], f"acknowledged records delivered again: {again[:10]}"
    assert {(p, o) for _, p, o, _ in events} >= {(p, o) for p in range(PARTITIONS) for o in range(2 * RECORDS // PARTITIONS)}
    redelivered = sum(1 for kind, _, _, count in events if kind == "delivered" and count > 1)
    print(f"{len(confirmed_at)} confirmed, {redelivered} deliveries beyond the first")
