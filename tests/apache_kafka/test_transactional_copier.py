"""Kafka's own exactly-once check (kafkatest ``tests/core/transactions_test.py``) through the
gateway: Kafka 4.4's ``TransactionalMessageCopier`` copies a seeded input topic to an output topic
in transactions while the shard leading the copier's group is killed with SIGKILL and an upstream
broker is bounced; read_committed readers of the output then see every input value exactly once,
in order (one partition each way, as transactions_test's ``check_order``). Kafka 4.4 really drops
aborted records from read_committed fetches, so a transaction whose offsets and output disagree
would show as a duplicate or a gap.

Transaction version: Kafka 4.4 finalizes ``transaction.version=2`` (KIP-890 part 2: the Java
client would send TxnOffsetCommit v5 without AddOffsetsToTxn and expect the group coordinator to
add its own partition to the transaction). The gateway answers ApiVersions itself and finalizes
no such feature, so the Java client stays on transaction version 1 (AddOffsetsToTxn, then
TxnOffsetCommit up to v4, EndTxn up to v4), which Kafka 4.4's transaction coordinator still
serves: the copier finishing here is the proof the fallback is clean.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from real_parts import start_apache_kafka

from groupcoord.common.kafka_wire.exchange import exchange
from groupcoord.common.partitioning import partition_for
from groupcoord.local_cluster import ClusterOptions
from groupcoord.testing import BackgroundCluster
from groupcoord.testing.apache_kafka import ApacheKafka

from .conftest import TRANSACTIONAL_MESSAGE_COPIER, VERIFIABLE_PRODUCER, run_tool, start_tool

RECORDS = 6000
TRANSACTION_SIZE = 150
BOUNCED = 2  # the broker leading both topics (node 1 is the gateway's bootstrap)
STATE_PARTITIONS = 4


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
    """groupcoord in front of ``kafka3``: two shard processes over four state partitions."""
    options = ClusterOptions(
        port=0,
        partitions=STATE_PARTITIONS,
        shards=2,
        metrics=False,
        state_topic=f"__copier_{uuid.uuid4().hex[:6]}",
        log_dir=tmp_path_factory.mktemp("copier-cluster"),
    )
    with BackgroundCluster((kafka3.host, kafka3.port), options) as c:
        yield c


def finalized_features(cluster: BackgroundCluster, address: tuple[str, int]) -> dict[str, int]:
    body = cluster.run(
        exchange(
            address, ApiVersionsRequest(client_software_name="tv-test", client_software_version="1"), "tv", 15
        )
    )
    return {f.name: int(f.max_version_level) for f in body.finalized_features or ()}


class Progress(threading.Thread):
    """Reads a copier's JSON status lines (stdout) and keeps the last one."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        super().__init__(daemon=True)
        self.process = process
        self.last: dict[str, object] = {}

    def run(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.last = json.loads(line)

    @property
    def processed(self) -> int:
        return int(self.last.get("totalProcessed", 0))  # type: ignore[arg-type]


class CommittedReader(threading.Thread):
    """A read_committed consumer of ``topic`` through the gateway, in a group of its own (the
    concurrent consumer of transactions_test), until it holds ``count`` values or is stopped."""

    def __init__(self, bootstrap: str, topic: str, count: int, **config: object) -> None:
        super().__init__(daemon=True)
        self.group = config_group = f"reader-{uuid.uuid4().hex[:6]}"
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": config_group,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                **config,
            }
        )
        self.topic, self.count = topic, count
        self.values: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        self.consumer.subscribe([self.topic])
        try:
            while not self.stop.is_set() and len(self.values) < self.count:
                for m in self.consumer.consume(500, 0.5):
                    if m.error() is None:
                        self.values.append(m.value().decode())
        finally:
            self.consumer.close()


def tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


