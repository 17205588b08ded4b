"""The contract between the sans-IO coordinator shards and the runtime that hosts them.

Modelled on Apache Kafka's group-coordinator: a request handler reads state and returns a
:class:`CoordinatorResult` — the response plus the records that must be written — and never
mutates anything. State changes only in ``replay(record)``, the same path the loader uses
after a failover. Timers are the same: an expiring timer returns records instead of changing
state. No handler reads a clock; the runtime passes ``now_ms`` in.

Records are protobuf messages (schemas under ``proto/groupcoord/records/v1``). A record is a
(key, value) pair; a ``None`` value is a tombstone, so a compacted state topic keeps only the
latest value per key. ``groupcoord.common.records.RECORD_TYPES`` (one table) assigns each key
message a stable numeric type id that prefixes the serialized key on the state topic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from google.protobuf.message import Message

from groupcoord.common.records import RECORD_TYPES
from groupcoord.common.steps import Steps
from groupcoord.records.v1 import offsets_pb2

R = TypeVar("R")
S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One state-topic record: a key message and a value message (None = tombstone).

    ``decoded``: the value in the form the shard's replay makes of it, when the handler that
    built the record had that form at hand; replay then takes it instead of reading the
    message. Both replicas replay a record, so a value read twice from a large message (a
    1,000-member group's target assignment: ~15 ms per replica on the partition's loop) is
    read not at all. It must equal what replay would decode from ``value`` (the property
    tests replay the log and compare with the live state), and is shared by the replicas,
    so nothing may change it. Not part of the record's value: records compare by key and
    value, and one read from the log has none."""

    key: Message
    value: Message | None
    decoded: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class CoordinatorResult(Generic[R]):
    """What a handler or timer returns: records to write, then the response to send.

    The runtime appends ``records`` to the partition's log, replays them, and only then
    answers with ``response`` (a write is acknowledged before anyone learns of it).

    Delayed responses (classic JoinGroup/SyncGroup, whose answers wait for other members):

    * A handler that cannot answer yet returns ``response=PENDING``. It was called with an
      opaque ``token`` for the waiting request (the runtime's future for it) and keeps that
      token; the runtime must leave the request waiting instead of answering it.
    * Any later result (another request's, or a timer's) may carry ``completions``: pairs
      ``(token, response)`` answering those waiting requests. The runtime releases them exactly
      like ``response``: after this result's records are acknowledged. A token may appear in
      at most one completion; tokens nobody waits for any more are simply ignored.
    * Waiting requests are not group state: they die with the partition's leadership (the
      runtime answers them NOT_COORDINATOR) and clients retry, as with Kafka. They die with a
      revert too: the runtime has already failed their callers, so ``restore`` drops every
      token the shard keeps (see :class:`CoordinatorShard`).
    """

    records: list[CoordinatorRecord] = field(default_factory=list)
    response: R | None = None
    completions: list[tuple[Any, Any]] = field(default_factory=list)
    timers: list[TimerIntent] = field(default_factory=list)
    """Timers to schedule, offload or cancel (h11's habit: effects are values). The runtime
    applies them in order as soon as the handler returns, before the next event on the loop."""
    transaction: TransactionalWrite | None = None
    """Set when ``records`` belong to a client's transaction (TxnOffsetCommit): the runtime
    writes them as one transactional batch of that producer, so the upstream transaction
    coordinator's COMMIT/ABORT marker for it lands in this partition, after them."""


class TransactionalWrite(NamedTuple):
    """The producer whose transaction a write belongs to, and the batch's base sequence."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    base_sequence: int


class _Pending:
    """Type of :data:`PENDING`."""

    _instance: _Pending | None = None

    def __new__(cls) -> _Pending:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "PENDING"


PENDING: Any = _Pending()
"""``CoordinatorResult.response`` of a request answered later through a completion."""


class ScheduleTimer(NamedTuple):
    """Run ``operation()`` on the partition's loop after ``delay_ms``, replacing any timer with
    the same key. The operation's result is handled exactly like a request's; it must
    re-validate state (the world may have moved since scheduling).

    Timer intents are named tuples, not frozen dataclasses: every heartbeat returns one, and a
    frozen dataclass costs several times more to build (bench/heartbeat_core.py)."""

    key: str
    delay_ms: int
    operation: Callable[[], CoordinatorResult[Any]]


class CancelTimer(NamedTuple):
    """Forget the timer with this key, if any."""

    key: str


class Offload(NamedTuple):
    """A timer whose wait is a computation (Kafka's ``CoordinatorExecutor.schedule``, which
    KIP-1263 uses for assignments): run the steps of ``task()`` (:mod:`groupcoord.common.steps`)
    off the partition's loop, on the offload thread in short slices, then ``then(task's
    result)`` on the partition's loop, whose result is handled exactly like a timer's.

    ``task`` reads only values it was given (a snapshot taken by the handler), never the shard:
    the loop goes on changing the shard meanwhile, which is the point. ``then`` re-validates
    what the result was computed from, as every timer operation does. The key is armed from
    scheduling until ``then`` runs (``is_scheduled``), so a handler starts one computation per
    key; a cancel, a replacing schedule or a revert drops the result. A task that raises is
    logged and dropped, as Kafka's executor hands the error to the operation that logs it."""

    key: str
    task: Callable[[], Steps[Any]]
    then: Callable[[Any], CoordinatorResult[Any]]


