"""Issue 23's hostile-client suite: every attack runs beside a healthy KIP-848 group and a
healthy classic group, which must see no error and lose no commit.

The bed is what a user runs: ``groupcoord up`` as a process of its own (two shard processes
behind mutual TLS) in front of the session's tansu broker, with a SASL/PLAIN listener and Kafka
ACLs. ``alice`` owns the healthy groups (``healthy-*``); ``mallory`` is an ordinary tenant with
rights on ``mallory-*`` only. The healthy groups consume a topic a producer keeps busy and
commit synchronously after every batch, recording every error any client call reports.

After each attack the row ``attack -> what happened -> healthy groups' errors -> RSS of the
gateway process and the shard processes (before -> after)`` joins the table printed at the end
of the run (``report.py``). Attacks whose point is upstream rights (a client in credentials
mode altering another topic's config, the coordinator's principal never lent) need an upstream
with ACLs: ``tests/apache_kafka/test_confused_deputy.py`` runs them against Kafka 4.4's
StandardAuthorizer.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from e2e.consumers import ConfluentConsumer
from e2e.test_internal_topics import state_keys
from gateway.transport.raw_wire import read_correlation_ids, read_frame
from kio.schema.delete_records.v2 import request as delete_records
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4 import request as find_coordinator
from kio.schema.join_group.v6 import request as join_group
from kio.schema.offset_commit.v8 import request as offset_commit
from kio.schema.offset_fetch.v8 import request as offset_fetch
from kio.schema.txn_offset_commit.v2 import request as txn_offset_commit
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from groupcoord.common.internal_tls import GATEWAY, InternalTls
from groupcoord.common.kafka_security import KafkaSecurity
from groupcoord.common.kafka_wire.exchange import exchange
from groupcoord.common.kafka_wire.framing import frame_bytes
from groupcoord.common.partitioning import partition_for
from groupcoord.embedded_broker import EmbeddedBroker, free_port
from groupcoord.observability.metric_samples import DEFAULT_TOPIC as METRICS_TOPIC
from groupcoord.rpc.v1 import coordinator_pb2 as pb
from groupcoord.rpc.v1 import coordinator_pb2_grpc as pb_grpc
from groupcoord.rpc.v1 import offsets_pb2
from groupcoord.rpc.v1 import shard_control_pb2 as sc
from groupcoord.rpc.v1 import shard_control_pb2_grpc as sc_grpc

from .report import ROWS, Row

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]

PARTITIONS = 4  # state-topic partitions
HEALTHY_PARTITIONS = 4  # of the topic the healthy groups consume
PER_IP_CAP = 200  # --max-connections-per-ip: the attacker's 1,000 connections meet it
ATTACKER_IP = "127.0.0.2"  # the attacker's own source address, so the cap is the attacker's alone
USERS = {"alice": "alice-secret", "mallory": "mallory-secret"}
TEN_S = i32Timedelta.parse(datetime.timedelta(seconds=10))


def sasl(user: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def acl(principal: str, operation: str, resource_type: str, prefix: str) -> dict[str, str]:
    return {
        "principal": f"User:{principal}",
        "host": "*",
        "operation": operation,
        "permissionType": "ALLOW",
        "resourceType": resource_type,
        "patternType": "PREFIXED",
        "resourceName": prefix,
    }


def rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class HealthyConsumer(ConfluentConsumer):
    """A confluent-kafka consumer that records every error a client call reports: consume
    errors, commit errors per partition, and the client's own error callback."""

    def open(self) -> None:
        self.config["error_cb"] = lambda err: self.history.errors.append(f"error_cb: {err}")
        super().open()

    def poll_once(self) -> None:
        msgs = self.consumer.consume(500, timeout=0.2)
        batch: dict[int, int] = {}
        for m in msgs:
            if m.error() is not None:
                self.history.errors.append(f"consume: {m.error()}")
                continue
            self.history.records.add((m.partition(), m.offset()))
            batch[m.partition()] = m.offset() + 1
        if batch:
            tps = [TopicPartition(self.topic, p, o) for p, o in batch.items()]
            result = self.consumer.commit(offsets=tps, asynchronous=False)
            self.history.errors.extend(f"commit {tp.partition}: {tp.error}" for tp in result if tp.error)
            acked = {tp.partition: tp.offset for tp in result if tp.error is None}
            if acked:
                self.history.commits.append((time.monotonic(), acked))


