"""The delivery state of one share-partition (KIP-932): which records are acquired, by whom,
until when, and which are done.

A share group reads a topic partition cooperatively: each record is *acquired* by one member
at a time under a lock, then *acknowledged* one by one — accepted, released for redelivery, or
rejected. Kafka keeps this state at the partition leader (``SharePartition``) and persists it
through the share coordinator (``ShareSnapshot`` records); we keep it in the coordinator shard
that owns the share-partition, with the same states, the same rules and Kafka's error codes::

    AVAILABLE --acquire--> ACQUIRED --ACCEPT-------------------> ACKNOWLEDGED
        ^                     |  |----REJECT, GAP--------------> ARCHIVED
        |                     |  `----RENEW: the lock extended (stays ACQUIRED)
        `--RELEASE, lock timeout, member gone (delivery count < limit)
                              `--RELEASE, lock timeout, member gone (count = limit) --> ARCHIVED

A group with a dead-letter queue (KIP-1191, ``errors.deadletterqueue.topic.name``) archives a
rejected record, and one delivered as often as it may be, through ARCHIVING: the record waits
in the window, neither deliverable nor done, until its copy is in the DLQ topic
(:func:`dead_letters`, :func:`finish_dead_letters`); a gap is archived at once, as in Kafka.

The window: every offset below the share-partition start offset (SPSO, ``start_offset``) is
done (acknowledged or archived) and forgotten; offsets from ``end_offset`` on were never
acquired; every offset between has a :class:`Delivery`. The SPSO moves forward over done
records as soon as they lead the window, and the window never spans more than
``max_in_flight`` offsets (Kafka's ``group.share.partition.max.record.locks``), which bounds
what one share-partition costs.

Pure functions over immutable values, in the habit of the rest of the core: each takes a
:class:`SharePartition` and the clock (``now_ms``), and returns the new value with its answer;
nothing here reads a clock or mutates. The caller writes the new value as one record
(:func:`to_record_value`, a snapshot: the latest record is the state) and replays it
(:func:`from_record_value`) before answering, so an acknowledgement answered is durable, and a
shard taking over the partition knows every lock and every delivery count.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from groupcoord.records.v1 import share_group_pb2


class RecordState(enum.IntEnum):
    """A record's delivery state, with Kafka's ids (``RecordState``)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3  # KIP-1191: on its way to the group's dead-letter queue
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """How a member acknowledges a record, with the ids ShareAcknowledge carries."""

    GAP = 0  # the offset holds no record (compacted, a control record): done
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # KIP-1222: keep the lock for another lock duration


class DeadLetterCause(enum.IntEnum):
    """Why a record goes to the dead-letter queue, with the message Kafka 4.4 writes in its
    ``__dlq.errors.message`` header (``ShareGroupDLQManager.CLIENT_REJECT`` and
    ``DELIVERY_COUNT_EXCEEDED``)."""

    NONE = 0
    REJECTED = 1
    DELIVERY_COUNT_EXCEEDED = 2

    @property
    def message(self) -> str:
        return _CAUSE_MESSAGES[self]


_CAUSE_MESSAGES = {
    DeadLetterCause.NONE: "",
    DeadLetterCause.REJECTED: "Offset rejected by client.",
    DeadLetterCause.DELIVERY_COUNT_EXCEEDED: "Offset delivery count exceeded the threshold.",
}

DONE = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})


@dataclass(frozen=True, slots=True)
class Delivery:
    """One in-flight offset: its state, how often it was acquired, while ACQUIRED by which
    member until when, and while ARCHIVING why and since when."""

    state: RecordState
    delivery_count: int = 0
    member_id: str = ""
    lock_deadline_ms: int = 0
    dead_letter_cause: DeadLetterCause = DeadLetterCause.NONE
    archiving_since_ms: int = 0


GAP = Delivery(RecordState.ARCHIVED)  # an offset the log holds no record for


