"""The admin APIs' authorization: DescribeGroups (DESCRIBE per group), ListGroups (filtered
unless DESCRIBE on the cluster), DeleteGroups (DELETE per group), FindCoordinator (DESCRIBE per
group key) and the GROUP resources of DescribeConfigs / IncrementalAlterConfigs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from kio.static.primitive import i8, i32

from groupcoord.authorization.acls import Operation, ResourceType
from groupcoord.common.group_api_declarations import GROUP_KEY, GROUP_RESOURCE
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.gateway.messages.kio_entities import element_type
from groupcoord.gateway.messages.wire_translation import from_proto
from groupcoord.gateway.security.group_acls import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_NAME,
    GROUP_DENIED,
    GROUP_DENIED_MESSAGE,
    Caller,
    GroupAcls,
    Hook,
    Verdict,
    make,
    merge_in_order,
    per_group_read,
)
from groupcoord.rpc.v1 import group_admin_pb2 as ga


def _list_groups(auth: GroupAcls, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
    # KafkaApis.handleListGroupsRequest asks both with logIfDenied = false: a listing is filtered,
    # nothing is refused
    if auth.allowed(caller, Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, quiet=True):
        return Verdict(req)

    def finish(resp: Any) -> Any:
        return dataclasses.replace(
            resp,
            groups=tuple(
                g
                for g in resp.groups
                if auth.allowed(caller, Operation.DESCRIBE, ResourceType.GROUP, g.group_id, quiet=True)
            ),
        )

    return Verdict(req, finish=finish)


def _delete_groups(auth: GroupAcls, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
    denied = {g for g in req.groups_names if not auth.group(caller, Operation.DELETE, g)}
    if not denied:
        return Verdict(req)
    result_type = element_type(rt, "results")

    def refused(group_id: str) -> Any | None:
        if group_id not in denied:
            return None
        return from_proto(
            ga.DeletableGroupResult(group_id=group_id, error_code=GROUP_DENIED.value), result_type
        )

    allowed = tuple(g for g in req.groups_names if g not in denied)
    if not allowed:
        return Verdict(None, lambda body: make(body, results=tuple(refused(g) for g in req.groups_names)))

    def finish(resp: Any) -> Any:
        return dataclasses.replace(
            resp,
            results=merge_in_order(
                req.groups_names, refused, resp.results, lambda g: g, lambda r: r.group_id
            ),
        )

    return Verdict(dataclasses.replace(req, groups_names=allowed), finish=finish)


def _find_coordinator(auth: GroupAcls, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
    if int(getattr(req, "key_type", GROUP_KEY)) != GROUP_KEY:
        return Verdict(req)  # transaction coordinators: the upstream decides
    if version < 4:
        if auth.group(caller, Operation.DESCRIBE, req.key):
            return Verdict(req)
        return Verdict(
            None,
            lambda body: make(  # FindCoordinatorResponse.prepareOldResponse(error, Node.noNode())
                body,
                error_code=GROUP_DENIED,
                error_message=GROUP_DENIED_MESSAGE,
                node_id=i32(-1),
                host="",
                port=i32(-1),
            ),
        )
    denied = {k for k in req.coordinator_keys if not auth.group(caller, Operation.DESCRIBE, k)}
    if not denied:
        return Verdict(req)

    def finish(resp: Any) -> Any:
        return dataclasses.replace(
            resp,
            coordinators=tuple(
                dataclasses.replace(
                    c, node_id=i32(-1), host="", port=i32(-1), error_code=GROUP_DENIED, error_message=None
                )
                if c.key in denied
                else c
                for c in resp.coordinators
            ),
        )

    return Verdict(req, finish=finish)


def _group_configs(operation: Operation, entries: str) -> Callable[..., Verdict]:
    """DescribeConfigs / IncrementalAlterConfigs: GROUP resources checked, others untouched
    (the upstream authorizes those)."""

    def hook(auth: GroupAcls, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
        denied = {
            id(r)
            for r in req.resources
            if int(r.resource_type) == GROUP_RESOURCE and not auth.group(caller, operation, r.resource_name)
        }
        if not denied:
            return Verdict(req)
        entry_type = element_type(rt, entries)

        def refused(r: Any) -> Any:
            return make(
                entry_type,
                error_code=GROUP_DENIED,
                error_message=None,
                resource_type=i8(GROUP_RESOURCE),
                resource_name=r.resource_name,
                configs=(),
            )

        allowed = tuple(r for r in req.resources if id(r) not in denied)
        if not allowed:
            return Verdict(
                None, lambda body: make(body, **{entries: tuple(refused(r) for r in req.resources)})
            )

        def finish(resp: Any) -> Any:
            served = iter(getattr(resp, entries))  # the handler answers in request order
            merged = tuple(refused(r) if id(r) in denied else next(served) for r in req.resources)
            return dataclasses.replace(resp, **{entries: merged})

        return Verdict(dataclasses.replace(req, resources=allowed), finish=finish)

    return hook


AUTHORIZATION_HOOKS: Mapping[ApiKey, Hook] = {
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    # DescribeGroupsResponse.groupError: no message, operations omitted
    ApiKey.DESCRIBE_GROUPS: per_group_read(
        "groups",
        "groups",
        lambda g: ga.DescribedGroup(
            group_id=g,
            error_code=GROUP_DENIED.value,
            authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        ),
    ),
    ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.DESCRIBE_CONFIGS: _group_configs(Operation.DESCRIBE_CONFIGS, "results"),
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _group_configs(Operation.ALTER_CONFIGS, "responses"),
}
"""The admin APIs' hooks, registered against their declarations by :mod:`.group_authorization`."""
