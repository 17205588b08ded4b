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

Each answer also says what its step did to how many records (``counts``: acquired, accepted,
released, rejected, locks run out, archived), for the shard's metrics: a snapshot record cannot
tell afterwards, since done records leave the window in the step that finishes them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from groupcoord.coordinator.core.contract import CoordinatorRecord, CoordinatorResult
from groupcoord.coordinator.core.share import share_partition as sp
from groupcoord.coordinator.core.topics_image import TopicsImage
from groupcoord.records.v1 import share_group_pb2 as rpb
from groupcoord.rpc.v1 import share_group_pb2 as pb

SharePartitionKey = tuple[str, bytes, int]
"""(group id, topic id, partition): one share-partition."""


@dataclass(frozen=True, slots=True)
class DeliveryConfig:
    """A share group's delivery configs (its group configs, else the broker's defaults)."""

    limits: sp.DeliveryLimits
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"
    renew_enabled: bool = True  # share.renew.acknowledge.enable


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


def deliver(
    states: dict[SharePartitionKey, sp.SharePartition],
    request: pb.ShareDeliveryRequest,
    now_ms: int,
    config: Callable[[str], DeliveryConfig],
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
    records: list[CoordinatorRecord] = []
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
            state = sp.release_member(held, request.member_id, limits)
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
    for key, state in changed.items():
        if states.get(key) != state:
            records.append(state_record(key, state))
    return CoordinatorResult(records=records, response=response)


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
    states: dict[SharePartitionKey, sp.SharePartition], group_id: str, member_id: str, limits: sp.DeliveryLimits
) -> list[CoordinatorRecord]:
    """Records giving back everything ``member_id`` holds in the group's share-partitions: it
    left or its session ran out, and another member may take its records now rather than
    after their locks (Kafka releases them when the member goes)."""
    records = []
    for key in sorted(k for k in states if k[0] == group_id):
        released = sp.release_member(states[key], member_id, limits)
        if released != states[key]:
            records.append(state_record(key, released))
    return records


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
