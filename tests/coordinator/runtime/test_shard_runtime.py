"""The worker runtime against a real broker: writes, committed reads, loads, takeovers, fencing.

Each test uses its own state topic. The hosted coordinator shard is the register shard (a real
one with its own records, :mod:`register_shard`), so these tests do not depend on the group
coordinator.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
from aiokafka import AIOKafkaProducer
from kio.schema.errors import ErrorCode
from prometheus_client import CollectorRegistry
from register_pb2 import RegisterGetRequest, RegisterKey, RegisterPutRequest, RegisterValue
from register_shard import OPERATIONS, RegisterShard

from groupcoord.common.errors import CoordinatorError
from groupcoord.common.records import LEADER_EPOCH_TYPE_ID
from groupcoord.coordinator.core.contract import CoordinatorRecord, deserialize_record, serialize_record
from groupcoord.coordinator.runtime import write_pipeline
from groupcoord.coordinator.runtime.fencing import ReplayFilter, fence_tag, parse_marker
from groupcoord.coordinator.runtime.partition_state import PartitionState
from groupcoord.coordinator.runtime.replicas import ShardFactory
from groupcoord.coordinator.runtime.statelog import PartitionReader, StateLogWriter, ensure_topic
from groupcoord.coordinator.runtime.worker_runtime import WorkerRuntime
from groupcoord.coordinator.runtime.write_pipeline import Fenced
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.observability.shard_metrics import ShardMetrics

pytestmark = pytest.mark.broker

P = 0  # every test works on partition 0 of its own topic


def submit(rt: WorkerRuntime, api: str, request: object) -> asyncio.Future[object]:
    """The register service's ``api`` on partition P, as the gRPC dispatcher submits it."""
    return rt.submit(P, OPERATIONS[api](request))


async def call(rt: WorkerRuntime, api: str, request: object) -> object:
    return await submit(rt, api, request)


def put(name: str, value: int, **kw: object) -> RegisterPutRequest:
    return RegisterPutRequest(name=name, value=value, **kw)


class CountingWriter(StateLogWriter):
    """The real writer, counting produce calls (to show that concurrent requests share one)."""

    def __init__(self, *a: object, **kw: object) -> None:
        super().__init__(*a, **kw)  # type: ignore[arg-type]
        self.appends = 0

    async def append(self, partition, entries, tag):  # type: ignore[no-untyped-def]
        self.appends += 1
        return await super().append(partition, entries, tag)


@pytest.fixture
async def topic(broker: EmbeddedBroker) -> str:
    name = f"state-{uuid.uuid4().hex[:8]}"
    await ensure_topic(broker.bootstrap, name, 2)
    return name


@pytest.fixture
async def runtimes(broker: EmbeddedBroker, topic: str) -> AsyncIterator[Callable[..., WorkerRuntime]]:
    """Factory of started runtimes ("shards") on the test's topic; all closed at the end."""
    made: list[WorkerRuntime] = []

    def make(
        shard_id: str, factory: ShardFactory = RegisterShard, metrics: ShardMetrics | None = None
    ) -> WorkerRuntime:
        rt = WorkerRuntime(
            bootstrap=broker.bootstrap,
            topic=topic,
            partitions=2,
            shard_factory=factory,
            shard_id=shard_id,
            writer=CountingWriter(broker.bootstrap, topic),
            metrics=metrics,
        )
        made.append(rt)
        return rt

    yield make
    for rt in made:
        await rt.close()


async def started(
    make: Callable[..., WorkerRuntime],
    shard_id: str,
    factory: ShardFactory = RegisterShard,
    metrics: ShardMetrics | None = None,
) -> WorkerRuntime:
    rt = make(shard_id, factory, metrics)
    await rt.start()
    return rt


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    """A metric sample as a scrape shows it (None: no such series)."""
    return registry.get_sample_value(name, labels)


def registers(rt: WorkerRuntime) -> dict[str, int]:
    part = rt.partition(P)
    assert part is not None and isinstance(part.shard, RegisterShard)
    return dict(part.shard.values)


async def test_acknowledged_writes_survive_a_takeover_and_concurrent_requests_share_a_write(runtimes) -> None:
    a = await started(runtimes, "a")
    await a.become_leader(P, 1)
    writes_before = a.writer.appends
    results = await asyncio.gather(*(call(a, "put", put(f"r{i}", i)) for i in range(200)))
    assert [r.previous for r in results] == [0] * 200
    # 200 requests submitted together are handled in one loop turn: one produce request.
    assert a.writer.appends - writes_before == 1
    await call(a, "put", put("r0", 42))

    b = await started(runtimes, "b")
    await b.become_leader(P, 2)
    assert registers(b) == {**{f"r{i}": i for i in range(200)}, "r0": 42}
    assert (await call(b, "get", RegisterGetRequest(name="r0"))).value == 42
    # Two markers and 201 records were read; r0's first value was superseded in memory (the
    # loader compacts like the broker would) so 200 records were replayed.
    assert (b.partition(P).records_read, b.partition(P).records_loaded) == (203, 200)


