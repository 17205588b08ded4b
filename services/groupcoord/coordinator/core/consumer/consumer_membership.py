"""Consumer group members leaving, being fenced, and static membership.

Kafka's ``consumerGroupLeave`` and member fencing: a member leaves with epoch -1 (or
-2, a static member's temporary leave that keeps its assignment for the instance id); a
member whose session or rebalance timeout runs out is fenced. Either way its records go, and
the group epoch is bumped (the assignor runs on the next heartbeat) — or, when only classic
members remain, the group converts back into a classic group (online downgrade). The timers
that fence members live here too: the session timer, the rebalance timer of a revoking
member, and the timers a takeover re-arms.
"""

from __future__ import annotations

from collections.abc import Callable

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.consumer.assignment import assignment_timer, may_assign, subscribed_topics
from groupcoord.coordinator.core.consumer.consumer_context import ConsumerContext
from groupcoord.coordinator.core.consumer.consumer_group import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    current_assignment_record,
    group_metadata_record,
    member_tombstones,
    regex_record,
    replace_member,
)
from groupcoord.coordinator.core.consumer.consumer_timers import (
    member_timer_cancels,
    rebalance_timer_key,
    session_timer_key,
)
from groupcoord.coordinator.core.contract import (
    CancelTimer,
    CoordinatorRecord,
    CoordinatorResult,
    ScheduleTimer,
    TimerIntent,
    deadline_timer,
)
from groupcoord.rpc.v1 import consumer_group_pb2 as pb


# ---------------------------------------------------------------------------------- leaving
def leave(
    ctx: ConsumerContext, r: pb.ConsumerGroupHeartbeatRequest, now_ms: int
) -> CoordinatorResult[pb.ConsumerGroupHeartbeatResponse]:
    """A ConsumerGroupHeartbeat with member epoch -1 (leave) or -2 (a static member's
    temporary leave)."""
    group = ctx.consumer_group(r.group_id)
    if group is None:
        raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {r.group_id} not found.")
    instance_id = r.instance_id if r.HasField("instance_id") else None
    if instance_id is not None:
        member = known_static_member(group, instance_id, r.member_id)
    else:
        member = group.members.get(r.member_id)
        if member is None:
            raise CoordinatorError(
                ErrorCode.unknown_member_id,
                f"Member {r.member_id} is not a member of group {group.group_id}.",
            )
    response = pb.ConsumerGroupHeartbeatResponse(member_id=member.member_id, member_epoch=r.member_epoch)
    if r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if member.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return CoordinatorResult(response=response)  # a retried temporary leave
        # Temporary leave: keep the assignment for the instance id, release what it was revoking.
        away = replace_member(
            member,
            member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
            previous_member_epoch=member.member_epoch,
            pending_revocation={},
            state=MemberState.STABLE if member.state is MemberState.UNREVOKED_PARTITIONS else member.state,
        )
        return CoordinatorResult(
            records=[current_assignment_record(group.group_id, away)],
            response=response,
            timers=[CancelTimer(rebalance_timer_key(group.group_id, member.member_id))],
        )
    removal = remove_member(ctx, group, member, now_ms)
    return CoordinatorResult(records=removal.records, response=response, timers=removal.timers)


def remove_member(
    ctx: ConsumerContext, group: ConsumerGroup, member: ConsumerGroupMember, now_ms: int
) -> CoordinatorResult[None]:
    """Kafka's fencing/removal: the member's tombstones, its regex if nobody else uses it,
    and a group epoch bump (the assignor runs on the next heartbeat) — or, when only
    classic members remain, the records converting the group back into a classic group
    (online downgrade). The member's timers end either way."""
    converted = downgrade(ctx, group, member.member_id, now_ms)
    if converted is not None:
        return converted
    return remove_members(ctx, group, [member])


def downgrade(
    ctx: ConsumerContext,
    group: ConsumerGroup,
    leaving_member_id: str,
    now_ms: int,
    joining: ConsumerGroupMember | None = None,
) -> CoordinatorResult[None] | None:
    """The records converting the group back into a classic group when
    ``leaving_member_id`` goes (``joining`` taking its place), None when it stays a
    consumer group; on a conversion the members' consumer-group timers end and the classic
    group's start."""
    if ctx.downgrade_to_classic is None:
        return None
    converted = ctx.downgrade_to_classic(group, leaving_member_id, now_ms, joining)
    if converted is None:
        return None
    member_ids = list(group.members)
    if joining is not None:
        member_ids.append(joining.member_id)
    timers = list(converted.timers)
    for member_id in member_ids:
        timers += member_timer_cancels(group.group_id, member_id)
    return CoordinatorResult(records=converted.records, timers=timers)


def remove_members(
    ctx: ConsumerContext, group: ConsumerGroup, members: list[ConsumerGroupMember]
) -> CoordinatorResult[None]:
    """Removing several members at once (a classic LeaveGroup batch): their tombstones,
    the regexes only they used, and one group epoch bump; their timers end."""
    gid = group.group_id
    records: list[CoordinatorRecord] = []
    timers: list[TimerIntent] = []
    for member in members:
        records += member_tombstones(gid, member.member_id)
        timers += member_timer_cancels(gid, member.member_id)
    resolved = {k: v.topics for k, v in group.resolved_regexes.items()}
    names, regexes = subscribed_topics(group, resolved, gone=members)
    for regex in group.resolved_regexes:
        if regexes.get(regex, 0) <= 0:
            records.append(regex_record(gid, regex, None))
    records.append(group_metadata_record(gid, group.group_epoch + 1, ctx.image.metadata_hash(names)))
    return CoordinatorResult(records=records, timers=timers)


