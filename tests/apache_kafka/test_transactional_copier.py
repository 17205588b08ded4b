"""Kafka's own exactly-once check (kafkatest ``tests/core/transactions_test.py``) through the
gateway: Kafka 4.4's ``TransactionalMessageCopier`` copies a seeded input topic to an output topic
in transactions while the shard leading the copier's group is killed with SIGKILL and an upstream
broker is bounced; read_committed readers of the output then see every input value exactly once,
in order (one partition each way, as transactions_test's ``check_order``). Kafka 4.4 really drops
aborted records from read_committed fetches, so a transaction whose offsets and output disagree
would show as a duplicate or a gap.

Transaction version: Kafka 4.4 finalizes ``transaction.version=2`` (KIP-890 part 2) and so does
the gateway in front of it, so the Java client runs transaction version 2: no AddOffsetsToTxn,
TxnOffsetCommit v5, whose group coordinator adds its own partition to the transaction, and an
epoch bump at each transaction's end (the markers in our state partition carry the bumped epoch).
The state partition's records show it: every transaction's offsets were written at an epoch of
their own.
"""


from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
import uuid
from collections.abc import Awaitable, Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka import errors as Errors
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from real_parts import start_apache_kafka

from groupcoord.common.partitioning import partition_for
from groupcoord.coordinator.core.contract import TransactionalWrite
from groupcoord.coordinator.runtime.statelog import StateLogWriter
from groupcoord.coordinator.runtime.transactions import append_transactional
from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

from .conftest import run_tool
from .copier import (
    STATE_PARTITIONS,
    TRANSACTION_SIZE,
    CommittedReader,
    Copy,
    assert_copied_exactly_once,
    copier_cluster,
    finalized_features,
    pending_offset_epochs,
    seeded_job,
    start_copier,
    stop_copier,
)

REASSIGN_PARTITIONS = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
RECORDS = 6000
BOUNCED = 2  # the broker leading both topics (node 1 is the gateway's bootstrap)



@pytest.fixture(scope="module")
def kafka3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """Three Kafka 4.4 nodes: replication factor 3 and min ISR 2, so one may be bounced."""
    k = start_apache_kafka("kafka-4.4", tmp_path_factory.mktemp("kafka-4.4x3"), nodes=3)
    try:
        yield k
    finally:
        k.stop()


@pytest.fixture(scope="module")
def cluster3(kafka3: ApacheKafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundCluster]:
    with copier_cluster(kafka3, tmp_path_factory.mktemp("copier-cluster")) as c:
        yield c



def test_the_gateway_finalizes_the_transaction_version_kafka_4_4_finalizes(
    kafka3: ApacheKafka, cluster3: BackgroundCluster
) -> None:
    """What makes the Java client choose its transaction version: the finalized features."""
    assert finalized_features(cluster3, (kafka3.host, kafka3.port)).get("transaction.version") == 2
    assert finalized_features(cluster3, cluster3.gateway.bootstrap_address) == {
        "transaction.version": 2,
        "share.version": 2,  # ours on every upstream (dead-letter queues)
        "streams.version": 1,  # ours on every upstream
    }



