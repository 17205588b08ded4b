"""The classic group protocol's authorization: READ on the group for JoinGroup, SyncGroup,
Heartbeat and LeaveGroup, else the API's own refusal (Kafka's ``getErrorResponse``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from google.protobuf.message import Message

from groupcoord.authorization.acls import Operation
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.gateway.security.group_acls import GROUP_DENIED, Caller, GroupAcls, Hook, Verdict
from groupcoord.rpc.v1 import classic_group_pb2 as cg


def _whole_group(operation: Operation, refusal: Callable[[Any], Message]) -> Callable[..., Verdict]:
    def hook(auth: GroupAcls, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
        if auth.group(caller, operation, req.group_id):
            return Verdict(req)
        return Verdict(None, refusal(req))

    return hook


AUTHORIZATION_HOOKS: Mapping[ApiKey, Hook] = {
    ApiKey.JOIN_GROUP: _whole_group(
        Operation.READ,
        # JoinGroupRequest.getErrorResponse: UNKNOWN_GENERATION_ID and UNKNOWN_MEMBER_ID ("")
        lambda req: cg.JoinGroupResponse(error_code=GROUP_DENIED.value, generation_id=-1, member_id=""),
    ),
    ApiKey.HEARTBEAT: _whole_group(
        Operation.READ, lambda req: cg.HeartbeatResponse(error_code=GROUP_DENIED.value)
    ),
    ApiKey.LEAVE_GROUP: _whole_group(
        Operation.READ, lambda req: cg.LeaveGroupResponse(error_code=GROUP_DENIED.value)
    ),
    ApiKey.SYNC_GROUP: _whole_group(
        Operation.READ, lambda req: cg.SyncGroupResponse(error_code=GROUP_DENIED.value)
    ),
}
"""The classic protocol's hooks, registered against their declarations by :mod:`.group_authorization`."""
