"""The group APIs' declarations against every table derived from them: each declared API has a
gateway adapter, an authorization hook and (if it declares one) a shard operation under the
declared name and kind, which its adapter sends; no table serves an undeclared API; and the
api keys are kio's."""

from __future__ import annotations

import asyncio
import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.static.primitive import i8

from groupcoord.common.group_api_declarations import (
    DECLARATIONS,
    GATEWAY_OPERATIONS,
    GROUP_RESOURCE,
    NOT_SERVED,
    SHARD_APIS,
    GroupApi,
    ShardOperation,
    registered,
    write,
)
from groupcoord.common.kafka_wire import codec
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.coordinator.core.group_operations import OPERATIONS
from groupcoord.gateway.groups.group_apis import GROUP_APIS, GroupApis
from groupcoord.gateway.groups.leadership import LeadershipTable, ShardEndpoint
from groupcoord.gateway.groups.worker_client import ShardReply, failed
from groupcoord.gateway.security.group_authorization import HOOKS, TOPIC_NAME_VERSIONS
from groupcoord.gateway.transport.api_versions import GROUP_API_KEYS, advertised_versions
from groupcoord.rpc.v1.coordinator_pb2 import CoordinatorEnvelope, CoordinatorReply


def test_every_api_key_is_kio_s_number_for_that_api() -> None:
    assert {key: key.name.lower() for key in ApiKey} == {key: api_key_map[key] for key in ApiKey}


def test_each_api_is_declared_once() -> None:
    keys = [api.key for api in DECLARATIONS]
    assert len(keys) == len(set(keys))
    assert keys == sorted(keys)
    assert not set(keys) & NOT_SERVED


def test_the_gateway_serves_exactly_the_declared_apis_at_their_versions() -> None:
    assert list(GROUP_APIS) == [api.key for api in DECLARATIONS]
    assert {key: served.versions for key, served in GROUP_APIS.items()} == {
        api.key: api.versions for api in DECLARATIONS
    }


def test_every_declared_api_has_an_authorization_hook_and_no_other_api_has_one() -> None:
    assert list(HOOKS) == [api.key for api in DECLARATIONS]
    assert set(TOPIC_NAME_VERSIONS) <= set(HOOKS)


def declared_operations() -> list[ShardOperation]:
    """The operations of the declared group APIs, and those the gateway asks for on its own."""
    return [*(api.operation for api in SHARD_APIS if api.operation is not None), *GATEWAY_OPERATIONS]


def test_every_shard_operation_is_registered_as_declared() -> None:
    assert set(OPERATIONS) == {op.name for op in declared_operations()}
    for declared in declared_operations():
        # the request is bound only when the operation runs
        operation = OPERATIONS[declared.name](None)
        assert (operation.name, operation.read_only) == (declared.name, declared.read_only)


def test_no_client_request_names_a_gateway_operation() -> None:
    """The gateway's own operations (a group's adoption) are no Kafka API: no adapter, no
    api key reaches them."""
    assert not {op.name for op in GATEWAY_OPERATIONS} & {
        api.operation.name for api in SHARD_APIS if api.operation is not None
    }


def test_the_envelope_oneofs_carry_exactly_the_declared_operations() -> None:
    declared = {op.name for op in declared_operations()}
    for message, oneof in ((CoordinatorEnvelope, "request"), (CoordinatorReply, "response")):
        assert {f.name for f in message.DESCRIPTOR.oneofs_by_name[oneof].fields} == declared


class OperationsSent:
    """A shard client that records the oneof field of every envelope and answers
    UNKNOWN_SERVER_ERROR (not a failover error: the adapter builds its error response at once)."""

    def __init__(self) -> None:
        self.sent: list[str | None] = []

    async def call(self, address: tuple[str, int], envelope: CoordinatorEnvelope) -> ShardReply:
        self.sent.append(envelope.WhichOneof("request"))
        return failed(ErrorCode.unknown_server_error, "")