async def test_a_write_larger_than_one_batch_is_split_and_confirmed(runtimes) -> None:
    a = await started(runtimes, "a")
    await a.become_leader(P, 1)
    pad = b"x" * 100_000  # 30 x 100 kB in one write: several produce batches
    await asyncio.gather(*(call(a, "put", put(f"big{i}", i, padding=pad)) for i in range(30)))
    b = await started(runtimes, "b")
    await b.become_leader(P, 2)
    assert registers(b) == {f"big{i}": i for i in range(30)}


async def test_a_record_over_the_batch_size_fails_only_its_own_request(runtimes) -> None:
    """Kafka's runtime refuses an operation whose records exceed one batch
    (RecordTooLargeException, answered UNKNOWN_SERVER_ERROR) before it is appended; the writes
    queued with it on the partition are untouched (they all got NOT_COORDINATOR before)."""
    a = await started(runtimes, "a")
    await a.become_leader(P, 1)
    before = [submit(a, "put", put(f"ok{i}", i)) for i in range(10)]
    huge = submit(a, "put", put("huge", 1, padding=b"x" * (1 << 20)))
    after = [submit(a, "put", put(f"late{i}", i)) for i in range(10)]
    results = await asyncio.gather(*before, huge, *after, return_exceptions=True)
    error = results[10]
    assert isinstance(error, CoordinatorError) and error.code is ErrorCode.unknown_server_error
    assert not any(isinstance(r, BaseException) for r in results[:10] + results[11:])
    part = a.partition(P)
    assert part.writes_reverted == 0 and part.state is PartitionState.ACTIVE
    expected = {**{f"ok{i}": i for i in range(10)}, **{f"late{i}": i for i in range(10)}}
    assert registers(a) == expected
    b = await started(runtimes, "b")
    await b.become_leader(P, 2)
    assert registers(b) == expected


async def test_read_only_requests_do_not_wait_for_writes_and_see_the_committed_state(runtimes) -> None:
    a = await started(runtimes, "a")
    await a.become_leader(P, 1)
    pending_put = submit(a, "put", put("k", 7))
    got = await submit(a, "get", RegisterGetRequest(name="k"))
    # The read is answered while the write is still unacknowledged, from the state as of the
    # last committed write: it does not see the record in flight (Kafka's committed offset).
    assert not pending_put.done()
    assert not got.found
    assert (await pending_put).previous == 0
    got = await submit(a, "get", RegisterGetRequest(name="k"))
    assert got.found and got.value == 7  # committed now


async def test_requests_while_loading_or_not_leading_get_retriable_errors(runtimes) -> None:
    a = await started(runtimes, "a")
    with pytest.raises(CoordinatorError) as not_led:
        await call(a, "get", RegisterGetRequest(name="k"))
    assert not_led.value.code == ErrorCode.not_coordinator

    loading = asyncio.create_task(a.become_leader(P, 1))
    await asyncio.sleep(0)  # the takeover has started: its marker write is in flight
    with pytest.raises(CoordinatorError) as in_progress:
        await call(a, "get", RegisterGetRequest(name="k"))
    assert in_progress.value.code == ErrorCode.coordinator_load_in_progress
    assert a.active_partitions() == []
    await loading
    assert a.partition(P).state is PartitionState.ACTIVE
    assert a.active_partitions() == [(P, 1)]
    assert a.partition(P).shard.loaded_at_ms is not None  # the post-load hook ran