@dataclass(frozen=True, slots=True)
class DeliveryLimits:
    """The group's delivery configs, with Kafka's defaults."""

    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    max_in_flight: int = 2_000  # group.share.partition.max.record.locks
    # whether the group has a dead-letter queue (errors.deadletterqueue.topic.name is set):
    # then a rejected record, and one past the delivery count limit, is ARCHIVING first
    dead_letters: bool = False


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """Offsets acquired together with one delivery count (ShareFetch's ``AcquiredRecords``)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class SharePartition:
    """The delivery state of one share-partition; see the module's docstring."""

    start_offset: int = 0
    end_offset: int = 0
    deliveries: Mapping[int, Delivery] = field(default_factory=dict)  # every offset in [start, end)
    state_epoch: int = 0

    @classmethod
    def starting_at(cls, offset: int, state_epoch: int = 0) -> SharePartition:
        """A share-partition that delivers from ``offset`` on (``share.auto.offset.reset``, or
        AlterShareGroupOffsets, which also moves the state epoch)."""
        return cls(offset, offset, {}, state_epoch)

    def next_fetch_offset(self) -> int:
        """Where the next fetch for this share-partition starts: the first AVAILABLE offset in
        the window (released records are redelivered first), else the end of the window."""
        for offset in range(self.start_offset, self.end_offset):
            if self.deliveries[offset].state is RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def next_lock_deadline(self) -> int | None:
        """When the earliest lock runs out (the timer to arm), or None with nothing acquired."""
        deadlines = [d.lock_deadline_ms for d in self.deliveries.values() if d.state is RecordState.ACQUIRED]
        return min(deadlines, default=None)

    def has_dead_letters(self) -> bool:
        """Whether any record of the window is ARCHIVING (on its way to the dead-letter queue)."""
        return any(d.state is RecordState.ARCHIVING for d in self.deliveries.values())

    def in_flight(self) -> int:
        """Offsets in the window not done yet (Kafka's in-flight count for this share-partition)."""
        return sum(1 for d in self.deliveries.values() if d.state not in DONE)


def _archived(delivery: Delivery, cause: DeadLetterCause, limits: DeliveryLimits, now_ms: int) -> Delivery:
    """A record archived by its member (REJECT) or by the delivery count limit: ARCHIVING, on
    its way to the dead-letter queue, when the group has one; else done."""
    if limits.dead_letters:
        return Delivery(RecordState.ARCHIVING, delivery.delivery_count, dead_letter_cause=cause, archiving_since_ms=now_ms)
    return Delivery(RecordState.ARCHIVED, delivery.delivery_count)


def _released(delivery: Delivery, limits: DeliveryLimits, now_ms: int) -> Delivery:
    """A record given back (RELEASE, lock timeout, its member gone): available again, unless it
    was delivered as often as the group allows — then archived, never delivered again."""
    if delivery.delivery_count >= limits.delivery_count_limit:
        return _archived(delivery, DeadLetterCause.DELIVERY_COUNT_EXCEEDED, limits, now_ms)
    return Delivery(RecordState.AVAILABLE, delivery.delivery_count)


def _advance(start: int, end: int, deliveries: dict[int, Delivery]) -> int:
    """Move the start offset over the done records leading the window (forgetting them)."""
    while start < end and deliveries[start].state in DONE:
        del deliveries[start]
        start += 1
    return start


def _ranges(acquired: Iterable[tuple[int, int]]) -> list[AcquiredRange]:
    """Consecutive offsets with one delivery count, as ranges."""
    out: list[AcquiredRange] = []
    for offset, count in acquired:
        last = out[-1] if out else None
        if last is not None and last.last_offset + 1 == offset and last.delivery_count == count:
            out[-1] = replace(last, last_offset=offset)
        else:
            out.append(AcquiredRange(offset, offset, count))
    return out


