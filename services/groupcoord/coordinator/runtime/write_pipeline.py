"""A partition's writes: batching, the acks=all append, confirmation, then release.

One write is in flight at a time. The records of every request handled meanwhile accumulate
in the *open* write, so a busy partition writes in batches without any linger delay. A write's
callers are answered only after it is acknowledged *and confirmed* and its records are
committed (replayed into the committed replica, :mod:`.replicas`).

Confirmation (the writer half of :mod:`.fencing`): a write counts only if no marker of a newer
leader precedes it. The produce response gives each batch's offsets; if a batch starts right
after the end of our previous write (or our marker), nothing foreign lies between and it is
confirmed at once. Otherwise the gap is read back with the one fence scan: a superseding
marker means we were deposed (:class:`Fenced`); a fenced writer's record means a key needs a
repair (:class:`NeedsRepair`, after this write is released); a record of our own means a write
that failed did land after all, so the live state no longer matches the log
(:class:`NeedsReload`).

A failed append (the writer raised: "maybe written") is not fatal: the pipeline drops the
failed and the open write and hands their callers to ``on_failed``, which reverts the live
replica. If the records did land, the next write's gap check finds them (NeedsReload).

A transactional write (TxnOffsetCommit: records of a client's transaction, see
``CoordinatorResult.transaction``) is a write of its own, never merged with others: it goes out
as one transactional batch of that producer. Its records reach the live replica only once the
upstream accepted them (``replay_live``, before they are committed), because any client can
make the upstream refuse them (a fenced or made-up producer): Kafka verifies a transaction
before its coordinator runs the write, so a refusal touches nothing. A refused write fails its
own callers with the upstream's error, and nothing else: no revert, the writes queued behind
it go on, and those that only waited for it (answers without records) are answered.
Transaction markers the upstream writes into the partition are foreign records in the gaps;
the gap check passes over them (the marker follower of :mod:`.transactions` replays them).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.contract import CoordinatorRecord, TransactionalWrite
from groupcoord.coordinator.runtime.fencing import TXN_MARKER_PREFIX, Fence, ReplayFilter
from groupcoord.coordinator.runtime.statelog import Entry, PartitionReader, StateLogWriter
from groupcoord.coordinator.runtime.transactions import (
    TransactionalWriteDuplicate,
    TransactionalWriteRefused,
    append_transactional,
)
from groupcoord.observability.shard_metrics import ShardMetrics

WRITE_TIMEOUT_S = 5.0
"""How long a write's callers wait for its acknowledgement: Kafka's ``offsets.commit.timeout.ms``
(5,000 ms by default), which its coordinator runtime applies to every write. Past it they are
answered COORDINATOR_NOT_AVAILABLE (Kafka's answer to a write that timed out) and retry, while
the write itself goes on: if it lands, the state has it, as with a retried commit."""

log = logging.getLogger(__name__)

Waiter = tuple[asyncio.Future[Any], Any]
"""A caller's future and the response it gets once the write is committed."""


class Fenced(Exception):
    """A newer leader's marker precedes our write: this process is no longer the writer."""


class NeedsRepair(Exception):
    """A fenced writer's records landed after our marker; a reload rewrites their keys."""


class NeedsReload(Exception):
    """Records of a write reported failed are in the log: only a reload matches the log again."""


@dataclass(slots=True)
class Write:
    """The records of one or more requests, written as one append."""

    records: list[CoordinatorRecord] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    waiters: list[Waiter] = field(default_factory=list)
    transaction: TransactionalWrite | None = None
    # Records already in the log (transaction markers) that the committed replica must see
    # after this write's records: they are committed with it, never written.
    deferred: list[CoordinatorRecord] = field(default_factory=list)
    # How many of ``waiters`` are the callers of the write itself (a transactional write's;
    # answers without records waiting for it are appended after them).
    own_waiters: int = 0
    # Answers its callers COORDINATOR_NOT_AVAILABLE once the write timeout has passed.
    expiry: asyncio.TimerHandle | None = None


class WritePipeline:
    """The writes of one partition under one fence; see the module docstring."""

    def __init__(
        self,
        partition: int,
        *,
        writer: StateLogWriter,
        reader: PartitionReader,
        replay_filter: ReplayFilter,
        fence: Fence,
        next_offset: int,
        commit: Callable[[list[CoordinatorRecord]], None],
        replay_live: Callable[[list[CoordinatorRecord]], None],
        on_failed: Callable[[BaseException, list[Waiter]], None],
        metrics: ShardMetrics | None = None,
    ) -> None:
        self.partition = partition
        self.write_timeout_s = WRITE_TIMEOUT_S
        self.stale_keys_seen = 0
        self.newest_unconfirmed: Write | None = None
        self._writer = writer
        self._reader = reader
        self._filter = replay_filter
        self._fence = fence
        self._next_expected = next_offset
        self._commit = commit
        self._replay_live = replay_live
        self._on_failed = on_failed
        self._metrics = metrics
        self._queued: deque[Write] = deque()
        self._inflight: Write | None = None
        self.orphaned: list[CoordinatorRecord] = []
        self._ready = asyncio.Event()
        self._repair_needed = False

    @property
    def confirmed_end(self) -> int:
        """The offset after our last confirmed write."""
        return self._next_expected

    def add(
        self,
        records: list[CoordinatorRecord],
        entries: list[Entry],
        waiters: list[Waiter],
        transaction: TransactionalWrite | None = None,
    ) -> None:
        """Queue records and their callers: already replayed into the live replica, unless
        ``transaction`` (replayed once the upstream accepted them)."""
        queued = self._queued
        if transaction is None and queued and queued[-1].transaction is None:
            w = queued[-1]
        else:
            w = Write(transaction=transaction)
            w.expiry = asyncio.get_running_loop().call_later(self.write_timeout_s, self._expire, w)
            queued.append(w)
        w.records.extend(records)
        w.entries.extend(entries)
        w.waiters.extend(waiters)
        w.own_waiters = len(w.waiters)
        self.newest_unconfirmed = w

    def writing_for(self, producer_id: int) -> bool:
        """Whether a transactional write of ``producer_id`` is unacknowledged: the producer's
        next batch's sequence follows it, so it must wait (CONCURRENT_TRANSACTIONS)."""
        writes = (self._inflight, *self._queued)
        return any(
            w is not None and w.transaction is not None and w.transaction.producer_id == producer_id
            for w in writes
        )

    def defer_commit(self, records: list[CoordinatorRecord]) -> bool:
        """Commit records that are already in the log after the newest unconfirmed write;
        False if nothing is unconfirmed (the caller commits them now)."""
        w = self.newest_unconfirmed
        if w is None:
            return False
        w.deferred.extend(records)
        return True

    def flush(self) -> None:
        """End of a loop turn: send the queued writes once the one in flight is done."""
        if self._queued:
            self._ready.set()

    def abandon(self) -> list[Waiter]:
        """Forget every unconfirmed write; returns their callers (to be failed). Their deferred
        records (in the log already) are kept in ``orphaned`` for the caller to commit."""
        writes = [w for w in (self._inflight, *self._queued) if w is not None]
        for w in writes:
            _settled(w)
        waiters = [wt for w in writes for wt in w.waiters]
        self.orphaned.extend(r for w in writes for r in w.deferred)
        self._inflight = self.newest_unconfirmed = None
        self._queued.clear()
        return waiters

    async def run(self) -> None:
        """Write for ever; raises Fenced, NeedsRepair, NeedsReload (or a bug)."""
        tag = self._fence.tag()
        while True:
            await self._ready.wait()
            self._ready.clear()
            if not self._queued:
                continue
            w = self._queued.popleft()
            self._inflight = w
            started = time.perf_counter()
            try:
                if w.transaction is None:
                    spans = await self._writer.append(self.partition, w.entries, tag)
                else:
                    spans = await append_transactional(
                        self._writer, self.partition, w.entries, tag, w.transaction
                    )
            except asyncio.CancelledError:
                raise
            except TransactionalWriteDuplicate as exc:
                raise NeedsReload(f"partition {self.partition}: {exc} is in the log already") from exc
            except TransactionalWriteRefused as refused:  # not written: its callers learn why
                self._refused(w, CoordinatorError(ErrorCode(refused.code), str(refused)))
                continue
            except Exception as exc:  # noqa: BLE001 - maybe written: revert, confirm later
                if self._metrics is not None:
                    self._metrics.record_state_write_error(self.partition)
                self._on_failed(exc, self.abandon())
                continue
            for first, last in spans:
                await self._confirm(first, last)
            if self._metrics is not None:
                self._metrics.observe_state_write(
                    self.partition, time.perf_counter() - started, len(w.entries)
                )
            self._inflight = None
            _settled(w)
            if self.newest_unconfirmed is w:
                self.newest_unconfirmed = None
            if w.transaction is not None:
                self._replay_live(w.records)
            self._commit(w.records + w.deferred if w.deferred else w.records)
            for fut, response in w.waiters:
                if not fut.done():
                    fut.set_result(response)
            if self._repair_needed:
                raise NeedsRepair(f"partition {self.partition}: a fenced writer's records follow our marker")
            if self._queued:
                self._ready.set()

    def _refused(self, w: Write, error: CoordinatorError) -> None:
        """A transactional write the upstream refused (not written, never replayed): its
        callers get the error; whoever only waited for it is answered; markers to be committed
        after it (in the log already) are committed now."""
        self._inflight = None
        _settled(w)
        if self.newest_unconfirmed is w:
            self.newest_unconfirmed = None
        for i, (fut, response) in enumerate(w.waiters):
            if fut.done():
                continue
            if i < w.own_waiters:
                fut.set_exception(error)
            else:
                fut.set_result(response)
        if w.deferred:
            self._commit(w.deferred)
        if self._queued:
            self._ready.set()

    def _expire(self, w: Write) -> None:
        """The write timeout passed before ``w`` was acknowledged (an upstream without a leader
        for the partition, a broker that died mid-write): its callers learn it now, as Kafka's
        coordinator answers a write that timed out, instead of waiting out the upstream."""
        w.expiry = None
        waiting = [fut for fut, _ in w.waiters if not fut.done()]
        if not waiting:
            return
        if self._metrics is not None:
            self._metrics.record_state_write_timeout(self.partition)
        log.warning(
            "partition %d: a write of %d record(s) not acknowledged within %.0f s: its %d caller(s) "
            "answered COORDINATOR_NOT_AVAILABLE",
            self.partition,
            len(w.entries),
            self.write_timeout_s,
            len(waiting),
        )
        error = CoordinatorError(
            ErrorCode.coordinator_not_available,
            f"The coordinator's write was not acknowledged within {self.write_timeout_s:g} s.",
        )
        for fut in waiting:
            fut.set_exception(error)

    async def _confirm(self, first: int, last: int) -> None:
        if first < self._next_expected:
            raise RuntimeError(
                f"partition {self.partition}: write acked at {first}, expected >= {self._next_expected}"
            )
        if first > self._next_expected:
            ours = 0

            def admit(key: bytes, value: bytes | None) -> None:
                nonlocal ours
                if key[:2] != TXN_MARKER_PREFIX:  # markers are the upstream's
                    ours += 1

            def reject(key: bytes) -> None:
                self.stale_keys_seen += 1
                self._repair_needed = True
                if self._metrics is not None:
                    self._metrics.record_state_records_fenced(self.partition)

            self._reader.seek(self._next_expected)
            async for chunk in self._reader.chunks_until(first):
                self._filter.scan(chunk, admit, reject, strict=True)
                if self._filter.supersedes(self._fence):
                    raise Fenced(f"partition {self.partition}: marker {self._filter.current} before {first}")
            if ours:
                raise NeedsReload(
                    f"partition {self.partition}: {ours} record(s) of a failed write landed before {first}"
                )
        self._next_expected = last + 1


def _settled(w: Write) -> None:
    """``w`` no longer waits for the upstream (acknowledged, refused or abandoned)."""
    if w.expiry is not None:
        w.expiry.cancel()
        w.expiry = None