async def test_zombie_leader_is_fenced_and_changes_nothing_anyone_reads(runtimes, broker, topic) -> None:
    registry = CollectorRegistry()
    a = await started(runtimes, "a", metrics=ShardMetrics("a", registry))
    await a.become_leader(P, 1)
    await call(a, "put", put("x", 1))
    zombie_fence = a.partition(P).fence

    b = await started(runtimes, "b", metrics=ShardMetrics("b", registry))
    await b.become_leader(P, 2)  # nobody told A: A still believes it leads
    for shard in ("a", "b"):  # the counters show for every partition a shard led, at zero
        assert value(registry, "groupcoord_partitions_fenced_total", shard=shard, partition="0") == 0
        assert value(registry, "groupcoord_state_records_fenced_total", shard=shard, partition="0") == 0

    # A's next write lands after B's marker; A reads the gap back, finds the marker and
    # answers NOT_COORDINATOR instead of success, then stops writing.
    with pytest.raises(CoordinatorError) as fenced:
        await call(a, "put", put("x", 2))
    assert fenced.value.code == ErrorCode.not_coordinator
    assert a.partition(P).state is PartitionState.STOPPED
    assert value(registry, "groupcoord_partitions_fenced_total", shard="a", partition="0") == 1
    with pytest.raises(CoordinatorError):
        await call(a, "put", put("x", 3))

    # A produce of A's still in flight could land even later: write such stray records raw.
    stray = StateLogWriter(broker.bootstrap, topic)
    await stray.start()
    try:
        rec = serialize_record(CoordinatorRecord(RegisterKey(name="x"), RegisterValue(value=666)))
        await stray.append(P, [rec], zombie_fence.tag())
    finally:
        await stray.stop()
    await call(b, "put", put("y", 5))  # B confirms past the stray record (a gap it reads)
    assert b.partition(P).stale_keys_seen == 2  # A's fenced put and the stray record
    # ... and counted where an operator looks: B read 2 records of a zombie; A was fenced once
    assert value(registry, "groupcoord_state_records_fenced_total", shard="b", partition="0") == 2
    assert value(registry, "groupcoord_partitions_fenced_total", shard="b", partition="0") == 0
    assert value(registry, "groupcoord_state_records_fenced_total", shard="a", partition="0") == 0

    # Stale records after the valid x=1 would let log compaction (last record per key wins)
    # drop x=1. B therefore reloads and rewrites x under its own fence.
    await b.settle()
    assert b.partition(P).state is PartitionState.ACTIVE and b.partition(P).keys_repaired == 1
    # ... and serves on after the repair: a write, then a read through its loop
    await asyncio.wait_for(call(b, "put", put("z", 7)), 10)
    assert (await asyncio.wait_for(call(b, "get", RegisterGetRequest(name="z")), 10)).value == 7

    # Every replayer — B live, a fresh leader, a hot standby, a replay of the log as Kafka's
    # compaction would leave it — agrees: x is still 1.
    assert registers(b) == {"x": 1, "y": 5, "z": 7}
    c = await started(runtimes, "c")
    await c.start_standby(P)
    d = await started(runtimes, "d")
    await d.become_leader(P, 3)
    assert registers(d) == {"x": 1, "y": 5, "z": 7}
    assert d.partition(P).keys_repaired == 0  # the repair is the last record of x now
    await c.become_leader(P, 4)  # warm takeover from the standby's tail
    assert registers(c) == {"x": 1, "y": 5, "z": 7}
    assert await replay_compacted(broker, topic) == {"x": 1, "y": 5, "z": 7}


async def replay_compacted(broker: EmbeddedBroker, topic: str) -> dict[str, int]:
    """Replay partition P as fully compacted by Kafka: only the last record of each key."""
    reader = PartitionReader(broker.bootstrap, topic, P)
    records = []
    try:
        while not records or reader.position < (reader.highwater or 0):
            records.extend(await reader.read(timeout_ms=500))
    finally:
        await reader.stop()
    last = {r.key: r for r in records}
    survivors = sorted(last.values(), key=lambda r: r.offset)
    filt, shard = ReplayFilter(), RegisterShard(P, None)  # type: ignore[arg-type]
    for r in survivors:
        if r.key[:2] == LEADER_EPOCH_TYPE_ID.to_bytes(2, "big"):
            filt.see_marker(parse_marker(r.value))
        elif filt.admits(fence_tag(r.headers)):
            shard.replay(deserialize_record(r.key, r.value))
    return shard.values


async def test_no_acknowledged_write_is_lost_when_a_takeover_races_writes(runtimes) -> None:
    a = await started(runtimes, "a")
    await a.become_leader(P, 1)
    acked: dict[str, int] = {}
    rejected = 0
    b = await started(runtimes, "b")
    takeover: asyncio.Task[None] | None = None
    rounds_after_takeover = 0
    for round_no in range(1000):
        if round_no == 5:
            takeover = asyncio.create_task(b.become_leader(P, 2))
        names = [f"w{round_no}-{i}" for i in range(10)]
        outcomes = await asyncio.gather(
            *(call(a, "put", put(n, round_no)) for n in names), return_exceptions=True
        )
        for n, o in zip(names, outcomes, strict=True):
            if isinstance(o, CoordinatorError):
                assert o.code == ErrorCode.not_coordinator
                rejected += 1
            else:
                acked[n] = round_no
        if takeover is not None and takeover.done():
            rounds_after_takeover += 1
        if rejected or rounds_after_takeover > 3:
            break
    assert takeover is not None
    await takeover

    # B loaded up to its marker; a later leader loads everything. Every ack is in both.
    b_state = registers(b)
    assert all(b_state.get(n) == v for n, v in acked.items())
    c = await started(runtimes, "c")
    await c.become_leader(P, 3)
    c_state = registers(c)
    assert all(c_state.get(n) == v for n, v in acked.items())
    # And nothing A did after B's marker counts: C sees exactly what B saw.
    assert c_state == b_state
    assert acked and rejected  # the race really happened: some writes acked, then fenced


