"""The state topic on Kafka (aiokafka): topic creation, the batched acks=all writer, readers.

Broker facts this is built around (true on Kafka and on the embedded tansu broker):

* a produce response names the exact base offset of the batch, so a writer knows where its
  records landed (used by fencing: offsets between two of our own writes are foreign);
* the end of a partition is taken from the high watermark in fetch responses, never from
  ListOffsets "latest" (wrong on tansu 0.6). A leader does not even need it: it loads up to
  its own epoch marker, whose offset the produce response gives;
* compaction may or may not have run, so a reader must work on the whole history too.

The producer is plain (no idempotence, no transactions: aiokafka's InitProducerId fails on
tansu, and fencing is done with epochs, see :mod:`.fencing`). aiokafka keeps one produce
request in flight per broker and mutes a partition while its batch is in flight, so batches
of one partition land in the order they were sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from groupcoord.coordinator.shard.fencing import FENCE_HEADER

log = logging.getLogger(__name__)

MAX_BATCH_BYTES = 1 << 20
Entry = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class LogEntry:
    """A state-topic record as read back: offset, raw key/value and the writer's fence tag."""

    offset: int
    key: bytes | None
    value: bytes | None
    tag: bytes | None


async def ensure_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1) -> None:
    """Create the state topic if missing (compacted; ``min.compaction.lag.ms`` gives a fenced
    writer's stray records time to be overwritten before compaction could prefer them)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        existing = await admin.list_topics()
        if topic in existing:
            return
        new = NewTopic(
            topic,
            partitions,
            replication_factor,
            topic_configs={"cleanup.policy": "compact", "min.compaction.lag.ms": "3600000"},
        )
        with contextlib.suppress(TopicAlreadyExistsError):
            await admin.create_topics([new])
    finally:
        await admin.close()


class StateLogWriter:
    """One acks=all producer per worker process, shared by all of its partitions."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            linger_ms=0,  # batching is ours: one write carries every record of a loop turn
            max_batch_size=MAX_BATCH_BYTES,
            max_request_size=MAX_BATCH_BYTES + 4096,
            enable_idempotence=False,
            request_timeout_ms=30000,
        )

    async def start(self) -> None:
        await self._producer.start()

    async def stop(self) -> None:
        await self._producer.stop()

    async def append(
        self, partition: int, entries: Sequence[Entry], tag: bytes | None
    ) -> list[tuple[int, int]]:
        """Write ``entries`` (in order) and wait for acks=all; returns each batch's (first, last).

        Entries that do not fit one batch go in several batches, sent back to back; aiokafka
        keeps them in order, but another writer's records may land between them, which is why
        every span is returned. The caller must treat an exception as "maybe written".
        """
        headers = [(FENCE_HEADER, tag)] if tag is not None else []
        futures = []
        counts: list[int] = []
        batch = self._producer.create_batch()
        count = 0
        for key, value in entries:
            if batch.append(timestamp=None, key=key, value=value, headers=headers) is None:
                if count == 0:
                    raise ValueError(
                        f"a record of {len(key) + len(value or b'')} bytes exceeds the batch size"
                    )
                batch.close()
                futures.append(await self._producer.send_batch(batch, self.topic, partition=partition))
                counts.append(count)
                batch = self._producer.create_batch()
                count = 0
                if batch.append(timestamp=None, key=key, value=value, headers=headers) is None:
                    raise ValueError(
                        f"a record of {len(key) + len(value or b'')} bytes exceeds the batch size"
                    )
            count += 1
        batch.close()
        futures.append(await self._producer.send_batch(batch, self.topic, partition=partition))
        counts.append(count)
        metas = await asyncio.gather(*futures)
        return [(m.offset, m.offset + n - 1) for m, n in zip(metas, counts, strict=True)]


class PartitionReader:
    """Reads one state-topic partition from a position onward (its own aiokafka consumer)."""

    def __init__(self, bootstrap: str, topic: str, partition: int, start: int = 0) -> None:
        self.tp = TopicPartition(topic, partition)
        self.position = start
        self.highwater: int | None = None
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_uncommitted",
            fetch_max_wait_ms=200,
            max_partition_fetch_bytes=16 << 20,
            fetch_max_bytes=64 << 20,
        )
        self._started = False

    async def start(self) -> None:
        if not self._started:
            await self._consumer.start()
            self._consumer.assign([self.tp])
            self._consumer.seek(self.tp, self.position)
            self._started = True

    async def stop(self) -> None:
        if self._started:
            self._started = False
            await self._consumer.stop()

    def seek(self, offset: int) -> None:
        self.position = offset
        self._consumer.seek(self.tp, offset)

    async def read(self, timeout_ms: int = 1000) -> list[LogEntry]:
        """The next records (possibly none before ``timeout_ms``); updates position/highwater."""
        await self.start()
        got = await self._consumer.getmany(self.tp, timeout_ms=timeout_ms)
        hw = self._consumer.highwater(self.tp)
        if hw is not None:
            self.highwater = hw
        out: list[LogEntry] = []
        for msg in got.get(self.tp, ()):
            tag = None
            for hk, hv in msg.headers:
                if hk == FENCE_HEADER:
                    tag = hv
            out.append(LogEntry(msg.offset, msg.key, msg.value, tag))
        if out:
            self.position = out[-1].offset + 1
        else:
            self.position = await self._consumer.position(self.tp)
        return out

    async def chunks_until(self, end: int, timeout_s: float = 60.0) -> AsyncIterator[list[LogEntry]]:
        """Every record from the position up to (excluding) offset ``end``, chunk by chunk.

        Stops without progress after ``timeout_s`` (TimeoutError), e.g. when ``end`` lies past
        the real end of the log.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.position < end:
            entries = await self.read()
            if entries:
                deadline = loop.time() + timeout_s
                if entries[-1].offset >= end:
                    entries = [e for e in entries if e.offset < end]
                yield entries
            elif loop.time() > deadline:
                raise TimeoutError(f"{self.tp}: at {self.position}, wanted {end}")
