"""KIP-848 consumer groups at the gateway: ConsumerGroupHeartbeat and ConsumerGroupDescribe.

A heartbeat subscribing by regex carries the topics the member may not DESCRIBE (resolved
here, with the member's rights, from the upstream's topic names), so the shard leaves them out
of the subscription as Kafka 4.0 does (KAFKA-18813).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.gateway.groups.serving import Adapter, CallContext, GroupServing
from groupcoord.gateway.messages.wire_translation import to_proto
from groupcoord.gateway.security.group_acls import Caller
from groupcoord.rpc.v1 import consumer_group_pb2 as cgh
from groupcoord.rpc.v1.coordinator_pb2 import CoordinatorEnvelope as Envelope


async def consumer_group_heartbeat(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    msg = to_proto(req, cgh.ConsumerGroupHeartbeatRequest(api_version=ctx.version))
    msg.client_id = ctx.header.client_id or ""
    msg.client_host = ctx.member_host
    regex = getattr(req, "subscribed_topic_regex", None)
    if regex and apis.authorization is not None:  # resolved with this member's rights
        caller = Caller(ctx.principal, ctx.client_host)
        msg.undescribable_topics.extend(
            apis.authorization.undescribable(caller, regex, await apis.topics.all_names())
        )
    reply = await apis.call(req.group_id, Envelope(consumer_group_heartbeat=msg))
    resp = reply.response or cgh.ConsumerGroupHeartbeatResponse(
        error_code=reply.error_code, error_message=reply.error_message or None, member_epoch=-1
    )
    return apis.response(ctx, resp)


async def consumer_group_describe(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    return await apis.describe_by_group_ids(
        ctx,
        req,
        "consumer_group_describe",
        cgh.ConsumerGroupDescribeResponse,
        cgh.ConsumerGroupDescribeGroup,
    )


ADAPTERS: Mapping[ApiKey, Adapter] = {
    ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: consumer_group_describe,
}
"""The consumer groups' adapters, registered against their declarations by :mod:`.group_apis`."""
