"""KIP-1071 streams groups at the gateway: StreamsGroupHeartbeat and StreamsGroupDescribe.

A heartbeat whose group's topology lacks internal topics comes back with the topics to create
(``topics_to_create``, ours, not Kafka's wire): they are created here, on the member's own
upstream connection (``CallContext.ask``), so with the member's rights, never the coordinator's;
a topic the member may not CREATE (the gateway's ACLs) is left out and named in the status, as
Kafka's ``KafkaApis`` does. The member keeps hearing MISSING_INTERNAL_TOPICS until the shard's
topics image has them (at most one metadata poll later), then gets its tasks.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kio.schema.create_topics.v5.request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32, i32Timedelta

from groupcoord.authorization.acls import Operation, ResourceType
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.gateway.groups.serving import Adapter, CallContext, GroupServing
from groupcoord.gateway.messages.wire_translation import to_proto
from groupcoord.gateway.security.group_acls import CLUSTER_NAME, Caller
from groupcoord.rpc.v1 import streams_group_pb2 as st
from groupcoord.rpc.v1.coordinator_pb2 import CoordinatorEnvelope as Envelope

log = logging.getLogger(__name__)

MISSING_INTERNAL_TOPICS = 3  # StreamsGroupHeartbeatResponse.Status
CREATE_TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=10))


async def streams_group_heartbeat(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    msg = to_proto(req, st.StreamsGroupHeartbeatRequest(api_version=ctx.version))
    if req.topology is not None:
        msg.topology.SetInParent()  # present even with epoch 0 and nothing else set
    if req.user_endpoint is not None:
        msg.user_endpoint.SetInParent()
    msg.client_id = ctx.header.client_id or ""
    msg.client_host = ctx.member_host
    reply = await apis.call(req.group_id, Envelope(streams_group_heartbeat=msg))
    resp = reply.response or st.StreamsGroupHeartbeatResponse(
        error_code=reply.error_code, error_message=reply.error_message or None
    )
    if resp.topics_to_create:
        refused = await create_internal_topics(apis, ctx, resp.topics_to_create)
        if refused:
            resp.status.statuses.add(
                status_code=MISSING_INTERNAL_TOPICS,
                status_detail=f"Unauthorized to CREATE on topics {', '.join(refused)}.",
            )
    return apis.response(ctx, resp)


async def create_internal_topics(
    apis: GroupServing, ctx: CallContext, topics: Sequence[st.StreamsTopicToCreate]
) -> list[str]:
    """Create ``topics`` on the upstream as the member; the names it may not CREATE (by the
    gateway's ACLs or the upstream's), which stay missing."""
    refused: list[str] = []
    allowed = list(topics)
    auth = apis.authorization
    if auth is not None:  # Kafka's: CREATE on the cluster, else on each topic
        caller = Caller(ctx.principal, ctx.client_host)
        if not auth.allowed(caller, Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, quiet=True):
            refused = [t.name for t in topics if not auth.topic(caller, Operation.CREATE, t.name)]
            allowed = [t for t in topics if t.name not in refused]
    if not allowed:
        return refused
    request = CreateTopicsRequest(
        topics=tuple(
            CreatableTopic(
                name=t.name,
                num_partitions=i32(t.partitions),
                replication_factor=i16(t.replication_factor),
                assignments=(),
                configs=tuple(CreatableTopicConfig(name=c.key, value=c.value) for c in t.configs),
            )
            for t in allowed
        ),
        timeout=CREATE_TIMEOUT,
    )
    try:
        response = await ctx.ask(request)
    except (ConnectionError, OSError) as exc:
        log.warning("streams group internal topics not created (upstream: %s)", exc)
        return refused
    for result in response.topics:
        if result.error_code == ErrorCode.topic_authorization_failed:
            refused.append(result.name)
        elif result.error_code not in (ErrorCode.none, ErrorCode.topic_already_exists):
            log.warning("internal topic %s not created: %s %s", result.name, result.error_code.name, result.error_message)
    return refused


async def streams_group_describe(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    return await apis.describe_by_group_ids(
        ctx, req, "streams_group_describe", st.StreamsGroupDescribeResponse, st.StreamsGroupDescribeGroup
    )


ADAPTERS: Mapping[ApiKey, Adapter] = {
    ApiKey.STREAMS_GROUP_HEARTBEAT: streams_group_heartbeat,
    ApiKey.STREAMS_GROUP_DESCRIBE: streams_group_describe,
}
"""The streams groups' adapters, registered against their declarations by :mod:`.group_apis`."""
