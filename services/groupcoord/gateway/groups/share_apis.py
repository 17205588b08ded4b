"""KIP-932 share groups at the gateway: ShareGroupHeartbeat, ShareGroupDescribe,
ShareAcknowledge and the share-group offsets admin APIs (Describe/Alter/DeleteShareGroupOffsets).

ShareFetch, the one API whose adapter calls its shard operation twice with an upstream Fetch
between, and the share sessions both delivery APIs move on, are :mod:`.share_fetch`'s; this
module registers every share-group adapter.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i32Timedelta

from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.gateway.groups import share_fetch
from groupcoord.gateway.groups.serving import Adapter, CallContext, GroupServing
from groupcoord.gateway.groups.share_sessions import ShareSessionError
from groupcoord.gateway.messages.kio_entities import NO_THROTTLE, element_type
from groupcoord.gateway.messages.wire_translation import to_proto
from groupcoord.rpc.v1 import share_group_pb2 as sh
from groupcoord.rpc.v1.coordinator_pb2 import CoordinatorEnvelope as Envelope


async def share_group_heartbeat(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    msg = to_proto(req, sh.ShareGroupHeartbeatRequest(api_version=ctx.version))
    msg.client_id = ctx.header.client_id or ""
    msg.client_host = ctx.member_host
    reply = await apis.call(req.group_id, Envelope(share_group_heartbeat=msg))
    resp = reply.response or sh.ShareGroupHeartbeatResponse(  # Kafka's: epoch 0
        error_code=reply.error_code, error_message=reply.error_message or None
    )
    return apis.response(ctx, resp)


async def share_group_describe(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    return await apis.describe_by_group_ids(
        ctx, req, "share_group_describe", sh.ShareGroupDescribeResponse, sh.ShareGroupDescribeGroup
    )


async def share_acknowledge(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    rt = ctx.response_type
    group_id, member_id = req.group_id or "", req.member_id or ""
    delivery = apis.connection_state(share_fetch.ShareDelivery)
    try:
        delivery.sessions.acknowledge(group_id, member_id, int(req.share_session_epoch))
    except ShareSessionError as e:
        return share_fetch.share_error(rt, e.code)
    acknowledgements = {
        (share_fetch.topic_id_bytes(t.topic_id), int(p.partition_index)): p.acknowledgement_batches
        for t in req.topics
        for p in t.partitions
    }
    ended = delivery.final(group_id, member_id, int(req.share_session_epoch))
    renew = ctx.version >= share_fetch.RENEW_VERSION and bool(req.is_renew_ack)
    reply = await apis.call(
        group_id,
        Envelope(
            share_acknowledge=share_fetch.delivery_request(
                group_id, member_id, (), acknowledgements, ctx.version, ended, renew
            )
        ),
    )
    if reply.response is None or reply.response.error_code:
        code = reply.error_code if reply.response is None else reply.response.error_code
        return share_fetch.share_error(rt, ErrorCode(code))
    topic_type = element_type(rt, "responses")
    partition_type = element_type(topic_type, "partitions")
    leader_type = partition_type.__dataclass_fields__["current_leader"].type
    by_topic: dict[bytes, list[Any]] = {}
    for p in reply.response.partitions:
        if (p.topic_id, p.partition) not in acknowledgements:
            continue  # a share-partition of the ended session, named only to give back
        by_topic.setdefault(p.topic_id, []).append(
            partition_type(
                partition_index=i32(p.partition),
                error_code=ErrorCode(p.acknowledge_error_code),
                current_leader=leader_type(leader_id=i32(-1), leader_epoch=i32(-1)),
            )
        )
    lock = {  # v2 tells the member how long what it renewed is now locked for
        "acquisition_lock_timeout": i32Timedelta.parse(
            datetime.timedelta(milliseconds=reply.response.acquisition_lock_timeout_ms)
        )
    }
    return rt(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        responses=tuple(
            topic_type(topic_id=uuid.UUID(bytes=tid), partitions=tuple(parts))
            for tid, parts in by_topic.items()
        ),
        node_endpoints=(),
        **(lock if ctx.version >= share_fetch.RENEW_VERSION else {}),
    )


async def describe_share_group_offsets(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    """The shard's start offsets, and (v1) the lag: the upstream's log end (on the client's own
    connection, as a new share-partition's start: :func:`share_fetch.log_ends`) less the start
    offset and the records done past it."""
    asked = {g.group_id: g for g in req.groups}

    def envelope(ids: list[str]) -> Envelope:
        msg = sh.DescribeShareGroupOffsetsRequest(api_version=ctx.version)
        for gid in ids:
            group = msg.groups.add(group_id=gid, all_topics=asked[gid].topics is None)
            for t in asked[gid].topics or ():
                group.topics.add(topic_name=t.topic_name, partitions=[int(p) for p in t.partitions])
        return Envelope(describe_share_group_offsets=msg)

    groups = await apis.per_group(
        [g.group_id for g in req.groups],
        envelope,
        lambda resp: ((g.group_id, g) for g in resp.groups),
        lambda gid, reply: sh.DescribeShareGroupOffsetsResponseGroup(
            group_id=gid, error_code=reply.error_code, error_message=reply.error_message or None
        ),
    )
    if ctx.version >= 1:  # v1 carries the lag
        partitions = [(t, p) for g in groups for t in g.topics for p in t.partitions if p.start_offset >= 0]
        ids = {(t.topic_name, p.partition_index): t.topic_id for t, p in partitions}
        listed = await share_fetch.end_offsets(ctx.ask, ids)
        ends = await share_fetch.log_ends(ctx.ask, {(ids[k], k[1]): offset for k, offset in listed.items()})
        for t, p in partitions:
            end = ends.get((t.topic_id, p.partition_index))
            if end is not None:
                p.lag = max(0, end - p.start_offset - p.done)
    return apis.response(ctx, sh.DescribeShareGroupOffsetsResponse(groups=groups))


async def alter_share_group_offsets(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    msg = sh.AlterShareGroupOffsetsRequest(api_version=ctx.version, group_id=req.group_id)
    for t in req.topics:
        msg.topics.add(
            topic_name=t.topic_name,
            partitions=[int(p.partition_index) for p in t.partitions],
            start_offsets=[int(p.start_offset) for p in t.partitions],
        )
    return await _change_share_group_offsets(apis, ctx, req.group_id, Envelope(alter_share_group_offsets=msg))


async def delete_share_group_offsets(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    msg = sh.AlterShareGroupOffsetsRequest(api_version=ctx.version, group_id=req.group_id, delete=True)
    for t in req.topics:
        msg.topics.add(topic_name=t.topic_name)
    return await _change_share_group_offsets(
        apis, ctx, req.group_id, Envelope(delete_share_group_offsets=msg)
    )


async def _change_share_group_offsets(
    apis: GroupServing, ctx: CallContext, group_id: str, envelope: Envelope
) -> Any:
    """AlterShareGroupOffsets and DeleteShareGroupOffsets: the shard's answer, or its
    request-level error in the response's."""
    reply = await apis.call(group_id, envelope)
    return apis.response(
        ctx,
        reply.response
        or sh.AlterShareGroupOffsetsResponse(
            error_code=reply.error_code, error_message=reply.error_message or None
        ),
    )


ADAPTERS: Mapping[ApiKey, Adapter] = {
    ApiKey.SHARE_GROUP_HEARTBEAT: share_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: share_group_describe,
    ApiKey.SHARE_FETCH: share_fetch.share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: share_acknowledge,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: alter_share_group_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: delete_share_group_offsets,
}
"""The share groups' adapters, registered against their declarations by :mod:`.group_apis`."""
