"""Issue 13 acceptance, failover: a consume-transform-produce loop of many transactions while
the shard leading the group's state partition is killed with SIGKILL, sometimes after
TxnOffsetCommit and before EndTxn (the pending offsets and the marker meet in the new leader's
load), sometimes right after EndTxn (the marker arrives while the partition moves).

History check over the whole run: the group's committed offset is exactly the last committed
transaction's, and the committed output (aborted transactions removed) is every input record
up to it, once and in order.

tansu 0.6.0 serves aborted records to read_committed consumers (measured), so the output is
read here raw: data batches of transactions the log's ABORT markers end are dropped, as a
Kafka broker's read_committed fetch would.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord_testing.committed_output import committed_output

from .failover import failover_cluster
from .test_consumer_groups import wait_until

pytestmark = pytest.mark.broker
RECORDS = 48
PER_TXN = 3
KILL_EVERY = 3  # transactions


def test_shard_kills_around_end_txn_lose_no_outcome_and_invent_none(broker: EmbeddedBroker, tmp_path) -> None:
    with failover_cluster(broker, tmp_path, "eosfo") as fo:
        bootstrap = fo.bootstrap
        tag = uuid.uuid4().hex[:6]
        topic_in, topic_out, group = f"eosfo-in-{tag}", f"eosfo-out-{tag}", f"eosfo-g-{tag}"
        fo.create_topics(topic_in, topic_out, partitions=1)
        source = Producer({"bootstrap.servers": bootstrap})
        for i in range(RECORDS):
            source.produce(topic_in, f"{i}".encode(), partition=0)
        assert source.flush(15) == 0

        state_partition = fo.state_partition(group)

        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        tp = TopicPartition(topic_in, 0)
        consumer.assign([TopicPartition(topic_in, 0, 0)])
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"eosfo-tx-{tag}"})
        producer.init_transactions(30)
        checker = Consumer({"bootstrap.servers": bootstrap, "group.id": group})

        def group_offset() -> int:
            return checker.committed([tp], 30)[0].offset

        last_committed = 0  # the offset the last committed transaction sent
        transactions = aborted = 0
        kills = {"before EndTxn": 0, "after EndTxn": 0}
        deadline = time.monotonic() + 240
        while last_committed < RECORDS:
            assert time.monotonic() < deadline, f"stuck at {last_committed}"
            batch = []
            while len(batch) < PER_TXN and (last_committed + len(batch)) < RECORDS:
                m = consumer.poll(1.0)
                if m is not None and m.error() is None:
                    batch.append(m)
            transactions += 1
            kill = None
            if transactions % KILL_EVERY == 0:
                kill = "before EndTxn" if (transactions // KILL_EVERY) % 2 else "after EndTxn"
            try:
                producer.begin_transaction()
                for m in batch:
                    producer.produce(topic_out, m.value(), partition=0)
                offset = batch[-1].offset() + 1
                producer.send_offsets_to_transaction(
                    [TopicPartition(topic_in, 0, offset)], consumer.consumer_group_metadata(), 30
                )
                if kill == "before EndTxn":
                    fo.kill_leader(state_partition)  # the pending offsets are in the log, the marker not yet
                    kills[kill] += 1
                producer.commit_transaction(30)
                last_committed = offset
                if kill == "after EndTxn":
                    fo.kill_leader(state_partition)  # the marker meets the moving partition
                    kills[kill] += 1
                if kill:  # this very transaction's outcome reaches the group, not an older one
                    wait_until(lambda o=offset: group_offset() == o, timeout=30, what=f"offset {offset}")
            except KafkaException as exc:
                if not exc.args[0].txn_requires_abort():
                    raise
                producer.abort_transaction(30)
                aborted += 1
            consumer.seek(TopicPartition(topic_in, 0, last_committed))

        # The group's offset is exactly the last committed transaction's (once the marker is in).
        fresh = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"}
        )
        try:
            assert [p.offset for p in fresh.committed([tp], 60)] == [RECORDS]
        finally:
            fresh.close()
        consumer.close()
        checker.close()
        output = fo.cluster.run(committed_output(bootstrap, topic_out))
        assert output == [f"{i}".encode() for i in range(RECORDS)]  # no duplicate, no gap
        assert min(kills.values()) >= 2, (kills, transactions, aborted)
