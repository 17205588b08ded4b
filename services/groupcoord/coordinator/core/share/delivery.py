"""ShareFetch and ShareAcknowledge at the group's shard: acknowledge, tell where to fetch,
acquire what was fetched.

Kafka splits this between the partition leader (``SharePartition``: in-memory acquisitions)
and the share coordinator (``ShareSnapshot`` records). Here the shard that owns the share
group owns the delivery state of every share-partition of the group, as plain data in the
partition's state (``GroupCoordinatorState.share_partitions``), changed only by replaying one
snapshot record per share-partition (type 60, :mod:`.share_partition`). The gateway, between
two calls of the same operation, fetches the records from the upstream:

1. **acknowledge** (ShareAcknowledge; ShareFetch's piggybacked acknowledgements): applied per
   share-partition, all or nothing for each; when the member's share session ends
   (``end_session``: its final epoch, or its connection closed) what it still holds there is
   given back at once, as a RELEASE, not after its locks (Kafka's ``releaseSession``); for
   ShareFetch, each share-partition's next fetch offset is returned too — or, for one never
   read, ``share.auto.offset.reset`` (the gateway asks the upstream where that is and says so
   in step 2). RENEW (KIP-1222) keeps a record acquired with a fresh lock; it must come in a
   request that says it carries RENEW (v2's ``is_renew_ack``, which fetches nothing), else
   that share-partition's acknowledgement is INVALID_REQUEST, and a group with
   ``share.renew.acknowledge.enable=false`` refuses it with INVALID_RECORD_STATE, as Kafka 4.4
   answers;
2. **acquire** (ShareFetch): the offsets the fetch returned are acquired for the member, each
   locked for ``share.record.lock.duration.ms`` and counting one more delivery.

Another member may fetch between the two steps: it cannot matter, since step 2 acquires only
what is AVAILABLE or new then. Locks run out lazily: every step first releases what expired
(``expire_locks``), so a record whose member died is delivered again at the next fetch after
its lock, exactly when Kafka would. The answer is sent once the records are written: an
acknowledgement answered is never undone, and a shard taking over knows every lock.

A group with a dead-letter queue (KIP-1191) archives a rejected record, and one delivered as
often as the group allows, through ARCHIVING (:mod:`.share_partition`): the step that did it
also returns a :class:`~groupcoord.coordinator.core.contract.Publish` per share-partition (one in
flight at a time), which the runtime carries out once the step's record is written — the
records' copies, with Kafka's ``__dlq.errors.*`` headers, written to the group's DLQ topic with
the coordinator's identity, within the operator's bounds — and whose outcome turns them
ARCHIVED (:func:`dead_letters_written`). A new leader resumes what was ARCHIVING, skipping
copies its predecessor wrote (:func:`dead_letter_intents` with ``resuming``).

Each answer also says what its step did to how many records (``counts``: acquired, accepted,
released, rejected, locks run out, archived), for the shard's metrics: a snapshot record cannot
tell afterwards, since done records leave the window in the step that finishes them.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from kio.schema.errors import ErrorCode

from groupcoord.coordinator.core.contract import (
    ArmedTimers,
    CoordinatorRecord,
    CoordinatorResult,
    OutboundRecord,
    Publication,
    Publish,
    PublishOutcome,
    TimerIntent,
    TopicRule,
)
from groupcoord.coordinator.core.share import share_partition as sp
from groupcoord.coordinator.core.topics_image import TopicsImage
from groupcoord.records.v1 import share_group_pb2 as rpb
from groupcoord.rpc.v1 import share_group_pb2 as pb

SharePartitionKey = tuple[str, bytes, int]
"""(group id, topic id, partition): one share-partition."""


# Kafka 4.4's headers of a dead-letter record (ShareGroupDLQRecordHelper): values are UTF-8
# text, numbers in decimal; they follow the source record's own headers when it is copied.
HEADER_TOPIC = "__dlq.errors.topic"
HEADER_PARTITION = "__dlq.errors.partition"
HEADER_OFFSET = "__dlq.errors.offset"
HEADER_GROUP = "__dlq.errors.group"
HEADER_DELIVERY_COUNT = "__dlq.errors.delivery.count"
HEADER_MESSAGE = "__dlq.errors.message"
# What makes a dead letter the same one again (a new leader resuming its predecessor's writes).
DEAD_LETTER_IDENTITY = (HEADER_GROUP, HEADER_TOPIC, HEADER_PARTITION, HEADER_OFFSET)
DLQ_TOPIC_ENABLE_CONFIG = ("errors.deadletterqueue.group.enable", "true")  # Kafka's TopicConfig
# Dead letters of one share-partition per Publish: a bound on one write, not on the queue (the
# next Publish follows the outcome).
MAX_DEAD_LETTERS_PER_PUBLISH = 500
DEAD_LETTER_METRIC = "share_dlq"


@dataclass(frozen=True, slots=True)
class DeadLetterQueue:
    """A share group's dead-letter queue: its topic (``errors.deadletterqueue.topic.name``),
    whether records are copied into it (``errors.deadletterqueue.copy.record.enable``), and the
    operator's bounds on the topic (``errors.deadletterqueue.topic.name.prefix``, the topic's
    own ``errors.deadletterqueue.group.enable``, and ``errors.deadletterqueue.auto.create.topics.enable``)."""

    topic: str
    copy_record: bool = False
    rule: TopicRule = TopicRule()


@dataclass(frozen=True, slots=True)
class DeliveryConfig:
    """A share group's delivery configs (its group configs, else the broker's defaults)."""

    limits: sp.DeliveryLimits
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"
    renew_enabled: bool = True  # share.renew.acknowledge.enable
    dead_letter_queue: DeadLetterQueue | None = None


def state_record(key: SharePartitionKey, partition: sp.SharePartition | None) -> CoordinatorRecord:
    group_id, topic_id, index = key
    return CoordinatorRecord(
        rpb.SharePartitionStateKey(group_id=group_id, topic_id=topic_id, partition=index),
        None if partition is None else sp.to_record_value(partition),
    )


def replay(
    states: dict[SharePartitionKey, sp.SharePartition],
    key: rpb.SharePartitionStateKey,
    value: rpb.SharePartitionStateValue | None,
) -> None:
    k = (key.group_id, key.topic_id, key.partition)
    if value is None:
        states.pop(k, None)
    else:
        states[k] = sp.from_record_value(value)


DeadLetterWork = Callable[[Mapping[SharePartitionKey, sp.SharePartition]], list[TimerIntent]]
"""The dead letters due in changed share-partitions (their new states): :func:`dead_letter_intents`
bound to the shard's timers, image and configs."""