async def unreachable(body: Any) -> Any:
    raise ConnectionError("no upstream in this test")


async def operations_sent(key: ApiKey, version: int, request: Any) -> list[str | None]:
    leadership = LeadershipTable(3)
    leadership.update({p: (0, 1) for p in range(3)}, {0: ShardEndpoint("shard-0", 7000)})
    shards = OperationsSent()

    async def node(listener: tuple[str, int]) -> tuple[int, str, int]:
        return 1, *listener

    apis = GroupApis(leadership, shards, unreachable, node, failover_wait_s=0.1)  # type: ignore[arg-type]
    header = SimpleNamespace(request_api_key=key, request_api_version=version, client_id="t")
    await apis.handle(header, request, ("127.0.0.1", 9092), "127.0.0.1")
    return shards.sent


def requests(key: ApiKey, version: int) -> st.SearchStrategy[Any]:
    strategy = st.from_type(codec.request_type(key, version))
    if key in (ApiKey.DESCRIBE_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        # GROUP resources only: the others go to the upstream, which this test has not
        strategy = strategy.map(
            lambda r: dataclasses.replace(
                r,
                resources=tuple(
                    dataclasses.replace(x, resource_type=i8(GROUP_RESOURCE)) for x in r.resources
                ),
            )
        )
    return strategy


ADAPTER_CASES = [
    pytest.param(api, version, id=f"{api.key.name}-v{version}")
    for api in SHARD_APIS
    for version in sorted(
        {
            max(api.versions[0], codec.CODEC_VERSIONS[api.key][0]),
            min(api.versions[1], codec.CODEC_VERSIONS[api.key][1]),
        }
    )
]


@pytest.mark.parametrize(("api", "version"), ADAPTER_CASES)
def test_every_adapter_sends_the_operation_declared_for_its_api(api: GroupApi, version: int) -> None:
    assert api.operation is not None
    declared = api.operation.name

    @settings(
        max_examples=10,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(requests(api.key, version))
    def sends_only_the_declared_operation(request: Any) -> None:
        assert set(asyncio.run(operations_sent(api.key, version, request))) <= {declared}

    sends_only_the_declared_operation()


def test_unserved_apis_naming_only_groups_are_not_forwarded_and_mixed_ones_are() -> None:
    upstream = {
        ApiKey.DESCRIBE_CONFIGS: (1, 4),
        ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
        ApiKey.HEARTBEAT: (0, 4),
    }
    advertised = advertised_versions(upstream, {ApiKey.DESCRIBE_GROUPS: (0, 5)})
    assert ApiKey.DESCRIBE_CONFIGS in advertised  # its topic and broker resources are the upstream's
    assert ApiKey.SHARE_GROUP_DESCRIBE not in advertised
    assert ApiKey.HEARTBEAT not in advertised
    assert GROUP_API_KEYS >= NOT_SERVED


def test_a_registration_must_cover_exactly_the_declared_apis() -> None:
    apis = (
        GroupApi(ApiKey.HEARTBEAT, (0, 4), write("heartbeat")),
        GroupApi(ApiKey.JOIN_GROUP, (0, 9), write("join_group")),
    )
    assert registered("hook", {ApiKey.JOIN_GROUP: "j", ApiKey.HEARTBEAT: "h"}, apis) == [
        (apis[0], "h"),
        (apis[1], "j"),
    ]
    with pytest.raises(ValueError, match=r"missing for \['JOIN_GROUP'\], undeclared \[\]"):
        registered("hook", {ApiKey.HEARTBEAT: "h"}, apis)
    with pytest.raises(ValueError, match=r"missing for \[\], undeclared \['SYNC_GROUP'\]"):
        registered("hook", {ApiKey.HEARTBEAT: "h", ApiKey.JOIN_GROUP: "j", ApiKey.SYNC_GROUP: "s"}, apis)
