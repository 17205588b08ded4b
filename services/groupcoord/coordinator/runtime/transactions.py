"""Client transactions on the state topic: the transactional write, reading the upstream's
markers, the marker follower, the marker barrier. The rest of the runtime (the reader, the
loader, the write pipeline) knows transactions only through this module, and only a shard that
opts in (``CoordinatorShard.transactions()`` returns its
:class:`~groupcoord.coordinator.core.contract.TransactionalShard`: the group coordinator's,
for TxnOffsetCommit) brings them into a partition's runtime.

Why the upstream decides: a TxnOffsetCommit's offsets stay pending until the client's
transaction ends, and only the upstream transaction coordinator knows how it ended. So, as in
Kafka, the records are written as one transactional batch of the *client's* producer (its
transactional id, producer id, epoch and a sequence the shard keeps), with a raw Produce
request (:func:`append_transactional`), and the upstream then writes its COMMIT/ABORT marker
into our partition, after them. Measured on tansu 0.6.0: it writes markers only into
partitions that hold a transactional batch of the producer (AddPartitionsToTxn alone is not
enough), validates sequences (DUPLICATE/OUT_OF_ORDER_SEQUENCE_NUMBER) and refuses a fenced
epoch (PRODUCER_FENCED). A reader of such a shard's partition hands its control batches to
:class:`LogTransactions`, which makes marker records of them
(:func:`~groupcoord.coordinator.core.contract.marker_record`) that the shard replays like any
other record; a shard that keeps no transactions never sees one.

The leader learns the outcome by reading its own partition (:class:`MarkerFollower`) while
the shard has open transactions, and replays each marker into both replicas (into the
committed one after the writes still unconfirmed, so reads never see a marker before the
records it decides). The outcome is the upstream's, read from the log, never inferred.

The marker barrier: a producer's TxnOffsetCommit while its earlier offsets are pending must
first see every marker already in the log (the marker deciding those offsets precedes the new
ones in the log, so it must be replayed before them). Such a request waits until the follower
has read the log to its end (:meth:`MarkerFollower.queue_after_markers`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from aiokafka import TopicPartition
from aiokafka import errors as Errors
from aiokafka.protocol.produce import ProduceRequest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.contract import (
    CoordinatorRecord,
    TransactionalShard,
    TransactionalWrite,
    deserialize_record,
    marker_record,
    serialize_record,
)
from groupcoord.coordinator.runtime.fencing import FENCE_HEADER, TXN_MARKER_PREFIX
from groupcoord.coordinator.runtime.replicas import ShardReplicas
from groupcoord.coordinator.runtime.statelog import MAX_BATCH_BYTES, Entry, PartitionReader, StateLogWriter
from groupcoord.observability.shard_metrics import ShardMetrics

if TYPE_CHECKING:  # the pipeline writes transactionally through this module
    from groupcoord.coordinator.runtime.write_pipeline import WritePipeline

MARKER_POLL_MS = 100  # the follower's fetch wait while transactions are open (bounds the outcome's delay)
MARKER_BARRIER_S = 5.0  # how long a request needing the log's markers waits for the follower

# Answers to a transactional batch meaning "not written, and retrying will not help": the
# producer is fenced, its transaction is not open, or we may not write for it.
REFUSED_TRANSACTIONAL_WRITE = frozenset(
    e.value
    for e in (
        ErrorCode.producer_fenced,
        ErrorCode.invalid_producer_epoch,
        ErrorCode.invalid_txn_state,
        ErrorCode.invalid_producer_id_mapping,
        ErrorCode.out_of_order_sequence_number,
        ErrorCode.unknown_producer_id,
        ErrorCode.transactional_id_authorization_failed,
        ErrorCode.topic_authorization_failed,
    )
)


_CONTROL_ABORT, _CONTROL_COMMIT = 0, 1


class ControlRecord:
    """A transaction marker (control batch) of the log, as a marker record: ``key`` and
    ``value`` are the serialized TxnMarkerKey/Value (see :func:`marker_record`), so the
    reader's callers handle it like the log's other records."""

    __slots__ = ("offset", "key", "value", "headers")

    def __init__(
        self, offset: int, producer_id: int, producer_epoch: int, commit: bool, sequence_bound: int | None
    ) -> None:
        self.offset = offset
        self.key, self.value = serialize_record(
            marker_record(offset, producer_id, producer_epoch, commit, sequence_bound)
        )
        self.headers: tuple[()] = ()


class LogTransactions:
    """What a :class:`~.statelog.PartitionReader` of a transactional shard's partition makes of
    the client transactions it reads: each COMMIT/ABORT marker becomes a marker record.

    With ``producer_sequences`` (producer id -> (epoch, next sequence) of the log before the
    reader's start; the marker follower's), it also follows the producers' sequences through
    the transactional batches it reads, so each marker carries its producer's sequence at its
    place in the log (``TxnMarkerValue.sequence_bound``). A load needs no bound (it replays
    the log in order), so the loader's has none."""

    __slots__ = ("producer_sequences",)

    def __init__(self, producer_sequences: dict[int, tuple[int, int]] | None = None) -> None:
        self.producer_sequences = producer_sequences

    def marker(self, batch: Any) -> ControlRecord | None:
        """The marker record of a control batch (None for control records other than markers)."""
        sequences = self.producer_sequences
        known = sequences.get(batch.producer_id) if sequences is not None else None
        bound = known[1] if known is not None and known[0] == batch.producer_epoch else None
        for record in batch:
            key = record.key
            if key is None or len(key) < 4:
                return None
            kind = int.from_bytes(key[2:4], "big")
            if kind not in (_CONTROL_ABORT, _CONTROL_COMMIT):
                return None
            return ControlRecord(
                record.offset, batch.producer_id, batch.producer_epoch, kind == _CONTROL_COMMIT, bound
            )
        return None

    def written(self, batch: Any) -> None:
        """A transactional (non-control) batch was read: its producer's sequence moves on."""
        sequences = self.producer_sequences
        if sequences is None:
            return
        end = batch.base_sequence + batch.next_offset - batch.base_offset
        known = sequences.get(batch.producer_id)
        if known is None or (batch.producer_epoch, end) > known:
            sequences[batch.producer_id] = (batch.producer_epoch, end)


