"""Shards serve only the gateway and the control plane (issue 23), on a real local cluster.

``BackgroundCluster`` runs what ``groupcoord up`` runs: real shard processes behind mutual TLS
with a CA made at start, the gateway and the control plane holding certificates of their own.
Real gRPC clients then call a shard worker directly: without a certificate, with one of
another CA, with the wrong identity for the service, and with a forged SetLeadership. Real
consumers commit through the gateway before and after, and a shard supervisor killed with
SIGKILL takes its worker processes with it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord import status
from groupcoord.common import internal_tls
from groupcoord.common.internal_tls import CONTROL_PLANE, GATEWAY, InternalTls
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.local_cluster import ClusterOptions
from groupcoord.rpc.v1 import coordinator_pb2 as pb
from groupcoord.rpc.v1 import coordinator_pb2_grpc as pb_grpc
from groupcoord.rpc.v1 import offsets_pb2
from groupcoord.rpc.v1 import shard_control_pb2 as sc
from groupcoord.rpc.v1 import shard_control_pb2_grpc as sc_grpc
from groupcoord_testing import BackgroundCluster

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]
PARTITIONS = 4
FORGED_EPOCH = 2**31 - 1


@pytest.fixture(scope="module")
def cluster(broker: EmbeddedBroker) -> Iterator[BackgroundCluster]:
    # a state topic of its own: the session's clusters share the broker with another partition count
    options = ClusterOptions(
        port=0, shards=2, partitions=PARTITIONS, metrics=False, state_topic=f"__mtls_{uuid.uuid4().hex[:6]}"
    )
    with BackgroundCluster((broker.host, broker.port), options) as c:
        yield c


@pytest.fixture(scope="module")
def topic(cluster: BackgroundCluster) -> str:
    name = f"mtls-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def certificate(cluster: BackgroundCluster, identity: str) -> InternalTls:
    assert cluster.cluster is not None and cluster.cluster.tls_dir is not None
    return InternalTls.from_dir(cluster.cluster.tls_dir / identity)


def shard_address(cluster: BackgroundCluster, shard: int) -> str:
    assert cluster.cluster is not None and cluster.cluster.control is not None
    proc = cluster.cluster.control.processes[shard]
    return f"{proc.host}:{proc.grpc_port}"


def commit_and_read(bootstrap: str, group: str, topic: str, offset: int, within_s: float = 60) -> int:
    """Commit ``offset`` for ``group`` through the gateway and read it back; retriable errors
    (a partition still loading after a failover on a busy machine) are retried, as an
    application does, for ``within_s``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    deadline = time.monotonic() + within_s
    try:
        while True:
            try:
                consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
                break
            except KafkaException as exc:
                if not exc.args[0].retriable() or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        return int(consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset)
    finally:
        consumer.close()


async def ping(channel: grpc.aio.Channel) -> sc.ShardPingResponse:
    return await sc_grpc.ShardControlStub(channel).Ping(sc.ShardPingRequest(), timeout=5)


async def list_groups(channel: grpc.aio.Channel, partition: int) -> pb.CoordinatorReply:
    """One envelope on a Coordinator stream, as the gateway sends them."""
    envelope = pb.CoordinatorEnvelope(
        correlation_id=1, partition=partition, principal="User:test", offset_fetch=offsets_pb2.OffsetFetchRequest()
    )

    async def one() -> Iterator[pb.CoordinatorBatch]:
        yield pb.CoordinatorBatch(envelopes=[envelope])

    async for batch in pb_grpc.CoordinatorStub(channel).Batches(one(), timeout=5):
        return batch.replies[0]
    raise AssertionError("the stream ended without a reply")


def refused(call: Callable[[], object]) -> grpc.StatusCode:
    """The status code a direct call to a shard fails with (it must fail).

    A shard refuses a stream before reading it; when the client's first write loses that race,
    gRPC's client ends the call with its own INTERNAL ("Internal error from Core") in place of
    the shard's answer (1 run in 10 here). That status is the client's, not the shard's: the
    call is made again, a few times at most."""

    async def run() -> grpc.StatusCode:
        for _ in range(5):
            try:
                await call()  # type: ignore[misc]
            except grpc.aio.AioRpcError as exc:
                if exc.code() is grpc.StatusCode.INTERNAL and exc.details() == "Internal error from Core":
                    continue
                return exc.code()
            raise AssertionError("the shard served a caller it must refuse")
        return grpc.StatusCode.INTERNAL

    return asyncio.run(run())


