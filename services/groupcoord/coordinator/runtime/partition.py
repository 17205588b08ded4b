"""One state-topic partition hosted by a shard: a single-writer event loop over a core.

Every request, timer and load hook of a partition runs on one task (the partition's loop), in
arrival order, against one :class:`~groupcoord.coordinator.core.contract.CoordinatorShard`. A handler's
records are replayed into the live state at once (so the next request sees them, as in
Kafka's coordinator runtime) and queued for the log; the response is released only after
the write is acknowledged (acks=all) *and confirmed* (see below). While one write is in
flight, the records of every request handled meanwhile accumulate into the next write, so a
busy partition writes in batches without any linger delay.

* A write operation that produces no records still waits for the newest unconfirmed write
  (its answer may depend on state that write created).
* A read-only operation never waits on writes. The contract has no snapshots, so it reads the
  live state, including records whose write is still in flight; if such a write later fails,
  the partition fails and is reloaded from the log (never keeps serving a diverged state).

Confirmation (the writer half of :mod:`.fencing`): a write counts only if no marker of a newer
leader precedes it. The produce response gives each batch's offsets; if a batch starts right
after the end of our previous write (or our marker), nothing foreign lies between and it is
confirmed immediately. Otherwise the loop reads the gap back; a superseding marker there means
we were deposed: the write's callers get NOT_COORDINATOR and the partition stops writing.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import gc
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from groupcoord.common.errors import CoordinatorError, ErrorCode
from groupcoord.coordinator.core.contract import (
    PENDING,
    CoordinatorOperation,
    CoordinatorResult,
    CoordinatorShard,
    Timer,
    apply_timer_intents,
    deserialize_record,
    serialize_record,
)
from groupcoord.coordinator.runtime.fencing import (
    FENCE_HEADER,
    MARKER_PREFIX,
    Fence,
    ReplayFilter,
    is_marker,
    parse_marker,
)
from groupcoord.coordinator.runtime.record_metrics import RecordCounter
from groupcoord.coordinator.runtime.statelog import (
    Entry,
    PartitionReader,
    RecordDecoder,
    StateLogWriter,
    fence_tag,
)
from groupcoord.observability.shard_metrics import ShardMetrics

log = logging.getLogger(__name__)

ShardFactory = Callable[[int, Timer], CoordinatorShard]
"""Builds the core for a partition: ``factory(partition, timer)``."""


class PartitionState(enum.Enum):
    STOPPED = "stopped"
    STANDBY = "standby"
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"


class Fenced(Exception):
    """A newer leader's marker precedes our write: this shard is no longer the writer."""


class NeedsRepair(Exception):
    """A fenced writer's records landed after our marker; a reload rewrites their keys."""


def now_ms() -> int:
    return int(time.time() * 1000)


class LoopTimer:
    """The :class:`~groupcoord.coordinator.core.contract.Timer` of one partition.

    Expiry only enqueues an event; the operation runs on the partition's loop like a request,
    so it never races a handler. A token per schedule makes a replaced or cancelled timer whose
    callback was already queued a no-op.
    """

    def __init__(self, enqueue: Callable[[object], None]) -> None:
        self._enqueue = enqueue
        self._timers: dict[str, tuple[object, asyncio.TimerHandle, Callable[[], CoordinatorResult[Any]]]] = {}

    def schedule(self, key: str, delay_ms: int, operation: Callable[[], CoordinatorResult[Any]]) -> None:
        self.cancel(key)
        token = object()
        handle = asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, self._expired, key, token)
        self._timers[key] = (token, handle, operation)

    def cancel(self, key: str) -> None:
        entry = self._timers.pop(key, None)
        if entry is not None:
            entry[1].cancel()

    def is_scheduled(self, key: str) -> bool:
        return key in self._timers

    def cancel_all(self) -> None:
        for _, handle, _ in self._timers.values():
            handle.cancel()
        self._timers.clear()

    def __len__(self) -> int:
        return len(self._timers)

    def _expired(self, key: str, token: object) -> None:
        self._enqueue(_TimerEvent(key, token))

    def take(self, key: str, token: object) -> Callable[[], CoordinatorResult[Any]] | None:
        """The operation of a fired timer if it is still the live one (and forget it)."""
        entry = self._timers.get(key)
        if entry is None or entry[0] is not token:
            return None
        del self._timers[key]
        return entry[2]


