"""Committing applications with librdkafka, run in a client container during a deployment test.

``python committing_clients.py BOOTSTRAP TOPIC SECONDS GROUP:PROTOCOL[:MEMBERS]...`` produces to
TOPIC all along and runs MEMBERS (default 1) confluent-kafka consumers per GROUP (``classic`` or
``consumer``, KIP-848), each committing synchronously after every message and remembering the
offsets the coordinator acknowledged. It prints ``consuming`` once every group consumed (the test
then disturbs the cluster), and after SECONDS (or once /tmp/stop exists) one JSON line: per group
what was consumed, the last acknowledged commit per partition, what the coordinator answers as
committed afterwards, every error the application saw, how many commits were acknowledged in
each wall-clock second, and every moment a partition was handed to a member while another
member of the group still owned it (its rebalance callbacks had not revoked or lost it). A
committed offset below an acknowledged one is a lost commit; a partition owned twice is a
coordinator that let two generations (or two leaders) assign at once.
"""

from __future__ import annotations

import collections
import json
import logging
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 2
# What the Java client raises as a RetriableException (and librdkafka's local equivalents).
RETRIABLE = {
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._WAIT_COORD,
}
STOP_FILE = Path("/tmp/stop")  # the test may end the run early: docker exec ... touch /tmp/stop


def produce_all_along(bootstrap: str, topic: str, stop: threading.Event) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    i = 0
    while not stop.is_set():
        producer.produce(topic, f"r{i}".encode(), partition=i % PARTITIONS)
        producer.poll(0)
        i += 1
        time.sleep(0.02)
    producer.flush(30)


class Ownership:
    """Which member of each group owns each partition, from the members' rebalance callbacks
    (all in this process, on one clock): a partition assigned while another member still owns
    it is owned twice."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[tuple[str, int], str] = {}
        self.twice: list[str] = []

    def assigned(self, group: str, member: str, partitions: list[int]) -> None:
        with self.lock:
            for p in partitions:
                held = self.owner.get((group, p))
                if held is not None and held != member:
                    self.twice.append(
                        f"{time.time():.3f} {group}[{p}] assigned to {member} while {held} owns it"
                    )
                self.owner[(group, p)] = member

    def released(self, group: str, member: str, partitions: list[int]) -> None:
        with self.lock:
            for p in partitions:
                if self.owner.get((group, p)) == member:
                    del self.owner[(group, p)]


OWNERSHIP = Ownership()


class RecentLines(logging.Handler):
    """The last lines of a consumer's librdkafka log."""

    def __init__(self, keep: int = 25) -> None:
        super().__init__()
        self.lines: collections.deque[str] = collections.deque(maxlen=keep)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.created:.3f} {record.getMessage()}"[:300])


