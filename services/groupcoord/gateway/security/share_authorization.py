"""KIP-932 share groups' authorization: the heartbeat and describe as consumer groups'; ShareFetch
and ShareAcknowledge READ on the group (topics: the upstream's, fetched as the client); the
share-group offsets APIs per group, then per topic, as ``KafkaApis`` checks them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from groupcoord.authorization.acls import Operation
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.gateway.messages.kio_entities import NO_THROTTLE, element_type, has_field
from groupcoord.gateway.security.group_acls import (
    AUTHORIZED_OPERATIONS_OMITTED,
    GROUP_DENIED,
    GROUP_DENIED_MESSAGE,
    TOPIC_DENIED,
    TOPIC_DENIED_MESSAGE,
    ZERO_UUID,
    Caller,
    GroupAcls,
    Hook,
    Verdict,
    make,
    merge_in_order,
    modern_describe,
    modern_heartbeat,
    per_group_read,
)
from groupcoord.rpc.v1 import share_group_pb2 as sgh


def _share_delivery(auth: GroupAcls, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
    """ShareFetch and ShareAcknowledge: READ on the group, else GROUP_AUTHORIZATION_FAILED for
    the whole request. Topics are named by id only; READ on each is the upstream's to decide, as
    the records are fetched on the client's own upstream connection under its own identity
    (a refused topic's partitions carry the upstream's TOPIC_AUTHORIZATION_FAILED)."""
    if auth.group(caller, Operation.READ, req.group_id or ""):
        return Verdict(req)

    return Verdict(
        None,
        lambda body: make(  # acquisition_lock_timeout: ShareFetch only
            body,
            error_code=GROUP_DENIED,
            responses=(),
            node_endpoints=(),
            acquisition_lock_timeout=NO_THROTTLE,
        ),
    )


def _refused_share_topic(topic_type: type[Any], name: str, partitions: Iterable[Any]) -> Any:
    """A share-group offsets answer's topic whose every partition is TOPIC_AUTHORIZATION_FAILED
    (no offset, leader epoch or lag: -1 where the partition type has them)."""
    partition_type = element_type(topic_type, "partitions")
    return make(
        topic_type,
        topic_name=name,
        topic_id=ZERO_UUID,
        partitions=tuple(
            make(
                partition_type,
                partition_index=index,
                start_offset=i64(-1),
                leader_epoch=i32(-1),
                lag=i64(-1),
                error_code=TOPIC_DENIED,
                error_message=TOPIC_DENIED_MESSAGE,
            )
            for index in partitions
        ),
    )


def _share_offsets_change(operation: Operation) -> Hook:
    """AlterShareGroupOffsets (READ on the group) and DeleteShareGroupOffsets (DELETE): refused,
    the whole request is GROUP_AUTHORIZATION_FAILED. Then READ on each topic
    (``KafkaApis.handleAlterShareGroupOffsetsRequest`` / ``handleDeleteShareGroupOffsetsRequest``):
    a refused topic is answered TOPIC_AUTHORIZATION_FAILED here (each partition of it for Alter,
    the topic for Delete) and never reaches the shard; the others are served, in request order."""

    def hook(auth: GroupAcls, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
        if not auth.group(caller, operation, req.group_id):
            return Verdict(
                None,
                lambda body: make(
                    body, error_code=GROUP_DENIED, error_message=GROUP_DENIED_MESSAGE, responses=()
                ),
            )
        denied = {id(t) for t in req.topics if not auth.topic(caller, Operation.READ, t.topic_name)}
        if not denied:
            return Verdict(req)
        topic_type = element_type(rt, "responses")

        def refused(topic: Any) -> Any:
            if has_field(topic_type, "partitions"):  # Alter: per partition
                return _refused_share_topic(
                    topic_type, topic.topic_name, (p.partition_index for p in topic.partitions)
                )
            return make(
                topic_type, topic_name=topic.topic_name, topic_id=ZERO_UUID, error_code=TOPIC_DENIED,
                error_message=TOPIC_DENIED_MESSAGE,
            )  # fmt: skip

        def merged(served: Iterable[Any]) -> tuple[Any, ...]:
            return merge_in_order(
                req.topics,
                lambda t: refused(t) if id(t) in denied else None,
                served,
                lambda t: t.topic_name,
                lambda t: t.topic_name,
            )

        if len(denied) == len(req.topics):
            return Verdict(None, lambda body: make(body, error_code=ErrorCode.none, responses=merged(())))
        return Verdict(
            dataclasses.replace(req, topics=tuple(t for t in req.topics if id(t) not in denied)),
            finish=lambda resp: dataclasses.replace(resp, responses=merged(resp.responses)),
        )

    return hook


def _describe_share_offsets(per_group: Hook) -> Hook:
    """DescribeShareGroupOffsets: DESCRIBE on each group (``per_group``), then on each topic
    (``KafkaApis.handleDescribeShareGroupOffsetsRequest``, as OffsetFetch): a named topic the
    caller may not DESCRIBE has every partition TOPIC_AUTHORIZATION_FAILED and is not asked of
    the shard; an all-topics description leaves such topics out."""

    def hook(auth: GroupAcls, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
        verdict = per_group(auth, caller, version, rt, req)
        if verdict.request is None:
            return verdict
        topic_type = element_type(element_type(rt, "groups"), "topics")
        asked = {g.group_id: g for g in verdict.request.groups}
        denied = {
            id(t)
            for g in verdict.request.groups
            for t in g.topics or ()
            if not auth.topic(caller, Operation.DESCRIBE, t.topic_name)
        }

        def refused(topic: Any) -> Any | None:
            if id(topic) not in denied:
                return None
            return _refused_share_topic(topic_type, topic.topic_name, topic.partitions)

        def described(group: Any) -> Any:
            request = asked.get(group.group_id)
            if request is None:
                return group
            if request.topics is None:
                return dataclasses.replace(
                    group,
                    topics=tuple(
                        t for t in group.topics if auth.topic(caller, Operation.DESCRIBE, t.topic_name)
                    ),
                )
            topics = merge_in_order(
                request.topics, refused, group.topics, lambda t: t.topic_name, lambda t: t.topic_name
            )
            return dataclasses.replace(group, topics=topics)

        served = verdict.finish

        def finish(resp: Any) -> Any:
            resp = dataclasses.replace(resp, groups=tuple(described(g) for g in resp.groups))
            return served(resp) if served is not None else resp

        narrowed = tuple(
            g
            if g.topics is None
            else dataclasses.replace(g, topics=tuple(t for t in g.topics if id(t) not in denied))
            for g in verdict.request.groups
        )
        return Verdict(dataclasses.replace(verdict.request, groups=narrowed), finish=finish)

    return hook


AUTHORIZATION_HOOKS: Mapping[ApiKey, Hook] = {
    ApiKey.SHARE_GROUP_HEARTBEAT: modern_heartbeat(sgh.ShareGroupHeartbeatResponse),
    ApiKey.SHARE_FETCH: _share_delivery,
    ApiKey.SHARE_ACKNOWLEDGE: _share_delivery,
    # DescribeShareGroupOffsetsRequest.getErrorResponse: the message too
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: _describe_share_offsets(
        per_group_read(
            "groups",
            "groups",
            lambda g: sgh.DescribeShareGroupOffsetsResponseGroup(
                group_id=g, error_code=GROUP_DENIED.value, error_message=GROUP_DENIED_MESSAGE
            ),
            group_of=lambda group: group.group_id,
        )
    ),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: _share_offsets_change(Operation.READ),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: _share_offsets_change(Operation.DELETE),
    ApiKey.SHARE_GROUP_DESCRIBE: modern_describe(
        lambda g: sgh.ShareGroupDescribeGroup(
            group_id=g, error_code=GROUP_DENIED.value, authorized_operations=AUTHORIZED_OPERATIONS_OMITTED
        )
    ),
}
"""The share groups' hooks, registered against their declarations by :mod:`.group_authorization`."""