class Copy:
    """The copier's run as a test reads it: its progress, and on a stall what it, the shards
    and the brokers last said (a stall is seen once in many runs, and only a CI log keeps it)."""

    def __init__(
        self, copier: subprocess.Popen[str], log: Path, cluster: BackgroundCluster, kafka: ApacheKafka
    ):
        self.copier, self.log, self.cluster, self.kafka = copier, log, cluster, kafka
        self.progress = Progress(copier)
        self.progress.start()

    def wait_for_progress(self, at_least: int, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while self.progress.processed < at_least:
            if self.copier.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{what}: {self.report()}")
            time.sleep(0.2)

    def report(self) -> str:
        log_dir = self.cluster.options.log_dir
        shards = sorted(Path(log_dir).glob("shard-*.log")) if log_dir is not None else []
        brokers = [n.log for n in self.kafka.members]
        return "\n".join(
            [f"copier exit {self.copier.poll()}, last status {self.progress.last}", "copier:", tail(self.log)]
            + [f"{p.name}:\n{tail(p)}" for p in shards]
            + [f"{p}:\n{tail(p, 15)}" for p in brokers]
        )


def test_kafka_4_4_finalizes_transaction_version_2_and_the_gateway_does_not(
    kafka3: ApacheKafka, cluster3: BackgroundCluster
) -> None:
    """What makes the Java client choose its transaction version: Kafka's finalized features."""
    assert finalized_features(cluster3, (kafka3.host, kafka3.port)).get("transaction.version") == 2
    assert "transaction.version" not in finalized_features(cluster3, cluster3.gateway.bootstrap_address)


def test_copier_copies_exactly_once_through_a_shard_kill_and_a_broker_bounce(
    kafka3: ApacheKafka, cluster3: BackgroundCluster, tmp_path: Path
) -> None:
    gateway = cluster3.bootstrap
    suffix = uuid.uuid4().hex[:6]
    source, sink, group = f"copier-in-{suffix}", f"copier-out-{suffix}", f"copier-g-{suffix}"
    admin = AdminClient({"bootstrap.servers": kafka3.bootstrap})
    topics = [
        NewTopic(t, 1, replica_assignment=[[BOUNCED, 3, 1]], config={"min.insync.replicas": "2"})
        for t in (source, sink)
    ]
    for fut in admin.create_topics(topics).values():
        fut.result(30)

    seeded = run_tool(
        VERIFIABLE_PRODUCER, "--topic", source, "--max-messages", str(RECORDS), "--bootstrap-server", gateway
    )
    assert seeded.returncode == 0, seeded.stderr
    acked = [json.loads(line) for line in seeded.stdout.splitlines() if '"producer_send_success"' in line]
    input_values = [str(i) for i in range(RECORDS)]
    assert sorted(int(a["value"]) for a in acked) == list(range(RECORDS))

    concurrent = CommittedReader(gateway, sink, RECORDS)
    concurrent.start()
    copier = start_tool(
        TRANSACTIONAL_MESSAGE_COPIER,
        *("--input-topic", source, "--input-partition", "0", "--output-topic", sink),
        *("--broker-list", gateway, "--transactional-id", f"copier-{suffix}", "--consumer-group", group),
        *("--transaction-size", str(TRANSACTION_SIZE), "--transaction-timeout", "40000"),
        "--group-mode",
        "--use-group-metadata",
        log=tmp_path / "copier.log",
    )
    copy = Copy(copier, tmp_path / "copier.log", cluster3, kafka3)
    progress = copy.progress
    try:
        copy.wait_for_progress(RECORDS // 5, 120, "20% copied")
        control = cluster3.cluster.control  # type: ignore[union-attr]
        assert control is not None
        leader = control.placement[partition_for(group, STATE_PARTITIONS)].leader
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
        if copier.poll() is None:
            os.killpg(copier.pid, signal.SIGKILL)
            copier.wait(10)
        concurrent.stop.set()

    after = CommittedReader(gateway, sink, RECORDS)
    after.start()
    after.join(90)
    after.stop.set()
    for values in (after.values, concurrent.values):
        assert len(values) == len(set(values)), "duplicates in the committed output"
        assert values == input_values, (
            f"{len(values)} of {RECORDS} values, in order: {values == sorted(values, key=int)}"
        )
    # and the group's committed offset is the end of the input
    reader = Consumer({"bootstrap.servers": gateway, "group.id": group})
    try:
        [tp] = reader.committed([TopicPartition(source, 0)], timeout=30)
        assert tp.offset == RECORDS
    finally:
        reader.close()
