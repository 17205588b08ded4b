"""Heartbeat v0-4 and LeaveGroup v0-5: a classic member stays in its group, or leaves it.

Kafka's ``classicGroupHeartbeat`` and ``classicGroupLeave``: a heartbeat re-arms the member's
session (REBALANCE_IN_PROGRESS tells it to rejoin); a leave removes a batch of members (by
member id or group instance id) and rebalances the group (rebalance.remove_member_and_rebalance).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.classic.classic_context import ClassicContext, GroupChange
from groupcoord.coordinator.core.classic.classic_group import ClassicGroupState
from groupcoord.coordinator.core.classic.classic_timers import pending_member_key
from groupcoord.coordinator.core.classic.rebalance import (
    client_reason,
    finish,
    maybe_complete_join,
    remove_member_and_rebalance,
    session_timer,
)
from groupcoord.coordinator.core.contract import CancelTimer, CoordinatorResult
from groupcoord.rpc.v1 import classic_group_pb2 as pb

State = ClassicGroupState


def heartbeat(
    ctx: ClassicContext, request: pb.HeartbeatRequest, now_ms: int
) -> CoordinatorResult[pb.HeartbeatResponse]:
    """Heartbeat v0-4: keeps the session; REBALANCE_IN_PROGRESS tells a member to rejoin."""
    try:
        group = ctx.classic_group(request.group_id)
    except CoordinatorError:
        return CoordinatorResult(response=pb.HeartbeatResponse(error_code=ErrorCode.unknown_member_id.value))
    instance_id = request.group_instance_id if request.HasField("group_instance_id") else None
    try:
        if group is None:
            raise CoordinatorError(ErrorCode.unknown_member_id)
        if group.state is State.DEAD:
            raise CoordinatorError(ErrorCode.coordinator_not_available)
        group.validate_member(request.member_id, instance_id)
        if request.generation_id != group.generation_id:
            raise CoordinatorError(ErrorCode.illegal_generation)
        if group.state is State.EMPTY:
            raise CoordinatorError(ErrorCode.unknown_member_id)
    except CoordinatorError as e:
        return CoordinatorResult(response=pb.HeartbeatResponse(error_code=e.code.value))
    member = group.members[request.member_id]
    code = ErrorCode.rebalance_in_progress if group.state is State.PREPARING_REBALANCE else ErrorCode.none
    return CoordinatorResult(
        response=pb.HeartbeatResponse(error_code=code.value),
        timers=[session_timer(ctx, group.group_id, member.member_id, member.session_timeout_ms, now_ms)],
    )


def leave_group(
    ctx: ClassicContext, request: pb.LeaveGroupRequest, now_ms: int
) -> CoordinatorResult[pb.LeaveGroupResponse]:
    """LeaveGroup v0-5: a batch of members, by member id and/or group instance id."""
    try:
        live = ctx.classic_group(request.group_id)
    except CoordinatorError:
        live = None
    if live is None:
        return CoordinatorResult(response=pb.LeaveGroupResponse(error_code=ErrorCode.unknown_member_id.value))
    if live.state is State.DEAD:
        return CoordinatorResult(
            response=pb.LeaveGroupResponse(error_code=ErrorCode.coordinator_not_available.value)
        )
    change = GroupChange(request.group_id, live, now_ms)
    group = change.group
    results: list[pb.LeaveGroupMemberResponse] = []
    for leaving in request.members:
        instance_id = leaving.group_instance_id if leaving.HasField("group_instance_id") else None
        result = pb.LeaveGroupMemberResponse(member_id=leaving.member_id)
        if instance_id is not None:
            result.group_instance_id = instance_id
        code = ErrorCode.none
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is None:
                code = ErrorCode.unknown_member_id
            elif leaving.member_id and leaving.member_id != existing:
                code = ErrorCode.fenced_instance_id
            else:
                remove_member_and_rebalance(ctx, change, existing, _leave_reason(existing, leaving))
        elif leaving.member_id in group.pending_members:
            change.remove_pending(leaving.member_id)
            change.timers.append(CancelTimer(pending_member_key(group.group_id, leaving.member_id)))
            maybe_complete_join(ctx, change)
        elif leaving.member_id in group.members:
            remove_member_and_rebalance(
                ctx, change, leaving.member_id, _leave_reason(leaving.member_id, leaving)
            )
        else:
            code = ErrorCode.unknown_member_id
        result.error_code = code.value
        results.append(result)
    top = ErrorCode.none
    if request.api_version < 3 and results:
        top = ErrorCode(results[0].error_code)
    return finish(ctx, change, pb.LeaveGroupResponse(error_code=top.value, members=results))


def _leave_reason(member_id: str, leaving: pb.LeaveGroupMember) -> str:
    return f"Removing member {member_id} on LeaveGroup; client reason: {client_reason(leaving)}"