async def test_a_leader_that_loads_behind_a_newer_marker_is_fenced_at_once(runtimes) -> None:
    b = await started(runtimes, "b")
    await b.become_leader(P, 5)
    late = await started(runtimes, "late")
    with pytest.raises(Fenced):
        await late.become_leader(P, 4)  # an older epoch arriving late never becomes leader
    with pytest.raises(CoordinatorError) as err:
        await call(late, "put", put("k", 1))
    assert err.value.code == ErrorCode.not_coordinator
    await call(b, "put", put("k", 2))  # the rightful leader is unaffected


async def test_timers_run_on_the_partition_loop_and_their_records_are_written(runtimes) -> None:
    a = await started(runtimes, "a")
    await a.become_leader(P, 1)
    await call(a, "put", put("temp", 1, expire_after_ms=50))
    await call(a, "put", put("kept", 2))
    for _ in range(200):
        got = await call(a, "get", RegisterGetRequest(name="temp"))
        if not got.found:
            break
        await asyncio.sleep(0.02)
    assert not got.found
    b = await started(runtimes, "b")
    await b.become_leader(P, 2)  # the expiry's tombstone is in the log
    assert registers(b) == {"kept": 2}


async def test_resign_stops_writing_and_answers_pending_requests(runtimes) -> None:
    a = await started(runtimes, "a")
    await a.become_leader(P, 1)
    pending = [submit(a, "put", put(f"p{i}", i)) for i in range(20)]
    await a.resign(P)
    outcomes = await asyncio.gather(*pending, return_exceptions=True)
    assert all(isinstance(o, CoordinatorError) and o.code == ErrorCode.not_coordinator for o in outcomes)
    assert a.partition(P) is None


async def test_delayed_responses_are_released_with_the_completing_write(runtimes) -> None:
    a = await started(runtimes, "a")
    await a.become_leader(P, 1)
    waiting = [submit(a, "wait", RegisterGetRequest(name="late")) for _ in range(3)]
    await call(a, "get", RegisterGetRequest(name="late"))  # a full loop turn
    assert not any(w.done() for w in waiting)
    completing = submit(a, "put", put("late", 9))
    answers = await asyncio.gather(*waiting)
    assert [(r.found, r.value) for r in answers] == [(True, 9)] * 3
    assert completing.done()  # released together with (after) the write that completes them

    orphan = submit(a, "wait", RegisterGetRequest(name="never"))
    await a.resign(P)
    with pytest.raises(CoordinatorError) as err:
        await orphan
    assert err.value.code == ErrorCode.not_coordinator


async def test_a_standby_that_streamed_a_fenced_record_repairs_it_on_takeover(
    runtimes, broker, topic
) -> None:
    a = await started(runtimes, "a")
    await a.become_leader(P, 1)
    await call(a, "put", put("x", 1))
    zombie_fence = a.partition(P).fence
    b = await started(runtimes, "b")
    await b.become_leader(P, 2)
    standby = await started(runtimes, "standby")
    await standby.start_standby(P)
    stray = StateLogWriter(broker.bootstrap, topic)
    await stray.start()
    try:  # A's late write: the last record of x is now a fenced one
        rec = serialize_record(CoordinatorRecord(RegisterKey(name="x"), RegisterValue(value=666)))
        [(stray_offset, _)] = await stray.append(P, [rec], zombie_fence.tag())
    finally:
        await stray.stop()
    part = standby.partition(P)
    while part._loader.reader.position <= stray_offset:  # the standby has streamed past it
        await asyncio.sleep(0.02)
    await standby.become_leader(P, 3)  # x=1 lies in the streamed part: a full reload finds it
    assert registers(standby) == {"x": 1}
    assert standby.partition(P).keys_repaired == 1
    await call(standby, "get", RegisterGetRequest(name="x"))
    for _ in range(100):  # the repair write goes through the loop like any request
        if await replay_compacted(broker, topic) == {"x": 1}:
            break
        await asyncio.sleep(0.05)
    assert await replay_compacted(broker, topic) == {"x": 1}


async def test_a_standby_streams_the_log_and_takes_over_warm(runtimes) -> None:
    a = await started(runtimes, "a")
    await a.become_leader(P, 1)
    await asyncio.gather(*(call(a, "put", put(f"s{i}", i)) for i in range(50)))
    standby = await started(runtimes, "standby")
    await standby.start_standby(P)
    await call(a, "put", put("s0", 100))  # streamed by the standby as it is written
    part = standby.partition(P)
    while part.lag is None or part.lag > 0:
        await asyncio.sleep(0.02)
    await a.resign(P)
    await standby.become_leader(P, 2)
    expected = {**{f"s{i}": i for i in range(50)}, "s0": 100}
    assert registers(standby) == expected
    assert standby.partition(P).committed_shard.values == expected  # both replicas streamed
    await call(standby, "put", put("s1", 11))
    assert (await call(standby, "get", RegisterGetRequest(name="s1"))).value == 11


