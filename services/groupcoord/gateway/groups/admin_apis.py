"""Group administration at the gateway: ListGroups, DescribeGroups, DeleteGroups,
FindCoordinator, and the GROUP resources of DescribeConfigs and IncrementalAlterConfigs.

ListGroups asks every state partition; DescribeGroups and DeleteGroups are split by partition
and merged in request order. FindCoordinator names this gateway's listener for group keys and
asks the upstream (as the client) for transaction coordinators. The configs APIs serve GROUP
resources here and send every other resource on the client's own upstream connection.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from groupcoord.common.group_api_declarations import GROUP_KEY, GROUP_RESOURCE
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.gateway.groups.serving import Adapter, CallContext, GroupServing
from groupcoord.gateway.messages.kio_entities import NO_THROTTLE, element_type
from groupcoord.gateway.messages.wire_translation import from_proto, to_proto
from groupcoord.rpc.v1 import group_admin_pb2 as ga
from groupcoord.rpc.v1.coordinator_pb2 import CoordinatorEnvelope as Envelope


async def list_groups(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    msg = to_proto(req, ga.ListGroupsRequest(api_version=ctx.version))
    replies = await asyncio.gather(
        *(apis.call_partition(p, Envelope(list_groups=msg)) for p in range(apis.leadership.partitions))
    )
    out = ga.ListGroupsResponse()
    for reply in replies:
        if reply.response is None:
            # like a broker with a loading partition: report it, keep what we have
            out.error_code = out.error_code or reply.error_code
            continue
        out.error_code = out.error_code or reply.response.error_code
        out.groups.extend(reply.response.groups)
    return apis.response(ctx, out)


async def describe_groups(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    msg = to_proto(req, ga.DescribeGroupsRequest(api_version=ctx.version))
    groups = await apis.per_group(
        list(msg.groups),
        lambda ids: Envelope(
            describe_groups=ga.DescribeGroupsRequest(
                api_version=msg.api_version,
                groups=ids,
                include_authorized_operations=msg.include_authorized_operations,
            )
        ),
        lambda resp: ((g.group_id, g) for g in resp.groups),
        lambda gid, reply: ga.DescribedGroup(
            group_id=gid, error_code=reply.error_code, error_message=reply.error_message
        ),
    )
    return apis.response(ctx, ga.DescribeGroupsResponse(groups=groups))


async def delete_groups(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    results = await apis.per_group(
        list(req.groups_names),
        lambda ids: Envelope(delete_groups=ga.DeleteGroupsRequest(api_version=ctx.version, groups_names=ids)),
        lambda resp: ((r.group_id, r) for r in resp.results),
        lambda gid, reply: ga.DeletableGroupResult(group_id=gid, error_code=reply.error_code),
    )
    return apis.response(ctx, ga.DeleteGroupsResponse(results=results))


async def find_coordinator(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    body_type = ctx.response_type
    key_type = int(getattr(req, "key_type", GROUP_KEY))
    keys = list(req.coordinator_keys) if ctx.version >= 4 else [req.key]
    if key_type != GROUP_KEY:  # transaction coordinators: the upstream's, as it answers the client
        return await ctx.ask(req)
    node_id, host, port = await apis.coordinator_node(ctx.listener)
    if ctx.version >= 4:
        entry = element_type(body_type, "coordinators")
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


async def _per_resource(
    ctx: CallContext, req: Any, one: Callable[[Any], Awaitable[Any]], upstream_results: str
) -> tuple[Any, ...]:
    """Results for ``req.resources`` in request order: GROUP resources through ``one``
    (in parallel), the others from one request carrying just those, sent on the client's
    own upstream connection (Kafka checks the client's DESCRIBE_CONFIGS / ALTER_CONFIGS)."""
    groups = [r for r in req.resources if int(r.resource_type) == GROUP_RESOURCE]
    others = tuple(r for r in req.resources if int(r.resource_type) != GROUP_RESOURCE)
    upstream = await ctx.ask(dataclasses.replace(req, resources=others)) if others else None
    mine = dict(zip((id(r) for r in groups), await asyncio.gather(*(one(r) for r in groups)), strict=True))
    theirs = iter(getattr(upstream, upstream_results) if upstream is not None else ())
    return tuple(mine[id(r)] if id(r) in mine else next(theirs) for r in req.resources)


def _group_resource_entry(entry_type: type[Any], resource: Any, resp: Any, **fields: Any) -> Any:
    """A GROUP resource's entry in a DescribeConfigs or IncrementalAlterConfigs answer: the
    shard's error, and its message only where the shard gave one."""
    return entry_type(
        error_code=ErrorCode(resp.error_code),
        error_message=resp.error_message if resp.HasField("error_message") else None,
        resource_type=i8(GROUP_RESOURCE),
        resource_name=resource.resource_name,
        **fields,
    )


async def describe_configs(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    body_type = ctx.response_type
    result_type = element_type(body_type, "results")
    config_type = element_type(result_type, "configs")

    async def one(resource: Any) -> Any:
        msg = ga.DescribeGroupConfigsRequest(
            api_version=ctx.version,
            group_id=resource.resource_name,
            configuration_keys=list(resource.configuration_keys or ()),
            include_synonyms=bool(getattr(req, "include_synonyms", False)),
            include_documentation=bool(getattr(req, "include_documentation", False)),
        )
        reply = await apis.call(resource.resource_name, Envelope(describe_group_configs=msg))
        resp = reply.response or ga.DescribeGroupConfigsResponse(
            error_code=reply.error_code, error_message=reply.error_message
        )
        return _group_resource_entry(
            result_type,
            resource,
            resp,
            configs=tuple(
                from_proto(
                    c,
                    config_type,
                    **({"synonyms": ()} if "synonyms" in config_type.__dataclass_fields__ else {}),
                )
                for c in resp.configs
            ),
        )

    results = await _per_resource(ctx, req, one, "results")
    return body_type(throttle_time=NO_THROTTLE, results=results)


async def incremental_alter_configs(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    body_type = ctx.response_type
    entry = element_type(body_type, "responses")

    async def one(resource: Any) -> Any:
        msg = ga.AlterGroupConfigsRequest(
            api_version=ctx.version,
            group_id=resource.resource_name,
            validate_only=bool(req.validate_only),
        )
        for c in resource.configs:
            to_proto(c, msg.configs.add())
        reply = await apis.call(resource.resource_name, Envelope(alter_group_configs=msg))
        resp = reply.response or ga.AlterGroupConfigsResponse(
            error_code=reply.error_code, error_message=reply.error_message
        )
        return _group_resource_entry(entry, resource, resp)

    responses = await _per_resource(ctx, req, one, "responses")
    return body_type(throttle_time=NO_THROTTLE, responses=responses)


ADAPTERS: Mapping[ApiKey, Adapter] = {
    ApiKey.FIND_COORDINATOR: find_coordinator,
    ApiKey.DESCRIBE_GROUPS: describe_groups,
    ApiKey.LIST_GROUPS: list_groups,
    ApiKey.DESCRIBE_CONFIGS: describe_configs,
    ApiKey.DELETE_GROUPS: delete_groups,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
}
"""The admin APIs' adapters, registered against their declarations by :mod:`.group_apis`."""
