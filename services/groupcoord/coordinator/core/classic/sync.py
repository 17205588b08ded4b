"""SyncGroup v0-5: the leader's assignments go to every member of the generation.

Kafka's ``classicGroupSync``. In CompletingRebalance, followers that arrive before the leader
wait (PENDING, parked until the leader's SyncGroup answers them all); the leader's SyncGroup
writes the assignments and makes the group Stable. In Stable, a member gets its assignment back.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.classic.classic_context import ClassicContext, GroupChange
from groupcoord.coordinator.core.classic.classic_group import ClassicGroupState, with_assignment
from groupcoord.coordinator.core.classic.rebalance import finish
from groupcoord.coordinator.core.classic.responses import error_sync, sync_response
from groupcoord.coordinator.core.classic.waiters import WaitKey
from groupcoord.coordinator.core.contract import CoordinatorResult
from groupcoord.rpc.v1 import classic_group_pb2 as pb

State = ClassicGroupState


def sync_group(
    ctx: ClassicContext, request: pb.SyncGroupRequest, now_ms: int, token: Any = None
) -> CoordinatorResult[pb.SyncGroupResponse]:
    """SyncGroup v0-5: the leader's assignments go to every member; followers that arrive
    first wait (PENDING) for them."""
    gid = request.group_id
    if not gid:
        return CoordinatorResult(response=error_sync(ErrorCode.invalid_group_id))
    try:
        live = ctx.classic_group(gid)
    except CoordinatorError:
        return CoordinatorResult(response=error_sync(ErrorCode.unknown_member_id))
    if live is None:
        return CoordinatorResult(response=error_sync(ErrorCode.unknown_member_id))
    instance_id = request.group_instance_id if request.HasField("group_instance_id") else None
    try:
        if live.state is State.DEAD:
            raise CoordinatorError(ErrorCode.coordinator_not_available)
        live.validate_member(request.member_id, instance_id)
        if request.generation_id != live.generation_id:
            raise CoordinatorError(ErrorCode.illegal_generation)
        if request.HasField("protocol_type") and request.protocol_type != live.protocol_type:
            raise CoordinatorError(ErrorCode.inconsistent_group_protocol)
        if request.HasField("protocol_name") and request.protocol_name != (live.protocol_name or ""):
            raise CoordinatorError(ErrorCode.inconsistent_group_protocol)
        if live.state is State.EMPTY:
            raise CoordinatorError(ErrorCode.unknown_member_id)
        if live.state is State.PREPARING_REBALANCE:
            raise CoordinatorError(ErrorCode.rebalance_in_progress)
    except CoordinatorError as e:
        return CoordinatorResult(response=error_sync(e.code))

    change = GroupChange(gid, live, now_ms)
    group = change.group
    member_id = request.member_id
    if group.state is State.STABLE:
        change.reschedule.append((member_id, group.members[member_id].session_timeout_ms))
        response = sync_response(group, group.members[member_id])
        change.answer("sync", member_id, response)
        return finish(ctx, change, response)
    # CompletingRebalance.
    wait: WaitKey = ("sync", gid, member_id)
    if not group.is_leader(member_id):
        # Waiting for the leader counts as being alive (Kafka: awaiting sync satisfies the
        # heartbeat) for up to the rebalance timeout.
        member = group.members[member_id]
        change.reschedule.append((member_id, max(member.rebalance_timeout_ms, member.session_timeout_ms)))
        return finish(ctx, change, wait=wait, token=token)
    assignments = {a.member_id: a.assignment for a in request.assignments}
    for m in list(group.members.values()):
        assignment = assignments.get(m.member_id, b"")
        if m.assignment != assignment:
            change.put_member(with_assignment(m, assignment))
    change.transition_to(State.STABLE)
    for m in group.members.values():
        change.answer("sync", m.member_id, sync_response(group, m))
        change.reschedule.append((m.member_id, m.session_timeout_ms))
    return finish(ctx, change, wait=wait, token=token)
