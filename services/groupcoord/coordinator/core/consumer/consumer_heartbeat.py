"""ConsumerGroupHeartbeat v0/v1 for KIP-848 groups.

Modelled on Apache Kafka 4.x's ``GroupMetadataManager.consumerGroupHeartbeat``. One heartbeat:

1. validates the request (INVALID_REQUEST per KIP rule, UNSUPPORTED_ASSIGNOR,
   INVALID_REGULAR_EXPRESSION);
2. finds or creates the group and the member — dynamic by member id, static by instance id
   (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED) —
   and checks the member epoch (FENCED_MEMBER_EPOCH, except the previous epoch when the
   owned partitions are a subset of the assignment: the last response was lost);
3. applies the fields the heartbeat carries (null = unchanged); then the group epoch, the
   target assignment and the member's reconciliation (consumer/assignment.py);
4. re-arms the session timer (and the rebalance timer while it must revoke).

Most heartbeats are none of that: a stable member at its group's assignment epoch saying
nothing new. Those take :func:`_steady_heartbeat`, which checks that nothing could change and
answers with the session re-armed, skipping steps 2-3's copies and comparisons; a property
test holds its answers and timers equal to the full path's for every request it accepts.

A leave (member epoch -1 or -2) is consumer/consumer_membership.py's. A repeated heartbeat that changes
nothing writes nothing.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError, error_response
from groupcoord.coordinator.core.consumer.assignment import MemberUpdate, advance_member
from groupcoord.coordinator.core.consumer.consumer_context import ConsumerContext
from groupcoord.coordinator.core.consumer.consumer_group import (
    CONSUMER_GROUP_REPLAY,
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    replace_member,
)
from groupcoord.coordinator.core.consumer.consumer_membership import (
    heartbeat_timers,
    known_static_member,
    leave,
    session_timer,
    static_takeover,
)
from groupcoord.coordinator.core.consumer.regex_subscriptions import compile_regex
from groupcoord.coordinator.core.contract import CoordinatorRecord, CoordinatorResult, TimerIntent
from groupcoord.coordinator.core.group import GroupType
from groupcoord.coordinator.core.topics_image import UNKNOWN_IMAGE
from groupcoord.rpc.v1 import consumer_group_pb2 as pb

# ConsumerGroupHeartbeat v1+: the client generates the member id (KIP-1082).
CONSUMER_GENERATED_MEMBER_ID_VERSION = 1


def heartbeat(
    ctx: ConsumerContext, request: pb.ConsumerGroupHeartbeatRequest, now_ms: int
) -> CoordinatorResult[pb.ConsumerGroupHeartbeatResponse]:
    try:
        _validate(ctx, request)
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return leave(ctx, request, now_ms)
        if ctx.image is UNKNOWN_IMAGE:
            raise CoordinatorError(
                ErrorCode.coordinator_load_in_progress,
                "The coordinator has not loaded topic metadata yet.",
            )
        steady = _steady_heartbeat(ctx, request, now_ms)
        return steady if steady is not None else _heartbeat(ctx, request, now_ms)
    except CoordinatorError as e:
        return CoordinatorResult(response=error_response(pb.ConsumerGroupHeartbeatResponse, e))


def _validate(ctx: ConsumerContext, r: pb.ConsumerGroupHeartbeatRequest) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid, rule by rule."""
    if not r.group_id:
        raise _invalid("GroupId can't be empty.")
    if r.HasField("instance_id") and not r.instance_id:
        raise _invalid("InstanceId can't be empty.")
    if r.HasField("rack_id") and not r.rack_id:
        raise _invalid("RackId can't be empty.")
    if r.api_version >= CONSUMER_GENERATED_MEMBER_ID_VERSION and not r.member_id:
        raise _invalid("MemberId can't be empty.")
    if (r.member_epoch > 0 or r.member_epoch == LEAVE_GROUP_MEMBER_EPOCH) and not r.member_id:
        raise _invalid("MemberId can't be empty.")
    if r.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        if r.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if not r.HasField("topic_partitions") or r.topic_partitions.topic_partitions:
            raise _invalid("TopicPartitions must be empty when (re-)joining.")
        if not r.HasField("subscribed_topic_names") and not r.HasField("subscribed_topic_regex"):
            raise _invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
            )
    elif r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if not r.HasField("instance_id"):
            raise _invalid("InstanceId can't be null.")
    elif r.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise _invalid(f"MemberEpoch {r.member_epoch} is invalid.")
    if r.rebalance_timeout_ms < -1:
        raise _invalid("RebalanceTimeoutMs must be -1 (unchanged) or positive.")
    if r.HasField("subscribed_topic_regex") and r.api_version < 1:
        raise _invalid("SubscribedTopicRegex requires ConsumerGroupHeartbeat v1.")
    if r.HasField("server_assignor") and r.server_assignor not in ctx.assignors:
        raise CoordinatorError(
            ErrorCode.unsupported_assignor,
            f"ServerAssignor {r.server_assignor} is not supported. "
            f"Supported assignors: {', '.join(ctx.assignors)}.",
        )
    if r.HasField("subscribed_topic_regex") and r.subscribed_topic_regex:
        compile_regex(r.subscribed_topic_regex)


