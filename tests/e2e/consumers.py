"""Real consumer clients run in threads, recording what they own, consume and commit.

One class per client library with the same small surface, so the end-to-end scenarios read
the same for confluent-kafka (classic eager / cooperative, and KIP-848), kafka-python and
aiokafka. Every consumer commits synchronously after each batch and records only commits
that the coordinator acknowledged, for the history checker.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class History:
    """What one consumer saw: owned partitions over time, records, acknowledged commits."""

    name: str
    assignments: list[tuple[float, frozenset[int]]] = field(default_factory=list)
    records: set[tuple[int, int]] = field(default_factory=set)  # (partition, offset)
    commits: list[tuple[float, dict[int, int]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    error_times: list[float] = field(default_factory=list)  # when each of ``errors`` was raised

    @property
    def owned(self) -> frozenset[int]:
        return self.assignments[-1][1] if self.assignments else frozenset()


class ConsumerThread(threading.Thread):
    """Base: subclasses implement ``open()``, ``poll_once()``, ``close()``."""

    def __init__(self, bootstrap: str, topic: str, group: str, name: str, **config: Any) -> None:
        super().__init__(daemon=True, name=name)
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.config = config
        self.history = History(name)
        self.stopping = threading.Event()
        self.closed = threading.Event()

    def note_assignment(self, partitions: frozenset[int]) -> None:
        if not self.history.assignments or self.history.assignments[-1][1] != partitions:
            self.history.assignments.append((time.monotonic(), partitions))

    # Ownership is recorded from the clients' rebalance callbacks, which run before a
    # revocation is acknowledged to the coordinator and after an assignment arrives: a
    # sound basis for "no partition owned twice" (polling would see changes late).
    def gained(self, partitions: list[int]) -> None:
        self.note_assignment(self.history.owned | frozenset(partitions))

    def lost(self, partitions: list[int]) -> None:
        self.note_assignment(self.history.owned - frozenset(partitions))

    def run(self) -> None:
        try:
            self.open()
            while not self.stopping.is_set():
                try:
                    self.poll_once()
                except Exception as exc:  # noqa: BLE001 - recorded, the scenario asserts on it
                    self.history.errors.append(repr(exc))
                    self.history.error_times.append(time.monotonic())
                    time.sleep(0.2)
        finally:
            with contextlib.suppress(Exception):
                self.close()
            self.note_assignment(frozenset())
            self.closed.set()

    def stop(self, timeout: float = 30) -> None:
        self.stopping.set()
        self.closed.wait(timeout)

    def open(self) -> None: ...
    def poll_once(self) -> None: ...
    def close(self) -> None: ...


class ConfluentConsumer(ConsumerThread):
    def open(self) -> None:
        from confluent_kafka import Consumer  # noqa: PLC0415

        conf = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **self.config,
        }
        self.consumer = Consumer(conf)
        self.consumer.subscribe(
            [self.topic],
            on_assign=lambda _c, tps: self.gained([tp.partition for tp in tps]),
            on_revoke=lambda _c, tps: self.lost([tp.partition for tp in tps]),
            on_lost=lambda _c, tps: self.lost([tp.partition for tp in tps]),
        )

    def poll_once(self) -> None:
        from confluent_kafka import TopicPartition  # noqa: PLC0415

        msgs = self.consumer.consume(500, timeout=0.2)
        batch: dict[int, int] = {}
        for m in msgs:
            if m.error() is not None:
                continue
            self.history.records.add((m.partition(), m.offset()))
            batch[m.partition()] = m.offset() + 1
        if batch:
            tps = [TopicPartition(self.topic, p, o) for p, o in batch.items()]
            result = self.consumer.commit(offsets=tps, asynchronous=False)
            acked = {tp.partition: tp.offset for tp in result if tp.error is None}
            if acked:
                self.history.commits.append((time.monotonic(), acked))

    def close(self) -> None:
        self.consumer.close()


class KafkaPythonConsumer(ConsumerThread):
    def open(self) -> None:
        from kafka import (
            ConsumerRebalanceListener,  # noqa: PLC0415
            KafkaConsumer,  # noqa: PLC0415
        )

        owner = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                owner.lost([tp.partition for tp in revoked])

            def on_partitions_assigned(self, assigned: Any) -> None:
                owner.gained([tp.partition for tp in assigned])

        self.consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **self.config,
        )
        self.consumer.subscribe([self.topic], listener=Listener())

    def poll_once(self) -> None:
        from kafka import TopicPartition  # noqa: PLC0415
        from kafka.structs import OffsetAndMetadata  # noqa: PLC0415

        polled = self.consumer.poll(timeout_ms=200, max_records=500)
        batch: dict[int, int] = {}
        for tp, records in polled.items():
            for r in records:
                self.history.records.add((tp.partition, r.offset))
                batch[tp.partition] = r.offset + 1
        if batch:
            self.consumer.commit(
                {TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in batch.items()}
            )
            self.history.commits.append((time.monotonic(), batch))

    def close(self) -> None:
        self.consumer.close()


class AioKafkaConsumer(ConsumerThread):
    """aiokafka on an event loop of its own inside the thread."""

    def open(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener  # noqa: PLC0415

        self.loop = asyncio.new_event_loop()
        owner = self

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: Any) -> None:
                owner.lost([tp.partition for tp in revoked])

            async def on_partitions_assigned(self, assigned: Any) -> None:
                owner.gained([tp.partition for tp in assigned])

        async def make() -> Any:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap,
                group_id=self.group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                **self.config,
            )
            await consumer.start()
            consumer.subscribe([self.topic], listener=Listener())
            return consumer

        self.consumer = self.loop.run_until_complete(make())

    def poll_once(self) -> None:
        from aiokafka.structs import OffsetAndMetadata, TopicPartition  # noqa: PLC0415

        async def once() -> None:
            polled = await self.consumer.getmany(timeout_ms=200, max_records=500)
            batch: dict[int, int] = {}
            for tp, records in polled.items():
                for r in records:
                    self.history.records.add((tp.partition, r.offset))
                    batch[tp.partition] = r.offset + 1
            if batch:
                await self.consumer.commit(
                    {TopicPartition(self.topic, p): OffsetAndMetadata(o, "") for p, o in batch.items()}
                )
                self.history.commits.append((time.monotonic(), batch))

        self.loop.run_until_complete(once())

    def close(self) -> None:
        self.loop.run_until_complete(self.consumer.stop())
        self.loop.close()


CLIENTS: dict[str, tuple[type[ConsumerThread], dict[str, Any]]] = {
    "confluent-classic-range": (ConfluentConsumer, {"partition.assignment.strategy": "range"}),
    "confluent-classic-cooperative": (
        ConfluentConsumer,
        {"partition.assignment.strategy": "cooperative-sticky"},
    ),
    "confluent-consumer-protocol": (ConfluentConsumer, {"group.protocol": "consumer"}),
    "kafka-python": (KafkaPythonConsumer, {}),
    "aiokafka": (AioKafkaConsumer, {}),
}


def assert_acknowledged_commits_kept(
    bootstrap: str, topic: str, group: str, consumers: list[ConsumerThread]
) -> None:
    """Every acknowledged commit is still visible: offsets only move forward in these scenarios,
    so the latest acknowledged offset per partition is what a fresh client's OffsetFetch must
    return (a lost commit would show as an older offset, or none)."""
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    acked: dict[int, int] = {}
    for c in consumers:
        for _, batch in c.history.commits:
            for p, offset in batch.items():
                acked[p] = max(acked.get(p, -1), offset)
    fresh = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = fresh.committed([TopicPartition(topic, p) for p in acked], timeout=30)
    finally:
        fresh.close()
    assert {tp.partition: tp.offset for tp in committed} == acked
