"""The pieces of Kafka's exactly-once check (kafkatest ``tests/core/transactions_test.py``) that
the copier tests share: a groupcoord cluster in front of an upstream, a seeded input topic, Kafka
4.4's ``TransactionalMessageCopier`` with its progress, read_committed readers of the output, and
the state partition's transactional offset records read back from the upstream."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from real_parts import start_apache_kafka

from groupcoord.common.kafka_wire.exchange import exchange
from groupcoord.common.partitioning import partition_for
from groupcoord.coordinator.core.contract import deserialize_record
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.local_cluster import ClusterOptions
from groupcoord.records.v1 import offsets_pb2 as rpb
from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

from .conftest import TRANSACTIONAL_MESSAGE_COPIER, VERIFIABLE_PRODUCER, run_tool, start_tool

Upstream = ApacheKafka | EmbeddedBroker


@contextlib.contextmanager
def upstream_named(name: str, workdir: Path) -> Iterator[Upstream]:
    """A fresh upstream of its own: tansu (``"tansu"``) or Apache Kafka (``"kafka-3.9"``...)."""
    if name == "tansu":
        with EmbeddedBroker(log_path=workdir / "tansu.log") as broker:
            yield broker
        return
    kafka = start_apache_kafka(name, workdir)
    try:
        yield kafka
    finally:
        kafka.stop()

TRANSACTION_SIZE = 150
STATE_PARTITIONS = 4


@contextlib.contextmanager
def copier_cluster(upstream: Upstream, log_dir: Path) -> Iterator[BackgroundCluster]:
    """groupcoord in front of ``upstream``: two shard processes over four state partitions."""
    log_dir.mkdir(parents=True, exist_ok=True)
    options = ClusterOptions(
        port=0,
        partitions=STATE_PARTITIONS,
        shards=2,
        metrics=False,
        state_topic=f"__copier_{uuid.uuid4().hex[:6]}",
        log_dir=log_dir,
    )
    with BackgroundCluster((upstream.host, upstream.port), options) as c:
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
        self, copier: subprocess.Popen[str], log: Path, cluster: BackgroundCluster, kafka: Upstream
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
        brokers = [n.log for n in getattr(self.kafka, "members", ())]  # tansu: its log is the fixture's
        return "\n".join(
            [f"copier exit {self.copier.poll()}, last status {self.progress.last}", "copier:", tail(self.log)]
            + [f"{p.name}:\n{tail(p)}" for p in shards]
            + [f"{p}:\n{tail(p, 15)}" for p in brokers]
        )


def pending_offset_epochs(kafka: Upstream, cluster: BackgroundCluster, group: str) -> list[tuple[int, bool]]:
    """(producer epoch, epoch bump) of every transactional offset record of ``group`` in its
    state partition, read from the upstream directly (uncommitted too)."""
    topic, partition = cluster.options.state_topic, partition_for(group, cluster.options.partitions)
    reader = Consumer(
        {"bootstrap.servers": kafka.bootstrap, "group.id": f"state-{uuid.uuid4().hex[:6]}", "isolation.level": "read_uncommitted"}
    )
    try:
        end = reader.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
        reader.assign([TopicPartition(topic, partition, 0)])
        found: list[tuple[int, bool]] = []
        position = 0
        while position < end:
            for m in reader.consume(500, 1.0):
                if m.error() is not None:
                    continue
                position = m.offset() + 1
                record = deserialize_record(m.key(), m.value())
                if isinstance(record.key, rpb.PendingTxnOffsetKey) and record.key.group_id == group:
                    assert record.value is not None
                    found.append((record.value.producer_epoch, record.value.epoch_bump))
        return found
    finally:
        reader.close()


@dataclass
class CopyJob:
    """A seeded input topic, an empty output topic and the copier's group, named for one test."""

    gateway: str
    source: str
    sink: str
    group: str
    transactional_id: str
    records: int


def seeded_job(kafka: Upstream, cluster: BackgroundCluster, records: int, replicas: list[int] | None) -> CopyJob:
    """Both topics with one partition on ``replicas`` (min ISR 2; None: one replica, the
    upstream's default configs), ``records`` values 0.. in the input, every one acknowledged."""
    suffix = uuid.uuid4().hex[:6]
    job = CopyJob(
        cluster.bootstrap,
        f"copier-in-{suffix}",
        f"copier-out-{suffix}",
        f"copier-g-{suffix}",
        f"copier-{suffix}",
        records,
    )
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    topics = [
        NewTopic(t, 1, 1)
        if replicas is None
        else NewTopic(t, 1, replica_assignment=[replicas], config={"min.insync.replicas": "2"})
        for t in (job.source, job.sink)
    ]
    for fut in admin.create_topics(topics).values():
        fut.result(30)
    # tansu 0.6.0 answers ListOffsets "latest" with its last batch's base offset + 1 (measured),
    # and the copier stops when its position passes that end: the last value goes in a batch of
    # its own, so that answer is the true end everywhere.
    seeded = run_tool(
        VERIFIABLE_PRODUCER,
        *("--topic", job.source, "--max-messages", str(records - 1), "--bootstrap-server", job.gateway),
    )
    assert seeded.returncode == 0, seeded.stderr
    acked = [json.loads(line) for line in seeded.stdout.splitlines() if '"producer_send_success"' in line]
    assert sorted(int(a["value"]) for a in acked) == list(range(records - 1))
    last = Producer({"bootstrap.servers": job.gateway, "enable.idempotence": True})
    last.produce(job.source, str(records - 1).encode(), partition=0)
    assert last.flush(30) == 0
    return job


def start_copier(job: CopyJob, log: Path) -> subprocess.Popen[str]:
    return start_tool(
        TRANSACTIONAL_MESSAGE_COPIER,
        *("--input-topic", job.source, "--input-partition", "0", "--output-topic", job.sink),
        *(
            "--broker-list",
            job.gateway,
            "--transactional-id",
            job.transactional_id,
            "--consumer-group",
            job.group,
        ),
        *("--transaction-size", str(TRANSACTION_SIZE), "--transaction-timeout", "40000"),
        "--group-mode",
        "--use-group-metadata",
        log=log,
    )


def assert_copied_exactly_once(job: CopyJob, *readers: CommittedReader, output: list[str] | None = None) -> None:
    """What transactions_test checks: every input value once and in order in the committed
    output, for the readers that read during the copy and for one that reads after it (or
    ``output``, where the upstream's read_committed fetch does not hide aborted records: see
    :mod:`groupcoord_testing.committed_output`); and the group's committed offset is the end of
    the input."""
    if output is None:
        after = CommittedReader(job.gateway, job.sink, job.records)
        after.start()
        after.join(90)
        after.stop.set()
        output = after.values
    input_values = [str(i) for i in range(job.records)]
    for values in [output, *(r.values for r in readers)]:
        assert len(values) == len(set(values)), "duplicates in the committed output"
        assert values == input_values, (
            f"{len(values)} of {job.records} values, in order: {values == sorted(values, key=int)}"
        )
    reader = Consumer({"bootstrap.servers": job.gateway, "group.id": job.group})
    try:
        [tp] = reader.committed([TopicPartition(job.source, 0)], timeout=30)
        assert tp.offset == job.records
    finally:
        reader.close()


def stop_copier(copier: subprocess.Popen[str]) -> None:
    if copier.poll() is None:
        os.killpg(copier.pid, signal.SIGKILL)
        copier.wait(10)

