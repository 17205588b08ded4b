"""KIP-1071 streams groups at the gateway: StreamsGroupHeartbeat and StreamsGroupDescribe.

A heartbeat whose group's topology lacks internal topics comes back with the topics to create
(``topics_to_create``, ours, not Kafka's wire): they are created here, on the member's own
upstream connection (``CallContext.ask``), so with the member's rights, never the coordinator's;
a topic the member may not CREATE (the gateway's ACLs) is left out and named in the status, as
Kafka's ``KafkaApis`` does. The member keeps hearing MISSING_INTERNAL_TOPICS until the shard's
topics image has them (at most one metadata poll later), then gets its tasks; meanwhile its
heartbeats do not ask again (:class:`RecentlyAsked`), as every member of a starting
application would, each heartbeat.
"""

from __future__ import annotations

import datetime
import logging
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
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
ASKED_FOR_S = 10.0  # a topic asked for is not asked again so soon (the image polls every 3 s)
ASKED_ENTRIES = 10_000


class RecentlyAsked:
    """The internal topics a gateway asked the upstream to create, by principal, with what the
    upstream answered (refused or not), for :data:`ASKED_FOR_S`: the members of one
    application all hear the same topics missing until the shards see them, and one
    CreateTopics per principal and topic is enough. Bounded: cleared when full."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._asked: dict[tuple[str, str], tuple[float, bool]] = {}

    def answered(self, principal: str, topic: str) -> bool | None:
        """Whether the upstream refused ``topic`` to ``principal`` (None: not asked lately)."""
        entry = self._asked.get((principal, topic))
        if entry is None or self._clock() - entry[0] > ASKED_FOR_S:
            return None
        return entry[1]

    def record(self, principal: str, topic: str, refused: bool) -> None:
        if len(self._asked) >= ASKED_ENTRIES:
            self._asked.clear()
        self._asked[(principal, topic)] = (self._clock(), refused)


_ASKED: weakref.WeakKeyDictionary[GroupServing, RecentlyAsked] = weakref.WeakKeyDictionary()


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
    asked = _ASKED.get(apis)
    if asked is None:
        asked = _ASKED[apis] = RecentlyAsked()
    principal = str(ctx.principal)
    to_ask = []
    for t in allowed:
        answer = asked.answered(principal, t.name)
        if answer is None:
            to_ask.append(t)
        elif answer:
            refused.append(t.name)
    if not to_ask:
        return refused
    upstream_refused = await _create(ctx, to_ask)
    if upstream_refused is None:  # not reached: asked again at the next heartbeat
        return refused
    for t in to_ask:
        asked.record(principal, t.name, t.name in upstream_refused)
    return refused + upstream_refused


async def _create(ctx: CallContext, allowed: Sequence[st.StreamsTopicToCreate]) -> list[str] | None:
    """CreateTopics on the member's connection; the names the upstream refused it (None: the
    upstream was not reached)."""
    refused: list[str] = []
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
        return None
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
