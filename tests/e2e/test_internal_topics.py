"""Issue 23: the coordinator's state topic is internal, as ``__consumer_offsets`` is in Kafka.

Real clients through the gateway of the local cluster: Metadata marks the topic internal; a
producer's records to it are refused (INVALID_TOPIC_EXCEPTION) while its records to an ordinary
topic in the same batches land; admin deletes, config changes, new partitions, record deletion
and a transaction adding its partition are refused with Kafka's errors; and nothing reaches the
topic (read back from the broker itself).
"""

from __future__ import annotations

import asyncio
import datetime
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka import KafkaAdminClient
from kio.schema.add_partitions_to_txn.v3 import request as add_txn
from kio.schema.alter_configs.v2 import request as alter
from kio.schema.create_partitions.v3 import request as create_parts
from kio.schema.delete_records.v2 import request as delete_records
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from groupcoord.common.kafka_wire.exchange import exchange
from groupcoord.common.partitioning import DEFAULT_STATE_TOPIC
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord_testing import BackgroundCluster

pytestmark = pytest.mark.broker
STATE = DEFAULT_STATE_TOPIC
TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=10))


def ask_gateway(cluster: BackgroundCluster, body: object) -> object:
    host, _, port = cluster.bootstrap.rpartition(":")
    return asyncio.run(exchange((host, int(port)), body, "internal-topics-test", 10.0))


def state_keys(broker: EmbeddedBroker, topic: str = STATE) -> set[bytes]:
    """Every key in ``topic`` (the state topic), read from the broker itself (not through the
    gateway)."""
    consumer = Consumer(
        {
            "bootstrap.servers": f"{broker.host}:{broker.port}",
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        keys: set[bytes] = set()
        at_end: set[int] = set()
        while len(at_end) < len(partitions):
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
            elif msg.key() is not None:
                keys.add(msg.key())
        return keys
    finally:
        consumer.close()


def test_the_state_topic_is_internal_and_closed_to_clients(
    cluster: BackgroundCluster, broker: EmbeddedBroker
) -> None:
    bootstrap = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ordinary, victim = f"it-{uuid.uuid4().hex[:6]}", f"it-victim-{uuid.uuid4().hex[:6]}"
    for fut in admin.create_topics([NewTopic(ordinary, 2, 1), NewTopic(victim, 1, 1)]).values():
        fut.result(15)

    # Metadata: internal, as Kafka marks __consumer_offsets (kafka-python reports the flag)
    kp = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        described = {t["name"]: t["is_internal"] for t in kp.describe_topics([STATE, ordinary])}
    finally:
        kp.close()
    assert described == {STATE: True, ordinary: False}

    # Produce: every record to the state topic refused, every ordinary one delivered
    poison = f"poison-{uuid.uuid4().hex}".encode()
    outcomes: dict[str, list[int | None]] = {STATE: [], ordinary: []}

    def delivered(err: KafkaError | None, msg: object) -> None:
        outcomes[msg.topic()].append(None if err is None else err.code())  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "message.send.max.retries": 0})
    for i in range(20):
        producer.produce(STATE, key=poison, value=b"x" * i, partition=i % 2, on_delivery=delivered)
        producer.produce(ordinary, key=b"k", value=b"v", partition=i % 2, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert outcomes[STATE] == [KafkaError.TOPIC_EXCEPTION] * 20
    assert outcomes[ordinary] == [None] * 20

    # DeleteTopics: the state topic refused, the other topic of the same request deleted
    results = admin.delete_topics([STATE, victim], operation_timeout=10)
    with pytest.raises(Exception) as refused:
        results[STATE].result(15)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    results[victim].result(15)

    # IncrementalAlterConfigs on the TOPIC resource (retention.ms=1 would erase the state)
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        STATE,
        incremental_configs=[ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)],
    )
    with pytest.raises(Exception) as refused:
        admin.incremental_alter_configs([resource])[resource].result(15)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # CreatePartitions (it would move groups: hash(group) mod P) and DeleteRecords: raw requests,
    # as tansu advertises neither and clients would not send them; the gateway never forwards them
    answer = ask_gateway(
        cluster,
        create_parts.CreatePartitionsRequest(
            topics=(create_parts.CreatePartitionsTopic(name=STATE, count=i32(64), assignments=None),),
            timeout=TIMEOUT,
            validate_only=False,
        ),
    )
    assert [(r.name, r.error_code) for r in answer.results] == [(STATE, ErrorCode.topic_authorization_failed)]  # type: ignore[attr-defined]
    answer = ask_gateway(
        cluster,
        delete_records.DeleteRecordsRequest(
            topics=(
                delete_records.DeleteRecordsTopic(
                    name=STATE,
                    partitions=(
                        delete_records.DeleteRecordsPartition(partition_index=i32(0), offset=i64(-1)),
                    ),
                ),
            ),
            timeout=TIMEOUT,
        ),
    )
    assert [p.error_code for t in answer.topics for p in t.partitions] == [ErrorCode.invalid_topic_exception]  # type: ignore[attr-defined]

    # AlterConfigs (the legacy API) and AddPartitionsToTxn, as raw requests
    answer = ask_gateway(
        cluster,
        alter.AlterConfigsRequest(
            resources=(
                alter.AlterConfigsResource(
                    resource_type=i8(2),
                    resource_name=STATE,
                    configs=(alter.AlterableConfig(name="cleanup.policy", value="delete"),),
                ),
            ),
            validate_only=False,
        ),
    )
    assert [r.error_code for r in answer.responses] == [ErrorCode.topic_authorization_failed]  # type: ignore[attr-defined]
    answer = ask_gateway(
        cluster,
        add_txn.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=f"tx-{uuid.uuid4().hex[:6]}",
            v3_and_below_producer_id=i64(1),
            v3_and_below_producer_epoch=i16(0),
            v3_and_below_topics=(
                add_txn.AddPartitionsToTxnTopic(name=STATE, partitions=(i32(0),)),
                add_txn.AddPartitionsToTxnTopic(name=ordinary, partitions=(i32(0),)),
            ),
        ),
    )
    assert {
        t.name: [p.partition_error_code for p in t.results_by_partition]
        for t in answer.results_by_topic_v3_and_below  # type: ignore[attr-defined]
    } == {STATE: [ErrorCode.topic_authorization_failed], ordinary: [ErrorCode.operation_not_attempted]}

    # nothing the client sent reached the state topic
    assert poison not in state_keys(broker)
