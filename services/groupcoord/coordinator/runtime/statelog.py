"""The state topic on Kafka (aiokafka): topic creation, the batched acks=all writer, readers.

Broker facts this is built around (true on Kafka and on the embedded tansu broker):

* a produce response names the exact base offset of the batch, so a writer knows where its
  records landed (used by fencing: offsets between two of our own writes are foreign);
* the end of a partition is taken from the high watermark in fetch responses, never from
  ListOffsets "latest" (wrong on tansu 0.6). A leader does not even need it: it loads up to
  its own epoch marker, whose offset the produce response gives;
* compaction may or may not have run, so a reader must work on the whole history too.

The writes are plain (no idempotence, no transactions: aiokafka's InitProducerId fails on
tansu, and fencing is done with epochs, see :mod:`.fencing`), sent by
:class:`~.produce_per_broker.ProducePerBroker`: one Produce request in flight per broker,
carrying the batches of every partition the worker leads on it that were queued meanwhile.
A write's batches are sent one after another, so they land in order.

Transactional offsets (TxnOffsetCommit) are the exception: they are written as a batch of the
client's producer (:mod:`.transactions`, through :attr:`StateLogWriter.client`). What a reader
makes of client transactions in the log (the upstream's COMMIT/ABORT markers, the producers'
sequences) is :mod:`.transactions`' business too: a reader given its
:class:`~.transactions.LogTransactions` hands it every control and transactional batch; a
reader without one (the partition of a shard that keeps no transactions) skips control batches.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka import errors as Errors
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.client import AIOKafkaClient
from aiokafka.errors import TopicAlreadyExistsError
from aiokafka.protocol.fetch import FetchRequest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords

from groupcoord.common.kafka_security import KafkaSecurity, upstream_security
from groupcoord.common.topic_replication import Replication, existing_topic_problems, fit_replication
from groupcoord.coordinator.runtime.fencing import FENCE_HEADER
from groupcoord.coordinator.runtime.produce_per_broker import ProducePerBroker

if TYPE_CHECKING:  # transactions.py writes through this module
    from groupcoord.coordinator.runtime.transactions import LogTransactions

log = logging.getLogger(__name__)

MAX_BATCH_BYTES = 1 << 20
FETCH_MAX_BYTES = 32 << 20
Entry = tuple[bytes, bytes | None]
# A v2 record batch's header, and the most a record adds to its key and value (its length,
# attributes, offset and timestamp deltas, key and value lengths as varints, our fence header):
# an upper bound, as Kafka's AbstractRecords.estimateSizeInBytes.
BATCH_OVERHEAD = 61
RECORD_OVERHEAD = 40


def estimated_batch_bytes(entries: Sequence[Entry]) -> int:
    """The most ``entries`` take as one record batch (uncompressed)."""
    return BATCH_OVERHEAD + sum(len(key) + len(value or b"") + RECORD_OVERHEAD for key, value in entries)


async def ensure_topic(
    bootstrap: str,
    topic: str,
    partitions: int,
    replication_factor: int = 1,
    min_insync_replicas: int | None = None,
    security: KafkaSecurity | None = None,
) -> Replication:
    """Create the state topic if missing (compacted; ``min.compaction.lag.ms`` gives a fenced
    writer's stray records time to be overwritten before compaction could prefer them).

    The replication asked for is fitted to the cluster's broker count
    (:func:`~groupcoord.common.topic_replication.fit_replication`); a clamp is logged as a
    warning. Returns what the topic was created with (or would have been, when it existed).

    An existing topic is checked against what is asked (compacted, replication factor,
    ``min.insync.replicas``): each difference is logged as a warning and returned in
    ``problems``, for the shard's status; the topic is used anyway (not silently, not fatally:
    an operator may have reasons, and a coordinator that refuses to start serves nobody).
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **upstream_security(security).aiokafka_options())
    await admin.start()
    try:
        brokers = len((await admin.describe_cluster()).get("brokers") or ()) or None
        fitted = fit_replication(
            replication_factor,
            replication_factor if min_insync_replicas is None else min_insync_replicas,
            brokers,
        )
        existing = await admin.list_topics()
        if topic in existing:
            problems = await _existing_topic_problems(
                admin, topic, fitted, check_min_isr=min_insync_replicas is not None
            )
            for problem in problems:
                log.warning("%s (serving with it anyway; fix the topic)", problem)
            return dataclasses.replace(fitted, problems=problems)
        if fitted.clamped:
            log.warning("state topic %s: %s", topic, fitted.message)
        configs = {"cleanup.policy": "compact", "min.compaction.lag.ms": "3600000"}
        if min_insync_replicas is not None:
            configs["min.insync.replicas"] = str(fitted.min_insync_replicas)
        new = NewTopic(topic, partitions, fitted.replication_factor, topic_configs=configs)
        with contextlib.suppress(TopicAlreadyExistsError):
            await admin.create_topics([new])
        return fitted
    finally:
        await admin.close()