class OutboundRecord(NamedTuple):
    """One record a :class:`Publish` writes. ``copy_of`` (topic name, partition, offset) names a
    record of the cluster whose key and value it takes (Kafka 4.4's dead-letter record with
    ``errors.deadletterqueue.copy.record.enable``, which keeps only its own headers); a source
    record that cannot be read (deleted by retention, a compacted-away offset) leaves the
    record as it is, headers only."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    copy_of: tuple[str, int, int] | None = None


class TopicRule(NamedTuple):
    """What the topic of a :class:`Publish` must be before anything is written to it: the
    operator's bounds on where the coordinator, with its own identity, writes for a client
    (Kafka's ``ShareGroupDLQValidator``).

    ``required_prefix``: the name must start with it ("" = any name). ``required_config``: a
    topic config the topic must have with that value (KIP-1191's
    ``errors.deadletterqueue.group.enable=true``), checked where the upstream knows the config
    at all (Kafka 4.4; Kafka 3.x and tansu answer nothing for it, and there the prefix is the
    operator's only say). ``create_if_missing``: create a missing topic (with the cluster's
    default partitions and replication, and ``required_config`` set) instead of failing."""

    required_prefix: str = ""
    required_config: tuple[str, str] | None = None
    create_if_missing: bool = False


class Publication(NamedTuple):
    """Records for a topic of the upstream cluster, all for one partition of it:
    ``partition_of`` modulo the topic's partition count (Kafka's dead-letter rule: the source
    partition's number). ``deduplicate_since_ms``: when set (a new leader resuming what its
    predecessor may have written before it died), a record already in that partition since
    then with the same values of ``identity_headers`` is not written again. ``metric`` names
    what the host counts the writes as (the process's metrics facade)."""

    topic: str
    partition_of: int
    records: tuple[OutboundRecord, ...]
    rule: TopicRule
    identity_headers: tuple[str, ...] = ()
    deduplicate_since_ms: int | None = None
    metric: str = ""


class PublishOutcome(NamedTuple):
    """How a :class:`Publish` ended: the records written (or found written already), the
    produce requests it took and how many failed, and the reason it gave up, if it did (the
    topic broke the rule, the cluster refused every retry)."""

    written: int
    requests: int = 0
    failed_requests: int = 0
    error: str | None = None


class Publish(NamedTuple):
    """A timer whose wait is a write to another topic of the upstream cluster, made by the
    host with the coordinator's own identity (Kafka's share-partition writing its dead-letter
    queue through the broker's ``ShareGroupDLQManager``): once the records of the result that
    returned it are written to the state topic (so a failover finds what is due in the state),
    write ``publication``, then ``then(outcome)`` on the partition's loop, handled like a fired
    timer. The key is armed from scheduling until ``then`` runs (``is_scheduled``); a cancel,
    a revert or a lost leadership drops the outcome, and the state's next owner resumes from
    the state (with ``deduplicate_since_ms``)."""

    key: str
    publication: Publication
    then: Callable[[PublishOutcome], CoordinatorResult[Any]]


TimerIntent = ScheduleTimer | CancelTimer | Offload | Publish


def deadline_timer(
    key: str, delay_ms: int, now_ms: int, expire: Callable[..., CoordinatorResult[Any]], *args: Any
) -> ScheduleTimer:
    """The one shape of every core timer: after ``delay_ms``, run ``expire(*args, deadline)``.

    The operation learns its deadline (``now_ms`` of scheduling + delay) as its ``now_ms``, so
    a timer reads no clock and a test replays it exactly. A negative delay fires at once."""
    # partial, not a lambda: two objects per timer instead of six (a function, its closure
    # cells, the args tuple); every heartbeat re-arms one, so the garbage collector notices.
    return ScheduleTimer(key, max(delay_ms, 0), partial(expire, *args, now_ms + delay_ms))


def apply_timer_intents(timer: Timer, intents: list[TimerIntent]) -> None:
    """What every host of a coordinator shard does with ``CoordinatorResult.timers``."""
    for intent in intents:
        if isinstance(intent, ScheduleTimer):
            timer.schedule(intent.key, intent.delay_ms, intent.operation)
        elif isinstance(intent, Offload):
            timer.offload(intent.key, intent.task, intent.then)
        elif isinstance(intent, Publish):
            timer.publish(intent.key, intent.publication, intent.then)
        else:
            timer.cancel(intent.key)


Token = Any
"""The runtime's opaque handle of a waiting request (see ``CoordinatorResult``)."""


@dataclass(frozen=True, slots=True)
class CoordinatorOperation(Generic[S, R]):
    """One named operation on a partition's coordinator shard, as Kafka's
    ``scheduleWriteOperation(name, tp, shard -> shard.consumerGroupHeartbeat(ctx, request))``:
    the caller binds the request in ``run``; the runtime calls ``run(shard, now_ms, token)`` on
    the partition's loop. A read (``read_only``) never waits on a write and writes nothing."""

    name: str
    read_only: bool
    run: Callable[[S, int, Token], CoordinatorResult[R]]
    # Whether, against the live shard, the operation must first see every transaction marker
    # already in the log (a producer's TxnOffsetCommit while its earlier offsets are pending:
    # the marker deciding those must be replayed before its new offsets, as in the log).
    needs_markers: Callable[[S], bool] | None = None
    # What a successful answer tells the process's metrics facade, when it says what it did
    # (a share delivery's counts): ``answered(sink, response)``, called by whoever delivers the
    # reply, so the dispatcher needs no list of such operations.
    answered: Callable[[Any, R], None] | None = None


def write_operation(
    name: str,
    run: Callable[[S, int, Token], CoordinatorResult[R]],
    needs_markers: Callable[[S], bool] | None = None,
    answered: Callable[[Any, R], None] | None = None,
) -> CoordinatorOperation[S, R]:
    return CoordinatorOperation(name, False, run, needs_markers, answered)


def read_operation(
    name: str,
    run: Callable[[S, int, Token], CoordinatorResult[R]],
    answered: Callable[[Any, R], None] | None = None,
) -> CoordinatorOperation[S, R]:
    return CoordinatorOperation(name, True, run, None, answered)


class ArmedTimers(Protocol):
    """What a coordinator shard may know of its partition's timers: which keys are armed.

    Handlers never schedule or cancel (they return :data:`TimerIntent` values); some decide by
    whether a timer is already running (not re-arming a rebalance timeout on every heartbeat),
    so the runtime hands them this read-only view of its :class:`Timer`."""

    def is_scheduled(self, key: str) -> bool: ...


class Timer(Protocol):
    """Timers owned by one state-topic partition's event loop.

    ``schedule`` replaces any timer with the same key. When a timer fires, the runtime calls
    ``operation()`` on the partition's loop and writes the records it returns, exactly as for
    a request. Operations must re-validate state (the world may have moved since scheduling).
    """

    def schedule(self, key: str, delay_ms: int, operation: Callable[[], CoordinatorResult[Any]]) -> None: ...

    def offload(
        self, key: str, task: Callable[[], Steps[Any]], then: Callable[[Any], CoordinatorResult[Any]]
    ) -> None:
        """Run the steps of ``task()`` off the loop, then ``then(result)`` as a fired timer (see
        :class:`Offload`); replaces any timer with the same key."""

    def publish(
        self, key: str, publication: Publication, then: Callable[[PublishOutcome], CoordinatorResult[Any]]
    ) -> None:
        """Write ``publication`` once what is being written now is durable, then ``then(outcome)``
        as a fired timer (see :class:`Publish`); replaces any timer with the same key."""

    def cancel(self, key: str) -> None: ...

    def is_scheduled(self, key: str) -> bool: ...


def serialize_record(record: CoordinatorRecord) -> tuple[bytes, bytes | None]:
    """State-topic bytes: key = 2-byte big-endian type id + key message; value = message or None."""
    rt = RECORD_TYPES.by_key(type(record.key))
    key = rt.type_id.to_bytes(2, "big") + record.key.SerializeToString(deterministic=True)
    value = None if record.value is None else record.value.SerializeToString(deterministic=True)
    return key, value


def deserialize_record(key: bytes, value: bytes | None) -> CoordinatorRecord:
    rt = RECORD_TYPES.by_id(int.from_bytes(key[:2], "big"))
    k = rt.key_type.FromString(key[2:])
    v = None if value is None else rt.value_type.FromString(value)
    return CoordinatorRecord(k, v)


class CoordinatorShard(Protocol):
    """A coordinator shard: the state machine for one state-topic partition (all groups hashed
    to it), Kafka's ``CoordinatorShard``. Not a shard *process*, which hosts many of them.

    Every hook the runtime calls is declared here and called directly: a shard implements the
    whole protocol (a hook with nothing to do returns an empty result), so no reader has to
    find out by probing which hooks a shard happens to have. The API handlers are not part of
    it: each is reached through a :class:`CoordinatorOperation` bound by the service.

    Requests a handler parked as :data:`PENDING` are not state: ``restore`` drops every token
    the shard keeps (the runtime has already failed their callers when it reverts)."""

    def replay(self, record: CoordinatorRecord) -> None:
        """Apply one record of the log (the only mutation of the state; see the module
        docstring). Called for live writes, acknowledged writes and loads alike."""

    def on_loaded(self, now_ms: int) -> CoordinatorResult[None]:
        """Once the partition is loaded (and again after a revert): what replay does not do,
        such as arming the timers of the state it rebuilt (Kafka's ``onLoaded``)."""

    def transactions(self) -> TransactionalShard | None:
        """The shard's transactional hooks (itself, typically), or None for a shard that keeps
        no client transactions. The shard's opt-in to the marker follower, asked once per load:
        a shard that returns None never sees a marker record."""

    def metrics(self) -> CoordinatorMetricsShard:
        """What the shard measures of itself (Kafka's ``CoordinatorMetricsShard``), which the
        runtime only hands the process's metrics facade: the runtime knows no metric of any
        shard."""

    @property
    def data(self) -> Any:
        """The shard's state as plain data: no wiring, no closures, nothing but values."""

    def restore(self, data: Any) -> None:
        """Make the state a copy of ``data`` (another replica's :attr:`data`): how the runtime
        reverts the live replica to the committed one after a failed write. All or nothing: if
        it raises, the state is unchanged (the runtime then reloads the partition instead)."""


class CoordinatorMetricsShard(Protocol):
    """The gauges and counters of one coordinator shard (Kafka's ``CoordinatorMetricsShard``),
    handed to the runtime by :meth:`CoordinatorShard.metrics`. The shard owns what is measured
    and how it is named; the runtime only says when, and hands over ``sink``, the process's
    metrics facade (``groupcoord.observability.shard_metrics.ShardMetrics``), so the runtime
    knows no group type, record type or metric of any shard."""

    def group_counts(self) -> dict[str, int]:
        """What the shard hosts by kind (bounded: no names), for the control plane's partition
        status."""

    def export(self, partition: int, sink: Any) -> None:
        """Set the shard's gauges for ``partition`` on ``sink``. Called about every second on
        the committed replica of an active partition (what reads see)."""

    def observe_written(
        self,
        partition: int,
        records: Sequence[CoordinatorRecord],
        sink: Any,
        seen: dict[Any, Any],
        *,
        by_timer: bool,
    ) -> None:
        """Count on ``sink`` what ``records``, written by one live request (``by_timer``: by a
        timer), did. Called on the live replica just before the records are replayed into it;
        never for records a load replays, which would recount history. ``seen`` is the
        partition's memory of what earlier writes said (a group's last epoch), which the
        runtime keeps across the partition's loads and reverts as it keeps the counts: a reload
        builds new replicas, and must not count again a change it counted before."""


class TransactionalShard(Protocol):
    """The hooks of a :class:`CoordinatorShard` that keeps client transactions' records
    (TxnOffsetCommit) pending until the upstream's COMMIT/ABORT marker decides them.

    Optional, and declared: a shard opts in by returning them from
    :meth:`CoordinatorShard.transactions` (a type checker then holds it to every hook here).
    The runtime asks once per load and runs the marker follower
    (:mod:`groupcoord.coordinator.runtime.transactions`) only for a shard that opted in; only
    such a shard replays marker records (:func:`marker_record`)."""

    def open_transactions(self) -> int:
        """Producers with pending records here: while any are open, the runtime follows the
        partition for their markers."""

    def producer_sequences(self) -> dict[int, tuple[int, int]]:
        """Producer id -> (epoch, next sequence) of the transactional writes replayed here,
        where the marker follower starts (see ``TxnMarkerValue.sequence_bound``)."""

    def after_markers(self, now_ms: int) -> CoordinatorResult[None]:
        """Right after the runtime replayed markers: the records they call for (restating
        the offsets a COMMIT applied as ordinary records)."""

    def transaction_stats(self) -> tuple[int, int, int]:
        """(pending transactional records, commits applied, aborts applied), for the metrics;
        the counts grow with replay and the runtime exports their changes."""


def marker_record(
    offset: int, producer_id: int, producer_epoch: int, commit: bool, sequence_bound: int | None = None
) -> CoordinatorRecord:
    """The record the runtime makes of the upstream's COMMIT/ABORT marker (a control batch) at
    ``offset``, which a :class:`TransactionalShard` replays like any other record (see
    ``TxnMarkerValue.sequence_bound`` for the bound)."""
    value = offsets_pb2.TxnMarkerValue(producer_id=producer_id, producer_epoch=producer_epoch, commit=commit)
    if sequence_bound is not None:
        value.sequence_bound = sequence_bound
    return CoordinatorRecord(offsets_pb2.TxnMarkerKey(offset=offset), value)