def acquire(
    partition: SharePartition,
    member_id: str,
    fetch_offset: int,
    offsets: Sequence[int],
    max_records: int,
    now_ms: int,
    limits: DeliveryLimits,
    covered_to: int | None = None,
) -> tuple[SharePartition, list[AcquiredRange]]:
    """Acquire for ``member_id`` what a fetch from ``fetch_offset`` returned.

    ``offsets`` are the offsets of the fetched records in order. The fetch covers everything
    from ``fetch_offset`` to the last of them, so an offset in that span that is not among them
    holds no record (compacted away, a control record, an aborted transaction's): it is
    archived as a gap and never delivered. ``fetch_offset`` is :meth:`SharePartition.next_fetch_offset`,
    or the log's start offset when that lies beyond it (then the offsets skipped are gaps too).

    Acquired: AVAILABLE offsets of the window, then offsets never acquired, up to
    ``max_records`` and as far as the window may reach (``limits.max_in_flight``). Each is
    locked until ``now_ms + lock_duration_ms`` and counts one more delivery. An offset
    acquired by anyone else, or done, is never acquired.

    ``covered_to``, when the fetch reached further than its last deliverable offset (it ended
    on transaction markers or an aborted transaction's records), is the last offset it covered:
    the offsets after the last of ``offsets`` up to it are gaps too, so the next fetch starts
    after them — if every record up to there was taken.
    """
    partition = expire_locks(partition, now_ms, limits)
    deliveries = dict(partition.deliveries)
    start, end = partition.start_offset, partition.end_offset
    if offsets:  # available offsets the fetch covered but did not return hold no record
        present = set(offsets)
        for offset in range(max(fetch_offset, start), min(end, offsets[-1] + 1)):
            if offset not in present and deliveries[offset].state is RecordState.AVAILABLE:
                deliveries[offset] = GAP
    deadline = now_ms + limits.lock_duration_ms
    acquired: list[tuple[int, int]] = []
    every_offset_seen = True  # no offset left for lack of room (max_records, the window)
    for offset in offsets:
        if len(acquired) >= max_records:
            every_offset_seen = False
            break
        if offset < start:
            continue
        if offset < end:
            delivery = deliveries[offset]
            if delivery.state is RecordState.AVAILABLE:
                count = delivery.delivery_count + 1
                deliveries[offset] = Delivery(RecordState.ACQUIRED, count, member_id, deadline)
                acquired.append((offset, count))
            continue
        start = _advance(start, end, deliveries)
        if offset - start >= limits.max_in_flight:
            every_offset_seen = False
            break  # the window is full: the rest waits for acknowledgements
        for gap in range(end, offset):
            deliveries[gap] = GAP
        deliveries[offset] = Delivery(RecordState.ACQUIRED, 1, member_id, deadline)
        acquired.append((offset, 1))
        end = offset + 1
    after = max(offsets[-1] + 1 if offsets else fetch_offset, fetch_offset)
    if covered_to is not None and covered_to >= after and every_offset_seen:
        for offset in range(max(after, start), min(end, covered_to + 1)):
            if deliveries[offset].state is RecordState.AVAILABLE:
                deliveries[offset] = GAP
        start = _advance(start, end, deliveries)
        if end >= after and covered_to + 1 - start <= limits.max_in_flight:
            for gap in range(end, covered_to + 1):
                deliveries[gap] = GAP
            end = max(end, covered_to + 1)
    start = _advance(start, end, deliveries)
    return SharePartition(start, end, deliveries, partition.state_epoch), _ranges(acquired)


