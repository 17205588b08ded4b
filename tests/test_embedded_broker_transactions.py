"""What the embedded broker (tansu) does with transactions: the measurements that decided how
TxnOffsetCommit reaches the upstream transaction coordinator (docs/exactly-once.md).

Raw requests, as librdkafka sends them (InitProducerId v4, AddPartitionsToTxn v3, Produce v9
with a transactional batch, EndTxn v3), and a raw read_uncommitted Fetch that keeps control
batches. If tansu changes, these say so.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from typing import Any

from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.add_partitions_to_txn.v3 import request as add
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v9 import request as produce
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64

from groupcoord.common.kafka_wire.exchange import exchange
from groupcoord.embedded_broker import EmbeddedBroker

ABORT, COMMIT = 0, 1


class Txn:
    def __init__(self, broker: EmbeddedBroker) -> None:
        self.address = (broker.host, broker.port)
        self.id = TransactionalId(f"probe-{uuid.uuid4().hex[:6]}")
        self.pid, self.epoch = -1, -1

    def ask(self, body: Any) -> Any:
        return asyncio.run(exchange(self.address, body, "txn-probe", 10))

    def init(self) -> None:
        r = self.ask(
            InitProducerIdRequest(
                transactional_id=self.id,
                transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
                producer_id=ProducerId(-1),
                producer_epoch=i16(-1),
            )
        )
        assert r.error_code == ErrorCode.none
        self.pid, self.epoch = int(r.producer_id), int(r.producer_epoch)

    def add(self, *topics: str) -> None:
        r = self.ask(
            add.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.id,
                v3_and_below_producer_id=ProducerId(self.pid),
                v3_and_below_producer_epoch=i16(self.epoch),
                v3_and_below_topics=tuple(
                    add.AddPartitionsToTxnTopic(name=TopicName(t), partitions=(i32(0),)) for t in topics
                ),
            )
        )
        assert {
            p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition
        } == {ErrorCode.none}

    def produce(self, topic: str, sequence: int) -> ErrorCode:
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=0,
            is_transactional=True,
            producer_id=self.pid,
            producer_epoch=self.epoch,
            base_sequence=sequence,
            batch_size=1 << 16,
        )
        builder.append(0, timestamp=None, key=b"k", value=b"v", headers=[])
        r = self.ask(
            produce.ProduceRequest(
                transactional_id=self.id,
                acks=i16(-1),
                timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
                topic_data=(
                    produce.TopicProduceData(
                        name=TopicName(topic),
                        partition_data=(
                            produce.PartitionProduceData(
                                index=i32(0), records=Records(bytes(builder.build()))
                            ),
                        ),
                    ),
                ),
            )
        )
        return r.responses[0].partition_responses[0].error_code

    def end(self, commit: bool) -> None:
        r = self.ask(
            EndTxnRequest(
                transactional_id=self.id,
                producer_id=ProducerId(self.pid),
                producer_epoch=i16(self.epoch),
                committed=commit,
            )
        )
        assert r.error_code == ErrorCode.none

    def batches(self, topic: str) -> list[tuple[bool, int, int | None]]:
        """(is control batch, producer id, control type) of every batch of partition 0."""
        r = self.ask(
            fetch.FetchRequest(
                replica_id=i32(-1),
                max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=10)),
                min_bytes=i32(1),
                max_bytes=i32(1 << 20),
                isolation_level=i8(0),
                session_id=i32(0),
                session_epoch=i32(-1),
                topics=(
                    fetch.FetchTopic(
                        topic=TopicName(topic),
                        partitions=(
                            fetch.FetchPartition(
                                partition=i32(0),
                                current_leader_epoch=i32(-1),
                                fetch_offset=i64(0),
                                last_fetched_epoch=i32(-1),
                                log_start_offset=i64(-1),
                                partition_max_bytes=i32(1 << 20),
                            ),
                        ),
                    ),
                ),
                forgotten_topics_data=(),
                rack_id="",
            )
        )
        records = MemoryRecords(bytes(r.responses[0].partitions[0].records or b""))
        out = []
        while records.has_next():
            batch = records.next_batch()
            kind = int.from_bytes(next(iter(batch)).key[2:4], "big") if batch.is_control_batch else None
            out.append((batch.is_control_batch, batch.producer_id, kind))
        return out


def topics(broker: EmbeddedBroker, n: int) -> list[str]:
    names = [f"probe-{uuid.uuid4().hex[:6]}" for _ in range(n)]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic(t, 1, 1) for t in names]).values():
        fut.result(10)
    return names


def test_markers_land_only_in_partitions_holding_a_transactional_batch(broker: EmbeddedBroker) -> None:
    """AddPartitionsToTxn alone does not get a partition its marker: this is why the shard
    writes pending offsets as a transactional batch of the client's producer."""
    with_data, added_only = topics(broker, 2)
    txn = Txn(broker)
    txn.init()
    txn.add(with_data, added_only)
    assert txn.produce(with_data, 0) == ErrorCode.none
    txn.end(commit=True)
    assert txn.batches(with_data) == [(False, txn.pid, None), (True, txn.pid, COMMIT)]
    assert txn.batches(added_only) == []


def test_a_foreign_writer_with_the_producers_id_gets_the_marker_and_is_fenced_later(
    broker: EmbeddedBroker,
) -> None:
    """A batch written for the producer (its id, epoch and our own sequence) into an added
    partition gets the transaction's marker; sequences are checked; once InitProducerId bumped
    the epoch, the old epoch's batch is refused PRODUCER_FENCED."""
    (state,) = topics(broker, 1)
    txn = Txn(broker)
    txn.init()
    txn.add(state)
    assert txn.produce(state, 0) == ErrorCode.none
    assert txn.produce(state, 0) == ErrorCode.duplicate_sequence_number
    txn.end(commit=True)
    assert txn.batches(state)[-1] == (True, txn.pid, COMMIT)
    old_epoch = txn.epoch
    txn.init()
    assert txn.epoch == old_epoch + 1
    txn.epoch = old_epoch
    assert txn.produce(state, 1) == ErrorCode.producer_fenced


def test_init_producer_id_aborts_the_open_transaction_in_its_partitions(broker: EmbeddedBroker) -> None:
    """A new instance of the transactional id aborts the old one's open transaction: an ABORT
    marker (of the old epoch) lands in the partitions holding its batches — in ours, the
    fenced producer's pending offsets."""
    (state,) = topics(broker, 1)
    txn = Txn(broker)
    txn.init()
    txn.add(state)
    assert txn.produce(state, 0) == ErrorCode.none
    txn.init()
    assert txn.batches(state) == [(False, txn.pid, None), (True, txn.pid, ABORT)]
