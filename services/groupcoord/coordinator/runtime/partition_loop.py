"""One state-topic partition in a worker process: leader, hot standby or nothing.

As leader, every request, timer and load hook of the partition runs on one task (the
partition's loop), in arrival order, against the partition's coordinator shard, kept as two
replicas (:mod:`.replicas`):

* A write operation runs against the live replica. Its records are replayed into it at once
  (the next request sees them, as in Kafka's coordinator runtime) and queued on the
  :mod:`.write_pipeline`; its response is released once the write is acknowledged, confirmed
  and committed. A write that produces no records still waits for the newest unconfirmed write
  (its answer may depend on state that write created).
* A read-only operation runs against the committed replica and is answered at once: it sees
  the state as of the last committed write, never a record whose write is still in flight.
* A write that fails reverts the live replica to the committed one without a reload; its
  callers and those of every later unconfirmed write get NOT_COORDINATOR (clients retry).
* An operation's records must fit one record batch of the state topic, as in Kafka's
  coordinator runtime: larger ones are refused before they are replayed or queued, so only
  that request fails (UNKNOWN_SERVER_ERROR, Kafka's answer to RecordTooLargeException) and the
  other writes of the partition go on.

A hot standby tails the log into both replicas (:mod:`.loader`), so a takeover only reads the
tail. Becoming leader writes our epoch marker first and loads up to it (:mod:`.fencing`).

A coordinator shard that declares client transactions (``transactions()`` returns its
``TransactionalShard``: TxnOffsetCommit) also gets the marker follower of :mod:`.transactions`
while it leads: the upstream's COMMIT/ABORT markers, read from the partition, are replayed on
this loop like any event.

Every change of :attr:`PartitionRuntime.state` is checked against the one table of
:mod:`.partition_state`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.contract import (
    PENDING,
    CoordinatorOperation,
    CoordinatorResult,
    CoordinatorShard,
    Publication,
    PublishOutcome,
    apply_timer_intents,
    serialize_record,
)
from groupcoord.coordinator.runtime.fencing import Fence
from groupcoord.coordinator.runtime.loader import PartitionLoader
from groupcoord.coordinator.runtime.partition_state import PartitionState, check_transition
from groupcoord.coordinator.runtime.replicas import ShardFactory, ShardReplicas
from groupcoord.coordinator.runtime.skipped_records import SkippedRecords
from groupcoord.coordinator.runtime.statelog import (
    MAX_BATCH_BYTES,
    PartitionReader,
    StateLogWriter,
    estimated_batch_bytes,
)
from groupcoord.coordinator.runtime.timers import LoopTimer, TimerEvent
from groupcoord.coordinator.runtime.transactions import LogTransactions, MarkerFollower, MarkersRead
from groupcoord.coordinator.runtime.write_pipeline import Fenced, Waiter, WritePipeline
from groupcoord.observability.shard_metrics import ShardMetrics

log = logging.getLogger(__name__)


_LOAD_IDS = itertools.count(1)


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class _Request:
    operation: CoordinatorOperation[Any, Any]
    future: asyncio.Future[Any]
    every_replica: bool = False


@dataclass(slots=True)
class _Call:
    """An internal operation on the loop (the post-load hook, a repair)."""

    operation: Callable[[], CoordinatorResult[Any]]
    what: str


def _error(code: ErrorCode, why: str) -> CoordinatorError:
    return CoordinatorError(code, why)


class PartitionRuntime:
    """Leader, standby or nothing for one partition; see the module docstring."""

    def __init__(
        self,
        partition: int,
        *,
        bootstrap: str,
        topic: str,
        writer: StateLogWriter,
        shard_factory: ShardFactory,
        shard_id: str,
        on_failure: Callable[[PartitionRuntime, BaseException], None] | None = None,
        metrics: ShardMetrics | None = None,
        thread: str = "0",
        publisher: Callable[[Publication], Awaitable[PublishOutcome]] | None = None,
    ) -> None:
        self.partition = partition
        self._state = PartitionState.STOPPED
        self.epoch = -1
        self.fence: Fence | None = None
        self.load_time_ms: int | None = None
        self.error: str | None = None
        self.keys_repaired = 0
        self.writes_reverted = 0
        # which load of the process this leadership is (0: none yet); any reload, at any
        # epoch, is a fresh shard and gets a new one
        self.load_id = 0
        self._bootstrap = bootstrap
        self._topic = topic
        self._writer = writer
        self._factory = shard_factory
        self._shard_id = shard_id
        self._on_failure = on_failure
        self._metrics = metrics
        # what the shard's metrics remember of earlier writes (a group's last epoch), kept
        # across loads and reverts like the counts they feed (CoordinatorMetricsShard)
        self._written_seen: dict[Any, Any] = {}
        self._thread = thread
        self._publisher = publisher
        self._queue: asyncio.Queue[tuple[float, object]] = asyncio.Queue()
        self._timer = LoopTimer(self._put, self._publish)
        self._replicas: ShardReplicas | None = None
        self._loader: PartitionLoader | None = None
        self._pipeline: WritePipeline | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._waiting: set[asyncio.Future[Any]] = set()
        self._markers: MarkerFollower | None = None  # while leading a TransactionalShard
        self._stale_keys_seen = 0
        #: records of its log no leader wrote, skipped by its loads and tails (all of them)
        self.skipped_records = SkippedRecords(partition, metrics)

    # --- observation ------------------------------------------------------------------------

    @property
    def state(self) -> PartitionState:
        return self._state

    def _transition_to(self, target: PartitionState) -> None:
        """The one place the state changes, checked against the table (raises on a bug)."""
        self._state = check_transition(self.partition, self._state, target)

    @property
    def shard(self) -> CoordinatorShard | None:
        """The live replica of the coordinator shard (None when stopped)."""
        return self._replicas.live if self._replicas is not None else None

    @property
    def committed_shard(self) -> CoordinatorShard | None:
        """The committed replica: what reads see (None when stopped)."""
        return self._replicas.committed if self._replicas is not None else None

    @property
    def records_read(self) -> int:
        return self._loader.records_read if self._loader is not None else 0

    @property
    def records_loaded(self) -> int:
        return self._loader.records_loaded if self._loader is not None else 0

    @property
    def stale_keys_seen(self) -> int:
        """Fenced writers' records read back behind our own writes (across leaderships)."""
        current = self._pipeline.stale_keys_seen if self._pipeline is not None else 0
        return self._stale_keys_seen + current

    @property
    def lag(self) -> int | None:
        """How far a standby's tail is behind the high watermark (None until known)."""
        reader = self._loader.reader if self._loader is not None else None
        if reader is None or reader.highwater is None:
            return None
        return max(reader.highwater - reader.position, 0)

    @property
    def queue_size(self) -> int:
        return self._queue.qsize()

    # --- submission -------------------------------------------------------------------------

    def _put(self, ev: object) -> None:
        self._queue.put_nowait((time.perf_counter(), ev))

    def submit(
        self, operation: CoordinatorOperation[Any, Any], *, every_replica: bool = False
    ) -> asyncio.Future[Any]:
        """Queue ``operation`` on the loop; the future gets the response or a CoordinatorError
        (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when not active).

        ``every_replica``: news from outside the log that reads must see too (Kafka's
        ``onNewMetadataImage``, which is not snapshotted either): the write operation first
        runs against the committed replica, whose result is dropped (its records reach that
        replica once the live replica's write is acknowledged), then as usual."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.state is PartitionState.ACTIVE:
            needs = operation.needs_markers
            markers = self._markers
            if markers is not None and needs is not None and needs(markers.live):
                request = _Request(operation, fut, every_replica)
                markers.queue_after_markers(lambda: self._queue_if_active(request), fut)
            else:
                self._put(_Request(operation, fut, every_replica))
        elif self.state is PartitionState.LOADING:
            fut.set_exception(
                _error(ErrorCode.coordinator_load_in_progress, f"partition {self.partition} loading")
            )
        else:
            fut.set_exception(_error(ErrorCode.not_coordinator, f"partition {self.partition} not led here"))
        return fut

    # --- leadership -------------------------------------------------------------------------

    async def start_standby(self) -> None:
        """Tail the partition continuously so that a takeover only needs the tail."""
        await self.stop()
        loader = self._fresh_state()
        self._transition_to(PartitionState.STANDBY)
        self._tasks = [asyncio.create_task(self._guard(loader.tail), name=f"standby-{self.partition}")]

    async def become_leader(self, epoch: int) -> None:
        """Write our marker, load up to it, then serve. Raises Fenced if a newer leader
        already wrote its marker before ours."""
        warm = self.state is PartitionState.STANDBY and self._loader is not None
        if warm:
            await self._cancel_tasks()  # keep the replicas, the filter and the reader position
            assert self._loader is not None
            loader = self._loader
        else:
            await self.stop()
            loader = self._fresh_state()
        self._transition_to(PartitionState.LOADING)
        self.epoch = epoch
        self.error = None
        if self._metrics is not None:
            self._metrics.track_fencing(self.partition)
        started = time.monotonic()
        fence = Fence.new(epoch)
        try:
            [(marker_offset, _)] = await self._writer.append(
                self.partition, [fence.marker(self._shard_id)], None
            )
            repair, busy = await loader.load_to(marker_offset + 1)
            if repair and warm:
                # The valid values of keys shadowed by fenced records may lie in the part the
                # standby streamed (and did not keep): find them with a full load instead.
                log.info("partition %d: fenced records seen while standing by: full reload", self.partition)
                await loader.reader.stop()
                loader = self._fresh_state()
                repair, busy = await loader.load_to(marker_offset + 1)
            if loader.filter.current != fence:
                raise Fenced(
                    f"partition {self.partition}: a newer leader ({loader.filter.current}) precedes epoch {epoch}"
                )
        except BaseException as exc:
            await self._fail(exc, notify=False)
            raise
        self.fence = fence
        self.load_time_ms = int((time.monotonic() - started) * 1000)
        if self._metrics is not None:
            self._metrics.record_thread_busy(self._thread, busy)
            self._metrics.observe_partition_load(self.partition, time.monotonic() - started)
        self._pipeline = WritePipeline(
            self.partition,
            writer=self._writer,
            reader=loader.reader,
            replay_filter=loader.filter,
            fence=fence,
            next_offset=marker_offset + 1,
            commit=self._commit,
            replay_live=self._replay_accepted_transaction,
            on_failed=self._write_failed,
            metrics=self._metrics,
        )
        assert self._replicas is not None
        self.load_id = next(_LOAD_IDS)
        self._transition_to(PartitionState.ACTIVE)
        self._tasks = [
            asyncio.create_task(self._loop(), name=f"loop-{self.partition}"),
            asyncio.create_task(self._guard(self._pipeline.run), name=f"writer-{self.partition}"),
        ]
        if self._replicas.live.transactions() is not None:
            markers = self._markers = MarkerFollower(
                self.partition,
                bootstrap=self._bootstrap,
                topic=self._topic,
                replicas=self._replicas,
                pipeline=self._pipeline,
                enqueue=self._put,
                metrics=self._metrics,
            )
            self._tasks.append(
                asyncio.create_task(
                    self._guard(lambda: markers.follow(marker_offset + 1)), name=f"markers-{self.partition}"
                )
            )
        if repair:
            # Log compaction keeps only a key's last record: a fenced writer's stale record
            # after the valid one would make compaction drop the valid value. Rewriting each
            # such key's valid value (or a tombstone) under our fence makes ours the last.
            log.warning(
                "partition %d: rewriting %d key(s) shadowed by fenced records", self.partition, len(repair)
            )
            self._put(_Call(lambda: CoordinatorResult(repair), "repair"))
            self.keys_repaired += len(repair)
        self._after_load()
        log.info(
            "partition %d: leader at epoch %d after loading %d records in %d ms (%s)",
            self.partition,
            epoch,
            self.records_loaded,
            self.load_time_ms,
            "warm" if warm else "cold",
        )

    async def stop(self) -> None:
        """Resign: stop writing at once; everything pending is answered NOT_COORDINATOR."""
        await self._shut_down(PartitionState.STOPPED)

    async def _shut_down(self, target: PartitionState) -> None:
        """Enter ``target`` (stopped, or failed) at once, then take everything down."""
        self._transition_to(target)
        if self._markers is not None:
            self._markers.stop()
            self._markers = None
        await self._cancel_tasks()
        self._abandon(_error(ErrorCode.not_coordinator, f"partition {self.partition} resigned"))
        self._timer.cancel_all()
        self._replicas = None
        self.fence = None
        if self._pipeline is not None:
            self._stale_keys_seen += self._pipeline.stale_keys_seen
            self._pipeline = None
        if self._loader is not None:
            reader = self._loader.reader
            self._loader = None
            await reader.stop()

    # --- internals --------------------------------------------------------------------------

    def _fresh_state(self) -> PartitionLoader:
        self._timer = LoopTimer(self._put, self._publish)
        self._replicas = ShardReplicas(self._factory, self.partition, self._timer)
        reader = PartitionReader(self._bootstrap, self._topic, self.partition, 0)
        if self._replicas.live.transactions() is not None:  # only its shard replays markers
            reader.transactions = LogTransactions()
        self._loader = PartitionLoader(reader, self._replicas, self.skipped_records)
        return self._loader

    def _queue_if_active(self, request: _Request) -> bool:
        """Queue a request that waited for the marker follower, if we still serve."""
        if self.state is not PartitionState.ACTIVE:
            return False
        self._put(request)
        return True

    def _after_load(self) -> None:
        """Queue the shard's post-load hook (re-arm timers, recheck metadata) on the loop."""
        assert self._replicas is not None
        on_loaded = self._replicas.live.on_loaded
        self._put(_Call(lambda: on_loaded(now_ms()), "load hook"))

    async def _cancel_tasks(self) -> None:
        tasks, self._tasks = self._tasks, []
        current = asyncio.current_task()
        for t in tasks:
            if t is not current:
                t.cancel()
        for t in tasks:
            if t is not current:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t

    def _abandon(self, error: CoordinatorError) -> None:
        waiters = self._pipeline.abandon() if self._pipeline is not None else []
        self._fail_waiters(waiters, error)
        while not self._queue.empty():
            _, ev = self._queue.get_nowait()
            if isinstance(ev, _Request) and not ev.future.done():
                ev.future.set_exception(error)

    def _fail_waiters(self, waiters: list[Waiter], error: CoordinatorError) -> None:
        """Fail the given callers and every request waiting for a delayed response (whose
        tokens the live replica holds: they do not survive a stop or a revert)."""
        for fut, _ in waiters:
            if not fut.done():
                fut.set_exception(error)
        for fut in list(self._waiting):
            if not fut.done():
                fut.set_exception(error)
        self._waiting.clear()

    async def _guard(self, job: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run a partition task; its failure fails the partition."""
        try:
            await job()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._fail(exc)

    async def _fail(self, exc: BaseException, notify: bool = True) -> None:
        if self.state in (PartitionState.STOPPED, PartitionState.FAILED):
            # Already down (resigned, or failed by another task first): nothing left to fail.
            log.info("partition %d: %s after it stopped: %s", self.partition, type(exc).__name__, exc)
            return
        fenced = isinstance(exc, Fenced)
        log.warning("partition %d: %s: %s", self.partition, "fenced" if fenced else "failed", exc)
        if fenced and self._metrics is not None:
            self._metrics.record_partition_fenced(self.partition)
        # Tell the owner before the first await, so that whoever learns of the failure (a
        # caller answered NOT_COORDINATOR) finds the retry already scheduled.
        if notify and self._on_failure is not None and not isinstance(exc, asyncio.CancelledError):
            self._on_failure(self, exc)
        await self._shut_down(PartitionState.STOPPED if fenced else PartitionState.FAILED)
        self.error = f"{type(exc).__name__}: {exc}"

    def _commit(self, records: list[Any]) -> None:
        assert self._replicas is not None
        self._replicas.commit(records)

    def _replay_accepted_transaction(self, records: list[Any]) -> None:
        """The upstream accepted a transactional write: its records reach the live replica
        now, and the marker follower (asleep while no transaction is open) reads on for the
        marker that will follow them."""
        assert self._replicas is not None
        self._replicas.replay_live(records)
        if self._markers is not None:
            self._markers.transaction_written()

    def _write_failed(self, exc: BaseException, waiters: list[Waiter]) -> None:
        """A write failed: back to the committed state, without a reload (see .replicas)."""
        assert self._replicas is not None
        log.warning("partition %d: write failed, reverting to the committed state: %s", self.partition, exc)
        try:
            self._replicas.revert()
        except Exception as copy_error:  # noqa: BLE001 - cannot copy the state: reload it
            log.exception("partition %d: cannot revert", self.partition)
            self._fail_waiters(waiters, _error(ErrorCode.not_coordinator, "partition failed"))
            asyncio.get_running_loop().create_task(self._fail(copy_error))
            return
        self.writes_reverted += 1
        pipeline = self._pipeline
        if pipeline is not None and pipeline.orphaned:
            # Markers that were to be committed after the failed writes are in the log anyway.
            orphans, pipeline.orphaned = pipeline.orphaned, []
            self._replicas.replay_live(orphans)
            self._replicas.commit(orphans)
        self._fail_waiters(waiters, _error(ErrorCode.not_coordinator, f"write failed: {exc}"))
        self._timer.cancel_all()  # armed for writes that never counted; on_loaded re-arms from the state
        self._after_load()  # re-arms timers and restates what the markers applied

    async def _loop(self) -> None:
        assert self._pipeline is not None
        pipeline = self._pipeline
        while True:
            self._run(await self._queue.get())
            while not self._queue.empty():
                self._run(self._queue.get_nowait())
            pipeline.flush()
            await asyncio.sleep(0)  # let the writer and the network run between bursts

    def _run(self, item: tuple[float, object]) -> None:
        enqueued, ev = item
        if self._metrics is None:
            self._handle(ev)
            return
        started = time.perf_counter()
        self._handle(ev)
        self._metrics.observe_event(
            started - enqueued, time.perf_counter() - started, partition=self.partition, thread=self._thread
        )

    def _handle(self, ev: object) -> None:
        replicas = self._replicas
        assert replicas is not None
        if isinstance(ev, _Request):
            if ev.future.done():
                return
            op = ev.operation
            try:
                if op.read_only:
                    ev.future.set_result(self._read(op, replicas.committed, ev.future))
                    return
                if ev.every_replica:
                    op.run(replicas.committed, now_ms(), None)
                result = op.run(replicas.live, now_ms(), ev.future)
            except CoordinatorError as exc:
                ev.future.set_exception(exc)
                return
            except Exception as exc:
                log.exception("partition %d: %s failed", self.partition, op.name)
                ev.future.set_exception(exc)
                return
            self._apply(result, ev.future)
        elif isinstance(ev, TimerEvent):
            operation = self._timer.take(ev)
            if operation is not None:
                self._run_internal(operation, f"timer {ev.key}", by_timer=True)
        elif isinstance(ev, _Call):
            self._run_internal(ev.operation, ev.what)
        elif isinstance(ev, MarkersRead):
            markers = self._markers
            assert markers is not None  # a stop() empties the queue with the follower
            markers.replay(ev.records)
            after_markers = markers.live.after_markers
            self._run_internal(lambda: after_markers(now_ms()), "after markers")

    def _read(self, op: CoordinatorOperation[Any, Any], committed: CoordinatorShard, token: Any) -> Any:
        result = op.run(committed, now_ms(), token)
        if result.records or result.timers or result.completions or result.response is PENDING:
            # A read runs on the committed replica: effects there would be lost or misapplied.
            raise RuntimeError(f"read-only operation {op.name} returned records, timers or completions")
        return result.response

    async def _publish(self, publication: Publication) -> PublishOutcome:
        """A shard's :class:`~groupcoord.coordinator.core.contract.Publish`: once everything
        written so far is acknowledged (the state that made it due, so a failover finds it
        due), write it with the worker's publisher. A failed state write raises here (the
        revert, or the next leader, resumes from the state)."""
        pipeline = self._pipeline
        w = pipeline.newest_unconfirmed if pipeline is not None else None
        if w is not None:
            written: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            w.waiters.append((written, None))
            await written
        if self._publisher is None:
            return PublishOutcome(0, error="this coordinator process writes no publications")
        return await self._publisher(publication)

    def _run_internal(
        self, op: Callable[[], CoordinatorResult[Any]], what: str, *, by_timer: bool = False
    ) -> None:
        try:
            result = op()
        except Exception:
            log.exception("partition %d: %s failed", self.partition, what)
            return
        self._apply(result, None, by_timer=by_timer)

    def _apply(
        self, result: CoordinatorResult[Any], fut: asyncio.Future[Any] | None, *, by_timer: bool = False
    ) -> None:
        records = result.records
        entries = [serialize_record(r) for r in records]
        if entries and (size := estimated_batch_bytes(entries)) > MAX_BATCH_BYTES:
            self._refuse_too_large(result, fut, size)
            return
        pipeline = self._pipeline
        assert pipeline is not None and self._replicas is not None
        transaction = result.transaction
        if transaction is not None and pipeline.writing_for(transaction.producer_id):
            if fut is not None:  # its sequence would follow a batch not yet accepted: retry
                fut.set_exception(
                    _error(ErrorCode.concurrent_transactions, "the producer's previous batch is being written")
                )
            return
        if result.timers:
            apply_timer_intents(self._timer, result.timers)
        if fut is not None and result.response is PENDING:
            # Answered later by a completion in some other result; until then it waits here.
            self._waiting.add(fut)
            fut.add_done_callback(self._waiting.discard)
            fut = None
        waiters = _completion_pairs(result.completions)
        if fut is not None:
            waiters.append((fut, result.response))
        if not records:
            w = pipeline.newest_unconfirmed
            if w is None:
                for f, response in waiters:
                    if not f.done():
                        f.set_result(response)
            else:
                w.waiters.extend(waiters)
            return
        if self._metrics is not None:  # before the live replay: counted once, as written
            try:
                self._replicas.live.metrics().observe_written(
                    self.partition, records, self._metrics, self._written_seen, by_timer=by_timer
                )
            except Exception:  # a metrics bug loses a count, never the write or its answer
                log.exception("partition %d: metrics of written records failed", self.partition)
        try:
            if transaction is None:  # a transactional write's, once the upstream accepted them
                self._replicas.replay_live(records)
        except Exception as exc:  # a shard bug; the live replica may be half-applied
            log.exception("partition %d: replay of live records failed", self.partition)
            if fut is not None:
                fut.set_exception(_error(ErrorCode.not_coordinator, "partition failed"))
            asyncio.get_running_loop().create_task(self._fail(exc))
            return
        pipeline.add(records, entries, waiters, transaction)


    def _refuse_too_large(self, result: CoordinatorResult[Any], fut: asyncio.Future[Any] | None, size: int) -> None:
        """Kafka's runtime throws RecordTooLargeException for an operation whose records exceed
        a batch, and answers it UNKNOWN_SERVER_ERROR; nothing of it was replayed, so the state
        is unchanged. The requests its write would have answered fail with it."""
        log.error(
            "partition %d: refused a write of %d record(s), %d bytes: over the %d bytes of one batch",
            self.partition,
            len(result.records),
            size,
            MAX_BATCH_BYTES,
        )
        error = _error(
            ErrorCode.unknown_server_error,
            f"the records of this request ({size} bytes) exceed the state topic's batch of {MAX_BATCH_BYTES} bytes",
        )
        waiters = _completion_pairs(result.completions)
        if fut is not None:
            waiters.append((fut, None))
        for f, _ in waiters:
            if not f.done():
                f.set_exception(error)


def _completion_pairs(completions: Any) -> list[Waiter]:
    """Responses to *other* waiting requests (answers of requests a handler parked as PENDING).

    A completion is a pair (token, response); the token is the future the runtime passed to the
    handler that answered PENDING. Released with this result's write; foreign tokens are ignored.
    """
    return [(t, r) for t, r in completions if isinstance(t, asyncio.Future)]