@dataclass(slots=True)
class _Request:
    operation: CoordinatorOperation[Any, Any]
    future: asyncio.Future[Any]


@dataclass(slots=True)
class _TimerEvent:
    key: str
    token: object


@dataclass(slots=True)
class _Call:
    """An internal operation on the loop (the post-load hook)."""

    operation: Callable[[], CoordinatorResult[Any]]


@dataclass(slots=True)
class _Write:
    entries: list[Entry] = field(default_factory=list)
    waiters: list[tuple[asyncio.Future[Any], Any]] = field(default_factory=list)


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
    ) -> None:
        self.partition = partition
        self.state = PartitionState.STOPPED
        self.epoch = -1
        self.fence: Fence | None = None
        self.shard: CoordinatorShard | None = None
        self.load_time_ms: int | None = None
        self.records_loaded = 0
        self.records_read = 0
        self.error: str | None = None
        self.stale_keys_seen = 0
        self.keys_repaired = 0
        self._stale_keys: set[bytes] = set()
        self._repair_needed = False
        self._bootstrap = bootstrap
        self._topic = topic
        self._writer = writer
        self._factory = shard_factory
        self._shard_id = shard_id
        self._on_failure = on_failure
        self._metrics = metrics
        self._record_counter = RecordCounter()
        self._thread = thread
        self._queue: asyncio.Queue[tuple[float, object]] = asyncio.Queue()
        self._timer = LoopTimer(self._put)
        self._filter = ReplayFilter()
        self._reader: PartitionReader | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._open: _Write | None = None
        self._inflight: _Write | None = None
        self._newest_unconfirmed: _Write | None = None
        self._write_ready = asyncio.Event()
        self._next_expected = 0
        self._waiting: set[asyncio.Future[Any]] = set()

    # --- submission -------------------------------------------------------------------------

    def _put(self, ev: object) -> None:
        self._queue.put_nowait((time.perf_counter(), ev))

    @property
    def lag(self) -> int | None:
        """How far a standby's tail is behind the high watermark (None until known)."""
        reader = self._reader
        if reader is None or reader.highwater is None:
            return None
        return max(reader.highwater - reader.position, 0)

    @property
    def queue_size(self) -> int:
        return self._queue.qsize()

    def submit(self, operation: CoordinatorOperation[Any, Any]) -> asyncio.Future[Any]:
        """Queue ``operation`` on the loop; the future gets the response or a CoordinatorError
        (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when not active)."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.state is PartitionState.ACTIVE:
            self._put(_Request(operation, fut))
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
        self._fresh_state()
        self.state = PartitionState.STANDBY
        self._reader = PartitionReader(self._bootstrap, self._topic, self.partition, 0)
        self._tasks = [asyncio.create_task(self._tail(), name=f"standby-{self.partition}")]

    async def become_leader(self, epoch: int) -> None:
        """Write our marker, load up to it, then serve. Raises Fenced if a newer leader
        already wrote its marker before ours."""
        warm = self.state is PartitionState.STANDBY and self._reader is not None
        if warm:
            await self._cancel_tasks()  # keep shard, filter and reader position
        else:
            await self.stop()
            self._fresh_state()
            self._reader = PartitionReader(self._bootstrap, self._topic, self.partition, 0)
        self.state = PartitionState.LOADING
        self.epoch = epoch
        self.error = None
        self._repair_needed = False
        started = time.monotonic()
        fence = Fence.new(epoch)
        try:
            [(marker_offset, _)] = await self._writer.append(
                self.partition, [fence.marker(self._shard_id)], None
            )
            repair = await self._load_to(marker_offset)
            if repair and warm:
                # The valid values of keys shadowed by fenced records may lie in the part the
                # standby streamed (and did not keep): find them with a full load instead.
                log.info("partition %d: fenced records seen while standing by: full reload", self.partition)
                await self._reader.stop()
                self._fresh_state()
                self._reader = PartitionReader(self._bootstrap, self._topic, self.partition, 0)
                repair = await self._load_to(marker_offset)
            if self._filter.current != fence:
                raise Fenced(
                    f"partition {self.partition}: a newer leader ({self._filter.current}) precedes epoch {epoch}"
                )
        except BaseException as exc:
            await self._fail(exc, notify=False)
            raise
        self.fence = fence
        self._next_expected = marker_offset + 1
        self.load_time_ms = int((time.monotonic() - started) * 1000)
        if self._metrics is not None:
            self._metrics.observe_partition_load(self.partition, time.monotonic() - started)
        self.state = PartitionState.ACTIVE
        self._tasks = [
            asyncio.create_task(self._loop(), name=f"loop-{self.partition}"),
            asyncio.create_task(self._write_loop(), name=f"writer-{self.partition}"),
        ]
        if repair:
            # Log compaction keeps only a key's last record: a fenced writer's stale record
            # after the valid one would make compaction drop the valid value. Rewriting each
            # such key's valid value (or a tombstone) under our fence makes ours the last.
            decode = RecordDecoder()
            records = [decode(k, v) for k, v in repair]
            log.warning(
                "partition %d: rewriting %d key(s) shadowed by fenced records", self.partition, len(records)
            )
            self._put(_Call(lambda: CoordinatorResult(records)))
            self.keys_repaired += len(records)
        on_loaded = getattr(self.shard, "on_loaded", None)
        if on_loaded is not None:
            self._put(_Call(lambda: on_loaded(now_ms())))
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
        self.state = PartitionState.STOPPED
        await self._cancel_tasks()
        self._abandon(_error(ErrorCode.not_coordinator, f"partition {self.partition} resigned"))
        self._timer.cancel_all()
        self.shard = None
        self.fence = None
        if self._reader is not None:
            reader, self._reader = self._reader, None
            await reader.stop()

    # --- internals --------------------------------------------------------------------------

    def _fresh_state(self) -> None:
        self._timer = LoopTimer(self._put)
        self._filter = ReplayFilter()
        self._stale_keys = set()
        self.shard = self._factory(self.partition, self._timer)
        self.records_loaded = 0
        self.records_read = 0

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
        for w in (self._inflight, self._open):
            if w is not None:
                for fut, _ in w.waiters:
                    if not fut.done():
                        fut.set_exception(error)
        self._inflight = self._open = self._newest_unconfirmed = None
        for fut in list(self._waiting):
            if not fut.done():
                fut.set_exception(error)
        self._waiting.clear()
        while not self._queue.empty():
            _, ev = self._queue.get_nowait()
            if isinstance(ev, _Request) and not ev.future.done():
                ev.future.set_exception(error)

    async def _fail(self, exc: BaseException, notify: bool = True) -> None:
        fenced = isinstance(exc, Fenced)
        log.warning("partition %d: %s: %s", self.partition, "fenced" if fenced else "failed", exc)
        # Tell the owner before the first await, so that whoever learns of the failure (a
        # caller answered NOT_COORDINATOR) finds the retry already scheduled.
        if notify and self._on_failure is not None and not isinstance(exc, asyncio.CancelledError):
            self._on_failure(self, exc)
        await self.stop()
        self.state = PartitionState.STOPPED if fenced else PartitionState.FAILED
        self.error = f"{type(exc).__name__}: {exc}"

    async def _load_to(self, marker_offset: int) -> list[tuple[bytes, bytes | None]]:
        """Load through our marker; returns the (key, valid value) pairs to rewrite (keys whose
        last record is a fenced writer's, see :mod:`.fencing`)."""
        assert self._reader is not None
        latest: dict[bytes, bytes | None] = {}
        busy = 0.0
        with _gc_paused():
            async for chunk in self._reader.chunks_until(marker_offset + 1):
                t0 = time.perf_counter()
                self._compact_into(latest, chunk)
                busy += time.perf_counter() - t0
            t0 = time.perf_counter()
            self._replay_latest(latest)
            busy += time.perf_counter() - t0
        if self._metrics is not None:
            self._metrics.record_thread_busy(self._thread, busy)
        repair = [(k, latest.get(k)) for k in self._stale_keys]
        self._stale_keys = set()
        return repair

    def _compact_into(self, latest: dict[bytes, bytes | None], chunk: list[Any]) -> None:
        """Loading: filter records by fence in log order and keep the last value per key.

        The state topic is compacted, so the cores' records are compaction-safe by design:
        replaying only each key's last valid record, in the order of those last occurrences,
        gives the state a fully compacted log gives. A log that was never compacted (tansu
        never compacts) then costs a dict update per superseded record instead of a protobuf
        parse and a replay. Stale (fenced) records are dropped before they can shadow a key.
        """
        filt = self._filter
        pop = latest.pop
        stale = self._stale_keys
        n = 0
        for e in chunk:
            key = e.key
            n += 1
            if key is None:
                continue
            if key[:2] == MARKER_PREFIX:
                if e.value is not None:
                    filt.see_marker(parse_marker(e.value))
                continue
            headers = e.headers
            tag = headers[0][1] if headers and headers[0][0] == FENCE_HEADER else fence_tag(headers)
            if tag == filt.current_tag or filt.admits(tag):
                pop(key, None)
                latest[key] = e.value
                if stale:
                    stale.discard(key)  # only a stale *last* record needs a repair
            else:
                stale.add(key)
        self.records_read += n

    def _replay_latest(self, latest: dict[bytes, bytes | None]) -> None:
        """Replay the loaded records. A shard may offer ``replay_serialized(key, value)`` to
        take state-topic bytes as they are (and decode lazily): decoding two protobufs per
        record is most of a load's cost in Python (see bench/takeover.py)."""
        shard = self.shard
        assert shard is not None
        raw = getattr(shard, "replay_serialized", None)
        if raw is not None:
            for key, value in latest.items():
                raw(key, value)
        else:
            replay, decode = shard.replay, RecordDecoder()
            for key, value in latest.items():
                replay(decode(key, value))
        self.records_loaded += len(latest)

    def _replay(self, chunk: list[Any]) -> None:
        shard, filt = self.shard, self._filter
        assert shard is not None
        raw = getattr(shard, "replay_serialized", None)
        replay = shard.replay
        stale = self._stale_keys
        n = 0
        self.records_read += len(chunk)
        for e in chunk:
            key = e.key
            if key is None:
                continue
            if is_marker(key):
                if e.value is not None:
                    filt.see_marker(parse_marker(e.value))
            elif filt.admits(fence_tag(e.headers)):
                if raw is not None:
                    raw(key, e.value)
                else:
                    replay(deserialize_record(key, e.value))
                n += 1
                if stale:
                    stale.discard(key)
            else:
                stale.add(key)
        self.records_loaded += n

    async def _tail(self) -> None:
        assert self._reader is not None
        try:
            while True:
                chunk = await self._reader.read(timeout_ms=500)
                if len(chunk) > 10_000:  # catching up: same GC reasoning as a load
                    with _gc_paused():
                        self._replay(chunk)
                else:
                    self._replay(chunk)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._fail(exc)

    async def _loop(self) -> None:
        while True:
            self._run(await self._queue.get())
            while not self._queue.empty():
                self._run(self._queue.get_nowait())
            if self._open is not None:
                self._write_ready.set()
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
        shard = self.shard
        assert shard is not None
        if isinstance(ev, _Request):
            if ev.future.done():
                return
            op = ev.operation
            try:
                result = op.run(shard, now_ms(), ev.future)
            except CoordinatorError as exc:
                ev.future.set_exception(exc)
                return
            except Exception as exc:
                log.exception("partition %d: %s failed", self.partition, op.name)
                ev.future.set_exception(exc)
                return
            self._apply(result, ev.future, op.read_only)
        elif isinstance(ev, _TimerEvent):
            op = self._timer.take(ev.key, ev.token)
            if op is not None:
                self._run_internal(op, f"timer {ev.key}")
        elif isinstance(ev, _Call):
            self._run_internal(ev.operation, "load hook")

    def _run_internal(self, op: Callable[[], CoordinatorResult[Any]], what: str) -> None:
        try:
            result = op()
        except Exception:
            log.exception("partition %d: %s failed", self.partition, what)
            return
        self._apply(result, None, False)

    def _apply(
        self, result: CoordinatorResult[Any], fut: asyncio.Future[Any] | None, read_only: bool
    ) -> None:
        if result.timers:
            apply_timer_intents(self._timer, result.timers)
        records = result.records
        completions = result.completions
        if fut is not None and result.response is PENDING:
            # Answered later by a completion in some other result; until then it waits here.
            self._waiting.add(fut)
            fut.add_done_callback(self._waiting.discard)
            fut = None
        if not records:
            if read_only or self._newest_unconfirmed is None:
                if fut is not None:
                    fut.set_result(result.response)
                self._complete_now(completions)
            else:
                w = self._newest_unconfirmed
                if fut is not None:
                    w.waiters.append((fut, result.response))
                self._complete_later(w, completions)
            return
        entries = [serialize_record(r) for r in records]
        if self._metrics is not None:
            self._record_counter.observe(self._metrics, self.partition, records)
        assert self.shard is not None
        try:
            for r in records:
                self.shard.replay(r)
        except Exception as exc:  # live state may be half-applied: only a reload can fix it
            log.exception("partition %d: replay of live records failed", self.partition)
            if fut is not None:
                fut.set_exception(_error(ErrorCode.not_coordinator, "partition failed"))
            asyncio.get_running_loop().create_task(self._fail(exc))
            return
        w = self._open
        if w is None:
            w = self._open = _Write()
        w.entries.extend(entries)
        if fut is not None:
            w.waiters.append((fut, result.response))
        self._complete_later(w, completions)
        self._newest_unconfirmed = w

    @staticmethod
    def _complete_now(completions: Any) -> None:
        for fut, response in _completion_pairs(completions):
            if not fut.done():
                fut.set_result(response)

    @staticmethod
    def _complete_later(w: _Write, completions: Any) -> None:
        w.waiters.extend(_completion_pairs(completions))

    async def _write_loop(self) -> None:
        assert self.fence is not None
        tag = self.fence.tag()
        try:
            while True:
                await self._write_ready.wait()
                self._write_ready.clear()
                w, self._open = self._open, None
                if w is None:
                    continue
                self._inflight = w
                write_started = time.perf_counter()
                spans = await self._writer.append(self.partition, w.entries, tag)
                for first, last in spans:
                    await self._confirm(first, last)
                if self._metrics is not None:
                    self._metrics.observe_state_write(
                        self.partition, time.perf_counter() - write_started, len(w.entries)
                    )
                self._inflight = None
                if self._newest_unconfirmed is w:
                    self._newest_unconfirmed = None
                for fut, response in w.waiters:
                    if not fut.done():
                        fut.set_result(response)
                if self._repair_needed:
                    raise NeedsRepair(
                        f"partition {self.partition}: a fenced writer's records follow our marker"
                    )
                if self._open is not None:
                    self._write_ready.set()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._fail(exc)

    async def _confirm(self, first: int, last: int) -> None:
        """Raise Fenced if a newer leader's marker lies between our previous write and this one."""
        if first < self._next_expected:
            raise RuntimeError(
                f"partition {self.partition}: write acked at {first}, expected >= {self._next_expected}"
            )
        if first > self._next_expected:
            reader = self._reader
            assert reader is not None and self.fence is not None
            reader.seek(self._next_expected)
            async for chunk in reader.chunks_until(first):
                for e in chunk:
                    if is_marker(e.key):
                        if e.value is not None:
                            self._filter.see_marker(parse_marker(e.value))
                            if self._filter.supersedes(self.fence):
                                raise Fenced(
                                    f"partition {self.partition}: marker {self._filter.current} at {e.offset}"
                                )
                    elif not self._filter.admits(fence_tag(e.headers)):
                        self.stale_keys_seen += 1
                        self._repair_needed = True
        self._next_expected = last + 1


_loads_in_progress = 0


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while loading (per process, across concurrent loads).

    A load creates millions of objects that all survive; each generation-2 collection would
    rescan all of them, which measured here made loading 1M records ~3x slower. The state
    topic's objects are acyclic, so reference counting still frees superseded ones. When the
    last load finishes, the survivors are frozen into the permanent generation so later
    collections on the serving loop do not rescan them either (``gc.freeze``).
    """
    global _loads_in_progress
    if _loads_in_progress == 0:
        gc.disable()
    _loads_in_progress += 1
    try:
        yield
    finally:
        _loads_in_progress -= 1
        if _loads_in_progress == 0:
            gc.freeze()
            gc.enable()


def _completion_pairs(completions: Any) -> list[tuple[asyncio.Future[Any], Any]]:
    """Responses to *other* waiting requests (delayed classic JoinGroup/SyncGroup answers).

    A completion is a pair (token, response); the token is the future the runtime passed to the
    handler that answered PENDING. Released with this result's write; foreign tokens are ignored.
    """
    return [(t, r) for t, r in completions if isinstance(t, asyncio.Future)]