def _steady_heartbeat(
    ctx: ConsumerContext, r: pb.ConsumerGroupHeartbeatRequest, now_ms: int
) -> CoordinatorResult[pb.ConsumerGroupHeartbeatResponse] | None:
    """The answer to a heartbeat that changes nothing, or None when it might change something
    (then the full path decides). Nothing changes when the member is stable at the group's
    target epoch, the group has no newer epoch to assign, the heartbeat carries that same
    epoch, and every field it sets equals the member's (:func:`_apply_fields` changes nothing,
    as it decides for the full path too): then the full path writes no record,
    computes no target, reconciles to the same member (its owned partitions are not looked at)
    and answers without an assignment; only the session timer is re-armed (Kafka's
    consumerGroupHeartbeat does the same work and finds nothing to write)."""
    group = ctx.groups.get(r.group_id)
    if not isinstance(group, ConsumerGroup):
        return None
    member_id = r.member_id
    member = group.members.get(member_id)
    if (
        member is None
        or member.state is not MemberState.STABLE
        or r.member_epoch != member.member_epoch
        or member.member_epoch != group.assignment_epoch
        or group.group_epoch != group.assignment_epoch
        or r.HasField("subscribed_topic_names")  # a full request: answered with the assignment
        or r.HasField("subscribed_topic_regex")
        or (r.undescribable_topics and member.subscribed_topic_regex is not None)
    ):
        return None
    instance_id = r.instance_id if r.HasField("instance_id") else None
    if instance_id is not None and group.static_members.get(instance_id) != member_id:
        return None  # the full path finds a static member by its instance id
    if _apply_fields(member, r, instance_id) is not member:
        return None
    response = pb.ConsumerGroupHeartbeatResponse(
        member_id=member_id,
        member_epoch=member.member_epoch,
        heartbeat_interval_ms=ctx.heartbeat_interval_ms(group.group_id),
    )
    return CoordinatorResult(
        response=response, timers=heartbeat_timers(ctx, group.group_id, member_id, member, member, now_ms)
    )


