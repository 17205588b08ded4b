"""Issue 16 acceptance: the offset paths answer admin tools and applications exactly as Apache
Kafka does, with real clients through the gateway, in both group protocols.

* A commit for a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION (librdkafka's commit
  callback depends on it), and nothing is stored.
* AdminClient alterConsumerGroupOffsets (no member, generation -1) while the group has members:
  UNKNOWN_MEMBER_ID, and the offsets stay; once the group is empty it succeeds and a consumer
  resumes from there.
* AdminClient deleteConsumerGroupOffsets: GROUP_SUBSCRIBED_TO_TOPIC for partitions of a topic
  the group subscribes to, the others deleted, an unknown topic UNKNOWN_TOPIC_OR_PARTITION,
  every requested partition echoed with its own error.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaPythonPartition
from kafka import errors as kafka_errors
from kafka.structs import OffsetAndMetadata

from groupcoord_testing import BackgroundCluster

from .test_consumer_groups import wait_until

pytestmark = pytest.mark.broker
PROTOCOLS = ["classic", "consumer"]


def make_topics(bootstrap: str, *specs: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, n, 1) for name, n in specs]).values():
        fut.result(15)


@pytest.fixture
def member(cluster: BackgroundCluster, request: pytest.FixtureRequest) -> Iterator[tuple[Consumer, str, str]]:
    """A running member of a fresh group subscribed to a fresh two-partition topic, which has
    committed offset 2 on both partitions: (consumer, group, topic)."""
    protocol = request.param
    bootstrap = cluster.bootstrap
    topic, group = f"adm-{uuid.uuid4().hex[:6]}", f"adm-g-{uuid.uuid4().hex[:6]}"
    make_topics(bootstrap, (topic, 2))
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    wait_until(lambda: bool(consumer.poll(0.2) or consumer.assignment()), what="an assignment")
    consumer.commit(offsets=[TopicPartition(topic, p, 2) for p in (0, 1)], asynchronous=False)
    try:
        yield consumer, group, topic
    finally:
        consumer.close()


def committed(consumer: Consumer, topic: str, partitions: range) -> dict[int, int]:
    return {
        tp.partition: tp.offset for tp in consumer.committed([TopicPartition(topic, p) for p in partitions])
    }


@pytest.mark.parametrize("member", PROTOCOLS, indirect=True)
def test_a_commit_to_a_topic_that_does_not_exist_is_unknown_topic_or_partition(
    member: tuple[Consumer, str, str],
) -> None:
    consumer, _group, topic = member
    with pytest.raises(KafkaException) as refused:
        consumer.commit(offsets=[TopicPartition(f"missing-{uuid.uuid4().hex[:6]}", 0, 5)], asynchronous=False)
    assert refused.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # a partition index the topic does not have is refused the same way
    with pytest.raises(KafkaException) as beyond:
        consumer.commit(offsets=[TopicPartition(topic, 7, 3)], asynchronous=False)
    assert beyond.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert committed(consumer, topic, range(2)) == {0: 2, 1: 2}


@pytest.mark.parametrize("member", PROTOCOLS, indirect=True)
def test_admin_cannot_move_offsets_under_a_running_group(
    cluster: BackgroundCluster, member: tuple[Consumer, str, str]
) -> None:
    consumer, group, topic = member
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 1)])]
    (future,) = admin.alter_consumer_group_offsets(request).values()
    answered = future.result(15).topic_partitions
    assert [(tp.partition, tp.error.code() if tp.error else None) for tp in answered] == [
        (0, KafkaError.UNKNOWN_MEMBER_ID)
    ]
    # kafka-python's admin client gets the same answer
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        result = kp.alter_group_offsets(group, {KafkaPythonPartition(topic, 1): OffsetAndMetadata(1, "", -1)})
    finally:
        kp.close()
    assert result == {KafkaPythonPartition(topic, 1): kafka_errors.UnknownMemberIdError}
    assert committed(consumer, topic, range(2)) == {0: 2, 1: 2}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_admin_moves_offsets_of_an_empty_group_and_a_consumer_resumes_there(
    cluster: BackgroundCluster, protocol: str
) -> None:
    bootstrap = cluster.bootstrap
    topic, group = f"adm-{uuid.uuid4().hex[:6]}", f"adm-g-{uuid.uuid4().hex[:6]}"
    make_topics(bootstrap, (topic, 1))
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(topic, str(i).encode(), partition=0)
    assert producer.flush(15) == 0
    config = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol}
    config |= {"enable.auto.commit": False, "auto.offset.reset": "earliest"}
    first = Consumer(config)
    first.subscribe([topic])
    wait_until(lambda: first.poll(0.2) is not None, what="a first record")
    first.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    first.close()  # the group is empty now
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while True:  # a consumer-protocol member's leave is acknowledged asynchronously
        (future,) = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 7)])]
        ).values()
        (tp,) = future.result(15).topic_partitions
        if tp.error is None or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert tp.error is None
    second = Consumer(config)
    second.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        msg = second.poll(0.2)
        while (msg is None or msg.error()) and time.monotonic() < deadline:
            msg = second.poll(0.2)
        assert msg is not None and msg.offset() == 7  # resumed where the admin moved the group
    finally:
        second.close()


@pytest.mark.parametrize("member", PROTOCOLS, indirect=True)
def test_offsets_of_subscribed_topics_cannot_be_deleted_the_others_can(
    cluster: BackgroundCluster, member: tuple[Consumer, str, str]
) -> None:
    consumer, group, topic = member
    other, missing = f"{topic}-other", f"missing-{uuid.uuid4().hex[:6]}"
    make_topics(cluster.bootstrap, (other, 1))
    consumer.commit(offsets=[TopicPartition(other, 0, 4)], asynchronous=False)
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        result = kp.delete_group_offsets(
            group,
            [
                KafkaPythonPartition(topic, 0),
                KafkaPythonPartition(topic, 1),
                KafkaPythonPartition(other, 0),
                KafkaPythonPartition(missing, 0),
            ],
        )
    finally:
        kp.close()
    assert result == {
        KafkaPythonPartition(topic, 0): kafka_errors.GroupSubscribedToTopicError,
        KafkaPythonPartition(topic, 1): kafka_errors.GroupSubscribedToTopicError,
        KafkaPythonPartition(other, 0): kafka_errors.NoError,
        KafkaPythonPartition(missing, 0): kafka_errors.UnknownTopicOrPartitionError,
    }
    assert committed(consumer, topic, range(2)) == {0: 2, 1: 2}
    assert committed(consumer, other, range(1)) == {0: -1001}  # OFFSET_INVALID: deleted