async def _existing_topic_problems(
    admin: AIOKafkaAdminClient, topic: str, fitted: Replication, *, check_min_isr: bool
) -> tuple[str, ...]:
    """:func:`~groupcoord.common.topic_replication.existing_topic_problems` of the topic as the
    cluster describes it (a cluster that cannot say is a problem too, not a failure)."""
    try:
        (described,) = await admin.describe_topics([topic])
        replicas = min((len(p["replicas"]) for p in described["partitions"]), default=0)
        [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        [resource] = response.resources
        configs = {entry[0]: entry[1] for entry in resource[4] if entry[1] is not None}
    except Exception as exc:  # noqa: BLE001 - a check that cannot run must not stop the shard
        return (f"state topic {topic}: its configuration could not be checked: {exc!r}",)
    return existing_topic_problems(topic, fitted, replicas, configs, check_min_isr=check_min_isr)


class StateLogWriter:
    """One acks=all writer per worker process, shared by all of its partitions: their batches
    share each broker's Produce requests (:class:`~.produce_per_broker.ProducePerBroker`);
    aiokafka's producer writes the other topics' records (:meth:`send_records`) and gives
    its connections to transactional writes."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        security: KafkaSecurity | None = None,
        on_produce_request: Callable[[int], None] | None = None,
    ) -> None:
        """``on_produce_request(batches)``: told of each Produce request the state writes take."""
        self.topic = topic
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            **upstream_security(security).aiokafka_options(),
            acks="all",
            linger_ms=0,  # batching is ours: one write carries every record of a loop turn
            max_batch_size=MAX_BATCH_BYTES,
            max_request_size=MAX_BATCH_BYTES + 4096,
            enable_idempotence=False,
            request_timeout_ms=30000,
        )
        self._produce = ProducePerBroker(
            self._producer.client, request_timeout_ms=30000, on_request=on_produce_request
        )

    async def start(self) -> None:
        await self._producer.start()

    async def stop(self) -> None:
        await self._produce.close()
        await self._producer.stop()

    @property
    def client(self) -> AIOKafkaClient:
        """The producer's connections, for writes aiokafka's producer cannot make (a client's
        transactional batch: :func:`.transactions.append_transactional`)."""
        return self._producer.client

    async def append(
        self, partition: int, entries: Sequence[Entry], tag: bytes | None
    ) -> list[tuple[int, int]]:
        """Write ``entries`` (in order) and wait for acks=all; returns each batch's (first, last).

        Entries that do not fit one batch go in several batches, each sent once the one before
        is acknowledged; another writer's records may land between them, which is why every
        span is returned. The caller must treat an exception as "maybe written".
        """
        headers = [(FENCE_HEADER, tag)] if tag is not None else []
        spans: list[tuple[int, int]] = []
        builder, count = _builder(), 0
        for key, value in entries:
            if builder.append(count, timestamp=None, key=key, value=value, headers=headers) is None:
                if count == 0:
                    raise ValueError(
                        f"a record of {len(key) + len(value or b'')} bytes exceeds the batch size"
                    )
                spans.append(await self._send(partition, builder, count))
                builder, count = _builder(), 0
                if builder.append(0, timestamp=None, key=key, value=value, headers=headers) is None:
                    raise ValueError(
                        f"a record of {len(key) + len(value or b'')} bytes exceeds the batch size"
                    )
            count += 1
        spans.append(await self._send(partition, builder, count))
        return spans

    async def _send(self, partition: int, builder: DefaultRecordBatchBuilder, count: int) -> tuple[int, int]:
        first = await self._produce.send(self.topic, partition, bytes(builder.build()))
        return first, first + count - 1

    async def send_records(self, topic: str, partition: int, records: Sequence[Any]) -> int:
        """Write ``records`` (each with ``key``, ``value``, ``headers``: a publication's, see
        :mod:`.publisher`) to a partition of another topic as one batch, acks=all, stamped with
        the wall clock (retention judges a record by it); returns the batch's base offset."""
        batch = self._producer.create_batch()
        for r in records:
            if batch.append(timestamp=None, key=r.key, value=r.value, headers=list(r.headers)) is None:
                if batch.record_count() == 0:
                    raise ValueError(f"a record of {len(r.key or b'') + len(r.value or b'')} bytes exceeds the batch size")
                raise ValueError("the records exceed one batch")
        batch.close()
        meta = await (await self._producer.send_batch(batch, topic, partition=partition))
        return int(meta.offset)


def _builder() -> DefaultRecordBatchBuilder:
    """A plain (no producer id, uncompressed) v2 record batch of at most MAX_BATCH_BYTES."""
    return DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=MAX_BATCH_BYTES,
    )


