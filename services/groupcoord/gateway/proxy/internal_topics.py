"""The coordinator's own topics are internal: no client writes, deletes or reconfigures them.

Apache Kafka protects ``__consumer_offsets`` in two ways, and the gateway does the same for the
state and metrics topics (whatever names the options give them):

* Metadata answers mark them ``is_internal`` (:meth:`InternalTopics.mark`), as
  ``KafkaApis.metadataResponseTopic`` does with ``Topic.isInternal``.
* The requests that change a topic are refused per topic when they name one, before anything
  is forwarded, with the error Kafka gives a client for ``__consumer_offsets``; the rest of the
  request goes upstream unchanged and the refused entries are merged into its answer
  (:meth:`InternalTopics.check`). Kafka's errors, by where Kafka decides:

  =======================  ===========================  ==========================================
  API                      error                        Kafka source
  =======================  ===========================  ==========================================
  Produce                  INVALID_TOPIC_EXCEPTION      ``ReplicaManager.appendToLocalLog``:
                           (per partition)              "Cannot append to internal topic"
  DeleteRecords            INVALID_TOPIC_EXCEPTION      ``ReplicaManager.deleteRecordsOnLocalLog``
  AddPartitionsToTxn v0-3  TOPIC_AUTHORIZATION_FAILED,  ``KafkaApis.handleAddPartitionsToTxn``:
                           the others OPERATION_NOT_     internal topics are never authorized, and
                           ATTEMPTED (whole request)    any failed partition fails the transaction
  DeleteTopics,            TOPIC_AUTHORIZATION_FAILED   ``ControllerApis``: KRaft has no internal-
  CreatePartitions,        (per topic / resource)       topic rule for these; Kafka refuses them
  AlterConfigs,                                         to a principal without DELETE / ALTER /
  IncrementalAlterConfigs                               ALTER_CONFIGS on the topic, and no client
  (TOPIC resources)                                     holds those on our topics: only the
                                                        coordinator's own principal writes them
  =======================  ===========================  ==========================================

  A Produce with acks=0 gets no answer from Kafka; Kafka closes the connection when one of its
  partitions fails (``KafkaApis.handleProduceRequest``), and so does the gateway.

AddPartitionsToTxn v4+ is the brokers' own batched verification (CLUSTER_ACTION), which Kafka
does not filter for internal topics either; it is forwarded unchanged. The gateway's own
AddOffsetsToTxn rewrite adds the state partition on the client's behalf without passing here.

The check is one substring search per request of these APIs when no internal name (or topic id,
learned from Metadata) occurs in its bytes, so ordinary Produce traffic is not decoded.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from groupcoord.common.kafka_wire import codec
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.gateway.messages.framed_request import Request
from groupcoord.gateway.messages.kio_entities import element_type

TOPIC_RESOURCE = 2  # Kafka's ConfigResource.Type.TOPIC
ZERO_UUID = uuid.UUID(int=0)
Topic = str | uuid.UUID


def _fields(entity: type[Any], **candidates: Any) -> Any:
    """``entity`` built from the ``candidates`` its version has (kio types differ by version)."""
    have = entity.__dataclass_fields__
    return entity(**{k: v for k, v in candidates.items() if k in have})


@dataclass(frozen=True, slots=True)
class Rule:
    """How one API names topics and how Kafka answers an entry naming an internal one.

    ``entries``: the request fields listing topics (the first one the version has);
    ``topic``: the topic of an entry (None: not a topic, e.g. a BROKER config resource);
    ``results``: the response field with one result per entry; ``result(entry, type, error,
    topic)``: the result of a refused entry; ``whole``: a refusal fails the whole request (the
    other entries answered ``others``, nothing forwarded); ``versions``: those it applies to.
    """

    error: ErrorCode
    entries: tuple[str, ...]
    results: str
    topic: Callable[[Any], Topic | None]
    result: Callable[[Any, type[Any], ErrorCode, Topic], Any]
    whole: bool = False
    others: ErrorCode = ErrorCode.none
    versions: tuple[int, int] = (0, 1 << 15)


def _named(entry: Any) -> Topic | None:
    name = getattr(entry, "name", None)
    return name if name else getattr(entry, "topic_id", None)


def _produce_result(entry: Any, rt: type[Any], error: ErrorCode, topic: Topic) -> Any:
    pt = element_type(rt, "partition_responses")
    return _fields(
        rt,
        name=getattr(entry, "name", None),
        topic_id=getattr(entry, "topic_id", None),
        partition_responses=tuple(
            _fields(
                pt,
                index=p.index,
                error_code=error,
                base_offset=-1,
                log_append_time=None,
                log_start_offset=-1,
                record_errors=(),
                error_message=f"Cannot append to internal topic {topic}",
            )
            for p in entry.partition_data
        ),
    )


def _delete_records_result(entry: Any, rt: type[Any], error: ErrorCode, topic: Topic) -> Any:
    pt = element_type(rt, "partitions")
    return rt(
        name=entry.name,
        partitions=tuple(
            pt(partition_index=p.partition_index, low_watermark=-1, error_code=error)
            for p in entry.partitions
        ),
    )


def _topic_result(entry: Any, rt: type[Any], error: ErrorCode, topic: Topic) -> Any:
    """DeleteTopics (a name, or a topic state by name or id) and CreatePartitions."""
    name = entry if isinstance(entry, str) else getattr(entry, "name", None)
    return _fields(
        rt,
        name=name,
        topic_id=getattr(entry, "topic_id", None) or ZERO_UUID,
        error_code=error,
        error_message=None,
    )


def _config_result(entry: Any, rt: type[Any], error: ErrorCode, topic: Topic) -> Any:
    return rt(
        error_code=error,
        error_message=None,
        resource_type=entry.resource_type,
        resource_name=entry.resource_name,
    )


def _txn_result(entry: Any, rt: type[Any], error: ErrorCode, topic: Topic) -> Any:
    pt = element_type(rt, "results_by_partition")
    return rt(
        name=entry.name,
        results_by_partition=tuple(
            pt(partition_index=p, partition_error_code=error) for p in entry.partitions
        ),
    )


def _topic_resource(entry: Any) -> str | None:
    return entry.resource_name if int(entry.resource_type) == TOPIC_RESOURCE else None


RULES: dict[int, Rule] = {
    ApiKey.PRODUCE: Rule(
        ErrorCode.invalid_topic_exception, ("topic_data",), "responses", _named, _produce_result
    ),
    ApiKey.DELETE_RECORDS: Rule(
        ErrorCode.invalid_topic_exception, ("topics",), "topics", _named, _delete_records_result
    ),
    ApiKey.DELETE_TOPICS: Rule(
        ErrorCode.topic_authorization_failed,
        ("topic_names", "topics"),
        "responses",
        lambda e: e if isinstance(e, str) else _named(e),
        _topic_result,
    ),
    ApiKey.CREATE_PARTITIONS: Rule(
        ErrorCode.topic_authorization_failed, ("topics",), "results", _named, _topic_result
    ),
    ApiKey.ALTER_CONFIGS: Rule(
        ErrorCode.topic_authorization_failed, ("resources",), "responses", _topic_resource, _config_result
    ),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: Rule(
        ErrorCode.topic_authorization_failed, ("resources",), "responses", _topic_resource, _config_result
    ),
    ApiKey.ADD_PARTITIONS_TO_TXN: Rule(
        ErrorCode.topic_authorization_failed,
        ("v3_and_below_topics",),
        "results_by_topic_v3_and_below",
        _named,
        _txn_result,
        whole=True,
        others=ErrorCode.operation_not_attempted,
        versions=(0, 3),
    ),
}
"""API key → how its requests name topics and Kafka's answer for an internal one."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """What to do with a request naming an internal topic.

    ``forward``: the request without the refused entries (same sequence number and correlation
    id), or None when nothing is left to forward; ``answer``: the whole response then;
    ``merge(response)``: the forwarded request's response with the refused entries added;
    ``close``: the connection must close after (a Produce that expects no answer).
    """

    forward: Request | None
    answer: Any | None
    merge: Callable[[Any], Any]
    close: bool = False


class InternalTopics:
    """The coordinator's topics by name, and their ids as Metadata answers reveal them."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = frozenset(n for n in names if n)
        self.ids: set[uuid.UUID] = set()
        self._needles: tuple[bytes, ...] = tuple(n.encode() for n in self.names)

    def mark(self, body: Any) -> Any:
        """A Metadata response with our topics marked internal (their ids remembered, for
        requests that name topics by id)."""
        topics = getattr(body, "topics", None)
        if not topics or not any(t.name in self.names for t in topics):
            return body
        marked = []
        for t in topics:
            if t.name in self.names:
                topic_id = getattr(t, "topic_id", None)
                if topic_id is not None and topic_id != ZERO_UUID and topic_id not in self.ids:
                    self.ids.add(topic_id)
                    self._needles += (topic_id.bytes,)
                if not t.is_internal:
                    t = dataclasses.replace(t, is_internal=True)
            marked.append(t)
        return dataclasses.replace(body, topics=tuple(marked))

    def guards(self, request: Request) -> bool:
        """Whether ``request`` may name one of our topics (cheap: a byte search, no decode)."""
        rule = RULES.get(request.api_key)
        if rule is None or not rule.versions[0] <= request.api_version <= rule.versions[1]:
            return False
        frame = request.frame
        return any(needle in frame for needle in self._needles)

    def check(self, request: Request, expects_response: bool = True) -> Refusal | None:
        """None if ``request`` names none of our topics, else how to refuse those entries."""
        rule = RULES[request.api_key]
        header, body = codec.decode_request(request.frame)
        field_name = next(f for f in rule.entries if f in body.__dataclass_fields__)
        entries = getattr(body, field_name)
        refused = [(e, t) for e in entries if (t := rule.topic(e)) is not None and self._internal(t)]
        if not refused:
            return None
        response_type = codec.response_type(request.api_key, request.api_version)
        result_type = element_type(response_type, rule.results)
        results = tuple(rule.result(e, result_type, rule.error, t) for e, t in refused)
        if rule.whole:
            others = tuple(
                rule.result(e, result_type, rule.others, rule.topic(e) or "")
                for e in entries
                if all(e is not r for r, _ in refused)
            )
            return Refusal(None, self._answer(response_type, rule, results + others), _unchanged)
        close = not expects_response
        kept = tuple(e for e in entries if all(e is not r for r, _ in refused))
        if not kept:
            return Refusal(
                None, None if close else self._answer(response_type, rule, results), _unchanged, close
            )
        frame = codec.encode_request(
            request.correlation_id, header.client_id, dataclasses.replace(body, **{field_name: kept})
        )
        forward = dataclasses.replace(request, frame=frame)

        def merge(response: Any) -> Any:
            return dataclasses.replace(response, **{rule.results: getattr(response, rule.results) + results})

        return Refusal(forward, None, merge, close)

    def _internal(self, topic: Topic) -> bool:
        return topic in self.names if isinstance(topic, str) else topic in self.ids

    @staticmethod
    def _answer(response_type: type[Any], rule: Rule, results: tuple[Any, ...]) -> Any:
        return _fields(
            response_type,
            **{rule.results: results},
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.none,
        )


def _unchanged(response: Any) -> Any:
    return response


def merge_payload(api_key: int, api_version: int, merge: Callable[[Any], Any]) -> Callable[[bytes], bytes]:
    """``merge`` applied to an encoded response payload (header + body)."""

    def patch(payload: bytes) -> bytes:
        correlation_id, body = codec.decode_response(api_key, api_version, payload)
        return codec.encode_response(correlation_id, merge(body))

    return patch
