"""The internal-topic rule on its own (sans-IO): which entries each API loses, Kafka's error for
them, the request that is still forwarded, and the merged answer."""

from __future__ import annotations

import datetime
import uuid

from kio.schema.add_partitions_to_txn.v3 import request as add_txn
from kio.schema.alter_configs.v2 import request as alter
from kio.schema.create_partitions.v3 import request as create_parts
from kio.schema.delete_records.v2 import request as delete_records
from kio.schema.delete_topics.v6 import request as delete_topics
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import request as inc_alter
from kio.schema.incremental_alter_configs.v1 import response as inc_alter_resp
from kio.schema.metadata.v12 import response as metadata
from kio.schema.produce.v9 import request as produce
from kio.schema.produce.v9 import response as produce_resp
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from groupcoord.common.kafka_wire import codec
from groupcoord.gateway.messages.framed_request import Request
from groupcoord.gateway.proxy.internal_topics import InternalTopics, merge_payload

STATE, METRICS = "__my_state", "__my_metrics"
TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=5))


def framed(body: object, correlation_id: int = 7) -> Request:
    frame = codec.encode_request(correlation_id, "t", body)
    key, version, cid = codec.peek_header(frame)
    return Request(3, key, version, cid, frame)


def guard() -> InternalTopics:
    return InternalTopics((STATE, METRICS))


def test_a_request_naming_no_internal_topic_is_not_even_decoded() -> None:
    body = delete_topics.DeleteTopicsRequest(
        topics=(delete_topics.DeleteTopicState(name="orders", topic_id=None),), timeout=TIMEOUT
    )
    assert not guard().guards(framed(body))


def test_produce_refuses_internal_partitions_and_forwards_the_rest() -> None:
    def topic(name: str) -> produce.TopicProduceData:
        return produce.TopicProduceData(
            name=name, partition_data=(produce.PartitionProduceData(index=i32(0), records=None),)
        )

    request = framed(
        produce.ProduceRequest(
            transactional_id=None, acks=i16(-1), timeout=TIMEOUT, topic_data=(topic(STATE), topic("orders"))
        )
    )
    g = guard()
    assert g.guards(request)
    refusal = g.check(request)
    assert refusal is not None and refusal.forward is not None and not refusal.close
    _, forwarded = codec.decode_request(refusal.forward.frame)
    assert [t.name for t in forwarded.topic_data] == ["orders"]
    assert (refusal.forward.seq, refusal.forward.correlation_id) == (3, 7)
    upstream = produce_resp.ProduceResponse(
        responses=(
            produce_resp.TopicProduceResponse(
                name="orders",
                partition_responses=(
                    produce_resp.PartitionProduceResponse(
                        index=i32(0),
                        error_code=ErrorCode.none,
                        base_offset=i64(5),
                        log_append_time=None,
                        log_start_offset=i64(0),
                        record_errors=(),
                        error_message=None,
                    ),
                ),
            ),
        ),
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
    )
    patch = merge_payload(request.api_key, request.api_version, refusal.merge)
    _, merged = codec.decode_response(
        request.api_key, request.api_version, patch(codec.encode_response(7, upstream))
    )
    errors = {t.name: [p.error_code for p in t.partition_responses] for t in merged.responses}
    assert errors == {"orders": [ErrorCode.none], STATE: [ErrorCode.invalid_topic_exception]}
    # acks=0: Kafka closes the connection instead of answering
    silent = framed(
        produce.ProduceRequest(
            transactional_id=None, acks=i16(0), timeout=TIMEOUT, topic_data=(topic(METRICS),)
        )
    )
    quiet = g.check(silent, expects_response=False)
    assert quiet is not None and quiet.forward is None and quiet.answer is None and quiet.close


def test_delete_records_and_create_partitions_answered_without_forwarding() -> None:
    g = guard()
    refusal = g.check(
        framed(
            delete_records.DeleteRecordsRequest(
                topics=(
                    delete_records.DeleteRecordsTopic(
                        name=STATE,
                        partitions=(
                            delete_records.DeleteRecordsPartition(partition_index=i32(1), offset=i64(-1)),
                        ),
                    ),
                ),
                timeout=TIMEOUT,
            )
        )
    )
    assert refusal is not None and refusal.forward is None
    [topic] = refusal.answer.topics
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [
        (1, ErrorCode.invalid_topic_exception)
    ]
    refusal = g.check(
        framed(
            create_parts.CreatePartitionsRequest(
                topics=(create_parts.CreatePartitionsTopic(name=METRICS, count=i32(9), assignments=None),),
                timeout=TIMEOUT,
                validate_only=False,
            )
        )
    )
    assert refusal is not None and refusal.forward is None
    assert [(r.name, r.error_code) for r in refusal.answer.results] == [
        (METRICS, ErrorCode.topic_authorization_failed)
    ]


