"""What every group API's authorization hook is built from: who is asking (:class:`Caller`),
the policy's decisions (:class:`GroupAcls`, counted and logged), what a hook returns
(:class:`Verdict`), the refusals' codes and messages, and the hooks more than one group type
uses (per-group DESCRIBE of the describe APIs, the KIP-848-style heartbeats and describes).

Each group type's hooks are a module of their own (``classic_authorization``,
``consumer_authorization``, ``share_authorization``, ``offsets_authorization``,
``admin_authorization``); :mod:`.group_authorization` registers them against the APIs'
declarations.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import re2
from google.protobuf.message import Message
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32
from prometheus_client import Counter

from groupcoord.authorization.acls import Authorizer, Operation, ResourceType
from groupcoord.gateway.messages.kio_entities import NO_THROTTLE, element_type, has_field
from groupcoord.gateway.messages.wire_translation import from_proto

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


class GroupAcls:
    """The decisions the hooks ask of a policy that may change (``policy()`` is asked each time),
    counted and logged; :class:`~.group_authorization.GroupAuthorization` adds the hooks."""

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


Hook = Callable[[GroupAcls, Caller, int, type[Any], Any], Verdict]
"""One group API's authorization: (the decisions, the caller, the request's version, its kio
response type, the decoded request) -> what to serve or answer."""


# --- kio helpers -----------------------------------------------------------------------------


def make(entity_type: type[Any], **values: Any) -> Any:
    """``entity_type`` from the ``values`` it has fields for (no throttling)."""
    if has_field(entity_type, "throttle_time"):
        values.setdefault("throttle_time", NO_THROTTLE)
    return entity_type(**{k: v for k, v in values.items() if has_field(entity_type, k)})


def topic_name(topic: Any) -> str | None:
    """A request topic's name; None for one named by id only (OffsetCommit/OffsetFetch v10)."""
    return getattr(topic, "name", None) or None


def merge_in_order(
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


# --- hooks more than one group type uses ------------------------------------------------


def modern_heartbeat(response_type: type[Message]) -> Hook:
    """ConsumerGroupHeartbeat and ShareGroupHeartbeat: READ on the group, DESCRIBE on every
    subscribed topic name (``KafkaApis.handleConsumerGroupHeartbeat`` /
    ``handleShareGroupHeartbeat``)."""

    def hook(auth: GroupAcls, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
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


#: the operations a Group supports and their wire codes (authorized_operations bits)
GROUP_OPERATION_CODES = {
    Operation.READ: 3,
    Operation.DELETE: 6,
    Operation.DESCRIBE: 8,
    Operation.DESCRIBE_CONFIGS: 10,
    Operation.ALTER_CONFIGS: 11,
}


def authorized_group_operations(auth: GroupAcls, caller: Caller, group_id: str) -> int:
    """The ``authorized_operations`` bit set of a group for ``caller`` (asked quietly, as
    Kafka's authorizedOperations does: neither counted nor logged as denials)."""
    policy = auth.policy()
    return sum(
        1 << code
        for op, code in GROUP_OPERATION_CODES.items()
        if policy.authorize(caller.principal, caller.host, op, ResourceType.GROUP, group_id)
    )


def per_group_read(
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

    def hook(auth: GroupAcls, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
        asked = tuple(getattr(req, field))
        ids = tuple(group_of(g) for g in asked)
        denied = {g for g in ids if not auth.group(caller, Operation.DESCRIBE, g)}
        with_operations = bool(getattr(req, "include_authorized_operations", False))
        if not denied and not with_operations:
            return Verdict(req)
        entry_type = element_type(rt, entry_field)

        def refused(group_id: str) -> Any | None:
            return from_proto(refusal(group_id), entry_type) if group_id in denied else None

        allowed = tuple(g for g in asked if group_of(g) not in denied)
        if not allowed:
            return Verdict(None, lambda body: make(body, **{entry_field: tuple(refused(g) for g in ids)}))

        def answer(entry: Any) -> Any:
            if (
                with_operations
                and int(entry.error_code) == 0
                and has_field(entry_type, "authorized_operations")
            ):
                return dataclasses.replace(
                    entry,
                    authorized_operations=i32(authorized_group_operations(auth, caller, entry.group_id)),
                )
            return entry

        def finish(resp: Any) -> Any:
            served = tuple(answer(e) for e in getattr(resp, entry_field))
            merged = merge_in_order(ids, refused, served, lambda g: g, lambda e: e.group_id)
            return dataclasses.replace(resp, **{entry_field: merged})

        return Verdict(dataclasses.replace(req, **{field: allowed}) if denied else req, finish=finish)

    return hook


def modern_describe(group_denied: Callable[[str], Message]) -> Hook:
    """ConsumerGroupDescribe and ShareGroupDescribe: DESCRIBE on each group, then on every
    topic of its members' assignments (and target assignments) (KAFKA-18813,
    ``KafkaApis.handleConsumerGroupDescribe`` / ``handleShareGroupDescribe``): a group naming a
    topic the caller may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED with Kafka's
    message and no members, so neither topic names nor partition ownership leak."""
    per_group = per_group_read("group_ids", "groups", group_denied)

    def hook(auth: GroupAcls, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
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


def _hide_undescribable(auth: GroupAcls, caller: Caller, group: Any) -> Any:
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
