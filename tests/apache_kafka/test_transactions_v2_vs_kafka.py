"""Transactions V2 (KIP-890 part 2) as a client of that version sends them, by raw requests, to
Kafka 4.4's own group coordinator and through the gateway in front of the same broker, and the
answers compared step by step: TxnOffsetCommit v5 with no AddOffsetsToTxn before it (the group
coordinator adds its partition to the transaction), EndTxn v5 bumping the producer's epoch, a
commit at the epoch of the transaction that just ended (stale), one at the new epoch, one of a
zombie after a new instance of the transactional id fenced it; and the committed offsets after
it all. Retriable answers (the transaction before still completing) are asked again, as clients
do, and reported. The same at TxnOffsetCommit v6 (KIP-1319: topics named by id), with its new
answers: an id no topic has (UNKNOWN_TOPIC_ID), a generation for a group that does not exist
(GROUP_ID_NOT_FOUND, ILLEGAL_GENERATION before v6)."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.offset_fetch.v7 import request as fetch_v7
from kio.schema.txn_offset_commit.v5 import request as txn
from kio.schema.types import GroupId, ProducerId, TransactionalId
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from groupcoord.common.kafka_wire import schemas_after_kio as txn_v6
from groupcoord.common.kafka_wire.exchange import exchange
from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

RETRIABLE = frozenset(
    {
        ErrorCode.concurrent_transactions,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.not_coordinator,
        ErrorCode.request_timed_out,
    }
)
RETRY_S = 30.0


class Side:
    """One coordinator (Kafka's own, or the gateway) as a raw client of transactions V2 sees it."""

    def __init__(self, cluster: BackgroundCluster, address: tuple[str, int], topic: str, version: int) -> None:
        self.cluster, self.address, self.topic, self.version = cluster, address, topic, version
        tag = uuid.uuid4().hex[:6]
        self.group, self.txn_id = f"tv2-g-{tag}", f"tv2-tx-{tag}"
        self.retried: set[str] = set()  # the retriable answers met, by name

    def ask(self, body: Any) -> Any:
        return self.cluster.run(exchange(self.address, body, "tv2-test", 15), 20)

    def retrying(self, send: Callable[[], Any], code: Callable[[Any], ErrorCode]) -> Any:
        deadline = time.monotonic() + RETRY_S
        while (response := send()) is not None and code(response) in RETRIABLE:
            self.retried.add(ErrorCode(code(response)).name)
            assert time.monotonic() < deadline, f"{code(response)!r} for too long"
            time.sleep(0.05)
        return response

    def find_coordinators(self) -> None:
        for key_type, key in ((1, self.txn_id), (0, self.group)):  # Kafka creates its topics here
            request = FindCoordinatorRequest(key_type=i8(key_type), coordinator_keys=(key,))
            self.retrying(lambda r=request: self.ask(r), lambda r: ErrorCode(r.coordinators[0].error_code))

    def init(self) -> tuple[int, int]:
        request = InitProducerIdRequest(
            transactional_id=TransactionalId(self.txn_id),
            transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
            producer_id=ProducerId(-1),
            producer_epoch=i16(-1),
        )
        r = self.retrying(lambda: self.ask(request), lambda r: ErrorCode(r.error_code))
        assert r.error_code == ErrorCode.none, r
        return int(r.producer_id), int(r.producer_epoch)

    def topic_id(self) -> uuid.UUID:
        request = MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=self.topic),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        return self.ask(request).topics[0].topic_id

    def commit(
        self,
        pid: int,
        epoch: int,
        offset: int,
        *,
        topic_id: uuid.UUID | None = None,
        generation: int = -1,
        group: str | None = None,
    ) -> str:
        """TxnOffsetCommit of partition 0 (by name before v6, by ``topic_id`` or the topic's id
        from v6) in ``group`` (the side's), as a producer without group membership sends it
        unless ``generation``."""
        schema: Any = txn if self.version < 6 else txn_v6
        partitions = (
            schema.TxnOffsetCommitRequestPartition(
                partition_index=i32(0),
                committed_offset=i64(offset),
                committed_leader_epoch=i32(-1),
                committed_metadata="",
            ),
        )
        topic = (
            schema.TxnOffsetCommitRequestTopic(name=self.topic, partitions=partitions)
            if self.version < 6
            else schema.TxnOffsetCommitRequestTopic(topic_id=topic_id or self.topic_id(), partitions=partitions)
        )
        request = schema.TxnOffsetCommitRequest(
            transactional_id=TransactionalId(self.txn_id),
            group_id=GroupId(group or self.group),
            producer_id=ProducerId(pid),
            producer_epoch=i16(epoch),
            generation_id=i32(generation),
            member_id="",
            group_instance_id=None,
            topics=(topic,),
        )
        r = self.retrying(lambda: self.ask(request), lambda r: ErrorCode(r.topics[0].partitions[0].error_code))
        return ErrorCode(r.topics[0].partitions[0].error_code).name

    def end(self, pid: int, epoch: int, commit: bool) -> tuple[str, int]:
        request = EndTxnRequest(
            transactional_id=TransactionalId(self.txn_id),
            producer_id=ProducerId(pid),
            producer_epoch=i16(epoch),
            committed=commit,
        )
        r = self.retrying(lambda: self.ask(request), lambda r: ErrorCode(r.error_code))
        return ErrorCode(r.error_code).name, int(r.producer_epoch)

    def committed(self) -> tuple[int, str]:
        """The group's stable committed offset (require_stable: no transaction pending)."""
        request = fetch_v7.OffsetFetchRequest(
            group_id=GroupId(self.group),
            topics=(fetch_v7.OffsetFetchRequestTopic(name=self.topic, partition_indexes=(i32(0),)),),
            require_stable=True,
        )
        deadline = time.monotonic() + RETRY_S
        while True:
            p = self.ask(request).topics[0].partitions[0]
            if p.error_code != ErrorCode.unstable_offset_commit or time.monotonic() > deadline:
                return int(p.committed_offset), ErrorCode(p.error_code).name
            time.sleep(0.1)

    def run(self) -> list[tuple[str, Any]]:
        self.find_coordinators()
        pid, first = self.init()
        steps: list[tuple[str, Any]] = [("commit at the transaction's epoch", self.commit(pid, first, 5))]
        ended, bumped = self.end(pid, first, commit=True)
        steps.append(("EndTxn v5 commits and bumps the epoch", (ended, bumped - first)))
        steps.append(("offsets after the commit", self.committed()))
        steps.append(("commit at the ended transaction's epoch", self.commit(pid, first, 6)))
        steps.append(("commit at the bumped epoch", self.commit(pid, bumped, 7)))
        pid_again, fencing = self.init()  # a new instance: the open transaction is aborted
        steps.append(("the new instance: same producer, a newer epoch", (pid_again == pid, fencing > bumped)))
        steps.append(("the zombie's commit", self.commit(pid, bumped, 8)))
        steps.append(("offsets after the fencing", self.committed()))
        # the producer's commits made the group exist (Kafka's simple group), another does not
        steps.append(("a generation in the producer's group", self.commit(pid_again, fencing, 9, generation=3)))
        nowhere = f"{self.group}-none"
        steps.append(("a generation in a group that does not exist", self.commit(pid_again, fencing, 9, generation=3, group=nowhere)))
        if self.version >= 6:
            steps.append(("an id no topic has", self.commit(pid_again, fencing, 9, topic_id=uuid.uuid4())))
        return steps


@pytest.mark.parametrize("version", [5, 6])
def test_transactions_v2_are_answered_as_kafka_4_4s_group_coordinator_answers_them(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster, version: int
) -> None:
    topic = f"tv2-in-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    kafkas = Side(kafka_cluster, (kafka.host, kafka.port), topic, version)
    ours = Side(kafka_cluster, kafka_cluster.gateway.bootstrap_address, topic, version)
    theirs, mine = kafkas.run(), ours.run()
    print("Kafka 4.4:", theirs, "retried", kafkas.retried)
    print("gateway:  ", mine, "retried", ours.retried)
    assert dict(theirs)["commit at the transaction's epoch"] == "none"
    assert dict(theirs)["offsets after the commit"] == (5, "none")
    assert mine == theirs