class TransactionalWriteRefused(Exception):
    """The upstream refused a transactional batch: nothing was written."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class TransactionalWriteDuplicate(Exception):
    """The upstream already has this batch (DUPLICATE_SEQUENCE_NUMBER): a write reported
    failed did land, so only a reload makes the state match the log again."""


async def append_transactional(
    writer: StateLogWriter,
    partition: int,
    entries: Sequence[Entry],
    tag: bytes | None,
    txn: TransactionalWrite,
) -> list[tuple[int, int]]:
    """Write ``entries`` as one transactional batch of the client's producer ``txn``
    (acks=all) through ``writer``'s connections; returns its (first, last) offsets. Raises
    TransactionalWriteRefused when the upstream refuses it (certainly not written); any other
    exception means "maybe written", as for :meth:`StateLogWriter.append`."""
    headers = [(FENCE_HEADER, tag)] if tag is not None else []
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=True,
        producer_id=txn.producer_id,
        producer_epoch=txn.producer_epoch,
        base_sequence=txn.base_sequence,
        batch_size=MAX_BATCH_BYTES,
    )
    for i, (key, value) in enumerate(entries):
        if builder.append(i, timestamp=None, key=key, value=value, headers=headers) is None:
            raise ValueError("a transactional offset commit exceeds the batch size")
    client = writer.client
    tp = TopicPartition(writer.topic, partition)
    node = client.cluster.leader_for_partition(tp)
    if node is None or node == -1:
        await client.force_metadata_update()
        node = client.cluster.leader_for_partition(tp)
        if node is None or node == -1:
            raise Errors.NotLeaderForPartitionError(f"no leader for {tp}")
    request = ProduceRequest(
        txn.transactional_id, -1, 30000, [(writer.topic, [(partition, bytes(builder.build()))])]
    )
    try:
        response = await client.send(node, request)
        for _topic, partitions in response.topics:
            for _partition, error_code, offset, *_rest in partitions:
                if error_code == ErrorCode.duplicate_sequence_number.value:
                    raise TransactionalWriteDuplicate(f"{txn} at {tp}")
                if error_code in REFUSED_TRANSACTIONAL_WRITE:
                    raise TransactionalWriteRefused(
                        error_code, f"upstream refused the transactional batch of {txn}: {error_code}"
                    )
                if error_code != 0:
                    raise Errors.for_code(error_code)(f"transactional write to {tp}")
                return [(offset, offset + len(entries) - 1)]
    except Errors.KafkaError as exc:
        if exc.invalid_metadata:
            # The leader moved (NOT_LEADER_OR_FOLLOWER from a broker still up, a lost
            # connection): ask Metadata again now, as aiokafka's producer does for its own
            # batches. Without it every retry went to the old leader until the metadata's
            # max age (minutes) or until that broker closed its connections: a broker in a
            # controlled shutdown stalled a copier's transactions, a leader election would not
            # have ended.
            client.force_metadata_update()
        raise
    raise Errors.KafkaError(f"no answer for {tp} in the produce response")


@dataclass(slots=True)
class MarkersRead:
    """Transaction markers the follower read from the partition (already in the log), queued
    on the partition's loop for :meth:`MarkerFollower.replay`."""

    records: list[CoordinatorRecord]


