"""Committed offsets at the gateway: OffsetCommit, TxnOffsetCommit, AddOffsetsToTxn,
OffsetFetch, OffsetDelete.

Partitions that do not exist upstream are answered UNKNOWN_TOPIC_OR_PARTITION here, as Kafka's
request handler answers them from its metadata cache (:class:`~.topic_catalog.TopicCatalog`);
the group's shard answers the rest. Offsets of a transaction go to the group's shard pending,
and AddOffsetsToTxn (transaction version 1) or TxnOffsetCommit itself (version 2) adds the
group's state-topic partition to the transaction at the upstream (its transaction coordinator
writes the markers there).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from groupcoord.common.group_api_declarations import TRANSACTION_V2_TXN_OFFSET_COMMIT
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.gateway.groups.offset_mirror import Offset
from groupcoord.gateway.groups.serving import Adapter, CallContext, GroupServing
from groupcoord.gateway.messages.kio_entities import NO_THROTTLE, element_type
from groupcoord.gateway.messages.wire_translation import from_proto, to_proto
from groupcoord.rpc.v1 import offsets_pb2 as op
from groupcoord.rpc.v1.coordinator_pb2 import CoordinatorEnvelope as Envelope


async def offset_commit(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    """Partitions that do not exist upstream are answered UNKNOWN_TOPIC_OR_PARTITION here,
    as Kafka's request handler does; the rest go to the group's shard (none: no call)."""
    unknown = await apis.topics.unknown_partitions(
        (t.name, p.partition_index) for t in req.topics if getattr(t, "name", None) for p in t.partitions
    )
    known = _without(req.topics, unknown) if unknown else req.topics
    resp = op.OffsetCommitResponse()
    if known:
        msg = to_proto(
            dataclasses.replace(req, topics=known), op.OffsetCommitRequest(api_version=ctx.version)
        )
        reply = await apis.call(req.group_id, Envelope(offset_commit=msg))
        resp = reply.response or _commit_errors(known, reply.error_code)
        if apis.offset_mirror is not None and reply.response is not None:
            apis.offset_mirror.committed(req.group_id, _accepted(msg, resp))
    if unknown:
        resp = _in_request_order(req.topics, resp, unknown)
    return apis.response(ctx, resp)


def _accepted(request: op.OffsetCommitRequest, response: op.OffsetCommitResponse) -> dict[tuple[str, int], Offset]:
    """(topic, partition) -> (offset, leader epoch, metadata) of what ``response`` accepted
    (topics named by id, v10, are not mirrored: the upstream's commit names topics)."""
    ok = {(t.name, p.partition_index) for t in response.topics if t.name for p in t.partitions if p.error_code == 0}
    return {
        (t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
        for t in request.topics
        for p in t.partitions
        if (t.name, p.partition_index) in ok
    }


async def add_offsets_to_txn(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    """Kafka's transaction coordinator answers AddOffsetsToTxn by adding the group's
    ``__consumer_offsets`` partition to the transaction. Ours is the state-topic partition
    that owns the group (:func:`_add_state_partition`), and the upstream's answer is the
    client's. The upstream then writes the transaction's COMMIT/ABORT marker into that
    partition, after the offsets TxnOffsetCommit writes there."""
    code = await _add_state_partition(apis, ctx, req.transactional_id, req.producer_id, req.producer_epoch, req.group_id)
    return ctx.response_type(throttle_time=NO_THROTTLE, error_code=code)


async def _add_state_partition(
    apis: GroupServing, ctx: CallContext, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
) -> ErrorCode:
    """Adds the group's state-topic partition to the client's transaction with AddPartitionsToTxn
    (the client's transactional id, producer id and epoch) at the upstream broker behind the
    client's listener (its transaction coordinator); returns the upstream's answer.

    It is first sent on the client's own connection, so Kafka checks the client's WRITE on
    its transactional id (and its producer) and refuses as it would refuse the client's own
    AddOffsetsToTxn. Kafka also checks WRITE on every topic AddPartitionsToTxn names, and a
    client has none on the coordinator's internal state topic (no client may write
    ``__consumer_offsets`` either): that refusal means the client passed every other check, and
    so does NOT_COORDINATOR (Kafka authorizes before it looks for the transaction, and the
    broker behind a group coordinator's listener need not be the transaction's coordinator).
    Then the coordinator adds its own partition under its own identity at the transaction's
    coordinator, as Kafka's transaction coordinator adds ``__consumer_offsets`` without a topic
    ACL."""
    from kio.schema.add_partitions_to_txn.v3 import request as add  # noqa: PLC0415

    body = add.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=producer_epoch,
        v3_and_below_topics=(
            add.AddPartitionsToTxnTopic(
                name=apis.state_topic, partitions=(i32(apis.leadership.partition_of(group_id)),)
            ),
        ),
    )
    try:
        code = _added(await ctx.ask(body))
        if code in (ErrorCode.topic_authorization_failed, ErrorCode.not_coordinator):
            code = _added(await apis.upstream_for_transaction(transactional_id, body))
    except ConnectionError:
        code = ErrorCode.coordinator_not_available  # retriable: the client asks again
    return code


# What a TxnOffsetCommit of transaction version 2 answers when adding the group's partition
# to the transaction failed, as Kafka's group coordinator answers its own verification's
# errors: the retriable ones (the transaction before is still being completed: CONCURRENT_
# TRANSACTIONS) send the client to find its coordinator again, a fenced producer is
# INVALID_PRODUCER_EPOCH, and TRANSACTION_ABORTABLE is INVALID_TXN_STATE for the clients that
# do not know it (Kafka's AddPartitionsToTxnManager); the rest is the client's as it came.
_IMPLICIT_ADD_ERRORS: Mapping[ErrorCode, ErrorCode] = {
    ErrorCode.concurrent_transactions: ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress: ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.producer_fenced: ErrorCode.invalid_producer_epoch,
    ErrorCode.transaction_abortable: ErrorCode.invalid_txn_state,
}


async def txn_offset_commit(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    """Offsets of a transaction go to the group's shard, which writes them pending into
    the producer's transaction (see coordinator/core/txn_offsets.py). Partitions that do
    not exist upstream are answered UNKNOWN_TOPIC_OR_PARTITION here, as Kafka's request
    handler does; every requested partition is echoed in request order. A v6 topic is named
    by id only (KIP-1319), which the shard resolves (UNKNOWN_TOPIC_ID if it cannot)."""
    unknown = await apis.topics.unknown_partitions(
        (t.name, p.partition_index) for t in req.topics if getattr(t, "name", None) for p in t.partitions
    )
    known = _without(req.topics, unknown) if unknown else req.topics
    errors: dict[tuple[tuple[str, bytes], int], int] = {}
    if known and ctx.version >= TRANSACTION_V2_TXN_OFFSET_COMMIT:
        # Transaction version 2: no AddOffsetsToTxn came before; the group's partition joins
        # the transaction now, as Kafka's group coordinator adds __consumer_offsets's.
        code = await _add_state_partition(
            apis, ctx, req.transactional_id, req.producer_id, req.producer_epoch, req.group_id
        )
        if code != ErrorCode.none:
            code = _IMPLICIT_ADD_ERRORS.get(code, code)
            errors = {(_request_topic_key(t), p.partition_index): code.value for t in known for p in t.partitions}
            known = ()
    if known:
        msg = to_proto(
            dataclasses.replace(req, topics=known), op.TxnOffsetCommitRequest(api_version=ctx.version)
        )
        if ctx.version < 3:  # no member information before KIP-447: Kafka's defaults
            msg.generation_id = -1
        if ctx.version < 2:
            for t in msg.topics:
                for p in t.partitions:
                    p.committed_leader_epoch = -1
        reply = await apis.call(req.group_id, Envelope(txn_offset_commit=msg))
        if reply.response is not None:
            errors = {
                (_topic_key(t.name, t.topic_id), p.partition_index): p.error_code
                for t in reply.response.topics
                for p in t.partitions
            }
        else:
            errors = {(_request_topic_key(t), p.partition_index): reply.error_code for t in known for p in t.partitions}
    resp = op.TxnOffsetCommitResponse()
    for t in req.topics:
        name, topic_id = topic = _request_topic_key(t)
        rt = resp.topics.add(name=name, topic_id=topic_id)
        for p in t.partitions:
            code = (
                ErrorCode.unknown_topic_or_partition.value
                if (name, p.partition_index) in unknown
                else errors.get((topic, p.partition_index), ErrorCode.unknown_server_error.value)
            )
            rt.partitions.add(partition_index=p.partition_index, error_code=code)
    return apis.response(ctx, resp)


async def offset_fetch(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
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

    def sub(ids: list[str]) -> Envelope:
        chosen = set(ids)
        groups = [g for g in msg.groups if g.group_id in chosen]
        return Envelope(
            offset_fetch=op.OffsetFetchRequest(
                api_version=msg.api_version, require_stable=msg.require_stable, groups=groups
            )
        )

    ordered = await apis.per_group(
        [g.group_id for g in msg.groups],
        sub,
        lambda resp: ((g.group_id, g) for g in resp.groups),
        lambda gid, reply: op.OffsetFetchResponseGroup(group_id=gid, error_code=reply.error_code),
    )
    if ctx.version <= 7:
        only = ordered[0]
        body_type = ctx.response_type
        topic_type = element_type(body_type, "topics")
        partition_type = element_type(topic_type, "partitions")
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
    return apis.response(ctx, op.OffsetFetchResponse(groups=ordered))


async def offset_delete(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    """Partitions that do not exist upstream (a topic that does not exist, or a partition
    index beyond its count) are answered UNKNOWN_TOPIC_OR_PARTITION, as Kafka's request
    handler answers them from its metadata cache; the shard answers the rest (and the
    group-level error), and every requested partition is echoed with its own error in
    request order."""
    absent = await apis.topics.unknown_partitions(
        (t.name, p.partition_index) for t in req.topics for p in t.partitions
    )
    known = tuple(
        dataclasses.replace(
            t, partitions=tuple(p for p in t.partitions if (t.name, p.partition_index) not in absent)
        )
        for t in req.topics
    )
    msg = to_proto(
        dataclasses.replace(req, topics=tuple(t for t in known if t.partitions)),
        op.OffsetDeleteRequest(api_version=ctx.version),
    )
    reply = await apis.call(req.group_id, Envelope(offset_delete=msg))
    resp = reply.response or op.OffsetDeleteResponse(error_code=reply.error_code)
    if absent and resp.error_code == ErrorCode.none.value:
        answered = {(t.name, p.partition_index): p for t in resp.topics for p in t.partitions}
        unknown = ErrorCode.unknown_topic_or_partition.value
        topics = [
            op.OffsetDeleteResponseTopic(
                name=t.name,
                partitions=[
                    answered[t.name, p.partition_index]
                    if (t.name, p.partition_index) in answered
                    else op.OffsetDeleteResponsePartition(
                        partition_index=p.partition_index, error_code=unknown
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
        del resp.topics[:]
        resp.topics.extend(topics)
    return apis.response(ctx, resp)


def _added(resp: Any) -> ErrorCode:
    """The error of an AddPartitionsToTxn v3 answer naming one partition (v3 carries errors
    per partition only)."""
    codes = [
        p.partition_error_code for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition
    ]
    return (
        next((c for c in codes if c != ErrorCode.none), ErrorCode.none)
        if codes
        else ErrorCode.unknown_server_error
    )


def _without(topics: tuple[Any, ...], unknown: set[tuple[str, int]]) -> tuple[Any, ...]:
    """The OffsetCommit request topics minus the ``unknown`` (topic, partition) pairs."""
    kept = (
        dataclasses.replace(
            t,
            partitions=tuple(
                p for p in t.partitions if (getattr(t, "name", ""), p.partition_index) not in unknown
            ),
        )
        for t in topics
    )
    return tuple(t for t in kept if t.partitions)


def _topic_key(name: str, topic_id: Any) -> tuple[str, bytes]:
    return name or "", topic_id.bytes if hasattr(topic_id, "bytes") else (topic_id or b"")


def _request_topic_key(topic: Any) -> tuple[str, bytes]:
    """(name, id bytes) of a request's topic, named either way (a version has one of the two)."""
    return _topic_key(getattr(topic, "name", ""), getattr(topic, "topic_id", None))


def _commit_errors(topics: Iterable[Any], code: int) -> op.OffsetCommitResponse:
    """An OffsetCommit answer giving every partition of ``topics`` the same error."""
    return op.OffsetCommitResponse(
        topics=[
            op.OffsetCommitResponseTopic(
                name=getattr(t, "name", "") or "",
                topic_id=_topic_key("", getattr(t, "topic_id", None))[1],
                partitions=[
                    op.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
                    for p in t.partitions
                ],
            )
            for t in topics
        ]
    )


def _in_request_order(
    topics: tuple[Any, ...], answered: op.OffsetCommitResponse, unknown: set[tuple[str, int]]
) -> op.OffsetCommitResponse:
    """Every requested partition in request order: its error from ``answered`` (the shard's
    answer for the known partitions), UNKNOWN_TOPIC_OR_PARTITION for the ``unknown`` ones."""
    errors = {
        (_topic_key(t.name, t.topic_id), p.partition_index): p.error_code
        for t in answered.topics
        for p in t.partitions
    }
    out = op.OffsetCommitResponse(throttle_time_ms=answered.throttle_time_ms)
    for t in topics:
        name, topic_id = _request_topic_key(t)
        rt = out.topics.add(name=name, topic_id=topic_id)
        for p in t.partitions:
            code = (
                ErrorCode.unknown_topic_or_partition.value
                if (name, p.partition_index) in unknown
                else errors.get(((name, topic_id), p.partition_index), ErrorCode.unknown_server_error.value)
            )
            rt.partitions.add(partition_index=p.partition_index, error_code=code)
    return out


ADAPTERS: Mapping[ApiKey, Adapter] = {
    ApiKey.OFFSET_COMMIT: offset_commit,
    ApiKey.OFFSET_FETCH: offset_fetch,
    ApiKey.ADD_OFFSETS_TO_TXN: add_offsets_to_txn,
    ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit,
    ApiKey.OFFSET_DELETE: offset_delete,
}
"""The offsets APIs' adapters, registered against their declarations by :mod:`.group_apis`."""