class CommittingConsumer(threading.Thread):
    def __init__(
        self, bootstrap: str, topic: str, group: str, protocol: str, stop: threading.Event, member: int = 0
    ) -> None:
        super().__init__(daemon=True, name=f"{group}#{member}")
        self.bootstrap, self.topic, self.group, self.protocol, self.stop = (
            bootstrap,
            topic,
            group,
            protocol,
            stop,
        )
        self.consumed = 0
        self.acked: dict[int, int] = {}
        self.errors: list[str] = []
        self.retriable: list[str] = []
        self.last_ack_wall = 0.0  # time.time() of the last acknowledged commit
        self.ack_seconds: dict[int, int] = {}  # acknowledged commits per wall-clock second
        self.started = threading.Event()
        self.assignments: list[str] = []  # every assignment change, for a run that never consumes
        self.log = logging.getLogger(f"rdkafka.{group}.{member}")
        self.log.propagate = False
        self.log.setLevel(logging.DEBUG)
        self.recent = RecentLines()
        self.log.addHandler(self.recent)

    def run(self) -> None:
        config = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "group.protocol": self.protocol,
        }
        if self.protocol == "classic":
            config["session.timeout.ms"] = 10000
        # librdkafka's group-coordination log, kept in memory: printed only by a run that never
        # consumes (it hands coordinator errors to nobody, so its log is the only witness)
        config["debug"] = "cgrp"
        consumer = Consumer(config, logger=self.log)

        def assigned(_: Consumer, tps: list[TopicPartition]) -> None:
            self.assignments.append(f"{time.time():.1f} +{[tp.partition for tp in tps]}")
            OWNERSHIP.assigned(self.group, self.name, [tp.partition for tp in tps])

        def released(_: Consumer, tps: list[TopicPartition]) -> None:
            self.assignments.append(f"{time.time():.1f} -{[tp.partition for tp in tps]}")
            OWNERSHIP.released(self.group, self.name, [tp.partition for tp in tps])

        consumer.subscribe([self.topic], on_assign=assigned, on_revoke=released, on_lost=released)
        try:
            while not self.stop.is_set():
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error() is not None:
                    self.note(msg.error())
                    continue
                self.consumed += 1
                self.started.set()
                try:
                    for tp in consumer.commit(message=msg, asynchronous=False) or []:
                        if tp.error is None and tp.offset >= 0:
                            self.acked[tp.partition] = max(self.acked.get(tp.partition, -1), tp.offset)
                            self.last_ack_wall = time.time()
                            second = int(self.last_ack_wall)
                            self.ack_seconds[second] = self.ack_seconds.get(second, 0) + 1
                except KafkaException as exc:
                    self.note(exc.args[0])
        finally:
            consumer.close()

    def note(self, error: KafkaError) -> None:
        """Retriable errors (Kafka's RetriableException family, which librdkafka does not always
        flag on a failed commit) are expected across a failover or a rolling restart; any other
        is an error the application must handle."""
        retriable = error.retriable() or error.code() in RETRIABLE
        (self.retriable if retriable else self.errors).append(str(error))

    def committed_now(self) -> dict[int, int]:
        reader = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group})
        try:
            tps = reader.committed([TopicPartition(self.topic, p) for p in range(PARTITIONS)], timeout=60)
            return {tp.partition: tp.offset for tp in tps}
        finally:
            reader.close()


def main(argv: list[str]) -> int:
    bootstrap, topic, seconds, *groups = argv
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        fut.result(60)
    stop = threading.Event()
    producer = threading.Thread(target=produce_all_along, args=(bootstrap, topic, stop), daemon=True)
    producer.start()
    consumers = []
    for spec in groups:
        group, protocol, *members = spec.split(":")
        for member in range(int(members[0]) if members else 1):
            consumers.append(CommittingConsumer(bootstrap, topic, group, protocol, stop, member))
    started_at = time.monotonic()
    for c in consumers:
        c.start()
    for c in consumers:
        if not c.started.wait(max(0.0, started_at + 120 - time.monotonic())):
            # what each member saw, so that a run that never consumes says why
            stuck = {  # short enough to survive the test's cut: the last few errors and their count
                d.name: {
                    "protocol": d.protocol,
                    "consumed": d.consumed,
                    "assignments": d.assignments,
                    "errors": d.errors[-3:],
                    "error_count": len(d.errors),
                    "retriable": d.retriable[-3:],
                }
                for d in consumers
            }
            for d in consumers:
                if not d.consumed:
                    print(f"--- {d.name}: the end of its librdkafka log", flush=True)
                    print("\n".join(d.recent.lines), flush=True)
            print(f"{c.name} consumed nothing: {json.dumps(stuck)}", flush=True)
            stop.set()
            return 2
    print("consuming", flush=True)
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline and not STOP_FILE.exists():
        time.sleep(0.2)
    stop.set()
    producer.join(60)
    for c in consumers:
        c.join(60)
    report = {}
    for group in dict.fromkeys(c.group for c in consumers):
        members = [c for c in consumers if c.group == group]
        acked: dict[int, int] = {}
        ack_seconds: dict[int, int] = {}
        for c in members:
            for p, offset in c.acked.items():
                acked[p] = max(acked.get(p, -1), offset)
            for second, n in c.ack_seconds.items():
                ack_seconds[second] = ack_seconds.get(second, 0) + n
        report[group] = {
            "protocol": members[0].protocol,
            "members": len(members),
            "consumed": sum(c.consumed for c in members),
            "acked": acked,
            "committed": members[0].committed_now(),
            "errors": [e for c in members for e in c.errors],
            "retriable": [e for c in members for e in c.retriable][-20:],
            "retriable_count": sum(len(c.retriable) for c in members),
            "last_ack_wall": max(c.last_ack_wall for c in members),
            "ack_seconds": ack_seconds,
            "owned_twice": [t for t in OWNERSHIP.twice if f" {group}[" in t],
        }
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
