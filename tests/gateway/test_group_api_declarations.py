"""The group APIs' declarations against every table derived from them: each declared API has a
gateway adapter, an authorization hook and (if it declares one) a shard operation under the
declared name and kind, no table serves an undeclared API, and the api keys are kio's."""

from __future__ import annotations

import pytest
from kio.schema.index import api_key_map

from groupcoord.common.group_api_declarations import (
    DECLARATIONS,
    NOT_SERVED,
    SHARD_APIS,
    GroupApi,
    registered,
    write,
)
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.coordinator.server.coordinator_service import OPERATIONS
from groupcoord.gateway.api_versions import GROUP_API_KEYS, advertised_versions
from groupcoord.gateway.group_apis import GROUP_APIS
from groupcoord.gateway.group_authorization import HOOKS, TOPIC_NAME_VERSIONS
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


def test_every_shard_operation_is_registered_as_declared() -> None:
    assert set(OPERATIONS) == {api.operation.name for api in SHARD_APIS if api.operation is not None}
    for api in SHARD_APIS:
        assert api.operation is not None
        # the request is bound only when the operation runs
        operation = OPERATIONS[api.operation.name](None)
        assert (operation.name, operation.read_only) == (api.operation.name, api.operation.read_only)


def test_the_envelope_oneofs_carry_exactly_the_declared_operations() -> None:
    declared = {api.operation.name for api in SHARD_APIS if api.operation is not None}
    for message, oneof in ((CoordinatorEnvelope, "request"), (CoordinatorReply, "response")):
        assert {f.name for f in message.DESCRIPTOR.oneofs_by_name[oneof].fields} == declared


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
