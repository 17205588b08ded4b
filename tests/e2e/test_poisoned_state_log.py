"""Issue 23: a state topic written around the gateway does not take the coordinator down.

200 random records go straight to the upstream's state topic (a producer on the broker itself,
as someone who reaches the cluster directly would), into the state partition a KIP-848 group
will use. The shard leading it reads them back behind its next write and reloads; later the
shard is killed and the other one loads the partition cold. Each time a new KIP-848 group
(confluent-kafka, ``group.protocol=consumer``) consumes 400 of 400 records and commits them,
and each shard process logs the skipping.
"""

from __future__ import annotations

import random
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from groupcoord.embedded_broker import EmbeddedBroker

from .failover import failover_cluster
from .test_consumer_groups import wait_until

pytestmark = pytest.mark.broker
RECORDS = 400


def poison(broker: EmbeddedBroker, topic: str, partition: int, n: int = 200) -> None:
    rng = random.Random(23)
    producer = Producer({"bootstrap.servers": f"{broker.host}:{broker.port}"})
    for i in range(n):
        headers = [("gc.fence", rng.randbytes(rng.choice([0, 5, 12])))] if i % 3 == 0 else None
        producer.produce(
            topic,
            key=rng.randbytes(rng.randint(0, 24)),
            value=rng.randbytes(rng.randint(0, 64)),
            partition=partition,
            headers=headers,
        )
    assert producer.flush(30) == 0


def consume_and_commit(bootstrap: str, topic: str, group: str) -> int:
    """A new KIP-848 member of ``group`` reads ``topic`` to the end and commits; the number of
    records it got (the committed offsets are checked to match)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    got = 0
    try:
        consumer.subscribe([topic])

        def read() -> bool:
            nonlocal got
            for msg in consumer.consume(100, 0.5):
                if not msg.error():
                    got += 1
            return got >= RECORDS

        wait_until(read, timeout=90, what=f"{RECORDS} records for {group}")
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, p) for p in range(2)], timeout=30)
        assert sum(tp.offset for tp in committed) == RECORDS
        return got
    finally:
        consumer.close()


def test_random_records_in_the_state_topic_are_skipped_and_groups_keep_working(
    broker: EmbeddedBroker, tmp_path
) -> None:
    with failover_cluster(broker, tmp_path, "poison") as fc:
        bootstrap = fc.bootstrap
        topic = f"poison-{uuid.uuid4().hex[:6]}"
        fc.create_topics(topic, partitions=2)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(RECORDS):
            producer.produce(topic, value=str(i).encode(), partition=i % 2)
        assert producer.flush(30) == 0
        first, second = f"pg1-{uuid.uuid4().hex[:6]}", "pg2"
        while fc.state_partition(second) != fc.state_partition(first):  # the same state partition
            second = f"pg2-{uuid.uuid4().hex[:6]}"
        state_partition = fc.state_partition(first)
        assert consume_and_commit(bootstrap, topic, f"warmup-{first}") == RECORDS

        poison(broker, fc.options.state_topic, state_partition)
        # the leader reads the garbage back behind its next write, reloads, and serves on
        assert consume_and_commit(bootstrap, topic, first) == RECORDS
        # a cold load by the other shard process skips the same records
        before = fc.kill_leader(state_partition)
        control = fc.control
        wait_until(lambda: control.placement[state_partition].leader != before.leader, what="failover")
        assert consume_and_commit(bootstrap, topic, second) == RECORDS
    # both shard processes said so, once per partition (their logs are the cluster's log_dir)
    logs = [f.read_text(errors="replace") for f in tmp_path.rglob("*.log")]
    assert sum("skipping a state-topic record" in text for text in logs) >= 2