class KeepProducing(threading.Thread):
    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **sasl("alice")})
        self.topic, self.stop = topic, threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        i = 0

        def delivered(err: KafkaError | None, _msg: object) -> None:
            if err is not None:
                self.errors.append(f"produce: {err}")

        while not self.stop.is_set():
            self.producer.produce(
                self.topic, str(i).encode(), partition=i % HEALTHY_PARTITIONS, on_delivery=delivered
            )
            self.producer.poll(0)
            i += 1
            if i % 20 == 0:
                time.sleep(0.05)
        self.producer.flush(30)


@dataclass
class Bed:
    """The running ``groupcoord up``, its state file and the healthy groups beside the attacks."""

    process: subprocess.Popen[str]
    state_file: Path
    bootstrap: str
    broker: EmbeddedBroker
    state_topic: str
    healthy_topic: str
    mallory_topic: str
    consumers: list[HealthyConsumer]
    producer: KeepProducing

    @property
    def state(self) -> dict[str, Any]:
        return json.loads(self.state_file.read_text())

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.bootstrap.rsplit(":", 1)
        return host, int(port)

    def shard_pids(self) -> list[int]:
        pids = [s["pid"] for s in self.state["shards"].values() if s["pid"]]
        return [p for s in pids for p in (s, *descendants(s))]

    def rss(self) -> tuple[float, float]:
        return rss_mib([self.process.pid]), rss_mib(self.shard_pids())

    def errors(self) -> list[str]:
        return [e for c in self.consumers for e in c.history.errors] + self.producer.errors

    def gateway_certificate(self) -> InternalTls:
        return InternalTls.from_dir(Path(self.state["internal_tls_dir"]).parent / GATEWAY)

    def shard_address(self, shard: str) -> str:
        s = self.state["shards"][shard]
        return f"{s['host']}:{s['grpc_port']}"

    def ask(self, body: Any, user: str = "mallory", timeout_s: float = 30.0) -> Any:
        """One raw request to the gateway on a SASL/PLAIN connection of ``user``'s own."""
        security = KafkaSecurity(
            "SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_username=user, sasl_password=USERS[user]
        )
        return asyncio.run(exchange(self.address, body, "hostile", timeout_s, security))

    def skipped_records(self) -> float:
        total = 0.0
        for s in self.state["shards"].values():
            if not s["metrics_port"]:
                continue
            text = (
                urllib.request.urlopen(f"http://{s['host']}:{s['metrics_port']}/metrics", timeout=10)
                .read()
                .decode()
            )
            total += sum(
                float(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith("groupcoord_state_records_skipped_total")
            )
        return total

    def commits_since(self, t: float) -> bool:
        return all(any(at > t for at, _ in c.history.commits) for c in self.consumers)


@pytest.fixture(scope="module")
def bed(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    home = tmp_path_factory.mktemp("hostile")
    (home / "users.json").write_text(json.dumps(USERS))
    (home / "acls.json").write_text(
        json.dumps(
            {
                "acls": [
                    acl(user, "READ", kind, f"{prefix}-")
                    for user, prefix in (("alice", "healthy"), ("mallory", "mallory"))
                    for kind in ("GROUP", "TOPIC")
                ]
            }
        )
    )
    port = free_port()
    state_topic = f"__hostile_{uuid.uuid4().hex[:6]}"
    cmd = [
        sys.executable, "-m", "groupcoord.cli", "--log-level", "WARNING", "up",
        "--kafka", f"{broker.host}:{broker.port}", "--port", str(port), "--shards", "2",
        "--partitions", str(PARTITIONS), "--state-topic", state_topic, "--log-dir", str(home / "logs"),
        "--listener-sasl", "credentials", "--listener-sasl-credentials", str(home / "users.json"),
        "--listener-sasl-mechanisms", "PLAIN", "--acl-file", str(home / "acls.json"),
        "--max-connections-per-ip", str(PER_IP_CAP), "--metric-samples-interval", "1",
    ]  # fmt: skip
    env = {**os.environ, "GROUPCOORD_STATE_DIR": str(home / "state")}
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("groupcoord is up"):
            break
    else:
        pytest.fail(f"groupcoord up ended with {process.wait()}")
    threading.Thread(target=process.stdout.read, daemon=True).start()  # never block its stdout
    bootstrap = f"127.0.0.1:{port}"
    healthy_topic, mallory_topic = f"healthy-{uuid.uuid4().hex[:6]}", f"mallory-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, **sasl("alice")})
    for fut in admin.create_topics(
        [NewTopic(healthy_topic, HEALTHY_PARTITIONS, 1), NewTopic(mallory_topic, 4, 1)]
    ).values():
        fut.result(30)
    tag = uuid.uuid4().hex[:6]
    consumers = [
        HealthyConsumer(bootstrap, healthy_topic, f"healthy-k848-{tag}", "kip848", group_protocol="consumer", **sasl("alice")),
        HealthyConsumer(
            bootstrap, healthy_topic, f"healthy-classic-{tag}", "classic",
            partition_assignment_strategy="cooperative-sticky", **sasl("alice"),
        ),
    ]  # fmt: skip
    for c in consumers:  # confluent-kafka's names have dots; ConsumerThread passes **config through
        c.config = {k.replace("_", "."): v for k, v in c.config.items()}
    producer = KeepProducing(bootstrap, healthy_topic)
    producer.start()
    for c in consumers:
        c.start()
    state_file = home / "state" / f"up-{port}.json"
    the_bed = Bed(
        process, state_file, bootstrap, broker, state_topic, healthy_topic, mallory_topic, consumers, producer
    )
    wait_until(lambda: the_bed.commits_since(0), "both healthy groups commit", 90)
    try:
        yield the_bed
        # every acknowledged commit is what a fresh client reads back
        producer.stop.set()
        producer.join(30)
        for c in consumers:
            c.stop()
        for c in consumers:
            acked: dict[int, int] = {}
            for _, batch in c.history.commits:
                for p, o in batch.items():
                    acked[p] = max(acked.get(p, -1), o)
            fresh = Consumer({"bootstrap.servers": bootstrap, "group.id": c.group, **sasl("alice")})
            try:
                got = fresh.committed([TopicPartition(healthy_topic, p) for p in acked], timeout=30)
            finally:
                fresh.close()
            assert {tp.partition: tp.offset for tp in got} == acked, c.name
        assert the_bed.errors() == []
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def wait_until(check: Any, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for: {what}"
        time.sleep(0.2)


class Attack:
    """``with Attack(bed, name) as row: ...`` runs the attack, then checks the healthy groups
    saw no error and still commit, and adds the row (``row.outcome`` says what happened)."""

    def __init__(self, bed: Bed, name: str) -> None:
        self.bed, self.name, self.outcome = bed, name, ""

    def __enter__(self) -> Attack:
        self.errors_before = len(self.bed.errors())
        self.rss_before = self.bed.rss()
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is not None:
            return
        t = time.monotonic()
        wait_until(lambda: self.bed.commits_since(t), f"healthy groups commit after {self.name}", 60)
        errors = self.bed.errors()[self.errors_before :]
        after = self.bed.rss()
        ROWS.append(
            Row(
                self.name,
                self.outcome,
                len(errors),
                (self.rss_before[0], after[0]),
                (self.rss_before[1], after[1]),
            )
        )
        assert errors == [], f"{self.name}: the healthy groups saw {errors}"


# -- the coordinator's own topics -------------------------------------------------------------


def test_produce_to_the_internal_topics_is_refused(bed: Bed) -> None:
    with Attack(bed, "produce 20 records to each internal topic") as attack:
        poison = f"poison-{uuid.uuid4().hex}".encode()
        outcomes: list[int | None] = []
        producer = Producer(
            {
                "bootstrap.servers": bed.bootstrap,
                "linger.ms": 20,
                "message.send.max.retries": 0,
                **sasl("mallory"),
            }
        )
        for topic, partitions in ((bed.state_topic, PARTITIONS), (METRICS_TOPIC, 1)):
            for i in range(20):
                producer.produce(
                    topic, key=poison, value=b"x", partition=i % partitions,
                    on_delivery=lambda err, _m: outcomes.append(None if err is None else err.code()),
                )  # fmt: skip
        assert producer.flush(30) == 0
        assert outcomes == [KafkaError.TOPIC_EXCEPTION] * 40  # INVALID_TOPIC_EXCEPTION, as Kafka
        assert poison not in state_keys(bed.broker, bed.state_topic)
        attack.outcome = "40 of 40 refused INVALID_TOPIC_EXCEPTION, none stored"


def test_delete_alter_and_delete_records_on_the_internal_topics_are_refused(bed: Bed) -> None:
    with Attack(bed, "delete / alter configs / delete records of internal topics") as attack:
        admin = AdminClient({"bootstrap.servers": bed.bootstrap, **sasl("mallory")})
        codes = []
        for topic in (bed.state_topic, METRICS_TOPIC):
            with pytest.raises(KafkaException) as deleted:
                admin.delete_topics([topic], operation_timeout=10)[topic].result(15)
            codes.append(deleted.value.args[0].code())
            resource = ConfigResource(
                ConfigResource.Type.TOPIC,
                topic,
                incremental_configs=[
                    ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)
                ],
            )
            with pytest.raises(KafkaException) as altered:
                admin.incremental_alter_configs([resource])[resource].result(15)
            codes.append(altered.value.args[0].code())
        assert codes == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 4
        answer = bed.ask(
            delete_records.DeleteRecordsRequest(
                topics=tuple(
                    delete_records.DeleteRecordsTopic(
                        name=topic,
                        partitions=(
                            delete_records.DeleteRecordsPartition(partition_index=i32(0), offset=i64(-1)),
                        ),
                    )
                    for topic in (bed.state_topic, METRICS_TOPIC)
                ),
                timeout=TEN_S,
            )
        )
        assert [p.error_code for t in answer.topics for p in t.partitions] == [
            ErrorCode.invalid_topic_exception
        ] * 2
        # still there, as they were (asked of the broker itself)
        direct = AdminClient({"bootstrap.servers": f"{bed.broker.host}:{bed.broker.port}"})
        topics = direct.list_topics(timeout=10).topics
        assert len(topics[bed.state_topic].partitions) == PARTITIONS and METRICS_TOPIC in topics
        attack.outcome = (
            "DeleteTopics/IncrementalAlterConfigs TOPIC_AUTHORIZATION_FAILED, DeleteRecords INVALID_TOPIC"
        )


def test_a_poisoned_state_log_is_skipped_and_the_partition_keeps_serving(bed: Bed) -> None:
    with Attack(bed, "200 random records written straight to the state topic") as attack:
        group = f"mallory-poisoned-{uuid.uuid4().hex[:6]}"
        partition = partition_for(group, PARTITIONS)
        before = bed.skipped_records()
        rng = random.Random(23)
        direct = Producer({"bootstrap.servers": f"{bed.broker.host}:{bed.broker.port}"})
        for _ in range(200):
            direct.produce(
                bed.state_topic, key=rng.randbytes(rng.randint(0, 24)), value=rng.randbytes(rng.randint(0, 64)),
                partition=partition,
            )  # fmt: skip
        assert direct.flush(30) == 0
        committer = Consumer({"bootstrap.servers": bed.bootstrap, "group.id": group, **sasl("mallory")})
        try:
            # the leader reads the garbage back behind its next write and reloads; a commit may
            # meet the reload (retriable) as an application's would
            deadline = time.monotonic() + 60
            while True:
                try:
                    committer.commit(offsets=[TopicPartition(bed.mallory_topic, 0, 7)], asynchronous=False)
                    break
                except KafkaException as exc:
                    assert exc.args[0].retriable() and time.monotonic() < deadline, exc
                    time.sleep(0.5)
            wait_until(
                lambda: bed.skipped_records() >= before + 1, "the skip counted in the shard's metrics", 60
            )
            got = committer.committed([TopicPartition(bed.mallory_topic, 0)], timeout=30)
            assert got[0].offset == 7
        finally:
            committer.close()
        attack.outcome = (
            f"partition {partition} reloaded and serves; {bed.skipped_records() - before:.0f} skips counted"
        )


# -- the shards' gRPC ports -------------------------------------------------------------------


def _refused(call: Any) -> grpc.StatusCode:
    async def run() -> grpc.StatusCode:
        try:
            await call()
        except grpc.aio.AioRpcError as exc:
            return exc.code()
        raise AssertionError("a shard served a caller it must refuse")

    return asyncio.run(run())


def test_a_direct_grpc_call_without_the_gateways_certificate_is_refused(bed: Bed) -> None:
    with Attack(bed, "direct gRPC to a shard without a certificate") as attack:
        envelope = pb.CoordinatorEnvelope(
            correlation_id=1,
            partition=0,
            principal="User:alice",
            offset_commit=offsets_pb2.OffsetCommitRequest(
                api_version=8, group_id="healthy-x", generation_id_or_member_epoch=-1
            ),
        )
        codes = []
        for shard in bed.state["shards"]:

            async def commit(address: str = bed.shard_address(shard)) -> None:
                async with grpc.aio.insecure_channel(address) as channel:

                    async def one() -> Iterator[pb.CoordinatorBatch]:
                        yield pb.CoordinatorBatch(envelopes=[envelope])

                    async for _ in pb_grpc.CoordinatorStub(channel).Batches(one(), timeout=5):
                        return

            codes.append(_refused(commit))
        assert codes == [grpc.StatusCode.UNAVAILABLE] * len(codes) and codes
        attack.outcome = f"{len(codes)} of {len(codes)} shards refused the TLS handshake (UNAVAILABLE)"


def test_a_forged_set_leadership_is_refused(bed: Bed) -> None:
    with Attack(bed, "forged SetLeadership, epoch 2^31-1, gateway's certificate") as attack:
        forged = sc.SetLeadershipRequest(
            leaders=[sc.PartitionEpoch(partition=p, epoch=2**31 - 1) for p in range(PARTITIONS)]
        )
        codes = []
        for shard in bed.state["shards"]:

            async def set_leadership(address: str = bed.shard_address(shard)) -> None:
                async with bed.gateway_certificate().channel(address) as channel:
                    await sc_grpc.ShardControlStub(channel).SetLeadership(forged, timeout=5)

            codes.append(_refused(set_leadership))
        assert codes == [grpc.StatusCode.PERMISSION_DENIED] * len(codes) and codes
        assert max(p["epoch"] for p in bed.state["placement"].values()) < 2**31 - 1
        attack.outcome = f"PERMISSION_DENIED on {len(codes)} shards; epochs unchanged"


# -- bounded resources ------------------------------------------------------------------------



def _request(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    return frame_bytes(struct.pack(">hhih", api_key, version, correlation_id, 1) + b"h" + body)


def _authenticated(bed: Bed, user: str = "mallory") -> socket.socket:
    sock = socket.create_connection(bed.address, timeout=30)
    sock.sendall(_request(17, 1, 1, struct.pack(">h", 5) + b"PLAIN"))
    assert struct.unpack(">ih", (read_frame(sock) or b"")[:6]) == (1, 0)
    token = f"\0{user}\0{USERS[user]}".encode()
    sock.sendall(_request(36, 1, 2, struct.pack(">i", len(token)) + token))
    assert struct.unpack(">ih", (read_frame(sock) or b"")[:6]) == (2, 0)
    return sock


def test_a_thousand_connections_from_one_address(bed: Bed) -> None:
    with Attack(bed, "1,000 connections from one address") as attack:
        opened: list[socket.socket] = []
        try:
            for _ in range(1000):
                sock = socket.socket()
                sock.bind((ATTACKER_IP, 0))
                sock.settimeout(10)
                sock.connect(bed.address)
                opened.append(sock)
            served = 0
            for i, sock in enumerate(opened):
                sock.sendall(_request(18, 0, i))
                served += read_frame(sock) is not None
        finally:
            for sock in opened:
                sock.close()
        assert served == PER_IP_CAP, served
        attack.outcome = f"{served} served (max.connections.per.ip), {1000 - served} closed"


def test_a_frame_over_the_pre_authentication_limit_closes_its_connection(bed: Bed) -> None:
    with Attack(bed, "600 KiB frame before authentication") as attack:
        with socket.create_connection(bed.address, timeout=10) as sock:
            sock.sendall(_request(18, 0, 1, b"x" * (600 * 1024)))
            assert read_frame(sock) is None
        attack.outcome = "connection closed (sasl.server.max.receive.size 512 KiB)"


def test_ten_thousand_pipelined_requests_on_one_connection(bed: Bed) -> None:
    with Attack(bed, "10,000 pipelined requests on one connection") as attack:
        count = 10_000
        with _authenticated(bed) as sock:
            sender = threading.Thread(
                target=sock.sendall, args=(b"".join(_request(18, 0, i) for i in range(count)),)
            )
            sender.start()
            ids = read_correlation_ids(sock, count)
            sender.join(30)
        assert ids == list(range(count))
        attack.outcome = "all 10,000 answered in order, reading paused at queued.max.requests"


def admin_commit(group: str, topic: str, offsets: dict[int, int]) -> offset_commit.OffsetCommitRequest:
    """An OffsetCommit v8 outside any generation (as an admin commits): partition -> offset."""
    return offset_commit.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=i32(-1),
        member_id="",
        group_instance_id=None,
        topics=(
            offset_commit.OffsetCommitRequestTopic(
                name=topic,
                partitions=tuple(
                    offset_commit.OffsetCommitRequestPartition(
                        partition_index=i32(p),
                        committed_offset=i64(o),
                        committed_leader_epoch=i32(-1),
                        committed_metadata=None,
                    )
                    for p, o in offsets.items()
                ),
            ),
        ),
    )


def test_a_one_mib_group_id(bed: Bed) -> None:
    with Attack(bed, "1 MiB group id (FindCoordinator, OffsetFetch, OffsetCommit)") as attack:
        group = "mallory-" + "x" * (1 << 20)
        started = time.monotonic()
        found = bed.ask(find_coordinator.FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,)))
        assert [c.error_code for c in found.coordinators] == [ErrorCode.none]
        committed = bed.ask(admin_commit(group, bed.mallory_topic, {0: 3}))
        # its offset record's key alone is over one state-topic batch (1 MiB): refused on its
        # own, as Kafka's coordinator answers a RecordTooLargeException (UNKNOWN_SERVER_ERROR)
        assert [p.error_code for t in committed.topics for p in t.partitions] == [
            ErrorCode.unknown_server_error
        ]
        fetched = bed.ask(
            offset_fetch.OffsetFetchRequest(
                groups=(offset_fetch.OffsetFetchRequestGroup(group_id=group, topics=None),),
                require_stable=False,
            )
        )
        (answer,) = fetched.groups
        assert answer.error_code == ErrorCode.none
        assert [p.committed_offset for t in answer.topics for p in t.partitions] == []  # nothing stored
        elapsed = time.monotonic() - started
        assert elapsed < 10, elapsed
        attack.outcome = (
            f"looked up, commit refused UNKNOWN_SERVER_ERROR (record > 1 MiB), 3 requests in {elapsed:.2f} s"
        )


