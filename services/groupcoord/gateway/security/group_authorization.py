"""Kafka's authorization of the group APIs, one hook per API (what ``KafkaApis`` checks).

Before a group API reaches a shard, its hook decides with the connection's principal and host
(:class:`Caller`) and the policy (:class:`~groupcoord.authorization.acls.Authorizer`):

=====================================  =========================  ===============================
API                                    Group                      Topics
=====================================  =========================  ===============================
JoinGroup, SyncGroup, Heartbeat,       READ                       -
LeaveGroup
ConsumerGroupHeartbeat                 READ                       DESCRIBE on subscribed names;
                                                                  a regex never resolves to a
                                                                  topic it may not DESCRIBE
ShareGroupHeartbeat                    READ                       DESCRIBE on subscribed names
ShareFetch, ShareAcknowledge           READ                       READ: the upstream's (records
                                                                  fetched as the client)
DescribeShareGroupOffsets              DESCRIBE, per group        DESCRIBE (failed per partition,
                                                                  or left out of "all topics")
AlterShareGroupOffsets                 READ                       READ, per topic
DeleteShareGroupOffsets                DELETE                     READ, per topic
OffsetCommit, TxnOffsetCommit          READ (else every           READ, per topic
(TxnOffsetCommit, AddOffsetsToTxn:     partition fails)
WRITE on the transactional id first)
OffsetFetch                            DESCRIBE                   DESCRIBE (failed per partition,
                                                                  or left out of "all topics")
DescribeGroups                         DESCRIBE, per group        -
ConsumerGroupDescribe,                 DESCRIBE, per group        DESCRIBE on every assigned
ShareGroupDescribe                                                topic, else the group is
                                                                  TOPIC_AUTHORIZATION_FAILED
ListGroups                             DESCRIBE on CLUSTER,       -
                                       else filtered per group
DeleteGroups                           DELETE, per group          -
OffsetDelete                           DELETE                     READ, per topic
FindCoordinator (group keys)           DESCRIBE, per key          -
DescribeConfigs / IncrementalAlter-    DESCRIBE_CONFIGS /         -
Configs (GROUP resources)              ALTER_CONFIGS
=====================================  =========================  ===============================

A refusal is GROUP_AUTHORIZATION_FAILED or TOPIC_AUTHORIZATION_FAILED where that API carries
errors (whole response, per group, per partition), exactly as Kafka answers. A hook returns a
:class:`Verdict`: the request to serve (narrowed to what is allowed: nothing refused is
written), or the whole refusal, and a ``finish`` that puts the refused entries back into the
served response in request order. Every decision is counted; every denial is logged with the
principal, operation and resource.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import re2
from google.protobuf.message import Message
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32, i32Timedelta, i64
from prometheus_client import Counter

from groupcoord.authorization.acls import Authorizer, Operation, ResourceType
from groupcoord.common.group_api_declarations import DECLARATIONS, GROUP_KEY, GROUP_RESOURCE, registered
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.gateway.groups.wire_translation import from_proto
from groupcoord.gateway.transport.api_versions import ServedApi
from groupcoord.rpc.v1 import classic_group_pb2 as cg
from groupcoord.rpc.v1 import consumer_group_pb2 as cgh
from groupcoord.rpc.v1 import group_admin_pb2 as ga
from groupcoord.rpc.v1 import offsets_pb2 as op
from groupcoord.rpc.v1 import share_group_pb2 as sgh

log = logging.getLogger(__name__)
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a client's bad pattern is the shard's answer, not a log line

GROUP_DENIED = ErrorCode.group_authorization_failed
TRANSACTIONAL_ID_DENIED = ErrorCode.transactional_id_authorization_failed
TOPIC_DENIED = ErrorCode.topic_authorization_failed
GROUP_DENIED_MESSAGE = "Group authorization failed."  # Errors.GROUP_AUTHORIZATION_FAILED.message()
TOPIC_DENIED_MESSAGE = "Topic authorization failed."  # Errors.TOPIC_AUTHORIZATION_FAILED.message()
ZERO_UUID = uuid.UUID(int=0)  # a refused topic's id: the gateway never looked it up
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)  # Integer.MIN_VALUE: not requested / not known
CLUSTER_NAME = "kafka-cluster"  # Kafka's one CLUSTER resource
NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))

DECISIONS = Counter(
    "groupcoord_authorization_decisions",
    "Authorization decisions at the gateway, by resource type, operation and result",
    ["resource_type", "operation", "result"],
)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a request: Kafka's principal (``User:alice``) and the client's address."""

    principal: str
    host: str