def deliver(
    states: dict[SharePartitionKey, sp.SharePartition],
    request: pb.ShareDeliveryRequest,
    now_ms: int,
    config: Callable[[str], DeliveryConfig],
    dead_letters: DeadLetterWork | None = None,
) -> CoordinatorResult[pb.ShareDeliveryResponse]:
    """Step 1 or step 2 (``request.acquire``) of one ShareFetch or ShareAcknowledge."""
    group_config = config(request.group_id)
    limits = group_config.limits
    response = pb.ShareDeliveryResponse(
        acquisition_lock_timeout_ms=limits.lock_duration_ms, isolation_level=group_config.isolation_level
    )
    if not request.group_id or not request.member_id:
        response.error_code = ErrorCode.invalid_request.value
        return CoordinatorResult(response=response)
    changed: dict[SharePartitionKey, sp.SharePartition] = {}
    counts = response.counts
    budget = request.max_records if request.max_records > 0 else 500
    for part in request.partitions:
        key = (request.group_id, part.topic_id, part.partition)
        out = response.partitions.add(topic_id=part.topic_id, partition=part.partition)
        state = changed.get(key, states.get(key))
        if state is not None:  # every step first releases what expired: counted once, here
            for expired in sp.expiring(state, now_ms):
                counts.lock_timeouts += 1
                counts.archived += expired.delivery_count >= limits.delivery_count_limit
        if request.acquire:
            if state is None:
                if not part.HasField("start_offset"):
                    out.error_code = ErrorCode.invalid_request.value
                    continue
                state = sp.SharePartition.starting_at(part.start_offset)
            state, acquired = sp.acquire(
                state,
                request.member_id,
                part.fetch_offset,
                list(part.offsets),
                budget,
                now_ms,
                limits,
                part.covered_to if part.HasField("covered_to") else None,
            )
            for r in acquired:
                size = r.last_offset - r.first_offset + 1
                budget -= size
                counts.acquired += size
                counts.redelivered += size if r.delivery_count > 1 else 0
                out.acquired.add(
                    first_offset=r.first_offset, last_offset=r.last_offset, delivery_count=r.delivery_count
                )
            changed[key] = state
            continue
        if part.acknowledgements:
            batches = [
                (b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in part.acknowledgements
            ]
            renewing = any(sp.AcknowledgeType.RENEW in b[2] for b in batches)
            if renewing and not request.is_renew_ack:  # v1 has no RENEW; v2 must say it has
                out.acknowledge_error_code = ErrorCode.invalid_request.value
            elif state is None or (renewing and not group_config.renew_enabled):
                out.acknowledge_error_code = ErrorCode.invalid_record_state.value
            else:
                before = sp.expire_locks(state, now_ms, limits)
                state, code = sp.acknowledge(state, request.member_id, batches, now_ms, limits)
                out.acknowledge_error_code = code.value
                if code is ErrorCode.none:
                    _count_acknowledgements(counts, before, batches, limits)
                    changed[key] = state
        if request.end_session and (held := changed.get(key, states.get(key))) is not None:
            state = sp.release_member(held, request.member_id, limits, now_ms)
            if state != held:
                changed[key] = state
        if part.fetch:
            if state is None:
                out.reset_to = group_config.auto_offset_reset
            else:
                expired = sp.expire_locks(state, now_ms, limits)
                if expired != state:
                    changed[key] = state = expired
                out.fetch_offset = state.next_fetch_offset()
    written = {key: state for key, state in changed.items() if states.get(key) != state}
    records = [state_record(key, state) for key, state in written.items()]
    # only a group with a DLQ archives through ARCHIVING: the others pay nothing for it
    timers = dead_letters(written) if dead_letters is not None and written and limits.dead_letters else []
    return CoordinatorResult(records=records, response=response, timers=timers)


def _count_acknowledgements(
    counts: pb.ShareDeliveryCounts,
    before: sp.SharePartition,
    batches: list[tuple[int, int, list[int]]],
    limits: sp.DeliveryLimits,
) -> None:
    """Add what acknowledgements that were applied to ``before`` did (GAP and RENEW: nothing)."""
    for first, last, types in batches:
        for offset in range(first, last + 1):
            kind = sp.AcknowledgeType(types[0] if len(types) == 1 else types[offset - first])
            if kind is sp.AcknowledgeType.ACCEPT:
                counts.accepted += 1
            elif kind is sp.AcknowledgeType.RELEASE:
                counts.released += 1
                counts.archived += before.deliveries[offset].delivery_count >= limits.delivery_count_limit
            elif kind is sp.AcknowledgeType.REJECT:
                counts.rejected += 1
                counts.archived += 1


def release_member(
    states: dict[SharePartitionKey, sp.SharePartition],
    group_id: str,
    member_id: str,
    limits: sp.DeliveryLimits,
    now_ms: int,
) -> dict[SharePartitionKey, sp.SharePartition]:
    """The group's share-partitions changed by giving back everything ``member_id`` holds: it
    left or its session ran out, and another member may take its records now rather than
    after their locks (Kafka releases them when the member goes)."""
    out = {}
    for key in sorted(k for k in states if k[0] == group_id):
        released = sp.release_member(states[key], member_id, limits, now_ms)
        if released != states[key]:
            out[key] = released
    return out


def dead_letter_key(key: SharePartitionKey) -> str:
    """The timer key of a share-partition's dead letters in flight (one Publish at a time)."""
    group_id, topic_id, partition = key
    return f"share-dlq:{group_id}:{topic_id.hex()}:{partition}"


def dead_letter_intents(
    changed: Mapping[SharePartitionKey, sp.SharePartition],
    config: Callable[[str], DeliveryConfig],
    topic_name: Callable[[bytes], str | None],
    armed: ArmedTimers,
    written: Callable[[SharePartitionKey, tuple[int, ...], PublishOutcome], CoordinatorResult[None]],
    *,
    resuming: bool = False,
) -> list[TimerIntent]:
    """A :class:`Publish` for each share-partition of ``changed`` (its new state) with records
    ARCHIVING and none of its dead letters in flight already (their outcome issues the next).

    ``resuming``: the state was loaded, not made here; a predecessor may have written some of
    these copies before it died, so the write skips those it finds in the DLQ partition since
    the earliest record began ARCHIVING. A group whose DLQ topic was unset meanwhile gets a
    publication to no topic, which fails at once and archives them (counted as failed)."""
    intents: list[TimerIntent] = []
    for key, state in changed.items():
        if armed.is_scheduled(dead_letter_key(key)):
            continue
        ranges = sp.dead_letters(state)
        if not ranges:
            continue
        group_id, topic_id, partition = key
        queue = config(group_id).dead_letter_queue or DeadLetterQueue("")
        name = topic_name(topic_id)
        source = name if name is not None else _topic_id_text(topic_id)
        records: list[OutboundRecord] = []
        offsets: list[int] = []
        for r in ranges:
            for offset in range(r.first_offset, min(r.last_offset + 1, r.first_offset + MAX_DEAD_LETTERS_PER_PUBLISH - len(records))):
                headers = (
                    (HEADER_TOPIC, source.encode()),
                    (HEADER_PARTITION, str(partition).encode()),
                    (HEADER_OFFSET, str(offset).encode()),
                    (HEADER_GROUP, group_id.encode()),
                    (HEADER_DELIVERY_COUNT, str(r.delivery_count).encode()),
                    (HEADER_MESSAGE, r.cause.message.encode()),
                )
                copy_of = (name, partition, offset) if queue.copy_record and name is not None else None
                records.append(OutboundRecord(None, None, headers, copy_of))
                offsets.append(offset)
        publication = Publication(
            queue.topic,
            partition,
            tuple(records),
            queue.rule,
            DEAD_LETTER_IDENTITY,
            min(r.since_ms for r in ranges) if resuming else None,
            DEAD_LETTER_METRIC,
        )
        intents.append(Publish(dead_letter_key(key), publication, partial(written, key, tuple(offsets))))
    return intents


def dead_letters_written(
    states: Mapping[SharePartitionKey, sp.SharePartition], key: SharePartitionKey, offsets: Iterable[int]
) -> dict[SharePartitionKey, sp.SharePartition]:
    """The share-partition once the Publish of ``offsets`` ended: those still ARCHIVING are
    ARCHIVED, written or not (Kafka archives a record whose DLQ write failed for good rather
    than hold the window; the failure is counted); nothing if the share-partition is gone
    (its group deleted, its offsets altered) or had nothing of them left."""
    state = states.get(key)
    if state is None:
        return {}
    done = sp.finish_dead_letters(state, offsets)
    return {} if done is state else {key: done}


def _topic_id_text(topic_id: bytes) -> str:
    """A topic id as Kafka prints it (``Uuid.toString``: URL-safe base64 without padding), the
    header Kafka writes when the topic's name is unknown."""
    return base64.urlsafe_b64encode(topic_id).decode().rstrip("=")


def records_in_flight(
    states: dict[SharePartitionKey, sp.SharePartition], image: TopicsImage
) -> dict[tuple[str, str, int], int]:
    """Per share-partition (group, topic name, partition), its records not done yet (acquired,
    or available again): Kafka's ``InFlightMessageCount``, for the metrics; share-partitions
    with none are left out."""
    out = {}
    for (group_id, topic_id, partition), state in states.items():
        if records := state.in_flight():
            out[(group_id, image.topic_name(topic_id) or topic_id.hex(), partition)] = records
    return out


def count_delivery(sink: Any, response: pb.ShareDeliveryResponse) -> None:
    """The ``answered`` hook of ShareFetch's and ShareAcknowledge's operations: what the step
    did to records (its answer's ``counts``) goes to the process's metrics facade
    (``ShardMetrics.record_share_delivery``) once the client is answered."""
    sink.record_share_delivery(response.counts)