def test_an_offset_commit_of_200000_partitions(bed: Bed) -> None:
    with Attack(bed, "OffsetCommit of 200,000 partitions") as attack:
        group = f"mallory-huge-{uuid.uuid4().hex[:6]}"
        started = time.monotonic()
        answer = bed.ask(
            admin_commit(group, bed.mallory_topic, {i: i for i in range(200_000)}), timeout_s=120
        )
        elapsed = time.monotonic() - started
        codes = [p.error_code for t in answer.topics for p in t.partitions]
        # the topic has 4 partitions: Kafka's request handler answers the other indexes
        # UNKNOWN_TOPIC_OR_PARTITION and never stores them
        assert codes[:4] == [ErrorCode.none] * 4
        assert set(codes[4:]) == {ErrorCode.unknown_topic_or_partition} and len(codes) == 200_000
        attack.outcome = f"4 stored, 199,996 UNKNOWN_TOPIC_OR_PARTITION in {elapsed:.1f} s"


def test_an_oversized_record(bed: Bed) -> None:
    """A classic member whose subscription metadata is 2 MiB: the group's record would exceed
    one state-topic batch (1 MiB), so the write is refused on its own, as Kafka's coordinator
    refuses a RecordTooLargeException (UNKNOWN_SERVER_ERROR for that request only)."""
    with Attack(bed, "classic member with 2 MiB of subscription metadata") as attack:
        group = f"mallory-big-{uuid.uuid4().hex[:6]}"

        def join(member_id: str) -> Any:
            return bed.ask(
                join_group.JoinGroupRequest(
                    group_id=group,
                    session_timeout=TEN_S,
                    rebalance_timeout=TEN_S,
                    member_id=member_id,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocols=(join_group.JoinGroupRequestProtocol(name="range", metadata=b"m" * (2 << 20)),),
                ),
                timeout_s=60,
            )

        first = join("")
        assert first.error_code == ErrorCode.member_id_required
        second = join(first.member_id)
        assert second.error_code == ErrorCode.unknown_server_error, second.error_code
        attack.outcome = "JoinGroup answered UNKNOWN_SERVER_ERROR (record over 1 MiB), nothing written"


def test_bogus_transactional_producers_in_a_loop(bed: Bed) -> None:
    with Attack(bed, "50 TxnOffsetCommit v2 from made-up producers") as attack:
        group = f"mallory-txn-{uuid.uuid4().hex[:6]}"
        codes = set()
        for i in range(50):
            answer = bed.ask(
                txn_offset_commit.TxnOffsetCommitRequest(
                    transactional_id=f"mallory-tx-{i}",
                    group_id=group,
                    producer_id=i64(10_000 + i),
                    producer_epoch=i16(0),
                    topics=(
                        txn_offset_commit.TxnOffsetCommitRequestTopic(
                            name=bed.mallory_topic,
                            partitions=(
                                txn_offset_commit.TxnOffsetCommitRequestPartition(
                                    partition_index=i32(0),
                                    committed_offset=i64(i),
                                    committed_leader_epoch=i32(-1),
                                    committed_metadata=None,
                                ),
                            ),
                        ),
                    ),
                )
            )
            codes.update(p.error_code for t in answer.topics for p in t.partitions)
        assert ErrorCode.none not in codes, codes
        names = ", ".join(sorted(c.name for c in codes))
        attack.outcome = f"every one refused ({names}); partitions stay active"