class FailingWriter(CountingWriter):
    """The real writer; ``fail`` makes the next append raise, before sending (``land=False``)
    or after its records were written and acknowledged (``land=True``: "maybe written")."""

    def __init__(self, *a: object, **kw: object) -> None:
        super().__init__(*a, **kw)
        self.fail: bool = False
        self.land: bool = False

    async def append(self, partition, entries, tag):  # type: ignore[no-untyped-def]
        if self.fail and tag is not None:
            self.fail = False
            if self.land:
                await super().append(partition, entries, tag)
            raise OSError("injected write failure")
        return await super().append(partition, entries, tag)


@contextlib.asynccontextmanager
async def leading(broker: EmbeddedBroker, topic: str, writer: StateLogWriter) -> AsyncIterator[WorkerRuntime]:
    """A started runtime writing through ``writer``, leading partition P at epoch 1."""
    rt = WorkerRuntime(
        bootstrap=broker.bootstrap, topic=topic, partitions=2, shard_factory=RegisterShard, writer=writer
    )
    await rt.start()
    try:
        await rt.become_leader(P, 1)
        yield rt
    finally:
        await rt.close()


class StalledWriter(CountingWriter):
    """The real writer, whose appends wait until ``released`` is set: a state partition
    whose leader died and whose new one the upstream has not elected yet."""

    def __init__(self, *a: object, **kw: object) -> None:
        super().__init__(*a, **kw)
        self.stall = False
        self.released = asyncio.Event()

    async def append(self, partition, entries, tag):  # type: ignore[no-untyped-def]
        if self.stall and tag is not None:
            await self.released.wait()
        return await super().append(partition, entries, tag)


async def test_a_write_not_acknowledged_in_time_answers_coordinator_not_available_and_lands_later(
    broker, topic, monkeypatch
) -> None:
    """Kafka's offsets.commit.timeout.ms: the callers of a write the upstream does not
    acknowledge in time are answered COORDINATOR_NOT_AVAILABLE (they retry) instead of waiting
    for the upstream; the write goes on, and once it lands the state has it."""
    monkeypatch.setattr(write_pipeline, "WRITE_TIMEOUT_S", 0.5)
    writer = StalledWriter(broker.bootstrap, topic)
    async with leading(broker, topic, writer) as rt:
        writer.stall = True
        with pytest.raises(CoordinatorError) as timed_out:
            await asyncio.wait_for(call(rt, "put", put("k", 1)), 10)
        assert timed_out.value.code == ErrorCode.coordinator_not_available
        part = rt.partition(P)
        assert part.state is PartitionState.ACTIVE
        writer.stall = False
        writer.released.set()
        # the retried request finds the value the late write left
        assert (await asyncio.wait_for(call(rt, "put", put("k", 2)), 10)).previous == 1
        assert registers(rt) == {"k": 2} and rt.partition(P) is part


async def test_a_failed_write_reverts_to_the_committed_state_without_a_reload(broker, topic) -> None:
    writer = FailingWriter(broker.bootstrap, topic)
    rt = WorkerRuntime(
        bootstrap=broker.bootstrap, topic=topic, partitions=2, shard_factory=RegisterShard, writer=writer
    )
    await rt.start()
    try:
        await rt.become_leader(P, 1)
        await call(rt, "put", put("k", 1))
        part = rt.partition(P)
        loaded = (part.records_read, part.records_loaded, part.load_time_ms)

        writer.fail = True
        first = submit(rt, "put", put("k", 2))  # in flight when the append fails
        later = submit(rt, "put", put("j", 3))  # handled in the same turn: same write
        waiting = submit(rt, "wait", RegisterGetRequest(name="never"))  # a delayed response
        outcomes = await asyncio.gather(first, later, waiting, return_exceptions=True)
        assert all(isinstance(o, CoordinatorError) and o.code == ErrorCode.not_coordinator for o in outcomes)

        # Reads and later writes see the committed state: k=1 and no j, as if the failed write
        # never happened; the partition kept serving and was not reloaded from the log.
        got = await call(rt, "get", RegisterGetRequest(name="k"))
        assert (got.found, got.value) == (True, 1)
        assert not (await call(rt, "get", RegisterGetRequest(name="j"))).found
        assert (await call(rt, "put", put("k", 5))).previous == 1  # the live replica reverted too
        assert registers(rt) == {"k": 5}
        assert part.state is PartitionState.ACTIVE and rt.partition(P) is part
        assert (part.records_read, part.records_loaded, part.load_time_ms) == loaded
        assert part.writes_reverted == 1
    finally:
        await rt.close()

    # The log agrees: a new leader loads k=5 and nothing of the failed write.
    b = WorkerRuntime(bootstrap=broker.bootstrap, topic=topic, partitions=2, shard_factory=RegisterShard)
    await b.start()
    try:
        await b.become_leader(P, 2)
        assert registers(b) == {"k": 5}
    finally:
        await b.close()


