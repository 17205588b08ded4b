"""The offsets APIs' authorization: OffsetCommit and TxnOffsetCommit (WRITE on the
transactional id first, READ on the group, READ per topic), AddOffsetsToTxn, OffsetFetch
(DESCRIBE on each group and each named topic) and OffsetDelete (DELETE, then READ per topic)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from groupcoord.authorization.acls import Operation, ResourceType
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.gateway.messages.kio_entities import element_type
from groupcoord.gateway.messages.wire_translation import from_proto
from groupcoord.gateway.security.group_acls import (
    GROUP_DENIED,
    TOPIC_DENIED,
    TRANSACTIONAL_ID_DENIED,
    Caller,
    GroupAcls,
    Hook,
    Verdict,
    make,
    merge_in_order,
    topic_name,
)
from groupcoord.rpc.v1 import offsets_pb2 as op


def _commit(auth: GroupAcls, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
    """OffsetCommit and TxnOffsetCommit: (WRITE on the transactional id,) READ on the group,
    READ on each topic."""
    topic_type = element_type(rt, "topics")
    partition_type = element_type(topic_type, "partitions")

    def refused(topic: Any, code: ErrorCode) -> Any:
        return make(
            topic_type,
            name=topic_name(topic) or "",
            topic_id=getattr(topic, "topic_id", None),
            partitions=tuple(
                partition_type(partition_index=p.partition_index, error_code=code) for p in topic.partitions
            ),
        )

    transactional_id = getattr(req, "transactional_id", None)
    if transactional_id is not None and not auth.allowed(
        caller, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        return Verdict(
            None,
            lambda body: make(body, topics=tuple(refused(t, TRANSACTIONAL_ID_DENIED) for t in req.topics)),
        )
    if not auth.group(caller, Operation.READ, req.group_id):
        return Verdict(
            None, lambda body: make(body, topics=tuple(refused(t, GROUP_DENIED) for t in req.topics))
        )
    denied = {id(t) for t in req.topics if not auth.topic(caller, Operation.READ, topic_name(t))}
    if not denied:
        return Verdict(req)
    if len(denied) == len(req.topics):
        return Verdict(
            None, lambda body: make(body, topics=tuple(refused(t, TOPIC_DENIED) for t in req.topics))
        )

    def finish(resp: Any) -> Any:
        topics = merge_in_order(
            req.topics,
            lambda t: refused(t, TOPIC_DENIED) if id(t) in denied else None,
            resp.topics,
            topic_name,
            topic_name,
        )
        return dataclasses.replace(resp, topics=topics)

    return Verdict(
        dataclasses.replace(req, topics=tuple(t for t in req.topics if id(t) not in denied)), finish=finish
    )


def _add_offsets_to_txn(auth: GroupAcls, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
    """AddOffsetsToTxn: WRITE on the transactional id, READ on the group (as Kafka checks them)."""
    if not auth.allowed(caller, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return Verdict(None, lambda body: make(body, error_code=TRANSACTIONAL_ID_DENIED))
    if not auth.group(caller, Operation.READ, req.group_id):
        return Verdict(None, lambda body: make(body, error_code=GROUP_DENIED))
    return Verdict(req)


def _fetch_partition(partition_type: type[Any], index: int, code: ErrorCode) -> Any:
    return from_proto(
        op.OffsetFetchResponsePartition(
            partition_index=index,
            committed_offset=-1,
            committed_leader_epoch=-1,
            metadata="",
            error_code=code.value,
        ),
        partition_type,
    )


def _fetch_topics(
    auth: GroupAcls, caller: Caller, topics: Iterable[Any], all_topics: bool
) -> tuple[Any, ...]:
    """OffsetFetch response topics with DESCRIBE checked: left out of an all-topics fetch,
    TOPIC_AUTHORIZATION_FAILED per partition when named."""
    out = []
    for t in topics:
        if auth.topic(caller, Operation.DESCRIBE, topic_name(t)):
            out.append(t)
        elif not all_topics:
            partition_type = type(t).__dataclass_fields__["partitions"].type.__args__[0]
            out.append(
                dataclasses.replace(
                    t,
                    partitions=tuple(
                        _fetch_partition(partition_type, p.partition_index, TOPIC_DENIED)
                        for p in t.partitions
                    ),
                )
            )
    return tuple(out)


def _refused_fetch_topic(topic_type: type[Any], topic: Any, code: ErrorCode) -> Any:
    """A requested OffsetFetch topic answered here: every partition ``code``, offset -1."""
    partition_type = element_type(topic_type, "partitions")
    return make(
        topic_type,
        name=topic.name,
        topic_id=getattr(topic, "topic_id", None),
        partitions=tuple(_fetch_partition(partition_type, int(i), code) for i in topic.partition_indexes),
    )


def _split_fetch_topics(auth: GroupAcls, caller: Caller, topics: Iterable[Any]) -> tuple[tuple, tuple]:
    """(topics the caller may DESCRIBE, the others) of an OffsetFetch request."""
    allowed, refused = [], []
    for t in topics:
        (allowed if auth.topic(caller, Operation.DESCRIBE, topic_name(t)) else refused).append(t)
    return tuple(allowed), tuple(refused)


def _offset_fetch(auth: GroupAcls, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
    """DESCRIBE on each group and each named topic (KafkaApis.handleOffsetFetchRequest): a
    refused group or topic never reaches a shard; refused topics come after the served ones with
    TOPIC_AUTHORIZATION_FAILED and offset -1 (fetchOffsetsForGroup); an all-topics fetch keeps
    only the topics the caller may DESCRIBE (fetchAllOffsetsForGroup)."""
    if version <= 7:
        if not auth.group(caller, Operation.DESCRIBE, req.group_id):
            topic_type = element_type(rt, "topics")
            partition_type = element_type(topic_type, "partitions")

            def refusal(body: type[Any]) -> Any:
                topics = tuple(
                    topic_type(
                        name=t.name,
                        partitions=tuple(
                            _fetch_partition(partition_type, int(i), GROUP_DENIED)
                            for i in t.partition_indexes
                        ),
                    )
                    for t in req.topics or ()
                )
                return make(body, topics=topics, error_code=GROUP_DENIED)

            return Verdict(None, refusal)
        if req.topics is None:
            return Verdict(
                req,
                finish=lambda resp: dataclasses.replace(
                    resp, topics=_fetch_topics(auth, caller, resp.topics, True)
                ),
            )
        allowed, refused = _split_fetch_topics(auth, caller, req.topics)
        if not refused:
            return Verdict(req)
        topic_type = element_type(rt, "topics")

        def finish_one(resp: Any) -> Any:
            if int(getattr(resp, "error_code", 0)) != 0:
                return resp
            extra = tuple(_refused_fetch_topic(topic_type, t, TOPIC_DENIED) for t in refused)
            return dataclasses.replace(resp, topics=(*resp.topics, *extra))

        return Verdict(dataclasses.replace(req, topics=allowed), finish=finish_one)
    group_type = element_type(rt, "groups")
    topic_type = element_type(group_type, "topics")
    denied = {g.group_id for g in req.groups if not auth.group(caller, Operation.DESCRIBE, g.group_id)}
    all_topics = {g.group_id for g in req.groups if g.topics is None and g.group_id not in denied}
    held: dict[str, tuple] = {}
    asked = []
    for g in req.groups:
        if g.group_id in denied:
            continue
        if g.topics is not None:
            allowed, refused = _split_fetch_topics(auth, caller, g.topics)
            if refused:
                held[g.group_id] = refused
                g = dataclasses.replace(g, topics=allowed)
        asked.append(g)

    def refusal_of(group: Any) -> Any | None:
        if group.group_id not in denied:
            return None
        return from_proto(
            op.OffsetFetchResponseGroup(group_id=group.group_id, error_code=GROUP_DENIED.value), group_type
        )

    if not asked:
        return Verdict(None, lambda body: make(body, groups=tuple(refusal_of(g) for g in req.groups)))
    if not denied and not held and not all_topics:
        return Verdict(req)

    def finish(resp: Any) -> Any:
        served = []
        for g in resp.groups:
            if int(g.error_code) == 0:
                if g.group_id in all_topics:
                    g = dataclasses.replace(g, topics=_fetch_topics(auth, caller, g.topics, True))
                extra = held.get(g.group_id)
                if extra:
                    refused_topics = tuple(_refused_fetch_topic(topic_type, t, TOPIC_DENIED) for t in extra)
                    g = dataclasses.replace(g, topics=(*g.topics, *refused_topics))
            served.append(g)
        groups = merge_in_order(req.groups, refusal_of, served, lambda g: g.group_id, lambda g: g.group_id)
        return dataclasses.replace(resp, groups=groups)

    return Verdict(dataclasses.replace(req, groups=tuple(asked)), finish=finish)


def _offset_delete(auth: GroupAcls, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
    if not auth.group(caller, Operation.DELETE, req.group_id):
        return Verdict(None, op.OffsetDeleteResponse(error_code=GROUP_DENIED.value))
    denied = {id(t) for t in req.topics if not auth.topic(caller, Operation.READ, topic_name(t))}
    if not denied:
        return Verdict(req)
    topic_type = element_type(rt, "topics")
    partition_type = element_type(topic_type, "partitions")

    def refused(t: Any) -> Any | None:
        if id(t) not in denied:
            return None
        return topic_type(
            name=t.name,
            partitions=tuple(
                partition_type(partition_index=p.partition_index, error_code=TOPIC_DENIED)
                for p in t.partitions
            ),
        )

    def finish(resp: Any) -> Any:
        if int(resp.error_code) != 0:
            return resp
        return dataclasses.replace(
            resp, topics=merge_in_order(req.topics, refused, resp.topics, topic_name, topic_name)
        )

    return Verdict(
        dataclasses.replace(req, topics=tuple(t for t in req.topics if id(t) not in denied)), finish=finish
    )


AUTHORIZATION_HOOKS: Mapping[ApiKey, Hook] = {
    ApiKey.OFFSET_COMMIT: _commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    # when the gateway answers it (forwarded, the upstream decides)
    ApiKey.ADD_OFFSETS_TO_TXN: _add_offsets_to_txn,
    ApiKey.TXN_OFFSET_COMMIT: _commit,
    ApiKey.OFFSET_DELETE: _offset_delete,
}
"""The offsets APIs' hooks, registered against their declarations by :mod:`.group_authorization`."""