def _group_for(
    ctx: ConsumerContext, r: pb.ConsumerGroupHeartbeatRequest, now_ms: int
) -> tuple[ConsumerGroup, list[CoordinatorRecord], bool, Callable[[], CoordinatorResult[None]] | None]:
    """The consumer group (a scratch one when it is to be created or converted), the
    records that must precede this heartbeat's (an empty classic group's tombstones, or a
    classic group's conversion), whether the group is new, and what retires a converted
    classic group (its waiting requests' answers, its timers' cancels) once the heartbeat
    succeeded."""
    existing = ctx.groups.get(r.group_id)
    if isinstance(existing, ConsumerGroup):
        return existing, [], False, None
    if existing is not None and r.member_epoch == JOIN_GROUP_MEMBER_EPOCH and not existing.is_empty():
        upgrade = None if ctx.upgrade_classic_group is None else ctx.upgrade_classic_group(existing, now_ms)
        if upgrade is not None:
            records, finish = upgrade
            group = ConsumerGroup(r.group_id)
            for record in records:
                replay = CONSUMER_GROUP_REPLAY.get(type(record.key))
                if replay is not None:
                    replay(group, record.key, record.value)
            return group, list(records), False, finish
    if existing is None or (existing.is_empty() and existing.group_type is GroupType.CLASSIC):
        if r.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
            raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {r.group_id} not found.")
        # An empty classic group becomes a consumer group (its offsets stay).
        pre = existing.tombstone_records() if existing is not None else []
        return ConsumerGroup(r.group_id), pre, True, None
    raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {r.group_id} is not a consumer group.")


def _heartbeat(
    ctx: ConsumerContext, r: pb.ConsumerGroupHeartbeatRequest, now_ms: int
) -> CoordinatorResult[pb.ConsumerGroupHeartbeatResponse]:
    group, records, group_is_new, finish_upgrade = _group_for(ctx, r, now_ms)
    gid = group.group_id
    owned = owned_partitions(r)
    instance_id = r.instance_id if r.HasField("instance_id") else None
    replaced: ConsumerGroupMember | None = None  # a static member's previous incarnation
    member_id = r.member_id
    if r.member_epoch == JOIN_GROUP_MEMBER_EPOCH and not member_id:
        member_id = base64.urlsafe_b64encode(ctx.new_uuid().bytes).rstrip(b"=").decode()  # v0

    if instance_id is None:
        member = group.members.get(member_id)
        if r.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            is_new = member is None
            if member is None:
                member = ConsumerGroupMember(member_id)
        else:
            if member is None:
                raise CoordinatorError(
                    ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {gid}."
                )
            is_new = False
            _check_epoch(member, r.member_epoch, owned)
    else:
        static = group.member_by_instance(instance_id)
        if r.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if static is None:
                member = group.members.get(member_id) or ConsumerGroupMember(member_id)
                is_new = member_id not in group.members
            elif static.member_id == member_id:
                member, is_new = static, False  # a retried join
            elif static.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise CoordinatorError(
                    ErrorCode.unreleased_instance_id,
                    f"Static member {member_id} with instance id {instance_id} cannot join the group "
                    f"because the instance id is owned by member {static.member_id}.",
                )
            else:
                replaced, member, is_new = static, static_takeover(static, member_id), False
        else:
            member, is_new = known_static_member(group, instance_id, member_id), False
            _check_epoch(member, r.member_epoch, owned)

    if is_new and len(group.members) >= ctx.config.consumer_group_max_size:
        raise CoordinatorError(
            ErrorCode.group_max_size_reached,
            f"The consumer group has reached its maximum capacity of {ctx.config.consumer_group_max_size} members.",
        )

    updated = _apply_fields(member, r, instance_id)
    timers: list[TimerIntent] = []
    change = MemberUpdate(member, updated, is_new, replaced)
    reconciled = advance_member(
        ctx,
        group,
        records,
        timers,
        change,
        group_is_new=group_is_new,
        owned=owned,
        now_ms=now_ms,
        undescribable=frozenset(r.undescribable_topics),
    )

    timers += heartbeat_timers(ctx, gid, member_id, member, reconciled, now_ms, replaced)

    response = pb.ConsumerGroupHeartbeatResponse(
        member_id=member_id,
        member_epoch=reconciled.member_epoch,
        heartbeat_interval_ms=ctx.heartbeat_interval_ms(gid),
    )
    full_request = (
        r.rebalance_timeout_ms != -1
        and (r.HasField("subscribed_topic_names") or r.HasField("subscribed_topic_regex"))
        and r.HasField("topic_partitions")
    )
    if (
        r.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        or full_request
        or reconciled.assigned_partitions() != member.assigned_partitions()
    ):
        response.assignment.SetInParent()
        for tid in sorted(reconciled.assigned):
            parts = reconciled.assigned[tid]
            if parts:
                response.assignment.topic_partitions.add(topic_id=tid, partitions=sorted(parts))
    completions: list[tuple[Any, Any]] = []
    if finish_upgrade is not None:
        # The converted classic members keep their own session timeouts (Kafka's
        # convertToConsumerGroup); the classic group's timers and waiting requests end.
        retired = finish_upgrade()
        completions = retired.completions
        timers += retired.timers
        for other in group.members.values():
            classic = other.classic_member_metadata
            if classic is not None and other.member_id != member_id:
                timers.append(session_timer(ctx, gid, other.member_id, now_ms, classic.session_timeout_ms))
    return CoordinatorResult(records=records, response=response, completions=completions, timers=timers)