class MarkerFollower:
    """The marker follower and barrier of one led partition; see the module docstring.

    Lives as long as one leadership (the partition's runtime builds one per load and stops it
    on resignation); ``follow`` is one of the leader's tasks."""

    def __init__(
        self,
        partition: int,
        *,
        bootstrap: str,
        topic: str,
        replicas: ShardReplicas,
        pipeline: WritePipeline,
        enqueue: Callable[[MarkersRead], None],
        metrics: ShardMetrics | None = None,
    ) -> None:
        self.partition = partition
        self._bootstrap = bootstrap
        self._topic = topic
        self._replicas = replicas
        self._pipeline = pipeline
        self._enqueue = enqueue
        self._metrics = metrics
        self._written = asyncio.Event()  # wakes the idle follower
        self._barriers: list[asyncio.Future[None]] = []
        self._barrier_tasks: set[asyncio.Task[None]] = set()

    @property
    def live(self) -> TransactionalShard:
        """The live replica: read through the replicas, which own it (a revert copies the
        committed data into the same object)."""
        return cast(TransactionalShard, self._replicas.live)

    def transaction_written(self) -> None:
        """A transactional write was accepted upstream: its marker will follow it in the log."""
        self._written.set()

    def stop(self) -> None:
        """The leadership ended: requests waiting on the barrier are answered NOT_COORDINATOR
        (the follower task itself is one of the leader's tasks, cancelled with them)."""
        for task in list(self._barrier_tasks):
            task.cancel()
        self._barriers = []

    # --- the barrier ------------------------------------------------------------------------

    def queue_after_markers(self, queue: Callable[[], bool], future: asyncio.Future[Any]) -> None:
        """Call ``queue()`` once the follower has read the log to its end (so every marker
        already in it is queued before the request ``queue`` puts on the loop); ``queue``
        returns False when the partition no longer serves. A follower that does not get there
        in time answers ``future`` COORDINATOR_LOAD_IN_PROGRESS (retriable; the gateway holds
        and resends); a resignation NOT_COORDINATOR."""
        task = asyncio.get_running_loop().create_task(self._after_barrier(queue, future))
        self._barrier_tasks.add(task)
        task.add_done_callback(self._barrier_tasks.discard)

    async def _after_barrier(self, queue: Callable[[], bool], future: asyncio.Future[Any]) -> None:
        barrier: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._barriers.append(barrier)
        self._written.set()  # wake the follower if it sleeps
        error = CoordinatorError(ErrorCode.not_coordinator, f"partition {self.partition} resigned")
        queued = False
        try:
            await asyncio.wait_for(asyncio.shield(barrier), MARKER_BARRIER_S)
            queued = queue()
        except TimeoutError:
            error = CoordinatorError(
                ErrorCode.coordinator_load_in_progress, "transaction markers not read yet"
            )
        finally:  # also when stop() cancels us: the caller must get an answer
            if not queued and not future.done():
                future.set_exception(error)

    @staticmethod
    def _release(barriers: list[asyncio.Future[None]]) -> None:
        for b in barriers:
            if not b.done():
                b.set_result(None)

    # --- the follower -----------------------------------------------------------------------

    def _producer_sequences(self) -> dict[int, tuple[int, int]]:
        """The committed state's producer sequences (what the log holds up to our confirmed
        writes, when no transaction is open or at the load's end)."""
        committed = self._replicas.committed.transactions()
        assert committed is not None  # a follower runs only for a shard that declares them
        return dict(committed.producer_sequences())

    async def follow(self, start: int) -> None:
        """Read the partition from ``start`` for the upstream's transaction markers while the
        shard has open transactions; queue each for replay on the loop.

        With none open, no marker can decide anything, so the follower does not read: it moves
        its position to the end of our confirmed writes (a transaction's record is written
        after that, and its marker after the record) and sleeps until a handler returns a
        transactional write."""
        reader = PartitionReader(self._bootstrap, self._topic, self.partition, start)
        # Markers it reads carry the producer's sequence at their place in the log, so that a
        # marker replayed after our later writes decides only what was written before it.
        reader.transactions = LogTransactions(self._producer_sequences())
        written = self._written
        try:
            while True:
                if not self.live.open_transactions():
                    # nothing pending: no marker can matter to a request waiting on a barrier
                    self._release(self._barriers)
                    self._barriers = []
                    if self._pipeline.confirmed_end > reader.position:
                        reader.seek(self._pipeline.confirmed_end)
                        reader.transactions = LogTransactions(self._producer_sequences())
                    written.clear()
                    if not self.live.open_transactions() and not self._barriers:
                        await written.wait()  # checked after clear: no lost wake-up
                    continue
                barriers, self._barriers = self._barriers, []
                # tansu holds an empty fetch for the whole wait even when a marker arrives
                chunk = await reader.read(timeout_ms=MARKER_POLL_MS)
                markers = [
                    deserialize_record(r.key, r.value)
                    for r in chunk
                    if r.key is not None and r.key[:2] == TXN_MARKER_PREFIX
                ]
                if markers:
                    self._enqueue(MarkersRead(markers))
                if reader.highwater is not None and reader.position >= reader.highwater:
                    # this fetch started after those requests came: their markers are queued
                    self._release(barriers)
                else:
                    self._barriers[:0] = barriers
        finally:
            await reader.stop()

    def replay(self, records: list[CoordinatorRecord]) -> None:
        """On the loop: replay markers the follower read into the live replica at once, and
        into the committed one after the writes still unconfirmed (or now, if none is)."""
        live = self.live
        before = live.transaction_stats() if self._metrics is not None else None
        self._replicas.replay_live(records)
        if before is not None and self._metrics is not None:
            after = live.transaction_stats()
            self._metrics.record_transaction_outcomes(after[1] - before[1], after[2] - before[2])
        if not self._pipeline.defer_commit(records):
            self._replicas.commit(records)