# ---------------------------------------------------------------------------------- static members
def static_takeover(static: ConsumerGroupMember, member_id: str) -> ConsumerGroupMember:
    """A static member back under a new member id takes over the old member's assignment,
    without a group epoch bump (KIP-848 static membership); its epoch starts again at 0."""
    return replace_member(static, member_id=member_id, member_epoch=0, previous_member_epoch=0)


def known_static_member(group: ConsumerGroup, instance_id: str, member_id: str | None) -> ConsumerGroupMember:
    """The member holding ``instance_id``: UNKNOWN_MEMBER_ID if none, FENCED_INSTANCE_ID if it
    has another member id than ``member_id`` (None: any, an admin removing by instance id)."""
    static = group.member_by_instance(instance_id)
    if static is None:
        raise CoordinatorError(
            ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown in group {group.group_id}."
        )
    if member_id is not None and static.member_id != member_id:
        raise CoordinatorError(
            ErrorCode.fenced_instance_id,
            f"Static member {member_id} with instance id {instance_id} is fenced by member {static.member_id}.",
        )
    return static


# ---------------------------------------------------------------------------------- timers
def session_timer(
    ctx: ConsumerContext, group_id: str, member_id: str, now_ms: int, delay_ms: int | None = None
) -> ScheduleTimer:
    """(Re-)arming the member's session: the group's session timeout, or ``delay_ms`` (a
    classic member's own session timeout)."""
    delay = ctx.session_timeout_ms(group_id) if delay_ms is None else delay_ms
    return fencing_timer(ctx, session_timer_key(group_id, member_id), group_id, member_id, now_ms, delay)


def fencing_timer(
    ctx: ConsumerContext,
    key: str,
    group_id: str,
    member_id: str,
    now_ms: int,
    delay_ms: int,
    still: Callable[[ConsumerGroupMember], bool] | None = None,
) -> ScheduleTimer:
    """A timer that removes the member when it fires, if it is still there (and ``still``
    holds for it: the world may have moved since)."""
    return deadline_timer(key, delay_ms, now_ms, _fence, ctx, group_id, member_id, still)


def _fence(
    ctx: ConsumerContext,
    group_id: str,
    member_id: str,
    still: Callable[[ConsumerGroupMember], bool] | None,
    now_ms: int,
) -> CoordinatorResult[None]:
    group = ctx.consumer_group(group_id)
    member = None if group is None else group.members.get(member_id)
    if group is None or member is None or (still is not None and not still(member)):
        return CoordinatorResult()
    return remove_member(ctx, group, member, now_ms)


def heartbeat_timers(
    ctx: ConsumerContext,
    group_id: str,
    member_id: str,
    before: ConsumerGroupMember,
    after: ConsumerGroupMember,
    now_ms: int,
    replaced: ConsumerGroupMember | None = None,
) -> list[TimerIntent]:
    """The timers one heartbeat of ``member_id`` (``before`` → ``after``) (re-)arms, in one
    call rather than one per timer: its session, the cancels of the static member's previous
    incarnation it ``replaced``, and its rebalance timer (:func:`rebalance_timer`)."""
    timers: list[TimerIntent] = [session_timer(ctx, group_id, member_id, now_ms)]
    if replaced is not None:
        timers += member_timer_cancels(group_id, replaced.member_id)
    timers += rebalance_timer(ctx, group_id, before, after, now_ms)
    return timers


def rebalance_timer(
    ctx: ConsumerContext, group_id: str, before: ConsumerGroupMember, after: ConsumerGroupMember, now_ms: int
) -> list[TimerIntent]:
    """A revoking member must revoke within its rebalance timeout: armed when it starts
    revoking at an epoch (not re-armed while it keeps revoking at that epoch), cancelled
    once it stops."""
    key = rebalance_timer_key(group_id, after.member_id)
    if after.state is not MemberState.UNREVOKED_PARTITIONS:
        return [CancelTimer(key)] if ctx.armed.is_scheduled(key) else []
    if (
        before.state is MemberState.UNREVOKED_PARTITIONS
        and before.member_epoch == after.member_epoch
        and ctx.armed.is_scheduled(key)
    ):
        return []
    epoch = after.member_epoch
    return [
        fencing_timer(
            ctx,
            key,
            group_id,
            after.member_id,
            now_ms,
            after.rebalance_timeout_ms,
            lambda m: m.member_epoch == epoch and m.state is MemberState.UNREVOKED_PARTITIONS,
        )
    ]


def timers_after_load(ctx: ConsumerContext, now_ms: int) -> CoordinatorResult[None]:
    """After a takeover: every member gets a fresh session (and a revoking member a fresh
    rebalance timeout); a group waiting for a batched assignment gets its timer back."""
    timers: list[TimerIntent] = []
    for group in list(ctx.groups.values()):
        if not isinstance(group, ConsumerGroup):
            continue
        for member in group.members.values():
            classic = member.classic_member_metadata
            session_ms = classic.session_timeout_ms if classic is not None else None
            timers.append(session_timer(ctx, group.group_id, member.member_id, now_ms, session_ms))
            if member.state is MemberState.UNREVOKED_PARTITIONS and classic is None:
                timers += rebalance_timer(
                    ctx, group.group_id, ConsumerGroupMember(member.member_id), member, now_ms
                )
        if (
            group.group_epoch > group.assignment_epoch
            and group.members
            and not may_assign(ctx, group, now_ms)
        ):
            timers += assignment_timer(ctx, group, now_ms)
    return CoordinatorResult(timers=timers)
