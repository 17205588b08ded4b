"""The classic group protocol at the gateway: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

Each is one call on the group's shard; a request-level error (the partition has no leader
after the failover wait) is answered in the API's own error code, with Kafka's defaults for
what the shard would have filled in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.gateway.groups.serving import Adapter, CallContext, GroupServing
from groupcoord.gateway.messages.wire_translation import to_proto
from groupcoord.rpc.v1 import classic_group_pb2 as cg
from groupcoord.rpc.v1.coordinator_pb2 import CoordinatorEnvelope as Envelope


async def join_group(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    msg = to_proto(req, cg.JoinGroupRequest(api_version=ctx.version))
    msg.client_id = ctx.header.client_id or ""
    msg.client_host = ctx.member_host
    if ctx.version == 0:  # v0 has no rebalance timeout: Kafka uses the session timeout
        msg.rebalance_timeout_ms = msg.session_timeout_ms
    reply = await apis.call(req.group_id, Envelope(join_group=msg))
    resp = reply.response or cg.JoinGroupResponse(
        error_code=reply.error_code, generation_id=-1, member_id=req.member_id
    )
    return apis.response(ctx, resp)


async def sync_group(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    msg = to_proto(req, cg.SyncGroupRequest(api_version=ctx.version))
    reply = await apis.call(req.group_id, Envelope(sync_group=msg))
    return apis.response(ctx, reply.response or cg.SyncGroupResponse(error_code=reply.error_code))


async def heartbeat(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    msg = to_proto(req, cg.HeartbeatRequest(api_version=ctx.version))
    reply = await apis.call(req.group_id, Envelope(heartbeat=msg))
    return apis.response(ctx, reply.response or cg.HeartbeatResponse(error_code=reply.error_code))


async def leave_group(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    msg = to_proto(req, cg.LeaveGroupRequest(api_version=ctx.version))
    if ctx.version <= 2:
        msg.members.add(member_id=req.member_id)
    reply = await apis.call(req.group_id, Envelope(leave_group=msg))
    return apis.response(ctx, reply.response or cg.LeaveGroupResponse(error_code=reply.error_code))


ADAPTERS: Mapping[ApiKey, Adapter] = {
    ApiKey.JOIN_GROUP: join_group,
    ApiKey.HEARTBEAT: heartbeat,
    ApiKey.LEAVE_GROUP: leave_group,
    ApiKey.SYNC_GROUP: sync_group,
}
"""The classic protocol's adapters, registered against their declarations by :mod:`.group_apis`."""
