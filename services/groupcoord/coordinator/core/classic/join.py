"""JoinGroup v0-9: members (re)join a classic group's rebalance.

Kafka's ``classicGroupJoin``: a new member (unknown member id) gets an id — first handed out
alone (KIP-394, v4+), or at once for a static member (KIP-345, whose restart takes over the
old member's assignment); a known member joins the rebalance that produces the next
generation. The answer is usually PENDING: it comes when the join phase ends
(rebalance.complete_join), for every member at once.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.classic.classic_context import ClassicContext, GroupChange
from groupcoord.coordinator.core.classic.classic_group import (
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
)
from groupcoord.coordinator.core.classic.classic_timers import pending_member_key
from groupcoord.coordinator.core.classic.rebalance import (
    client_reason,
    finish,
    pending_member_timer,
    prepare_rebalance_or_complete_join,
)
from groupcoord.coordinator.core.classic.responses import (
    error_join,
    error_sync,
    join_response,
    leader_members,
)
from groupcoord.coordinator.core.classic.waiters import WaitKey
from groupcoord.coordinator.core.contract import CancelTimer, CoordinatorRecord, CoordinatorResult
from groupcoord.coordinator.core.group import GroupType
from groupcoord.rpc.v1 import classic_group_pb2 as pb

State = ClassicGroupState
Protocols = tuple[tuple[str, bytes], ...]

# JoinGroup v4+ makes a new dynamic member fetch its id first (KIP-394).
JOIN_REQUIRES_KNOWN_MEMBER_ID_VERSION = 4
# JoinGroup v9+ lets a rejoining static leader skip computing an assignment (KIP-814).
_JOIN_SKIP_ASSIGNMENT_VERSION = 9


def new_member_id(client_id: str, random_id: uuid.UUID) -> str:
    """The member id the coordinator gives a classic member joining without one (Kafka:
    client id, a dash, a random UUID)."""
    return f"{client_id}-{random_id}"


def join_group(
    ctx: ClassicContext, request: pb.JoinGroupRequest, now_ms: int, token: Any = None
) -> CoordinatorResult[pb.JoinGroupResponse]:
    """JoinGroup v0-9. The answer is usually PENDING: it comes when the join phase ends."""
    if request.api_version == 0:
        # JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout.
        v0 = pb.JoinGroupRequest()
        v0.CopyFrom(request)
        v0.rebalance_timeout_ms = request.session_timeout_ms
        request = v0
    gid = request.group_id
    member_id = request.member_id
    if not gid:
        return CoordinatorResult(response=error_join(ErrorCode.invalid_group_id, member_id))
    if not (
        ctx.config.classic_group_min_session_timeout_ms
        <= request.session_timeout_ms
        <= ctx.config.classic_group_max_session_timeout_ms
    ):
        return CoordinatorResult(response=error_join(ErrorCode.invalid_session_timeout, member_id))
    unknown = member_id == ""
    existing = ctx.groups.get(gid)
    replaced: list[CoordinatorRecord] = []
    if existing is not None and existing.group_type is GroupType.SHARE:
        # no conversion exists, even of an empty share group (Kafka 4.4 answers this)
        return CoordinatorResult(response=error_join(ErrorCode.inconsistent_group_protocol, member_id))
    if existing is not None and not isinstance(existing, ClassicGroup):
        if not existing.is_empty():
            if ctx.join_other_group is not None:
                return ctx.join_other_group(existing, request, now_ms)
            return CoordinatorResult(response=error_join(ErrorCode.inconsistent_group_protocol, member_id))
        if unknown:
            # An empty consumer group becomes a classic group (its offsets stay), as in Kafka.
            replaced = existing.tombstone_records()
        existing = None
    live = existing
    if live is None and not unknown:
        # A known member id for a group that does not exist: it must rejoin from scratch.
        return CoordinatorResult(response=error_join(ErrorCode.unknown_member_id, member_id))
    change = GroupChange(gid, live, now_ms)
    change.replaced = replaced
    group = change.group
    protocols = tuple((p.name, p.metadata) for p in request.protocols)
    instance_id = request.group_instance_id if request.HasField("group_instance_id") else None

    if not _accept_joining_member(ctx, group, member_id):
        return CoordinatorResult(response=error_join(ErrorCode.group_max_size_reached, member_id))
    if group.state is State.DEAD:
        return CoordinatorResult(response=error_join(ErrorCode.coordinator_not_available, member_id))
    names = [n for n, _ in protocols]
    if not group.supports_protocols(request.protocol_type, names):
        return CoordinatorResult(response=error_join(ErrorCode.inconsistent_group_protocol, member_id))

    if unknown:
        return _join_new_member(ctx, change, request, protocols, instance_id, token)
    return _join_existing_member(ctx, change, request, protocols, instance_id, token)


def _accept_joining_member(ctx: ClassicContext, group: ClassicGroup, member_id: str) -> bool:
    """group.max.size, counted as Kafka does for each state."""
    limit = ctx.config.classic_group_max_size
    if group.state in (State.EMPTY, State.DEAD):
        return True
    if group.state is State.PREPARING_REBALANCE:
        member = group.members.get(member_id)
        return (member is not None and group.is_awaiting_join(member)) or group.num_awaiting_join() < limit
    return member_id in group.members or len(group.members) < limit


def _join_new_member(
    ctx: ClassicContext,
    change: GroupChange,
    request: pb.JoinGroupRequest,
    protocols: Protocols,
    instance_id: str | None,
    token: Any,
) -> CoordinatorResult[pb.JoinGroupResponse]:
    group = change.group
    new_id = new_member_id(request.client_id, ctx.new_uuid())
    if instance_id is not None:
        old_id = group.static_member_id(instance_id)
        if old_id is not None:
            return _rejoin_static_member(ctx, change, request, protocols, old_id, new_id, token)
        _add_member(ctx, change, request, protocols, new_id, instance_id)
        return finish(ctx, change, wait=("join", group.group_id, new_id), token=token)
    if request.api_version >= JOIN_REQUIRES_KNOWN_MEMBER_ID_VERSION:
        # KIP-394: hand out the id first; the member joins with it in its next request.
        change.add_pending(new_id, request.session_timeout_ms)
        change.timers.append(
            pending_member_timer(ctx, group.group_id, new_id, request.session_timeout_ms, change.now_ms)
        )
        return finish(ctx, change, error_join(ErrorCode.member_id_required, new_id))
    _add_member(ctx, change, request, protocols, new_id, None)
    return finish(ctx, change, wait=("join", group.group_id, new_id), token=token)


def _join_existing_member(
    ctx: ClassicContext,
    change: GroupChange,
    request: pb.JoinGroupRequest,
    protocols: Protocols,
    instance_id: str | None,
    token: Any,
) -> CoordinatorResult[pb.JoinGroupResponse]:
    group = change.group
    member_id = request.member_id
    wait: WaitKey = ("join", group.group_id, member_id)
    if member_id in group.pending_members:
        # The second JoinGroup of KIP-394's two-step join.
        _add_member(ctx, change, request, protocols, member_id, instance_id)
        return finish(ctx, change, wait=wait, token=token)
    try:
        group.validate_member(member_id, instance_id)
    except CoordinatorError as e:
        return finish(ctx, change, error_join(e.code, member_id))
    member = group.members[member_id]
    if group.state is State.PREPARING_REBALANCE:
        _update_member(ctx, change, member, request, protocols)
        return finish(ctx, change, wait=wait, token=token)
    if group.state is State.COMPLETING_REBALANCE:
        if member.matches(protocols):
            # The member lost its JoinGroup answer: send it again (to any earlier, still
            # waiting request of it as well).
            response = join_response(group, member)
            change.answer("join", member_id, response)
            return finish(ctx, change, response)
        _update_member(ctx, change, member, request, protocols)
        return finish(ctx, change, wait=wait, token=token)
    if group.state is State.STABLE:
        if group.is_leader(member_id) or not member.matches(protocols):
            # The leader rejoining (e.g. metadata changed) or new protocols: rebalance.
            _update_member(ctx, change, member, request, protocols)
            return finish(ctx, change, wait=wait, token=token)
        response = join_response(group, member)
        change.answer("join", member_id, response)
        return finish(ctx, change, response)
    # Empty: no member can be known.
    return finish(ctx, change, error_join(ErrorCode.unknown_member_id, member_id))


def _rejoin_static_member(
    ctx: ClassicContext,
    change: GroupChange,
    request: pb.JoinGroupRequest,
    protocols: Protocols,
    old_id: str,
    new_id: str,
    token: Any,
) -> CoordinatorResult[pb.JoinGroupResponse]:
    """KIP-345: a static member restarted (unknown member id, known instance id).

    The old member id is fenced (its waiting requests get FENCED_INSTANCE_ID); the new id
    takes over the assignment. In Stable, when the selected protocol stays the same, no
    rebalance happens: the member gets the current generation back.
    """
    group = change.group
    old = group.members[old_id]
    was_leader = group.is_leader(old_id)
    fenced = ErrorCode.fenced_instance_id
    change.answer("join", old_id, error_join(fenced, old_id))
    change.answer("sync", old_id, error_sync(fenced))
    change.remove_member(old_id)
    new = replace(
        old,
        member_id=new_id,
        client_id=request.client_id,
        client_host=request.client_host,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        session_timeout_ms=request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=protocols,
        is_new=False,
    )
    change.put_member(new)
    if was_leader:
        group.leader_id = new_id
    wait: WaitKey = ("join", group.group_id, new_id)
    if group.state is State.STABLE:
        if group.protocol_name is not None and group.select_protocol() == group.protocol_name:
            change.reschedule.append((new_id, new.session_timeout_ms))
            skip = request.api_version >= _JOIN_SKIP_ASSIGNMENT_VERSION and was_leader
            response = pb.JoinGroupResponse(
                error_code=ErrorCode.none.value,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader=group.leader_id or "",
                skip_assignment=skip,
                member_id=new_id,
                members=leader_members(group) if skip else [],
            )
            return finish(ctx, change, response)
        _update_member(ctx, change, new, request, protocols)
        return finish(ctx, change, wait=wait, token=token)
    # PreparingRebalance: join as usual; CompletingRebalance: the old id never got its
    # JoinGroup answer for this generation, so a new rebalance is needed.
    _update_member(ctx, change, new, request, protocols)
    return finish(ctx, change, wait=wait, token=token)


def _add_member(
    ctx: ClassicContext,
    change: GroupChange,
    request: pb.JoinGroupRequest,
    protocols: Protocols,
    member_id: str,
    instance_id: str | None,
) -> None:
    group = change.group
    change.remove_pending(member_id)
    member = ClassicGroupMember(
        member_id=member_id,
        group_instance_id=instance_id,
        client_id=request.client_id,
        client_host=request.client_host,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        session_timeout_ms=request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=protocols,
        joined_generation=group.generation_id + 1,
        is_new=True,
    )
    change.put_member(member)
    change.timers.append(CancelTimer(pending_member_key(group.group_id, member_id)))
    # A new member cannot heartbeat before its JoinGroup answer; a lost answer would leave a
    # defunct member behind, so new members expire on Kafka's new-member join timeout.
    change.reschedule.append((member_id, ctx.config.classic_group_new_member_join_timeout_ms))
    prepare_rebalance_or_complete_join(
        ctx,
        change,
        f"Adding new member {member_id} with group instance id {instance_id}; "
        f"client reason: {client_reason(request)}",
    )


def _update_member(
    ctx: ClassicContext,
    change: GroupChange,
    member: ClassicGroupMember,
    request: pb.JoinGroupRequest,
    protocols: Protocols,
) -> None:
    group = change.group
    change.put_member(
        replace(
            member,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=protocols,
            # Joins the rebalance that will produce the next generation.
            joined_generation=group.generation_id + 1,
            is_new=False,
        )
    )
    prepare_rebalance_or_complete_join(
        ctx,
        change,
        f"Updating metadata for member {member.member_id} during {group.state.value}; "
        f"client reason: {client_reason(request)}",
    )