async def test_a_failed_write_that_landed_after_all_makes_the_partition_reload(broker, topic) -> None:
    writer = FailingWriter(broker.bootstrap, topic)
    rt = WorkerRuntime(
        bootstrap=broker.bootstrap,
        topic=topic,
        partitions=2,
        shard_factory=RegisterShard,
        writer=writer,
        retry_backoff_s=0.05,
    )
    await rt.start()
    try:
        await rt.become_leader(P, 1)
        await call(rt, "put", put("x", 1))
        writer.fail, writer.land = True, True
        with pytest.raises(CoordinatorError):
            await call(rt, "put", put("x", 2))  # written, but reported failed: reverted to x=1
        assert (await call(rt, "get", RegisterGetRequest(name="x"))).value == 1
        # The next write's gap check finds the landed record: memory no longer matches the
        # log, so the partition fails and is reloaded (at the same epoch) instead of serving.
        with pytest.raises(CoordinatorError):
            await call(rt, "put", put("y", 3))
        for _ in range(200):
            part = rt.partition(P)
            if part is not None and part.state is PartitionState.ACTIVE and "x" in registers(rt):
                break
            await asyncio.sleep(0.05)
        assert registers(rt)["x"] == 2  # what the log says
        assert (await call(rt, "get", RegisterGetRequest(name="x"))).value == 2
    finally:
        await rt.close()


def _admin_commit(offset: int) -> object:
    """An admin OffsetCommit (no member) of orders-0 for group "app", as a shard operation."""
    from groupcoord.coordinator.core.group_operations import OPERATIONS  # noqa: PLC0415
    from groupcoord.rpc.v1 import offsets_pb2  # noqa: PLC0415

    return OPERATIONS["offset_commit"](
        offsets_pb2.OffsetCommitRequest(
            api_version=8,
            group_id="app",
            generation_id_or_member_epoch=-1,
            retention_time_ms=-1,
            topics=[
                offsets_pb2.OffsetCommitRequestTopic(
                    name="orders",
                    partitions=[
                        offsets_pb2.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)
                    ],
                )
            ],
        )
    )


async def _fetched(rt: WorkerRuntime) -> int:
    """The committed offset of orders-0 for group "app", read through the partition's runtime."""
    from groupcoord.coordinator.core.group_operations import OPERATIONS  # noqa: PLC0415
    from groupcoord.rpc.v1 import offsets_pb2  # noqa: PLC0415

    request = offsets_pb2.OffsetFetchRequest(
        api_version=8,
        groups=[
            offsets_pb2.OffsetFetchRequestGroup(
                group_id="app",
                member_epoch=-1,
                topics=[offsets_pb2.OffsetFetchRequestTopic(name="orders", partition_indexes=[0])],
            )
        ],
    )
    response = await rt.submit(P, OPERATIONS["offset_fetch"](request))
    return response.groups[0].topics[0].partitions[0].committed_offset


async def test_the_group_coordinator_shard_reverts_a_failed_offset_commit(broker, topic) -> None:
    """The revert is generic: the real GroupCoordinatorShard is copied too."""
    from groupcoord.coordinator.server.coordinator_service import group_shard_factory  # noqa: PLC0415

    writer = FailingWriter(broker.bootstrap, topic)
    rt = WorkerRuntime(
        bootstrap=broker.bootstrap,
        topic=topic,
        partitions=2,
        shard_factory=group_shard_factory,
        writer=writer,
    )
    await rt.start()
    try:
        await rt.become_leader(P, 1)
        await rt.submit(P, _admin_commit(42))
        writer.fail = True
        pending = rt.submit(P, _admin_commit(43))
        assert await _fetched(rt) == 42  # the commit in flight is not visible to a fetch
        with pytest.raises(CoordinatorError):
            await pending
        assert await _fetched(rt) == 42  # reverted, not reloaded
        assert rt.partition(P).writes_reverted == 1 and rt.partition(P).state is PartitionState.ACTIVE
        await rt.submit(P, _admin_commit(44))
        assert await _fetched(rt) == 44
    finally:
        await rt.close()