@dataclass
class Verdict:
    """What to do with a request: serve ``request`` (then ``finish`` the response), or answer
    ``denied`` (a coordinator-API message, or a function of the kio response type) when
    ``request`` is None."""

    request: Any | None
    denied: Message | Callable[[type[Any]], Any] | None = None
    finish: Callable[[Any], Any] | None = None


class GroupAuthorization:
    """The hooks of :data:`HOOKS` over a policy that may change (``policy()`` is asked each time)."""

    def __init__(self, policy: Callable[[], Authorizer]) -> None:
        self.policy = policy

    def allowed(
        self,
        caller: Caller,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
        quiet: bool = False,
    ) -> bool:
        """The decision, counted; a denial is logged unless ``quiet`` (Kafka's
        ``logIfDenied = false``, for checks that only filter a listing)."""
        ok = self.policy().authorize(caller.principal, caller.host, operation, resource_type, name)
        DECISIONS.labels(resource_type.value, operation.value, "allowed" if ok else "denied").inc()
        if not ok and not quiet:
            log.info(
                "denied: principal %s from %s, operation %s on %s %r",
                caller.principal,
                caller.host,
                operation.value,
                resource_type.value,
                name,
            )
        return ok

    def group(self, caller: Caller, operation: Operation, group_id: str) -> bool:
        return self.allowed(caller, operation, ResourceType.GROUP, group_id)

    def topic(self, caller: Caller, operation: Operation, name: str | None) -> bool:
        """A topic named only by id (OffsetCommit/OffsetFetch v10) is refused: the gateway
        authorizes topics by name."""
        return name is not None and self.allowed(caller, operation, ResourceType.TOPIC, name)

    def undescribable(self, caller: Caller, regex: str, topics: Iterable[str]) -> list[str]:
        """The ``topics`` a subscription to ``regex`` would match that ``caller`` may not
        DESCRIBE: Kafka 4.0 resolves a regex with the rights of the member refreshing it
        (KAFKA-18813), so the shard leaves these out. A pattern that does not compile names
        none (the shard answers INVALID_REGULAR_EXPRESSION). Denials only filter: not logged."""
        try:
            pattern = re2.compile(regex, _RE2_OPTIONS)
        except re2.error:
            return []
        return sorted(
            t
            for t in topics
            if pattern.fullmatch(t) is not None
            and not self.allowed(caller, Operation.DESCRIBE, ResourceType.TOPIC, t, quiet=True)
        )

    def check(
        self, api_key: int, caller: Caller, version: int, response_type: type[Any], request: Any
    ) -> Verdict:
        hook = HOOKS.get(api_key)
        return Verdict(request) if hook is None else hook(self, caller, version, response_type, request)


# --- kio helpers -----------------------------------------------------------------------------


def _entry(entity_type: type[Any], field_name: str) -> type[Any]:
    return entity_type.__dataclass_fields__[field_name].type.__args__[0]


def _has(entity_type: type[Any], field_name: str) -> bool:
    return field_name in entity_type.__dataclass_fields__


def _make(entity_type: type[Any], **values: Any) -> Any:
    """``entity_type`` from the ``values`` it has fields for (no throttling)."""
    if _has(entity_type, "throttle_time"):
        values.setdefault("throttle_time", NO_THROTTLE)
    return entity_type(**{k: v for k, v in values.items() if _has(entity_type, k)})


def _name(topic: Any) -> str | None:
    return getattr(topic, "name", None) or None


def _merge_in_order(
    requested: Iterable[Any],
    denied: Callable[[Any], Any | None],
    served: Iterable[Any],
    key: Callable[[Any], Any],
    served_key: Callable[[Any], Any],
) -> tuple[Any, ...]:
    """Entries for ``requested`` in request order: ``denied(entry)`` where it gives one, else the
    served entry with the same key (served entries of a key taken in order)."""
    by_key: dict[Any, deque[Any]] = defaultdict(deque)
    for entry in served:
        by_key[served_key(entry)].append(entry)
    out = []
    for entry in requested:
        refusal = denied(entry)
        if refusal is not None:
            out.append(refusal)
        elif by_key[key(entry)]:
            out.append(by_key[key(entry)].popleft())
    return tuple(out)


# --- hooks --------------------------------------------------------------------------------------


