"""The group APIs at the gateway: wire requests -> coordinator calls -> wire responses.

Each adapter turns one decoded Kafka request (any supported version) into calls on the
coordinator shards, one per state-topic partition involved (multi-group requests are split by
partition and merged back in request order), and builds the response for the request's
version. Request-level errors from the shard (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE when no leader is known) are placed where that API carries errors,
exactly as a Kafka broker would, so clients retry through a failover.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32, i32Timedelta

from groupcoord.gateway import codec
from groupcoord.gateway.leadership import LeadershipTable
from groupcoord.gateway.shard_client import ShardClient, ShardReply, failed
from groupcoord.gateway.wire_translation import from_proto, to_proto
from groupcoord.rpc.v1 import classic_group_pb2 as cg
from groupcoord.rpc.v1 import consumer_group_pb2
from groupcoord.rpc.v1 import group_admin_pb2 as ga
from groupcoord.rpc.v1 import offsets_pb2 as op

Address = tuple[str, int]
GROUP_RESOURCE = 16  # ConfigResource.Type.GROUP
GROUP_KEY, TRANSACTION_KEY = 0, 1
NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))

# api key -> versions served by the gateway itself (intersected with kio's by the gateway).
VERSIONS: dict[int, tuple[int, int]] = {
    8: (2, 10),  # OffsetCommit
    9: (1, 10),  # OffsetFetch
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 6),  # DescribeGroups
    16: (0, 5),  # ListGroups
    32: (1, 4),  # DescribeConfigs (GROUP resources; the rest go upstream)
    42: (0, 2),  # DeleteGroups
    44: (0, 1),  # IncrementalAlterConfigs (GROUP resources; the rest go upstream)
    47: (0, 0),  # OffsetDelete
}


@dataclass(frozen=True, slots=True)
class CallContext:
    header: Any
    version: int
    listener: Address
    client_host: str


Upstream = Callable[[Any], Awaitable[Any]]
CoordinatorNode = Callable[[Address], Awaitable[tuple[int, str, int]]]


def _entry(entity_type: type[Any], field_name: str) -> type[Any]:
    """The element type of a tuple field of a kio entity."""
    return entity_type.__dataclass_fields__[field_name].type.__args__[0]


class GroupApis:
    """Implements the gateway's ``GroupApiHandler`` on top of the coordinator shards."""

    def __init__(
        self,
        leadership: LeadershipTable,
        shards: ShardClient,
        upstream: Upstream,
        coordinator_node: CoordinatorNode,
    ) -> None:
        self.leadership = leadership
        self.shards = shards
        self.upstream = upstream
        self.coordinator_node = coordinator_node
        self.versions = dict(VERSIONS)
        self._handlers: dict[int, Callable[[CallContext, Any], Awaitable[Any]]] = {
            8: self.offset_commit,
            9: self.offset_fetch,
            10: self.find_coordinator,
            11: self.join_group,
            12: self.heartbeat,
            13: self.leave_group,
            14: self.sync_group,
            15: self.describe_groups,
            16: self.list_groups,
            32: self.describe_configs,
            42: self.delete_groups,
            44: self.incremental_alter_configs,
            47: self.offset_delete,
        }

        self._register_consumer_group_apis()

    def _register_consumer_group_apis(self) -> None:
        """ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), the KIP-848 APIs."""
        self._cg = consumer_group_pb2
        self.register(68, (0, 1), self.consumer_group_heartbeat)
        self.register(69, (0, 1), self.consumer_group_describe)

    def register(
        self, api_key: int, versions: tuple[int, int], handler: Callable[[CallContext, Any], Awaitable[Any]]
    ) -> None:
        """Add an API (used for the KIP-848 APIs)."""
        self.versions[api_key] = versions
        self._handlers[api_key] = handler

    async def handle(self, header: Any, request: Any, listener: Address, client_host: str = "") -> Any:
        ctx = CallContext(header, int(header.request_api_version), listener, client_host)
        return await self._handlers[int(header.request_api_key)](ctx, request)

    # --- plumbing ---------------------------------------------------------------------

    async def call(self, group_id: str, api: str, message: Message) -> ShardReply:
        partition = self.leadership.partition_of(group_id)
        return await self.call_partition(partition, api, message)

    async def call_partition(self, partition: int, api: str, message: Message) -> ShardReply:
        address = self.leadership.address_of(partition)
        if address is None:
            return failed(ErrorCode.coordinator_not_available, f"no leader for state partition {partition}")
        return await self.shards.call(address, partition, api, message)

    def response(self, ctx: CallContext, api_key: int, message: Message, **overrides: Any) -> Any:
        return from_proto(message, codec.response_type(api_key, ctx.version), **overrides)

    # --- classic protocol -------------------------------------------------------------

    async def join_group(self, ctx: CallContext, req: Any) -> Any:
        msg = to_proto(req, cg.JoinGroupRequest(api_version=ctx.version))
        msg.client_id = ctx.header.client_id or ""
        msg.client_host = ctx.client_host
        if ctx.version == 0:  # v0 has no rebalance timeout: Kafka uses the session timeout
            msg.rebalance_timeout_ms = msg.session_timeout_ms
        reply = await self.call(req.group_id, "join_group", msg)
        resp = reply.response or cg.JoinGroupResponse(
            error_code=reply.error_code, generation_id=-1, member_id=req.member_id
        )
        return self.response(ctx, 11, resp)

    async def sync_group(self, ctx: CallContext, req: Any) -> Any:
        reply = await self.call(
            req.group_id, "sync_group", to_proto(req, cg.SyncGroupRequest(api_version=ctx.version))
        )
        return self.response(ctx, 14, reply.response or cg.SyncGroupResponse(error_code=reply.error_code))

    async def heartbeat(self, ctx: CallContext, req: Any) -> Any:
        reply = await self.call(
            req.group_id, "heartbeat", to_proto(req, cg.HeartbeatRequest(api_version=ctx.version))
        )
        return self.response(ctx, 12, reply.response or cg.HeartbeatResponse(error_code=reply.error_code))

    async def leave_group(self, ctx: CallContext, req: Any) -> Any:
        msg = to_proto(req, cg.LeaveGroupRequest(api_version=ctx.version))
        if ctx.version <= 2:
            msg.members.add(member_id=req.member_id)
        reply = await self.call(req.group_id, "leave_group", msg)
        return self.response(ctx, 13, reply.response or cg.LeaveGroupResponse(error_code=reply.error_code))

    # --- offsets ----------------------------------------------------------------------

    async def offset_commit(self, ctx: CallContext, req: Any) -> Any:
        reply = await self.call(
            req.group_id, "offset_commit", to_proto(req, op.OffsetCommitRequest(api_version=ctx.version))
        )
        resp = reply.response
        if resp is None:  # every partition carries the request-level error
            resp = op.OffsetCommitResponse(
                topics=[
                    op.OffsetCommitResponseTopic(
                        name=getattr(t, "name", "") or "",
                        topic_id=t.topic_id.bytes if getattr(t, "topic_id", None) else b"",
                        partitions=[
                            op.OffsetCommitResponsePartition(
                                partition_index=p.partition_index, error_code=reply.error_code
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in req.topics
                ]
            )
        return self.response(ctx, 8, resp)

    async def offset_fetch(self, ctx: CallContext, req: Any) -> Any:
        msg = op.OffsetFetchRequest(
            api_version=ctx.version, require_stable=bool(getattr(req, "require_stable", False))
        )
        if ctx.version <= 7:
            group = msg.groups.add(group_id=req.group_id, all_topics=req.topics is None)
            for t in req.topics or ():
                to_proto(t, group.topics.add())
        else:
            for g in req.groups:
                group = to_proto(g, msg.groups.add())
                group.all_topics = g.topics is None
        replies = await self._per_partition(
            [g.group_id for g in msg.groups],
            lambda ids: op.OffsetFetchRequest(
                api_version=msg.api_version,
                require_stable=msg.require_stable,
                groups=[g for g in msg.groups if g.group_id in ids],
            ),
            "offset_fetch",
        )
        groups: dict[str, op.OffsetFetchResponseGroup] = {}
        for sub, reply in replies:
            if reply.response is not None:
                for g in reply.response.groups:
                    groups[g.group_id] = g
            else:
                for g in sub.groups:
                    groups[g.group_id] = op.OffsetFetchResponseGroup(
                        group_id=g.group_id, error_code=reply.error_code
                    )
        ordered = [groups[g.group_id] for g in msg.groups]
        if ctx.version <= 7:
            only = ordered[0]
            body_type = codec.response_type(9, ctx.version)
            topic_type = _entry(body_type, "topics")
            partition_type = _entry(topic_type, "partitions")
            topics = tuple(
                topic_type(name=t.name, partitions=tuple(from_proto(p, partition_type) for p in t.partitions))
                for t in only.topics
            )
            kwargs: dict[str, Any] = {"topics": topics}
            if "error_code" in body_type.__dataclass_fields__:
                kwargs["error_code"] = ErrorCode(only.error_code)
            if "throttle_time" in body_type.__dataclass_fields__:
                kwargs["throttle_time"] = NO_THROTTLE
            return body_type(**kwargs)
        return self.response(ctx, 9, op.OffsetFetchResponse(groups=ordered))

    async def offset_delete(self, ctx: CallContext, req: Any) -> Any:
        reply = await self.call(
            req.group_id, "offset_delete", to_proto(req, op.OffsetDeleteRequest(api_version=ctx.version))
        )
        return self.response(ctx, 47, reply.response or op.OffsetDeleteResponse(error_code=reply.error_code))

    # --- KIP-848 consumer groups ------------------------------------------------------------

    async def consumer_group_heartbeat(self, ctx: CallContext, req: Any) -> Any:
        msg = to_proto(req, self._cg.ConsumerGroupHeartbeatRequest(api_version=ctx.version))
        msg.client_id = ctx.header.client_id or ""
        msg.client_host = ctx.client_host
        reply = await self.call(req.group_id, "consumer_group_heartbeat", msg)
        resp = reply.response or self._cg.ConsumerGroupHeartbeatResponse(
            error_code=reply.error_code, error_message=reply.error_message or None, member_epoch=-1
        )
        return self.response(ctx, 68, resp)

    async def consumer_group_describe(self, ctx: CallContext, req: Any) -> Any:
        msg = to_proto(req, self._cg.ConsumerGroupDescribeRequest(api_version=ctx.version))
        ids = list(msg.group_ids)
        replies = await self._per_partition(
            ids,
            lambda chosen: self._cg.ConsumerGroupDescribeRequest(
                api_version=msg.api_version,
                group_ids=[g for g in ids if g in chosen],
                include_authorized_operations=msg.include_authorized_operations,
            ),
            "consumer_group_describe",
        )
        found: dict[str, Any] = {}
        for sub, reply in replies:
            if reply.response is not None:
                found.update((g.group_id, g) for g in reply.response.groups)
            else:
                for gid in sub.group_ids:
                    group = self._cg.ConsumerGroupDescribeResponse().groups.add()
                    group.group_id, group.error_code = gid, reply.error_code
                    if reply.error_message:
                        group.error_message = reply.error_message
                    found[gid] = group
        out = self._cg.ConsumerGroupDescribeResponse()
        out.groups.extend(found[g] for g in ids)
        return self.response(ctx, 69, out)

    # --- admin --------------------------------------------------------------------------

    async def _per_partition(
        self, group_ids: list[str], build: Callable[[set[str]], Message], api: str
    ) -> list[tuple[Any, ShardReply]]:
        """Split ``group_ids`` by state partition, call each partition once, in parallel."""
        by_partition: dict[int, set[str]] = {}
        for gid in group_ids:
            by_partition.setdefault(self.leadership.partition_of(gid), set()).add(gid)
        subs = {p: build(ids) for p, ids in by_partition.items()}
        replies = await asyncio.gather(*(self.call_partition(p, api, m) for p, m in subs.items()))
        return list(zip(subs.values(), replies, strict=True))

    async def list_groups(self, ctx: CallContext, req: Any) -> Any:
        msg = to_proto(req, ga.ListGroupsRequest(api_version=ctx.version))
        replies = await asyncio.gather(
            *(self.call_partition(p, "list_groups", msg) for p in range(self.leadership.partitions))
        )
        out = ga.ListGroupsResponse()
        for reply in replies:
            if reply.response is None:
                # like a broker with a loading partition: report it, keep what we have
                out.error_code = out.error_code or reply.error_code
                continue
            out.error_code = out.error_code or reply.response.error_code
            out.groups.extend(reply.response.groups)
        return self.response(ctx, 16, out)

    async def describe_groups(self, ctx: CallContext, req: Any) -> Any:
        msg = to_proto(req, ga.DescribeGroupsRequest(api_version=ctx.version))
        replies = await self._per_partition(
            list(msg.groups),
            lambda ids: ga.DescribeGroupsRequest(
                api_version=msg.api_version,
                groups=[g for g in msg.groups if g in ids],
                include_authorized_operations=msg.include_authorized_operations,
            ),
            "describe_groups",
        )
        found: dict[str, ga.DescribedGroup] = {}
        for sub, reply in replies:
            if reply.response is not None:
                found.update((g.group_id, g) for g in reply.response.groups)
            else:
                found.update(
                    (
                        gid,
                        ga.DescribedGroup(
                            group_id=gid, error_code=reply.error_code, error_message=reply.error_message
                        ),
                    )
                    for gid in sub.groups
                )
        return self.response(ctx, 15, ga.DescribeGroupsResponse(groups=[found[g] for g in msg.groups]))

    async def delete_groups(self, ctx: CallContext, req: Any) -> Any:
        names = list(req.groups_names)
        replies = await self._per_partition(
            names,
            lambda ids: ga.DeleteGroupsRequest(
                api_version=ctx.version, groups_names=[g for g in names if g in ids]
            ),
            "delete_groups",
        )
        results: dict[str, ga.DeletableGroupResult] = {}
        for sub, reply in replies:
            if reply.response is not None:
                results.update((r.group_id, r) for r in reply.response.results)
            else:
                results.update(
                    (gid, ga.DeletableGroupResult(group_id=gid, error_code=reply.error_code))
                    for gid in sub.groups_names
                )
        return self.response(ctx, 42, ga.DeleteGroupsResponse(results=[results[g] for g in names]))

    async def find_coordinator(self, ctx: CallContext, req: Any) -> Any:
        body_type = codec.response_type(10, ctx.version)
        key_type = int(getattr(req, "key_type", GROUP_KEY))
        keys = list(req.coordinator_keys) if ctx.version >= 4 else [req.key]
        if key_type != GROUP_KEY:  # transaction coordinators live in the upstream cluster
            return await self.upstream(req)
        node_id, host, port = await self.coordinator_node(ctx.listener)
        if ctx.version >= 4:
            entry = _entry(body_type, "coordinators")
            return body_type(
                throttle_time=NO_THROTTLE,
                coordinators=tuple(
                    entry(
                        key=k,
                        node_id=i32(node_id),
                        host=host,
                        port=i32(port),
                        error_code=ErrorCode.none,
                        error_message=None,
                    )
                    for k in keys
                ),
            )
        kwargs: dict[str, Any] = {
            "error_code": ErrorCode.none,
            "node_id": i32(node_id),
            "host": host,
            "port": i32(port),
        }
        fields = body_type.__dataclass_fields__
        if "throttle_time" in fields:
            kwargs["throttle_time"] = NO_THROTTLE
        if "error_message" in fields:
            kwargs["error_message"] = None
        return body_type(**kwargs)

    # --- group configs (DescribeConfigs / IncrementalAlterConfigs for GROUP resources) ---

    async def _per_resource(
        self, req: Any, one: Callable[[Any], Awaitable[Any]], upstream_results: str
    ) -> tuple[Any, ...]:
        """Results for ``req.resources`` in request order: GROUP resources through ``one``
        (in parallel), the others from one upstream request carrying just those."""
        groups = [r for r in req.resources if int(r.resource_type) == GROUP_RESOURCE]
        others = tuple(r for r in req.resources if int(r.resource_type) != GROUP_RESOURCE)
        upstream = await self.upstream(dataclasses.replace(req, resources=others)) if others else None
        mine = dict(
            zip((id(r) for r in groups), await asyncio.gather(*(one(r) for r in groups)), strict=True)
        )
        theirs = iter(getattr(upstream, upstream_results) if upstream is not None else ())
        return tuple(mine[id(r)] if id(r) in mine else next(theirs) for r in req.resources)

    async def describe_configs(self, ctx: CallContext, req: Any) -> Any:
        body_type = codec.response_type(32, ctx.version)
        result_type = _entry(body_type, "results")
        config_type = _entry(result_type, "configs")

        async def one(resource: Any) -> Any:
            msg = ga.DescribeGroupConfigsRequest(
                api_version=ctx.version,
                group_id=resource.resource_name,
                configuration_keys=list(resource.configuration_keys or ()),
                include_synonyms=bool(getattr(req, "include_synonyms", False)),
                include_documentation=bool(getattr(req, "include_documentation", False)),
            )
            reply = await self.call(resource.resource_name, "describe_group_configs", msg)
            resp = reply.response or ga.DescribeGroupConfigsResponse(
                error_code=reply.error_code, error_message=reply.error_message
            )
            return result_type(
                error_code=ErrorCode(resp.error_code),
                error_message=resp.error_message if resp.HasField("error_message") else None,
                resource_type=i8(GROUP_RESOURCE),
                resource_name=resource.resource_name,
                configs=tuple(
                    from_proto(
                        c,
                        config_type,
                        **({"synonyms": ()} if "synonyms" in config_type.__dataclass_fields__ else {}),
                    )
                    for c in resp.configs
                ),
            )

        results = await self._per_resource(req, one, "results")
        return body_type(throttle_time=NO_THROTTLE, results=results)

    async def incremental_alter_configs(self, ctx: CallContext, req: Any) -> Any:
        body_type = codec.response_type(44, ctx.version)
        entry = _entry(body_type, "responses")

        async def one(resource: Any) -> Any:
            msg = ga.AlterGroupConfigsRequest(
                api_version=ctx.version,
                group_id=resource.resource_name,
                validate_only=bool(req.validate_only),
            )
            for c in resource.configs:
                to_proto(c, msg.configs.add())
            reply = await self.call(resource.resource_name, "alter_group_configs", msg)
            resp = reply.response or ga.AlterGroupConfigsResponse(
                error_code=reply.error_code, error_message=reply.error_message
            )
            return entry(
                error_code=ErrorCode(resp.error_code),
                error_message=resp.error_message if resp.HasField("error_message") else None,
                resource_type=i8(GROUP_RESOURCE),
                resource_name=resource.resource_name,
            )

        responses = await self._per_resource(req, one, "responses")
        return body_type(throttle_time=NO_THROTTLE, responses=responses)