async def test_a_transactional_write_the_upstream_refuses_fails_alone_and_the_partition_serves_on(
    broker, topic
) -> None:
    """A client can make the upstream refuse a write (a TxnOffsetCommit of a fenced or made-up
    producer): its caller learns the upstream's error and nothing else happens (Kafka verifies
    the transaction before the write runs): the write queued behind it succeeds, no revert, no
    reload."""
    import datetime  # noqa: PLC0415

    from kio.schema.errors import ErrorCode as KioErrorCode  # noqa: PLC0415
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest  # noqa: PLC0415
    from kio.schema.types import ProducerId, TransactionalId  # noqa: PLC0415
    from kio.static.primitive import i16, i32Timedelta  # noqa: PLC0415

    from groupcoord.common.kafka_wire.exchange import exchange  # noqa: PLC0415
    from groupcoord.coordinator.core.group_operations import OPERATIONS as GROUP_OPERATIONS  # noqa: PLC0415
    from groupcoord.coordinator.runtime.transactions import REFUSED_TRANSACTIONAL_WRITE  # noqa: PLC0415
    from groupcoord.coordinator.server.coordinator_service import group_shard_factory  # noqa: PLC0415
    from groupcoord.rpc.v1 import offsets_pb2  # noqa: PLC0415

    transactional_id = f"txn-{uuid.uuid4().hex[:6]}"

    async def init_producer_id() -> tuple[int, int]:
        """InitProducerId on the upstream: a second one bumps the epoch, fencing the first."""
        r = await exchange(
            (broker.host, broker.port),
            InitProducerIdRequest(
                transactional_id=TransactionalId(transactional_id),
                transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
                producer_id=ProducerId(-1),
                producer_epoch=i16(-1),
            ),
            "txn-client",
            10,
        )
        assert r.error_code == KioErrorCode.none
        return int(r.producer_id), int(r.producer_epoch)

    def txn_commit(producer_id: int, producer_epoch: int, offset: int) -> object:
        return GROUP_OPERATIONS["txn_offset_commit"](
            offsets_pb2.TxnOffsetCommitRequest(
                api_version=3,
                transactional_id=transactional_id,
                group_id="app",
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                generation_id=-1,
                topics=[
                    offsets_pb2.TxnOffsetCommitRequestTopic(
                        name="orders",
                        partitions=[
                            offsets_pb2.TxnOffsetCommitRequestPartition(
                                partition_index=0, committed_offset=offset, committed_leader_epoch=-1
                            )
                        ],
                    )
                ],
            )
        )

    rt = WorkerRuntime(
        bootstrap=broker.bootstrap, topic=topic, partitions=2, shard_factory=group_shard_factory
    )
    await rt.start()
    try:
        await rt.become_leader(P, 1)
        await rt.submit(P, _admin_commit(42))
        producer_id, fenced_epoch = await init_producer_id()
        assert await init_producer_id() == (producer_id, fenced_epoch + 1)  # the client restarted

        refused = rt.submit(P, txn_commit(producer_id, fenced_epoch, 50))  # a write of its own
        behind = rt.submit(P, _admin_commit(43))  # queued behind it, in the same loop turn
        outcomes = await asyncio.gather(refused, behind, return_exceptions=True)
        assert isinstance(outcomes[0], CoordinatorError) and outcomes[0].code == ErrorCode.producer_fenced
        assert not isinstance(outcomes[1], BaseException)  # untouched by the refusal

        part = rt.partition(P)
        assert part.state is PartitionState.ACTIVE and part.writes_reverted == 0
        assert await _fetched(rt) == 43
        # bogus producers in a loop (v0-2: no member, no generation), each beside a healthy
        # commit: each fails alone; no revert, no reload
        for i in range(20):
            bogus = rt.submit(P, txn_commit(10_000_000 + i, 0, 60 + i))
            healthy = rt.submit(P, _admin_commit(100 + i))
            outcomes = await asyncio.gather(bogus, healthy, return_exceptions=True)
            assert isinstance(outcomes[0], CoordinatorError), outcomes[0]
            assert outcomes[0].code.value in REFUSED_TRANSACTIONAL_WRITE
            assert not isinstance(outcomes[1], BaseException)
        assert await _fetched(rt) == 119
        assert rt.partition(P) is part and part.writes_reverted == 0 and part.state is PartitionState.ACTIVE
    finally:
        await rt.close()


async def test_news_for_every_replica_reaches_what_reads_see(runtimes) -> None:
    """Like a topic-metadata image: state from outside the log that reads use too."""
    from groupcoord.coordinator.core.contract import CoordinatorResult, write_operation  # noqa: PLC0415

    def note(shard: RegisterShard, now_ms: int, _: object) -> CoordinatorResult[None]:
        shard.note = now_ms  # type: ignore[attr-defined]
        return CoordinatorResult()

    a = await started(runtimes, "a")
    await a.become_leader(P, 1)
    await a.submit(P, write_operation("note", note), every_replica=True)
    part = a.partition(P)
    assert part.shard.note == part.committed_shard.note
    await a.submit(P, write_operation("note", note))
    assert part.committed_shard is not part.shard


async def write_garbage(broker: EmbeddedBroker, topic: str, n: int, seed: int) -> None:
    """``n`` random records straight to partition P, as someone who bypasses the gateway would:
    random keys and values, some under a leadership-marker or a known record type id, some with
    a ``gc.fence`` header that is no fence tag."""
    rng = random.Random(seed)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
    await producer.start()
    try:
        for i in range(n):
            prefix = rng.choice([b"", LEADER_EPOCH_TYPE_ID.to_bytes(2, "big"), (1000).to_bytes(2, "big")])
            key = prefix + rng.randbytes(rng.randint(0, 24))
            value = None if i % 17 == 0 else rng.randbytes(rng.randint(0, 64))
            headers = [("gc.fence", rng.randbytes(rng.choice([0, 5, 12, 13])))] if i % 3 == 0 else None
            await producer.send(topic, value=value, key=key, partition=P, headers=headers)
        await producer.flush()
    finally:
        await producer.stop()