def _whole_group(operation: Operation, refusal: Callable[[Any], Message]) -> Callable[..., Verdict]:
    def hook(auth: GroupAuthorization, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
        if auth.group(caller, operation, req.group_id):
            return Verdict(req)
        return Verdict(None, refusal(req))

    return hook


def _share_delivery(auth: GroupAuthorization, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
    """ShareFetch and ShareAcknowledge: READ on the group, else GROUP_AUTHORIZATION_FAILED for
    the whole request. Topics are named by id only; READ on each is the upstream's to decide, as
    the records are fetched on the client's own upstream connection under its own identity
    (a refused topic's partitions carry the upstream's TOPIC_AUTHORIZATION_FAILED)."""
    if auth.group(caller, Operation.READ, req.group_id or ""):
        return Verdict(req)

    return Verdict(
        None,
        lambda body: _make(  # acquisition_lock_timeout: ShareFetch only
            body, error_code=GROUP_DENIED, responses=(), node_endpoints=(), acquisition_lock_timeout=NO_THROTTLE
        ),
    )


def _refused_share_topic(topic_type: type[Any], name: str, partitions: Iterable[Any]) -> Any:
    """A share-group offsets answer's topic whose every partition is TOPIC_AUTHORIZATION_FAILED
    (no offset, leader epoch or lag: -1 where the partition type has them)."""
    partition_type = _entry(topic_type, "partitions")
    return _make(
        topic_type,
        topic_name=name,
        topic_id=ZERO_UUID,
        partitions=tuple(
            _make(
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

    def hook(auth: GroupAuthorization, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
        if not auth.group(caller, operation, req.group_id):
            return Verdict(
                None, lambda body: _make(body, error_code=GROUP_DENIED, error_message=GROUP_DENIED_MESSAGE, responses=())
            )
        denied = {id(t) for t in req.topics if not auth.topic(caller, Operation.READ, t.topic_name)}
        if not denied:
            return Verdict(req)
        topic_type = _entry(rt, "responses")

        def refused(topic: Any) -> Any:
            if _has(topic_type, "partitions"):  # Alter: per partition
                return _refused_share_topic(topic_type, topic.topic_name, (p.partition_index for p in topic.partitions))
            return _make(
                topic_type, topic_name=topic.topic_name, topic_id=ZERO_UUID, error_code=TOPIC_DENIED,
                error_message=TOPIC_DENIED_MESSAGE,
            )  # fmt: skip

        def merged(served: Iterable[Any]) -> tuple[Any, ...]:
            return _merge_in_order(
                req.topics,
                lambda t: refused(t) if id(t) in denied else None,
                served,
                lambda t: t.topic_name,
                lambda t: t.topic_name,
            )

        if len(denied) == len(req.topics):
            return Verdict(None, lambda body: _make(body, error_code=ErrorCode.none, responses=merged(())))
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

    def hook(auth: GroupAuthorization, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
        verdict = per_group(auth, caller, version, rt, req)
        if verdict.request is None:
            return verdict
        topic_type = _entry(_entry(rt, "groups"), "topics")
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
                    group, topics=tuple(t for t in group.topics if auth.topic(caller, Operation.DESCRIBE, t.topic_name))
                )
            topics = _merge_in_order(request.topics, refused, group.topics, lambda t: t.topic_name, lambda t: t.topic_name)
            return dataclasses.replace(group, topics=topics)

        served = verdict.finish

        def finish(resp: Any) -> Any:
            resp = dataclasses.replace(resp, groups=tuple(described(g) for g in resp.groups))
            return served(resp) if served is not None else resp

        narrowed = tuple(
            g if g.topics is None else dataclasses.replace(g, topics=tuple(t for t in g.topics if id(t) not in denied))
            for g in verdict.request.groups
        )
        return Verdict(dataclasses.replace(verdict.request, groups=narrowed), finish=finish)

    return hook


def _modern_heartbeat(response_type: type[Message]) -> Hook:
    """ConsumerGroupHeartbeat and ShareGroupHeartbeat: READ on the group, DESCRIBE on every
    subscribed topic name (``KafkaApis.handleConsumerGroupHeartbeat`` /
    ``handleShareGroupHeartbeat``)."""

    def hook(auth: GroupAuthorization, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
        if not auth.group(caller, Operation.READ, req.group_id):
            # the request's getErrorResponse sets the error code only (epoch 0)
            return Verdict(None, response_type(error_code=GROUP_DENIED.value))
        names = getattr(req, "subscribed_topic_names", None) or ()
        refused = [n for n in names if not auth.topic(caller, Operation.DESCRIBE, n)]
        if refused:
            return Verdict(
                None,
                response_type(
                    error_code=TOPIC_DENIED.value,
                    error_message=f"The group has subscribed to topics that are not authorized: {sorted(refused)}",
                ),
            )
        return Verdict(req)

    return hook


def _commit(auth: GroupAuthorization, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
    """OffsetCommit and TxnOffsetCommit: (WRITE on the transactional id,) READ on the group,
    READ on each topic."""
    topic_type = _entry(rt, "topics")
    partition_type = _entry(topic_type, "partitions")

    def refused(topic: Any, code: ErrorCode) -> Any:
        return _make(
            topic_type,
            name=_name(topic) or "",
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
            lambda body: _make(body, topics=tuple(refused(t, TRANSACTIONAL_ID_DENIED) for t in req.topics)),
        )
    if not auth.group(caller, Operation.READ, req.group_id):
        return Verdict(
            None, lambda body: _make(body, topics=tuple(refused(t, GROUP_DENIED) for t in req.topics))
        )
    denied = {id(t) for t in req.topics if not auth.topic(caller, Operation.READ, _name(t))}
    if not denied:
        return Verdict(req)
    if len(denied) == len(req.topics):
        return Verdict(
            None, lambda body: _make(body, topics=tuple(refused(t, TOPIC_DENIED) for t in req.topics))
        )

    def finish(resp: Any) -> Any:
        topics = _merge_in_order(
            req.topics,
            lambda t: refused(t, TOPIC_DENIED) if id(t) in denied else None,
            resp.topics,
            _name,
            _name,
        )
        return dataclasses.replace(resp, topics=topics)

    return Verdict(
        dataclasses.replace(req, topics=tuple(t for t in req.topics if id(t) not in denied)), finish=finish
    )


def _add_offsets_to_txn(
    auth: GroupAuthorization, caller: Caller, version: int, rt: type[Any], req: Any
) -> Verdict:
    """AddOffsetsToTxn: WRITE on the transactional id, READ on the group (as Kafka checks them)."""
    if not auth.allowed(caller, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return Verdict(None, lambda body: _make(body, error_code=TRANSACTIONAL_ID_DENIED))
    if not auth.group(caller, Operation.READ, req.group_id):
        return Verdict(None, lambda body: _make(body, error_code=GROUP_DENIED))
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
    auth: GroupAuthorization, caller: Caller, topics: Iterable[Any], all_topics: bool
) -> tuple[Any, ...]:
    """OffsetFetch response topics with DESCRIBE checked: left out of an all-topics fetch,
    TOPIC_AUTHORIZATION_FAILED per partition when named."""
    out = []
    for t in topics:
        if auth.topic(caller, Operation.DESCRIBE, _name(t)):
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
    partition_type = _entry(topic_type, "partitions")
    return _make(
        topic_type,
        name=topic.name,
        topic_id=getattr(topic, "topic_id", None),
        partitions=tuple(_fetch_partition(partition_type, int(i), code) for i in topic.partition_indexes),
    )


def _split_fetch_topics(
    auth: GroupAuthorization, caller: Caller, topics: Iterable[Any]
) -> tuple[tuple, tuple]:
    """(topics the caller may DESCRIBE, the others) of an OffsetFetch request."""
    allowed, refused = [], []
    for t in topics:
        (allowed if auth.topic(caller, Operation.DESCRIBE, _name(t)) else refused).append(t)
    return tuple(allowed), tuple(refused)


def _offset_fetch(auth: GroupAuthorization, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
    """DESCRIBE on each group and each named topic (KafkaApis.handleOffsetFetchRequest): a
    refused group or topic never reaches a shard; refused topics come after the served ones with
    TOPIC_AUTHORIZATION_FAILED and offset -1 (fetchOffsetsForGroup); an all-topics fetch keeps
    only the topics the caller may DESCRIBE (fetchAllOffsetsForGroup)."""
    if version <= 7:
        if not auth.group(caller, Operation.DESCRIBE, req.group_id):
            topic_type = _entry(rt, "topics")
            partition_type = _entry(topic_type, "partitions")

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
                return _make(body, topics=topics, error_code=GROUP_DENIED)

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
        topic_type = _entry(rt, "topics")

        def finish_one(resp: Any) -> Any:
            if int(getattr(resp, "error_code", 0)) != 0:
                return resp
            extra = tuple(_refused_fetch_topic(topic_type, t, TOPIC_DENIED) for t in refused)
            return dataclasses.replace(resp, topics=(*resp.topics, *extra))

        return Verdict(dataclasses.replace(req, topics=allowed), finish=finish_one)
    group_type = _entry(rt, "groups")
    topic_type = _entry(group_type, "topics")
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
        return Verdict(None, lambda body: _make(body, groups=tuple(refusal_of(g) for g in req.groups)))
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
        groups = _merge_in_order(req.groups, refusal_of, served, lambda g: g.group_id, lambda g: g.group_id)
        return dataclasses.replace(resp, groups=groups)

    return Verdict(dataclasses.replace(req, groups=tuple(asked)), finish=finish)


def _offset_delete(
    auth: GroupAuthorization, caller: Caller, version: int, rt: type[Any], req: Any
) -> Verdict:
    if not auth.group(caller, Operation.DELETE, req.group_id):
        return Verdict(None, op.OffsetDeleteResponse(error_code=GROUP_DENIED.value))
    denied = {id(t) for t in req.topics if not auth.topic(caller, Operation.READ, _name(t))}
    if not denied:
        return Verdict(req)
    topic_type = _entry(rt, "topics")
    partition_type = _entry(topic_type, "partitions")

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
            resp, topics=_merge_in_order(req.topics, refused, resp.topics, _name, _name)
        )

    return Verdict(
        dataclasses.replace(req, topics=tuple(t for t in req.topics if id(t) not in denied)), finish=finish
    )


#: the operations a Group supports and their wire codes (authorized_operations bits)
GROUP_OPERATION_CODES = {
    Operation.READ: 3,
    Operation.DELETE: 6,
    Operation.DESCRIBE: 8,
    Operation.DESCRIBE_CONFIGS: 10,
    Operation.ALTER_CONFIGS: 11,
}


def authorized_group_operations(auth: GroupAuthorization, caller: Caller, group_id: str) -> int:
    """The ``authorized_operations`` bit set of a group for ``caller`` (asked quietly, as
    Kafka's authorizedOperations does: neither counted nor logged as denials)."""
    policy = auth.policy()
    return sum(
        1 << code
        for op, code in GROUP_OPERATION_CODES.items()
        if policy.authorize(caller.principal, caller.host, op, ResourceType.GROUP, group_id)
    )


def _per_group_read(
    field: str,
    entry_field: str,
    refusal: Callable[[str], Message],
    group_of: Callable[[Any], str] = lambda group_id: group_id,
) -> Callable[..., Verdict]:
    """Describe-style APIs naming several groups: refused groups are answered here and never
    sent to a shard, the others served, in request order (KafkaApis describes only the
    authorized groups); when asked for, ``authorized_operations`` are the caller's.
    ``group_of(entry)`` is the group an entry of the request's ``field`` names (the entry
    itself when it is a group id)."""

    def hook(auth: GroupAuthorization, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
        asked = tuple(getattr(req, field))
        ids = tuple(group_of(g) for g in asked)
        denied = {g for g in ids if not auth.group(caller, Operation.DESCRIBE, g)}
        with_operations = bool(getattr(req, "include_authorized_operations", False))
        if not denied and not with_operations:
            return Verdict(req)
        entry_type = _entry(rt, entry_field)

        def refused(group_id: str) -> Any | None:
            return from_proto(refusal(group_id), entry_type) if group_id in denied else None

        allowed = tuple(g for g in asked if group_of(g) not in denied)
        if not allowed:
            return Verdict(None, lambda body: _make(body, **{entry_field: tuple(refused(g) for g in ids)}))

        def answer(entry: Any) -> Any:
            if with_operations and int(entry.error_code) == 0 and _has(entry_type, "authorized_operations"):
                return dataclasses.replace(
                    entry,
                    authorized_operations=i32(authorized_group_operations(auth, caller, entry.group_id)),
                )
            return entry

        def finish(resp: Any) -> Any:
            served = tuple(answer(e) for e in getattr(resp, entry_field))
            merged = _merge_in_order(ids, refused, served, lambda g: g, lambda e: e.group_id)
            return dataclasses.replace(resp, **{entry_field: merged})

        return Verdict(dataclasses.replace(req, **{field: allowed}) if denied else req, finish=finish)

    return hook


def _modern_describe(group_denied: Callable[[str], Message]) -> Hook:
    """ConsumerGroupDescribe and ShareGroupDescribe: DESCRIBE on each group, then on every
    topic of its members' assignments (and target assignments) (KAFKA-18813,
    ``KafkaApis.handleConsumerGroupDescribe`` / ``handleShareGroupDescribe``): a group naming a
    topic the caller may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED with Kafka's
    message and no members, so neither topic names nor partition ownership leak."""
    per_group = _per_group_read("group_ids", "groups", group_denied)

    def hook(auth: GroupAuthorization, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
        verdict = per_group(auth, caller, version, rt, req)
        if verdict.request is None:
            return verdict
        served = verdict.finish

        def finish(resp: Any) -> Any:
            resp = served(resp) if served is not None else resp
            return dataclasses.replace(
                resp, groups=tuple(_hide_undescribable(auth, caller, g) for g in resp.groups)
            )

        return Verdict(verdict.request, finish=finish)

    return hook


UNDESCRIBABLE_TOPICS_MESSAGE = (
    "The group has described topic(s) that the client is not authorized to describe."
)


def _hide_undescribable(auth: GroupAuthorization, caller: Caller, group: Any) -> Any:
    names = {
        tp.topic_name
        for member in group.members
        for assignment in (member.assignment, getattr(member, "target_assignment", None))
        if assignment is not None  # share members have no target assignment
        for tp in assignment.topic_partitions
    }
    if all(auth.topic(caller, Operation.DESCRIBE, name) for name in sorted(names)):
        return group
    return dataclasses.replace(
        group,
        error_code=TOPIC_DENIED,
        error_message=UNDESCRIBABLE_TOPICS_MESSAGE,
        group_state="",
        group_epoch=i32(0),
        assignment_epoch=i32(0),
        assignor_name="",
        members=(),
        authorized_operations=i32(AUTHORIZED_OPERATIONS_OMITTED),
    )


def _list_groups(auth: GroupAuthorization, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
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


def _delete_groups(
    auth: GroupAuthorization, caller: Caller, version: int, rt: type[Any], req: Any
) -> Verdict:
    denied = {g for g in req.groups_names if not auth.group(caller, Operation.DELETE, g)}
    if not denied:
        return Verdict(req)
    result_type = _entry(rt, "results")

    def refused(group_id: str) -> Any | None:
        if group_id not in denied:
            return None
        return from_proto(
            ga.DeletableGroupResult(group_id=group_id, error_code=GROUP_DENIED.value), result_type
        )

    allowed = tuple(g for g in req.groups_names if g not in denied)
    if not allowed:
        return Verdict(None, lambda body: _make(body, results=tuple(refused(g) for g in req.groups_names)))

    def finish(resp: Any) -> Any:
        return dataclasses.replace(
            resp,
            results=_merge_in_order(
                req.groups_names, refused, resp.results, lambda g: g, lambda r: r.group_id
            ),
        )

    return Verdict(dataclasses.replace(req, groups_names=allowed), finish=finish)


def _find_coordinator(
    auth: GroupAuthorization, caller: Caller, version: int, rt: type[Any], req: Any
) -> Verdict:
    if int(getattr(req, "key_type", GROUP_KEY)) != GROUP_KEY:
        return Verdict(req)  # transaction coordinators: the upstream decides
    if version < 4:
        if auth.group(caller, Operation.DESCRIBE, req.key):
            return Verdict(req)
        return Verdict(
            None,
            lambda body: _make(  # FindCoordinatorResponse.prepareOldResponse(error, Node.noNode())
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

    def hook(auth: GroupAuthorization, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
        denied = {
            id(r)
            for r in req.resources
            if int(r.resource_type) == GROUP_RESOURCE and not auth.group(caller, operation, r.resource_name)
        }
        if not denied:
            return Verdict(req)
        entry_type = _entry(rt, entries)

        def refused(r: Any) -> Any:
            return _make(
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
                None, lambda body: _make(body, **{entries: tuple(refused(r) for r in req.resources)})
            )

        def finish(resp: Any) -> Any:
            served = iter(getattr(resp, entries))  # the handler answers in request order
            merged = tuple(refused(r) if id(r) in denied else next(served) for r in req.resources)
            return dataclasses.replace(resp, **{entries: merged})

        return Verdict(dataclasses.replace(req, resources=allowed), finish=finish)

    return hook


#: api key -> the last version naming topics by name (OffsetCommit/OffsetFetch v10 name them by
#: id only, which topic ACLs cannot be checked against here)
TOPIC_NAME_VERSIONS: dict[int, int] = {
    api.key: api.last_version_naming_topics
    for api in DECLARATIONS
    if api.last_version_naming_topics is not None
}


def authorizable_versions(apis: Mapping[int, ServedApi]) -> dict[int, ServedApi]:
    """``apis`` with the versions an authorizing gateway can check: ApiVersions then advertises
    no version whose topics it could not authorize, and clients pick one it can."""
    out = dict(apis)
    for key, top in TOPIC_NAME_VERSIONS.items():
        if key in out and out[key].versions[1] > top:
            out[key] = dataclasses.replace(out[key], versions=(out[key].versions[0], top))
    return out


Hook = Callable[[GroupAuthorization, Caller, int, type[Any], Any], Verdict]

HOOKS: dict[int, Hook] = {
    int(api.key): hook
    for api, hook in registered(
        "authorization hook",
        {
            ApiKey.OFFSET_COMMIT: _commit,
            ApiKey.OFFSET_FETCH: _offset_fetch,
            ApiKey.FIND_COORDINATOR: _find_coordinator,
            ApiKey.JOIN_GROUP: _whole_group(
                Operation.READ,
                # JoinGroupRequest.getErrorResponse: UNKNOWN_GENERATION_ID and UNKNOWN_MEMBER_ID ("")
                lambda req: cg.JoinGroupResponse(
                    error_code=GROUP_DENIED.value, generation_id=-1, member_id=""
                ),
            ),
            ApiKey.HEARTBEAT: _whole_group(
                Operation.READ, lambda req: cg.HeartbeatResponse(error_code=GROUP_DENIED.value)
            ),
            ApiKey.LEAVE_GROUP: _whole_group(
                Operation.READ, lambda req: cg.LeaveGroupResponse(error_code=GROUP_DENIED.value)
            ),
            ApiKey.SYNC_GROUP: _whole_group(
                Operation.READ, lambda req: cg.SyncGroupResponse(error_code=GROUP_DENIED.value)
            ),
            # DescribeGroupsResponse.groupError: no message, operations omitted
            ApiKey.DESCRIBE_GROUPS: _per_group_read(
                "groups",
                "groups",
                lambda g: ga.DescribedGroup(
                    group_id=g,
                    error_code=GROUP_DENIED.value,
                    authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
                ),
            ),
            ApiKey.LIST_GROUPS: _list_groups,
            # when the gateway answers it (forwarded, the upstream decides)
            ApiKey.ADD_OFFSETS_TO_TXN: _add_offsets_to_txn,
            ApiKey.TXN_OFFSET_COMMIT: _commit,
            ApiKey.DESCRIBE_CONFIGS: _group_configs(Operation.DESCRIBE_CONFIGS, "results"),
            ApiKey.DELETE_GROUPS: _delete_groups,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: _group_configs(Operation.ALTER_CONFIGS, "responses"),
            ApiKey.OFFSET_DELETE: _offset_delete,
            ApiKey.CONSUMER_GROUP_HEARTBEAT: _modern_heartbeat(cgh.ConsumerGroupHeartbeatResponse),
            ApiKey.CONSUMER_GROUP_DESCRIBE: _modern_describe(
                lambda g: cgh.ConsumerGroupDescribeGroup(
                    group_id=g, error_code=GROUP_DENIED.value, authorized_operations=AUTHORIZED_OPERATIONS_OMITTED
                )
            ),
            ApiKey.SHARE_GROUP_HEARTBEAT: _modern_heartbeat(sgh.ShareGroupHeartbeatResponse),
            ApiKey.SHARE_FETCH: _share_delivery,
            ApiKey.SHARE_ACKNOWLEDGE: _share_delivery,
            # DescribeShareGroupOffsetsRequest.getErrorResponse: the message too
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: _describe_share_offsets(
                _per_group_read(
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
            ApiKey.SHARE_GROUP_DESCRIBE: _modern_describe(
                lambda g: sgh.ShareGroupDescribeGroup(
                    group_id=g, error_code=GROUP_DENIED.value, authorized_operations=AUTHORIZED_OPERATIONS_OMITTED
                )
            ),
        },
    )
}
"""api key -> its authorization hook, one per declared group API (an API without one is not a
group API)."""