def test_a_shard_serves_only_the_certificates_of_the_gateway_and_the_control_plane(
    cluster: BackgroundCluster, topic: str, tmp_path: Path
) -> None:
    assert commit_and_read(cluster.bootstrap, f"g-{uuid.uuid4().hex[:6]}", topic, 7) == 7  # over mTLS
    address = shard_address(cluster, 0)

    async def plaintext() -> None:
        async with grpc.aio.insecure_channel(address) as channel:
            await ping(channel)

    foreign = InternalTls.from_dir(internal_tls.issue(tmp_path / "other-ca")[GATEWAY])

    async def other_ca() -> None:
        async with foreign.channel(address) as channel:
            await ping(channel)

    async def control_plane_on_the_coordinator_service() -> None:
        async with certificate(cluster, CONTROL_PLANE).channel(address) as channel:
            await list_groups(channel, 0)

    assert refused(plaintext) is grpc.StatusCode.UNAVAILABLE  # no TLS handshake without a certificate
    assert refused(other_ca) is grpc.StatusCode.UNAVAILABLE
    assert refused(control_plane_on_the_coordinator_service) is grpc.StatusCode.PERMISSION_DENIED

    async def as_gateway() -> tuple[sc.ShardPingResponse, pb.CoordinatorReply]:
        async with certificate(cluster, GATEWAY).channel(address) as channel:
            return await ping(channel), await list_groups(channel, 0)

    pong, reply = asyncio.run(as_gateway())
    assert pong.shard_id == "0"
    assert reply.correlation_id == 1 and (reply.HasField("offset_fetch") or reply.error_code != 0)

    # `groupcoord status` asks the shards with the control plane's certificate its state file names
    assert cluster.cluster is not None and cluster.cluster.control is not None
    rows = asyncio.run(status.collect(cluster.cluster.control.describe()))
    assert rows and not [r for r in rows if "error" in r]
    assert {r["partition"] for r in rows} == set(range(PARTITIONS))


def test_a_forged_set_leadership_is_refused_and_later_leaders_are_not_fenced(
    cluster: BackgroundCluster, topic: str
) -> None:
    assert cluster.cluster is not None and cluster.cluster.control is not None
    control = cluster.cluster.control
    forged = sc.SetLeadershipRequest(
        leaders=[sc.PartitionEpoch(partition=p, epoch=FORGED_EPOCH) for p in range(PARTITIONS)]
    )
    for shard in control.processes:
        address = shard_address(cluster, shard)

        async def without_certificate(address: str = address) -> None:
            async with grpc.aio.insecure_channel(address) as channel:
                await sc_grpc.ShardControlStub(channel).SetLeadership(forged, timeout=5)

        async def with_the_gateways(address: str = address) -> None:
            async with certificate(cluster, GATEWAY).channel(address) as channel:
                await sc_grpc.ShardControlStub(channel).SetLeadership(forged, timeout=5)

        assert refused(without_certificate) is grpc.StatusCode.UNAVAILABLE
        assert refused(with_the_gateways) is grpc.StatusCode.PERMISSION_DENIED

    # The legitimate leaders go on, and so do the next ones after a failover.
    groups = [f"forged-{i}-{uuid.uuid4().hex[:6]}" for i in range(8)]
    for offset, group in enumerate(groups, start=1):
        assert commit_and_read(cluster.bootstrap, group, topic, offset) == offset
    before = dict(control.placement)
    victim = control.processes[1]
    assert victim.process is not None
    os.kill(victim.process.pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while any(control.placement.get(p, a).epoch == a.epoch for p, a in before.items() if a.leader == 1):
        assert time.monotonic() < deadline, "the control plane did not move the stopped shard's partitions"
        time.sleep(0.2)
    for offset, group in enumerate(groups, start=100):
        assert commit_and_read(cluster.bootstrap, group, topic, offset) == offset
    statuses = cluster.run(control.status())
    epochs = [p.epoch for s in statuses for p in s.partitions]
    assert epochs and max(epochs) < FORGED_EPOCH


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_workers_die_with_their_supervisor_killed_with_sigkill(cluster: BackgroundCluster, topic: str) -> None:
    assert cluster.cluster is not None and cluster.cluster.control is not None
    control = cluster.cluster.control
    proc = control.processes[0]
    deadline = time.monotonic() + 60
    # every shard up again (the test before stops shard 1), so shard 0's partitions have a home
    while not all(p.alive and p.process is not None and _children(p.process.pid) for p in control.processes.values()):
        assert time.monotonic() < deadline, "the shards are not up"
        time.sleep(0.2)
    assert commit_and_read(cluster.bootstrap, f"before-kill-{uuid.uuid4().hex[:6]}", topic, 7) == 7
    supervisor = proc.process.pid
    workers = _children(supervisor)
    os.kill(supervisor, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(_running(w) for w in workers):
        assert time.monotonic() < deadline, f"workers {[w for w in workers if _running(w)]} outlived their supervisor"
        time.sleep(0.1)
    # The control plane restarts the shard on the same ports, which no orphan holds any more.
    group = f"after-kill-{uuid.uuid4().hex[:6]}"
    assert commit_and_read(cluster.bootstrap, group, topic, 42) == 42