class UpstreamProbe:
    """Whether this process reaches the Kafka cluster holding the state topic: a Metadata
    request, on connections of its own (a probe stuck on a cut connection never holds up the
    writer's requests). Each broker gets ``timeout_s`` to answer (then its connection closes,
    so the next probe connects afresh) before the next known broker is asked: one broker cut
    off does not make the cluster silent. Raises when no broker answered."""

    def __init__(self, bootstrap: str, security: KafkaSecurity | None = None, timeout_s: float = 3.0) -> None:
        self._client = AIOKafkaClient(
            bootstrap_servers=bootstrap,
            client_id="groupcoord-upstream-probe",
            request_timeout_ms=int(timeout_s * 1000),
            **upstream_security(security).aiokafka_options(),
        )
        self._bootstrapped = False

    async def __call__(self) -> None:
        if not self._bootstrapped:
            await self._client.bootstrap()  # a Metadata request too
            self._bootstrapped = True
        else:
            await self._client.fetch_all_metadata()

    async def close(self) -> None:
        await self._client.close()


class PartitionReader:
    """Reads one state-topic partition from a position onward, with raw Fetch requests.

    Loading is the hot path of a takeover (10,000 groups and 1,000,000 offsets must load in
    seconds), and aiokafka's consumer spends most of its time building a Python
    ``ConsumerRecord`` per record. This reader sends Fetch requests through aiokafka's client
    and hands out the C-parsed records of aiokafka's record batch reader directly; while the
    caller replays one chunk, the fetch of the next is already in flight. The high watermark is
    taken from each fetch response.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partition: int,
        start: int = 0,
        security: KafkaSecurity | None = None,
    ) -> None:
        self.tp = TopicPartition(topic, partition)
        self.position = start
        self.highwater: int | None = None
        self._client = AIOKafkaClient(
            bootstrap_servers=bootstrap,
            client_id="groupcoord-loader",
            **upstream_security(security).aiokafka_options(),
        )
        self._started = False
        self._node: int | None = None
        self._prefetch: asyncio.Task[tuple[int, list[Any]]] | None = None
        # Set for the partition of a TransactionalShard: what to make of its control batches.
        self.transactions: LogTransactions | None = None

    async def start(self) -> None:
        if not self._started:
            await self._client.bootstrap()
            self._client.add_topic(self.tp.topic)
            self._started = True

    async def stop(self) -> None:
        self._cancel_prefetch()
        if self._started:
            self._started = False
            await self._client.close()

    def seek(self, offset: int) -> None:
        self._cancel_prefetch()
        self.position = offset

    def _cancel_prefetch(self) -> None:
        if self._prefetch is not None:
            self._prefetch.cancel()
            self._prefetch = None

    async def _leader(self) -> int:
        while self._node is None:
            await self._client.force_metadata_update()
            self._node = self._client.cluster.leader_for_partition(self.tp)
            if self._node is None or self._node == -1:
                self._node = None
                await asyncio.sleep(0.1)
        return self._node

    async def _fetch(self, position: int, max_wait_ms: int) -> tuple[int, list[Any]]:
        """Records at ``position`` onward (whole batches may start earlier: those are skipped)."""
        await self.start()
        request = FetchRequest(
            max_wait_ms,
            1,
            FETCH_MAX_BYTES,
            0,
            [(self.tp.topic, [(self.tp.partition, position, FETCH_MAX_BYTES)])],
        )
        try:
            response = await self._client.send(await self._leader(), request)
        except Errors.KafkaError as exc:
            if not exc.retriable:
                raise
            # The leader crashed or is unreachable (NodeNotReady, connection errors, time-outs):
            # ask Metadata for the partition's new leader and fetch again, as for
            # NOT_LEADER_OR_FOLLOWER below, instead of failing the partition.
            self._node = None
            await asyncio.sleep(0.1)
            return position, []
        out: list[Any] = []
        for _topic, partitions in response.topics:
            for _partition, error_code, highwater, *data in partitions:
                if error_code != 0:
                    error = Errors.for_code(error_code)
                    if error.retriable or error in (
                        Errors.NotLeaderForPartitionError,
                        Errors.UnknownTopicOrPartitionError,
                    ):
                        self._node = None
                        await asyncio.sleep(0.1)
                        return position, []
                    raise error(f"fetching {self.tp} at {position}")
                self.highwater = highwater
                records = MemoryRecords(data[-1])
                while records.has_next():
                    batch = records.next_batch()
                    if not batch.validate_crc():
                        raise Errors.CorruptRecordException(
                            f"{self.tp}: bad CRC in batch at {batch.base_offset}"
                        )
                    transactions = self.transactions
                    if batch.is_control_batch:  # the upstream's (a transaction marker)
                        if transactions is not None:
                            marker = transactions.marker(batch)
                            if marker is not None and marker.offset >= position:
                                out.append(marker)
                        position = max(position, batch.next_offset)
                        continue
                    if transactions is not None and batch.is_transactional:
                        transactions.written(batch)
                    for record in batch:
                        if record.offset >= position:
                            out.append(record)
                    position = max(position, batch.next_offset)
        return position, out

    async def read(self, timeout_ms: int = 1000) -> list[Any]:
        """The next records (none if nothing came within ``timeout_ms``). Each record has
        ``offset``, ``key``, ``value`` and ``headers`` (see :func:`.fencing.fence_tag`)."""
        if self._prefetch is not None:
            task, self._prefetch = self._prefetch, None
            position, records = await task
        else:
            position, records = await self._fetch(self.position, timeout_ms)
        self.position = position
        return records

    async def chunks_until(self, end: int, timeout_s: float = 60.0) -> AsyncIterator[list[Any]]:
        """Every record from the position up to (excluding) offset ``end``, chunk by chunk;
        the next chunk is fetched while the caller processes this one.

        Stops without progress after ``timeout_s`` (TimeoutError), e.g. when ``end`` lies past
        the real end of the log.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.position < end:
            records = await self.read(timeout_ms=200)
            if self.position < end:
                self._prefetch = asyncio.ensure_future(self._fetch(self.position, 200))
            if records:
                deadline = loop.time() + timeout_s
                if records[-1].offset >= end:
                    records = [r for r in records if r.offset < end]
                yield records
            elif loop.time() > deadline:
                raise TimeoutError(f"{self.tp}: at {self.position}, wanted {end}")