def _invalid(message: str) -> CoordinatorError:
    return CoordinatorError(ErrorCode.invalid_request, message)


def owned_partitions(request: pb.ConsumerGroupHeartbeatRequest) -> dict[bytes, frozenset[int]] | None:
    if not request.HasField("topic_partitions"):
        return None
    out: dict[bytes, frozenset[int]] = {}
    for tp in request.topic_partitions.topic_partitions:
        out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return out


def _is_subset(owned: Mapping[bytes, frozenset[int]] | None, member: ConsumerGroupMember) -> bool:
    if owned is None:
        return False
    for tid, parts in owned.items():
        if not parts:
            continue
        have = member.assigned.get(tid)
        if have is None or any(p not in have for p in parts):
            return False
    return True


def _check_epoch(
    member: ConsumerGroupMember, received: int, owned: Mapping[bytes, frozenset[int]] | None
) -> None:
    """Kafka's throwIfMemberEpochIsInvalid, with the lost-response rule."""
    if received > member.member_epoch:
        raise CoordinatorError(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a greater member epoch ({received}) than the one known by "
            f"the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )
    # The member may have missed the response that bumped its epoch: accept the previous
    # epoch while it owns nothing it was not given.
    if received < member.member_epoch and (
        received != member.previous_member_epoch or not _is_subset(owned, member)
    ):
        raise CoordinatorError(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a smaller member epoch ({received}) than the one known by "
            f"the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )


def _apply_fields(
    member: ConsumerGroupMember, r: pb.ConsumerGroupHeartbeatRequest, instance_id: str | None
) -> ConsumerGroupMember:
    changes: dict[str, Any] = {}
    if instance_id is not None and instance_id != member.instance_id:
        changes["instance_id"] = instance_id
    if r.HasField("rack_id") and r.rack_id != member.rack_id:
        changes["rack_id"] = r.rack_id
    if r.rebalance_timeout_ms != -1 and r.rebalance_timeout_ms != member.rebalance_timeout_ms:
        changes["rebalance_timeout_ms"] = r.rebalance_timeout_ms
    if r.client_id and r.client_id != member.client_id:
        changes["client_id"] = r.client_id
    if r.client_host and r.client_host != member.client_host:
        changes["client_host"] = r.client_host
    if r.HasField("subscribed_topic_names"):
        names = tuple(sorted(set(r.subscribed_topic_names.names)))
        if names != member.subscribed_topic_names:
            changes["subscribed_topic_names"] = names
    if r.HasField("subscribed_topic_regex"):
        regex = r.subscribed_topic_regex or None
        if regex != member.subscribed_topic_regex:
            changes["subscribed_topic_regex"] = regex
    if r.HasField("server_assignor") and r.server_assignor != member.server_assignor:
        changes["server_assignor"] = r.server_assignor
    return replace_member(member, **changes) if changes else member