async def test_a_poisoned_log_is_skipped_counted_and_the_partition_serves_on(runtimes, broker, topic) -> None:
    a = await started(runtimes, "a")
    await a.become_leader(P, 1)
    await asyncio.gather(*(call(a, "put", put(f"p{i}", i)) for i in range(20)))
    standby = await started(runtimes, "standby")
    await standby.start_standby(P)
    await write_garbage(broker, topic, 200, seed=23)
    await call(a, "put", put("p0", 100))  # its gap check reads the garbage back
    part = standby.partition(P)
    async with asyncio.timeout(10):  # the standby tails through the garbage
        while part.skipped_records.total == 0 or part.lag is None or part.lag > 0:
            await asyncio.sleep(0.02)
    assert part.state is PartitionState.STANDBY
    await a.resign(P)
    await standby.become_leader(P, 2)
    expected = {**{f"p{i}": i for i in range(20)}, "p0": 100}
    assert registers(standby) == expected
    await call(standby, "put", put("p1", 11))
    assert (await call(standby, "get", RegisterGetRequest(name="p1"))).value == 11
    # a cold load of the same log skips the same records and serves too
    cold = await started(runtimes, "cold")
    await cold.become_leader(P, 3)
    assert registers(cold) == {**expected, "p1": 11}
    skipped = cold.partition(P).skipped_records.counts
    assert set(skipped) <= {"undecodable", "impossible_fence", "unreplayable"}
    assert skipped["undecodable"] > 0 and skipped["impossible_fence"] > 0
    await call(cold, "put", put("p2", 22))


async def test_a_partition_reloaded_at_its_epoch_gets_the_topic_image_again(runtimes, broker) -> None:
    """A zombie's late record makes the leader reload at the same epoch (to repair the keys it
    shadows): the reloaded shard is fresh and knows no topics until the metadata follower
    gives it the image again. Without it every KIP-848 heartbeat of the partition's groups
    was answered COORDINATOR_LOAD_IN_PROGRESS, which clients retry silently, for ever (the
    deployment test's stuck groups)."""
    from groupcoord.coordinator.core.group_operations import OPERATIONS  # noqa: PLC0415
    from groupcoord.coordinator.core.topics_image import TopicsImage  # noqa: PLC0415
    from groupcoord.coordinator.runtime.topic_metadata import follow_topics  # noqa: PLC0415
    from groupcoord.coordinator.server.coordinator_service import group_shard_factory  # noqa: PLC0415
    from groupcoord.rpc.v1 import consumer_group_pb2  # noqa: PLC0415

    await ensure_topic(broker.bootstrap, "orders", 2)

    def joining(member_id: str) -> object:
        request = consumer_group_pb2.ConsumerGroupHeartbeatRequest(
            api_version=1, group_id="kip848", member_id=member_id, member_epoch=0, rebalance_timeout_ms=30_000
        )
        request.subscribed_topic_names.SetInParent()
        request.subscribed_topic_names.names.append("orders")
        request.topic_partitions.SetInParent()
        return OPERATIONS["consumer_group_heartbeat"](request)

    async def joined(member_id: str) -> int:
        """The error of the member's join once the shard knows the topics (or the last one)."""
        code = -1
        for _ in range(100):
            code = (await b.submit(P, joining(member_id))).error_code
            if code != ErrorCode.coordinator_load_in_progress.value:
                break
            await asyncio.sleep(0.1)
        return code

    a = await started(runtimes, "a", group_shard_factory)
    b = await started(runtimes, "b", group_shard_factory)
    follower = follow_topics(b, TopicsImage.from_descriptions)
    follower.interval_s, follower.tick_s = 0.5, 0.05
    following = asyncio.create_task(follower.run())
    try:
        await a.become_leader(P, 1)
        await b.become_leader(P, 2)  # nobody told A
        assert await joined("m1") == 0
        # A's late write lands after B's marker, on a key B never writes: B's next write finds
        # it, and B reloads at epoch 2 to repair the key.
        with pytest.raises(CoordinatorError):
            await a.submit(P, _admin_commit(1))
        with contextlib.suppress(CoordinatorError):
            await b.submit(P, joining("m2"))
        for _ in range(100):
            part = b.partition(P)
            if part is not None and part.state is PartitionState.ACTIVE and part.keys_repaired:
                break
            await asyncio.sleep(0.05)
        assert b.partition(P).keys_repaired and b.partition(P).epoch == 2
        assert await joined("m3") == 0, "the reloaded shard never got the topics"
    finally:
        following.cancel()
