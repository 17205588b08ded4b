"""Denied groups and topics never reach a shard: the authorization hooks narrow the request the
gateway sends (DescribeGroups, ConsumerGroupDescribe, OffsetFetch v1-9), answer the refused
parts themselves, and merge them back in request order — as KafkaApis asks the coordinator only
for the authorized groups and topics. Responses in Kafka's shapes (FindCoordinator v0-3,
JoinGroup, ConsumerGroupHeartbeat error responses)."""

from __future__ import annotations

import datetime

from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v1.request import FindCoordinatorRequest as FindCoordinatorV1
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest as OffsetFetchV7
from kio.schema.offset_fetch.v7.request import OffsetFetchRequestTopic as TopicV7
from kio.schema.offset_fetch.v8.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kio.static.primitive import i8, i32, i32Timedelta

from groupcoord.authorization.acls import (
    AclBinding,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from groupcoord.common.kafka_wire import codec
from groupcoord.gateway.messages.wire_translation import from_proto
from groupcoord.gateway.security.group_acls import Caller
from groupcoord.gateway.security.group_authorization import GroupAuthorization
from groupcoord.rpc.v1 import consumer_group_pb2 as cgh
from groupcoord.rpc.v1 import group_admin_pb2 as ga
from groupcoord.rpc.v1 import offsets_pb2 as op

ME = Caller("User:alice", "10.0.0.7")
GAF, TAF = 30, 29


def policy(*bindings: AclBinding) -> GroupAuthorization:
    authorizer = Authorizer.of(bindings)
    return GroupAuthorization(lambda: authorizer)


def allow(
    op: Operation, rtype: ResourceType, name: str, pattern: PatternType = PatternType.LITERAL
) -> AclBinding:
    return AclBinding("User:alice", op, Permission.ALLOW, rtype, name, pattern)


APP = allow(Operation.READ, ResourceType.GROUP, "app-", PatternType.PREFIXED)  # READ implies DESCRIBE


def check(auth: GroupAuthorization, body: object):  # noqa: ANN201
    key, version = int(body.__api_key__), int(body.__version__)
    return auth.check(key, ME, version, codec.response_type(key, version), body)


def encodes(response: object) -> object:
    codec.encode_response(1, response)
    return response


def test_describe_groups_sends_only_authorized_groups() -> None:
    auth = policy(APP)
    verdict = check(
        auth, DescribeGroupsRequest(groups=("other", "app-1", "secret"), include_authorized_operations=True)
    )
    assert verdict.request.groups == ("app-1",)  # what goes to the shard
    rt = codec.response_type(15, 5)
    served = from_proto(
        ga.DescribeGroupsResponse(groups=[ga.DescribedGroup(group_id="app-1", group_state="Stable")]), rt
    )
    resp = encodes(verdict.finish(served))
    assert [(g.group_id, int(g.error_code)) for g in resp.groups] == [
        ("other", GAF),
        ("app-1", 0),
        ("secret", GAF),
    ]
    assert int(resp.groups[0].authorized_operations) == -(2**31)  # DescribeGroupsResponse.groupError
    assert int(resp.groups[1].authorized_operations) == (1 << 3) | (
        1 << 8
    )  # READ and the DESCRIBE it implies
    nothing = check(auth, DescribeGroupsRequest(groups=("other",), include_authorized_operations=False))
    assert nothing.request is None  # no shard call at all
    refusal = encodes(nothing.denied(rt))
    assert [(g.group_id, int(g.error_code)) for g in refusal.groups] == [("other", GAF)]


def test_consumer_group_describe_sends_only_authorized_groups() -> None:
    auth = policy(APP)
    verdict = check(
        auth, ConsumerGroupDescribeRequest(group_ids=("app-1", "other"), include_authorized_operations=False)
    )
    assert verdict.request.group_ids == ("app-1",)
    rt = codec.response_type(69, 0)
    served = from_proto(
        cgh.ConsumerGroupDescribeResponse(
            groups=[cgh.ConsumerGroupDescribeGroup(group_id="app-1", group_state="Stable")]
        ),
        rt,
    )
    resp = encodes(verdict.finish(served))
    assert [(g.group_id, int(g.error_code)) for g in resp.groups] == [("app-1", 0), ("other", GAF)]
    assert int(resp.groups[1].authorized_operations) == -(2**31)


def _fetch_group(group_id: str, *topics: str) -> OffsetFetchRequestGroup:
    return OffsetFetchRequestGroup(
        group_id=group_id,
        topics=tuple(OffsetFetchRequestTopics(name=t, partition_indexes=(i32(0), i32(1))) for t in topics)
        or None,
    )


def test_offset_fetch_sends_only_authorized_groups_and_topics() -> None:
    auth = policy(APP, allow(Operation.DESCRIBE, ResourceType.TOPIC, "t-ok"))
    body = OffsetFetchRequest(
        groups=(
            _fetch_group("other", "t-ok"),
            _fetch_group("app-1", "t-secret", "t-ok"),
            _fetch_group("app-2"),
        ),
        require_stable=False,
    )
    verdict = check(auth, body)
    sent = verdict.request.groups
    assert [g.group_id for g in sent] == ["app-1", "app-2"]
    assert [t.name for t in sent[0].topics] == ["t-ok"] and sent[1].topics is None
    rt = codec.response_type(9, 8)

    def offsets(*names: str) -> list[op.OffsetFetchResponseTopic]:
        return [
            op.OffsetFetchResponseTopic(
                name=n,
                partitions=[
                    op.OffsetFetchResponsePartition(partition_index=0, committed_offset=5, metadata="")
                ],
            )
            for n in names
        ]

    served = from_proto(
        op.OffsetFetchResponse(
            groups=[
                op.OffsetFetchResponseGroup(group_id="app-1", topics=offsets("t-ok")),
                op.OffsetFetchResponseGroup(group_id="app-2", topics=offsets("t-ok", "t-secret")),
            ]
        ),
        rt,
    )
    resp = encodes(verdict.finish(served))
    assert [(g.group_id, int(g.error_code)) for g in resp.groups] == [
        ("other", GAF),
        ("app-1", 0),
        ("app-2", 0),
    ]
    app1 = {
        t.name: [(int(p.committed_offset), int(p.error_code)) for p in t.partitions]
        for t in resp.groups[1].topics
    }
    assert app1 == {"t-ok": [(5, 0)], "t-secret": [(-1, TAF), (-1, TAF)]}
    assert [t.name for t in resp.groups[1].topics] == ["t-ok", "t-secret"]  # refused appended, as Kafka
    assert [t.name for t in resp.groups[2].topics] == ["t-ok"]  # all topics: only the describable
    nothing = check(auth, OffsetFetchRequest(groups=(_fetch_group("other"),), require_stable=False))
    assert nothing.request is None


def test_offset_fetch_v7_named_topics() -> None:
    auth = policy(APP, allow(Operation.DESCRIBE, ResourceType.TOPIC, "t-ok"))
    body = OffsetFetchV7(
        group_id="app-1",
        topics=(
            TopicV7(name="t-secret", partition_indexes=(i32(0),)),
            TopicV7(name="t-ok", partition_indexes=(i32(0),)),
        ),
        require_stable=False,
    )
    verdict = check(auth, body)
    assert [t.name for t in verdict.request.topics] == ["t-ok"]
    rt = codec.response_type(9, 7)
    topic_type = rt.__dataclass_fields__["topics"].type.__args__[0]
    partition_type = topic_type.__dataclass_fields__["partitions"].type.__args__[0]
    ok = topic_type(
        name="t-ok",
        partitions=(
            from_proto(
                op.OffsetFetchResponsePartition(partition_index=0, committed_offset=5, metadata=""),
                partition_type,
            ),
        ),
    )

    response = rt(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)), topics=(ok,), error_code=ErrorCode.none
    )
    resp = encodes(verdict.finish(response))
    assert [(t.name, [int(p.error_code) for p in t.partitions]) for t in resp.topics] == [
        ("t-ok", [0]),
        ("t-secret", [TAF]),
    ]


def test_kafkas_error_response_shapes() -> None:
    auth = policy()
    rt = codec.response_type(10, 1)
    refusal = encodes(check(auth, FindCoordinatorV1(key="g", key_type=i8(0))).denied(rt))
    # FindCoordinatorResponse.prepareOldResponse(error, Node.noNode()) carries error.message()
    assert (int(refusal.error_code), refusal.error_message, int(refusal.node_id), refusal.host, int(refusal.port)) == (
        GAF, "Group authorization failed.", -1, "", -1,
    )  # fmt: skip
    from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest  # noqa: PLC0415
    from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol  # noqa: PLC0415

    join = JoinGroupRequest(
        group_id="g", session_timeout=i32(30000), member_id="m-1", protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),),
    )  # fmt: skip
    denied = check(auth, join).denied  # JoinGroupRequest.getErrorResponse: UNKNOWN_MEMBER_ID
    assert denied.error_code == GAF and denied.member_id == "" and denied.generation_id == -1
    heartbeat = ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m-1", member_epoch=i32(3), subscribed_topic_names=None, topic_partitions=None
    )
    denied = check(auth, heartbeat).denied  # the error code only (epoch 0), as Kafka
    assert denied.error_code == GAF and denied.member_epoch == 0