def acknowledge(
    partition: SharePartition,
    member_id: str,
    batches: Sequence[tuple[int, int, Sequence[int]]],
    now_ms: int,
    limits: DeliveryLimits,
) -> tuple[SharePartition, ErrorCode]:
    """Apply ``member_id``'s acknowledgements (ShareAcknowledge's ``AcknowledgementBatches``:
    first offset, last offset, and one acknowledge type for the whole range or one per offset).

    All or nothing for the share-partition, as Kafka answers per partition. The batches apply
    in order, as Kafka 4.4 applies them: a batch none of whose offsets is in the window (never
    acquired, or done and forgotten) is INVALID_REQUEST; one naming an offset this member does
    not hold acquired (someone else's, done, its lock run out, acknowledged by an earlier batch
    of the same request: overlapping batches) is INVALID_RECORD_STATE; a batch that runs
    backwards, carries a wrong number of types or an unknown type is INVALID_REQUEST. Then
    nothing changes.
    """
    partition = expire_locks(partition, now_ms, limits)
    changes: dict[int, Delivery] = {}
    for first, last, types in batches:
        if first > last or len(types) not in (1, last - first + 1):
            return partition, ErrorCode.invalid_request
        try:
            kinds = [AcknowledgeType(t) for t in types]
        except ValueError:
            return partition, ErrorCode.invalid_request
        if last < partition.start_offset or first >= partition.end_offset:
            return partition, ErrorCode.invalid_request
        for offset in range(first, last + 1):
            delivery = partition.deliveries.get(offset)
            if (
                delivery is None
                or offset in changes
                or delivery.state is not RecordState.ACQUIRED
                or delivery.member_id != member_id
            ):
                return partition, ErrorCode.invalid_record_state
            kind = kinds[0] if len(kinds) == 1 else kinds[offset - first]
            if kind is AcknowledgeType.ACCEPT:
                changes[offset] = Delivery(RecordState.ACKNOWLEDGED, delivery.delivery_count)
            elif kind is AcknowledgeType.RELEASE:
                changes[offset] = _released(delivery, limits, now_ms)
            elif kind is AcknowledgeType.RENEW:
                changes[offset] = replace(delivery, lock_deadline_ms=now_ms + limits.lock_duration_ms)
            elif kind is AcknowledgeType.REJECT:
                changes[offset] = _archived(delivery, DeadLetterCause.REJECTED, limits, now_ms)
            else:  # GAP: no record to write anywhere
                changes[offset] = Delivery(RecordState.ARCHIVED, delivery.delivery_count)
    deliveries = {**partition.deliveries, **changes}
    start = _advance(partition.start_offset, partition.end_offset, deliveries)
    return SharePartition(start, partition.end_offset, deliveries, partition.state_epoch), ErrorCode.none


def _release_where(
    partition: SharePartition, limits: DeliveryLimits, now_ms: int, held: Callable[[Delivery], bool]
) -> SharePartition:
    """Release the acquired records ``held`` picks (``partition`` itself if none)."""
    released = [
        offset for offset, d in partition.deliveries.items() if d.state is RecordState.ACQUIRED and held(d)
    ]
    if not released:
        return partition
    deliveries = dict(partition.deliveries)
    for offset in released:
        deliveries[offset] = _released(deliveries[offset], limits, now_ms)
    start = _advance(partition.start_offset, partition.end_offset, deliveries)
    return SharePartition(start, partition.end_offset, deliveries, partition.state_epoch)


def expiring(partition: SharePartition, now_ms: int) -> list[Delivery]:
    """The acquired records whose lock ran out by ``now_ms`` (what :func:`expire_locks` releases)."""
    return [
        d for d in partition.deliveries.values() if d.state is RecordState.ACQUIRED and d.lock_deadline_ms <= now_ms
    ]


def expire_locks(partition: SharePartition, now_ms: int, limits: DeliveryLimits) -> SharePartition:
    """Release every record whose lock ran out by ``now_ms`` (``partition`` itself if none)."""
    return _release_where(partition, limits, now_ms, lambda d: d.lock_deadline_ms <= now_ms)


