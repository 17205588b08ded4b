"""What the classic APIs answer: JoinGroup and SyncGroup responses, successful or not.

Shared by the handlers and by the completion of a rebalance, which answers every member's
waiting JoinGroup (the leader with the members' metadata) and SyncGroup at once.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from groupcoord.coordinator.core.classic.classic_group import ClassicGroup, ClassicGroupMember
from groupcoord.rpc.v1 import classic_group_pb2 as pb


def error_join(code: ErrorCode, member_id: str = "") -> pb.JoinGroupResponse:
    return pb.JoinGroupResponse(error_code=code.value, member_id=member_id, generation_id=-1)


def error_sync(code: ErrorCode) -> pb.SyncGroupResponse:
    return pb.SyncGroupResponse(error_code=code.value)


def leader_members(group: ClassicGroup) -> list[pb.JoinGroupResponseMember]:
    """Every member with its metadata for the selected protocol: what the leader assigns from."""
    out = []
    for m in group.members.values():
        rm = pb.JoinGroupResponseMember(member_id=m.member_id, metadata=m.metadata(group.protocol_name))
        if m.group_instance_id is not None:
            rm.group_instance_id = m.group_instance_id
        out.append(rm)
    return out


def join_response(group: ClassicGroup, member: ClassicGroupMember) -> pb.JoinGroupResponse:
    """The JoinGroup answer for the current generation (the leader gets the member list)."""
    leader = group.is_leader(member.member_id)
    response = pb.JoinGroupResponse(
        error_code=ErrorCode.none.value,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        leader=group.leader_id or "",
        member_id=member.member_id,
        members=leader_members(group) if leader else [],
    )
    if group.protocol_name is not None:
        response.protocol_name = group.protocol_name
    return response


def sync_response(group: ClassicGroup, member: ClassicGroupMember) -> pb.SyncGroupResponse:
    """The SyncGroup answer: the member's assignment in the current generation."""
    response = pb.SyncGroupResponse(
        error_code=ErrorCode.none.value, protocol_type=group.protocol_type, assignment=member.assignment
    )
    if group.protocol_name is not None:
        response.protocol_name = group.protocol_name
    return response