def test_delete_topics_by_id_once_metadata_named_the_id() -> None:
    g = guard()
    state_id = uuid.uuid4()
    by_id = framed(
        delete_topics.DeleteTopicsRequest(
            topics=(delete_topics.DeleteTopicState(name=None, topic_id=state_id),), timeout=TIMEOUT
        )
    )
    assert not g.guards(by_id)  # the id is unknown until Metadata names it
    marked = g.mark(
        metadata.MetadataResponse(
            throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
            brokers=(),
            cluster_id=None,
            controller_id=i32(0),
            topics=tuple(
                metadata.MetadataResponseTopic(
                    error_code=ErrorCode.none,
                    name=name,
                    topic_id=tid,
                    is_internal=False,
                    partitions=(),
                    topic_authorized_operations=i32(-2147483648),
                )
                for name, tid in ((STATE, state_id), ("orders", uuid.uuid4()))
            ),
        )
    )
    assert {t.name: t.is_internal for t in marked.topics} == {STATE: True, "orders": False}
    assert g.guards(by_id)
    refusal = g.check(by_id)
    assert refusal is not None and refusal.forward is None
    [result] = refusal.answer.responses
    assert (result.topic_id, result.error_code) == (state_id, ErrorCode.topic_authorization_failed)


def test_config_changes_refused_for_topic_resources_only() -> None:
    g = guard()

    def resource(kind: int, name: str) -> inc_alter.AlterConfigsResource:
        return inc_alter.AlterConfigsResource(
            resource_type=i8(kind),
            resource_name=name,
            configs=(inc_alter.AlterableConfig(name="retention.ms", config_operation=i8(0), value="1"),),
        )

    # a GROUP resource that happens to carry our topic's name is not a topic
    request = framed(
        inc_alter.IncrementalAlterConfigsRequest(
            resources=(resource(2, STATE), resource(32, STATE), resource(2, "orders")), validate_only=False
        )
    )
    refusal = g.check(request)
    assert refusal is not None and refusal.forward is not None
    _, forwarded = codec.decode_request(refusal.forward.frame)
    assert [(int(r.resource_type), r.resource_name) for r in forwarded.resources] == [
        (32, STATE),
        (2, "orders"),
    ]
    merged = refusal.merge(
        inc_alter_resp.IncrementalAlterConfigsResponse(
            throttle_time=i32Timedelta.parse(datetime.timedelta(0)), responses=()
        )
    )
    assert [(int(r.resource_type), r.resource_name, r.error_code) for r in merged.responses] == [
        (2, STATE, ErrorCode.topic_authorization_failed)
    ]
    legacy = g.check(
        framed(
            alter.AlterConfigsRequest(
                resources=(
                    alter.AlterConfigsResource(
                        resource_type=i8(2),
                        resource_name=METRICS,
                        configs=(alter.AlterableConfig(name="retention.ms", value="1"),),
                    ),
                ),
                validate_only=False,
            )
        )
    )
    assert legacy is not None and legacy.forward is None
    assert [r.error_code for r in legacy.answer.responses] == [ErrorCode.topic_authorization_failed]


def test_add_partitions_to_txn_fails_the_whole_transaction_as_kafka_does() -> None:
    refusal = guard().check(
        framed(
            add_txn.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id="tx",
                v3_and_below_producer_id=i64(4),
                v3_and_below_producer_epoch=i16(0),
                v3_and_below_topics=(
                    add_txn.AddPartitionsToTxnTopic(name="orders", partitions=(i32(0), i32(1))),
                    add_txn.AddPartitionsToTxnTopic(name=STATE, partitions=(i32(3),)),
                ),
            )
        )
    )
    assert refusal is not None and refusal.forward is None
    errors = {
        (t.name, int(p.partition_index)): p.partition_error_code
        for t in refusal.answer.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }
    assert errors == {
        (STATE, 3): ErrorCode.topic_authorization_failed,
        ("orders", 0): ErrorCode.operation_not_attempted,
        ("orders", 1): ErrorCode.operation_not_attempted,
    }