def test_copier_copies_exactly_once_through_a_shard_kill_and_a_broker_bounce(
    kafka3: ApacheKafka, cluster3: BackgroundCluster, tmp_path: Path
) -> None:
    job = seeded_job(kafka3, cluster3, RECORDS, [BOUNCED, 3, 1])
    concurrent = CommittedReader(job.gateway, job.sink, RECORDS)
    concurrent.start()
    copier = start_copier(job, tmp_path / "copier.log")
    copy = Copy(copier, tmp_path / "copier.log", cluster3, kafka3)
    progress = copy.progress
    try:
        copy.wait_for_progress(RECORDS // 5, 120, "20% copied")
        control = cluster3.cluster.control  # type: ignore[union-attr]
        assert control is not None
        leader = control.placement[partition_for(job.group, STATE_PARTITIONS)].leader
        os.killpg(control.processes[leader].process.pid, signal.SIGKILL)
        at_kill = progress.processed

        copy.wait_for_progress(at_kill + 2 * TRANSACTION_SIZE, 120, "progress after the shard kill")
        kafka3.stop_node(BOUNCED)
        at_stop = progress.processed
        copy.wait_for_progress(at_stop + 2 * TRANSACTION_SIZE, 120, "progress with a broker down")
        kafka3.start_node(BOUNCED)

        copy.wait_for_progress(RECORDS, 180, "all copied")
        assert copier.wait(30) == 0, copy.report()
        progress.join(10)
        assert progress.processed == RECORDS, progress.last
        concurrent.join(90)
    finally:
        stop_copier(copier)
        concurrent.stop.set()
    assert_copied_exactly_once(job, concurrent)
    # Transaction version 2: TxnOffsetCommit v5 (epoch bump) and a new epoch per transaction.
    epochs = pending_offset_epochs(kafka3, cluster3, job.group)
    assert epochs and all(bump for _, bump in epochs), epochs[:5]
    assert len({e for e, _ in epochs}) >= RECORDS // TRANSACTION_SIZE, sorted({e for e, _ in epochs})


def move_leadership(kafka: ApacheKafka, topic: str, partition: int, workdir: Path) -> None:
    """Make another replica of ``partition`` its leader while every broker stays up, as an
    operator does (``kafka-reassign-partitions`` to put it first, then a preferred-leader
    election)."""
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    state = admin.list_topics(topic, timeout=10).topics[topic].partitions[partition]
    wanted = [r for r in state.replicas if r != state.leader] + [state.leader]
    plan = workdir / "reassignment.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": partition, "replicas": wanted}]}
        )
    )
    moved = run_tool(
        REASSIGN_PARTITIONS,
        *("--bootstrap-server", kafka.bootstrap, "--reassignment-json-file", str(plan), "--execute"),
    )
    assert moved.returncode == 0, moved.stdout + moved.stderr
    deadline = time.monotonic() + 60
    while True:
        state = admin.list_topics(topic, timeout=10).topics[topic].partitions[partition]
        if list(state.replicas) == wanted:
            if state.leader == wanted[0]:
                return
            with contextlib.suppress(Exception):  # ELECTION_NOT_NEEDED and the like: look again
                admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, partition)]).result(15)
        assert time.monotonic() < deadline, (
            f"{topic}-{partition}: replicas {state.replicas}, leader {state.leader}"
        )
        time.sleep(0.5)


def test_a_transactional_write_follows_a_leader_that_moved_while_the_old_one_stays_up(
    kafka3: ApacheKafka, tmp_path: Path
) -> None:
    """The shard writes a client's transactional offsets itself (``append_transactional``, a
    raw Produce on the log writer's connections). When the partition's leadership moves and
    the old leader stays up, that broker answers NOT_LEADER_OR_FOLLOWER; the write fails (its
    callers get NOT_COORDINATOR and retry) and the next one must reach the new leader. It went
    on asking the old one until the writer's metadata aged out, minutes later: in a controlled
    shutdown that stalled a copier's transactions until the broker closed its connections, and
    after a leader election it would have gone on for minutes."""
    kafka3.wait_ready()  # the broker the copier test bounced is back
    suffix = uuid.uuid4().hex[:6]
    topic, transactional_id = f"txn-leader-{suffix}", f"txn-leader-{suffix}"
    admin = AdminClient({"bootstrap.servers": kafka3.bootstrap})
    new_topic = NewTopic(topic, 1, replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"})
    admin.create_topics([new_topic])[topic].result(30)

    async def scenario() -> None:
        writer = StateLogWriter(kafka3.bootstrap, topic)
        producer = AIOKafkaProducer(bootstrap_servers=kafka3.bootstrap, transactional_id=transactional_id)
        await writer.start()
        await producer.start()
        try:
            # the client's transaction, with the partition in it (sequence 0 is the client's)
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"the client's", partition=0)
            txn_manager = producer._txn_manager  # noqa: SLF001 - its producer id and epoch
            assert txn_manager is not None

            def write(sequence: int) -> Awaitable[list[tuple[int, int]]]:
                txn = TransactionalWrite(
                    transactional_id, txn_manager.producer_id, txn_manager.producer_epoch, sequence
                )
                return append_transactional(writer, 0, [(b"k", b"offsets")], None, txn)

            assert await write(1) == [(1, 1)]
            await asyncio.to_thread(move_leadership, kafka3, topic, 0, tmp_path)
            with pytest.raises(Errors.NotLeaderForPartitionError):
                await write(2)  # the old leader, still up, refuses it
            deadline = time.monotonic() + 10
            while True:  # as the client's retries of TxnOffsetCommit come
                await asyncio.sleep(0.5)
                try:
                    assert await write(2) == [(2, 2)]
                    break
                except Errors.NotLeaderForPartitionError:
                    assert time.monotonic() < deadline, "transactional writes still go to the old leader"
            await producer.commit_transaction()
        finally:
            await producer.stop()
            await writer.stop()

    asyncio.run(scenario())
