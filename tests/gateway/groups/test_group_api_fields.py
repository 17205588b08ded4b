"""Every field of every served version of a group API reaches the coordinator and comes back.

The wire translation maps kio fields onto protobuf fields by name and skips a field the
protobuf message lacks (a version that lacks a field simply does not carry it). That leniency
once hid a real bug: OffsetDelete's ``partitions`` had no counterpart, so every OffsetDelete
reached the shard with no partitions, deleted nothing and answered nothing for them. This test
walks the kio schemas of every version the gateway serves and fails on any field without a
counterpart, except the few the handlers translate by hand (listed, with where).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from google.protobuf.descriptor import Descriptor
from kio.serial._introspect import EntityField, EntityTupleField, classify_field

from groupcoord.common.kafka_wire import codec
from groupcoord.gateway.groups.group_apis import GROUP_APIS
from groupcoord.gateway.messages.wire_translation import _proto_field_for
from groupcoord.rpc.v1 import classic_group_pb2 as cg
from groupcoord.rpc.v1 import consumer_group_pb2 as cgh
from groupcoord.rpc.v1 import group_admin_pb2 as ga
from groupcoord.rpc.v1 import offsets_pb2 as op
from groupcoord.rpc.v1 import share_group_pb2 as sgh
from groupcoord.rpc.v1 import streams_group_pb2 as stg

# api key -> (request message, response message) of the coordinator's contract.
MESSAGES: dict[int, tuple[Any, Any]] = {
    8: (op.OffsetCommitRequest, op.OffsetCommitResponse),
    9: (op.OffsetFetchRequest, op.OffsetFetchResponse),
    11: (cg.JoinGroupRequest, cg.JoinGroupResponse),
    12: (cg.HeartbeatRequest, cg.HeartbeatResponse),
    13: (cg.LeaveGroupRequest, cg.LeaveGroupResponse),
    14: (cg.SyncGroupRequest, cg.SyncGroupResponse),
    15: (ga.DescribeGroupsRequest, ga.DescribeGroupsResponse),
    16: (ga.ListGroupsRequest, ga.ListGroupsResponse),
    42: (ga.DeleteGroupsRequest, ga.DeleteGroupsResponse),
    47: (op.OffsetDeleteRequest, op.OffsetDeleteResponse),
    28: (op.TxnOffsetCommitRequest, op.TxnOffsetCommitResponse),
    68: (cgh.ConsumerGroupHeartbeatRequest, cgh.ConsumerGroupHeartbeatResponse),
    69: (cgh.ConsumerGroupDescribeRequest, cgh.ConsumerGroupDescribeResponse),
    76: (sgh.ShareGroupHeartbeatRequest, sgh.ShareGroupHeartbeatResponse),
    77: (sgh.ShareGroupDescribeRequest, sgh.ShareGroupDescribeResponse),
    88: (stg.StreamsGroupHeartbeatRequest, stg.StreamsGroupHeartbeatResponse),
    89: (stg.StreamsGroupDescribeRequest, stg.StreamsGroupDescribeResponse),
}

# (api key, "request"/"response", field path) -> the versions whose handler translates it by hand.
BY_HAND: dict[tuple[int, str, str], range] = {
    # OffsetFetch v1-7 name one group at top level; GroupApis.offset_fetch builds the group.
    (9, "request", "group_id"): range(1, 8),
    (9, "request", "topics"): range(1, 8),
    (9, "response", "topics"): range(1, 8),
    (9, "response", "error_code"): range(1, 8),
    # LeaveGroup v0-2 name one member at top level; GroupApis.leave_group adds it to members.
    (13, "request", "member_id"): range(0, 3),
}


def _missing(entity: type[Any], descriptor: Descriptor, prefix: str = "") -> list[str]:
    """Field paths of the kio ``entity`` without a protobuf counterpart in ``descriptor``."""
    out = []
    for f in dataclasses.fields(entity):
        path = f"{prefix}{f.name}"
        fd = _proto_field_for(descriptor, f.name)
        if fd is None:
            out.append(path)
            continue
        kind = classify_field(f)
        if isinstance(kind, EntityField | EntityTupleField):
            message = fd.message_type
            inner = message.fields[0] if len(message.fields) == 1 else None
            if isinstance(kind, EntityTupleField) and not fd.is_repeated and inner and inner.is_repeated:
                message = inner.message_type  # a null-vs-empty wrapper around the list
            out += _missing(kind.type_, message, f"{path}.")
    return out


CASES = [
    (key, version, side)
    for key, api in sorted(GROUP_APIS.items())
    if key in MESSAGES
    for version in range(api.versions[0], api.versions[1] + 1)
    for side in ("request", "response")
]


@pytest.mark.parametrize(("api_key", "version", "side"), CASES)
def test_every_wire_field_has_a_coordinator_field(api_key: int, version: int, side: str) -> None:
    entity = (codec.request_type if side == "request" else codec.response_type)(api_key, version)
    message = MESSAGES[api_key][0 if side == "request" else 1]
    missing = [
        path
        for path in _missing(entity, message.DESCRIPTOR)
        if version not in BY_HAND.get((api_key, side, path), range(0))
    ]
    assert missing == [], f"{entity.__name__} fields the coordinator never sees: {missing}"


def test_every_served_group_api_is_checked() -> None:
    # FindCoordinator, group configs (per resource), AddOffsetsToTxn (an upstream AddPartitionsToTxn),
    # ShareFetch, ShareAcknowledge and the share-group offsets APIs (answers built here, with the
    # upstream's records and offsets)
    answered_upstream_or_built_here = {10, 25, 32, 44, 78, 79, 90, 91, 92}
    assert set(GROUP_APIS) - answered_upstream_or_built_here == set(MESSAGES)