def release_member(
    partition: SharePartition, member_id: str, limits: DeliveryLimits, now_ms: int
) -> SharePartition:
    """Release what ``member_id`` holds: it left the group, its session in the group ran out, or
    its share session ended (the final epoch, or the connection that opened it closed: Kafka 4.4
    gives the records back then with their delivery counts kept, as a RELEASE would)."""
    return _release_where(partition, limits, now_ms, lambda d: d.member_id == member_id)


@dataclass(frozen=True, slots=True)
class DeadLetterRange:
    """Consecutive ARCHIVING offsets with one delivery count and cause: what one run of
    dead-letter records says of them (Kafka's ``ShareGroupDLQRecordParameter``)."""

    first_offset: int
    last_offset: int
    delivery_count: int
    cause: DeadLetterCause
    since_ms: int  # the earliest archiving_since_ms of the range


def dead_letters(partition: SharePartition) -> list[DeadLetterRange]:
    """The share-partition's records on their way to the dead-letter queue, in offset order."""
    out: list[DeadLetterRange] = []
    for offset in range(partition.start_offset, partition.end_offset):
        d = partition.deliveries[offset]
        if d.state is not RecordState.ARCHIVING:
            continue
        last = out[-1] if out else None
        if (
            last is not None
            and last.last_offset + 1 == offset
            and last.delivery_count == d.delivery_count
            and last.cause is d.dead_letter_cause
        ):
            out[-1] = replace(last, last_offset=offset, since_ms=min(last.since_ms, d.archiving_since_ms))
        else:
            out.append(DeadLetterRange(offset, offset, d.delivery_count, d.dead_letter_cause, d.archiving_since_ms))
    return out


def finish_dead_letters(partition: SharePartition, offsets: Iterable[int]) -> SharePartition:
    """Those of ``offsets`` still ARCHIVING are done (their copy is in the dead-letter queue, or
    writing it failed for good): ARCHIVED, and the window moves on over them."""
    deliveries = dict(partition.deliveries)
    changed = False
    for offset in offsets:
        d = deliveries.get(offset)
        if d is not None and d.state is RecordState.ARCHIVING:
            deliveries[offset] = Delivery(RecordState.ARCHIVED, d.delivery_count)
            changed = True
    if not changed:
        return partition
    start = _advance(partition.start_offset, partition.end_offset, deliveries)
    return SharePartition(start, partition.end_offset, deliveries, partition.state_epoch)


def to_record_value(partition: SharePartition) -> share_group_pb2.SharePartitionStateValue:
    """The state as one snapshot record: the window's offsets grouped in runs of equal state."""
    value = share_group_pb2.SharePartitionStateValue(
        state_epoch=partition.state_epoch,
        start_offset=partition.start_offset,
        end_offset=partition.end_offset,
    )
    run: share_group_pb2.DeliveryRun | None = None
    previous: Delivery | None = None
    for offset in range(partition.start_offset, partition.end_offset):
        delivery = partition.deliveries[offset]
        if run is not None and delivery == previous:
            run.last_offset = offset
            continue
        run = value.runs.add(
            first_offset=offset,
            last_offset=offset,
            state=int(delivery.state),
            delivery_count=delivery.delivery_count,
            member_id=delivery.member_id,
            lock_deadline_ms=delivery.lock_deadline_ms,
            dead_letter_cause=int(delivery.dead_letter_cause),
            archiving_since_ms=delivery.archiving_since_ms,
        )
        previous = delivery
    return value


def from_record_value(value: share_group_pb2.SharePartitionStateValue) -> SharePartition:
    """The state a snapshot record holds (replay)."""
    deliveries: dict[int, Delivery] = {}
    for run in value.runs:
        delivery = Delivery(
            RecordState(run.state),
            run.delivery_count,
            run.member_id,
            run.lock_deadline_ms,
            DeadLetterCause(run.dead_letter_cause),
            run.archiving_since_ms,
        )
        for offset in range(run.first_offset, run.last_offset + 1):
            deliveries[offset] = delivery
    return SharePartition(value.start_offset, value.end_offset, deliveries, value.state_epoch)
