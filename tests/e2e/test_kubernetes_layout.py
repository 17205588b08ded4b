"""Issue 12: in Kubernetes mode the gateway follows the live shard layout.

Real processes as pods run them — `groupcoord shard` x 2 and `groupcoord gateway`, all with
``--leadership kubernetes:<namespace>/<name>`` — follow a GroupCoordinator on a real Kubernetes API
server, as the chart's workload account
(the test plays the operator: it writes ``status.partitions``), in front of the real broker; a
real KIP-848 consumer commits through the gateway. Shards are rolled from 1 to 2 worker
processes one at a time, as the operator rolls a ``threadsPerShard`` change: the shard's
partitions are moved away, it drains and exits, comes back with two workers, turns Ready
(grpc.health.v1) and is given partitions again. The gateway was never told a worker count:
it asks the shards on every placement, so the group's odd state partition — worker 1's once a
shard has two workers — keeps being served, and the consumer sees no error. In that scenario
the gateway is ``groupcoord gateway --processes 2``, each process following the layout on its
own, with four consumers' connections spread over both.

A second scenario restarts a shard with more workers under an *unchanged* placement: the old
worker answers NOT_COORDINATOR, the gateway asks the shard again and routes to worker 1.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.common.partitioning import partition_for
from groupcoord.controlplane.local import free_port_block
from groupcoord.controlplane.placement import place
from groupcoord.embedded_broker import EmbeddedBroker, free_port
from tests.gateway.process_metrics import requests_by_process
from tests.security.tls import make_pki

from .consumers import ConfluentConsumer
from .failover import PARTITIONS, KeepProducing
from .kube import SERVING, check, until

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(240)]

STATE_PARTITIONS = 4
HOSTS = {0: "127.0.0.10", 1: "127.0.0.11"}  # one address per shard "pod", same port


def shared_port() -> int:
    """A base port with two consecutive free ports on both shard addresses."""
    for _ in range(50):
        port = free_port_block(2, HOSTS[0])
        try:
            for p in (port, port + 1):
                with socket.socket() as s:
                    s.bind((HOSTS[1], p))
        except OSError:
            continue
        return port
    raise RuntimeError("no shared free port")


def odd_partition_group() -> str:
    while True:
        group = f"lf-g-{uuid.uuid4().hex[:6]}"
        if partition_for(group, STATE_PARTITIONS) % 2 == 1:
            return group


class Pods:
    """The shard and gateway processes of one GroupCoordinator named ``name``."""

    def __init__(self, broker: EmbeddedBroker, kube: Any, name: str, log_dir: Path) -> None:
        self.broker, self.kube, self.name, self.log_dir = broker, kube, name, log_dir
        self.env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig)}
        self.port = shared_port()
        self.topic = f"__lf_{uuid.uuid4().hex[:6]}"
        self.shards: dict[int, subprocess.Popen[bytes]] = {}
        self.gateway: subprocess.Popen[bytes] | None = None
        self.gateway_port = free_port()

    def _popen(self, args: list[str], log_name: str) -> subprocess.Popen[bytes]:
        out = open(self.log_dir / log_name, "ab")  # noqa: SIM115
        return subprocess.Popen(
            [sys.executable, "-m", "groupcoord.cli", *args],
            stdout=out,
            stderr=out,
            start_new_session=True,
            env=self.env,
        )

    def start_shard(self, shard: int, threads: int) -> None:
        self.shards[shard] = self._popen(
            [
                *("shard", "--shard-id", str(shard), "--threads", str(threads)),
                *("--kafka", self.broker.bootstrap, "--state-topic", self.topic),
                *("--partitions", str(STATE_PARTITIONS), "--grpc-host", HOSTS[shard]),
                *("--grpc-port", str(self.port), "--metrics-port", "0", "--metric-samples-interval", "0"),
                *("--lag-interval", "0", "--drain-timeout", "30"),
                *("--leadership", f"kubernetes:{self.kube.namespace}/{self.name}"),
            ],
            f"shard-{shard}.log",
        )

    def start_gateway(self, *more: str) -> None:
        self.gateway = self._popen(
            [
                *("gateway", "--kafka", self.broker.bootstrap, "--host", "127.0.0.1"),
                *("--port", str(self.gateway_port), "--leadership", f"kubernetes:{self.kube.namespace}/{self.name}"),
                *("--shard-address-template", f"127.0.0.1{{shard}}:{self.port}"),
                *more,
            ],
            "gateway.log",
        )

    async def ready(self, shard: int) -> None:
        async def serving() -> bool:
            return await check(self.port, address=HOSTS[shard]) == SERVING

        await until(f"shard {shard} ready", serving, timeout=60)

    def stop(self) -> None:
        for proc in [*self.shards.values(), self.gateway]:
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


async def committing_since(consumer: ConfluentConsumer, since: float, timeout: float = 60) -> None:
    async def committed() -> bool:
        return any(t > since for t, _ in consumer.history.commits)

    await until(f"commits after {since:.1f}", committed, timeout=timeout)


@pytest.fixture
def pods(workload_namespace: Any, broker: EmbeddedBroker, tmp_path: Path):  # type: ignore[no-untyped-def]
    p = Pods(broker, workload_namespace, f"lf{uuid.uuid4().hex[:4]}", tmp_path)
    try:
        yield p
    finally:
        p.stop()


async def start_cluster(
    pods: Pods, *gateway_flags: str
) -> tuple[dict[int, Any], ConfluentConsumer, KeepProducing, str]:
    placement = place(STATE_PARTITIONS, [0, 1])
    await pods.kube.publish(pods.name, placement, new=True)
    for shard in (0, 1):
        pods.start_shard(shard, threads=1)
    pods.start_gateway(*gateway_flags)
    await asyncio.gather(pods.ready(0), pods.ready(1))
    bootstrap = f"127.0.0.1:{pods.gateway_port}"
    topic = f"lf-{uuid.uuid4().hex[:6]}"

    def create_topic() -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
            fut.result(30)

    await asyncio.to_thread(create_topic)
    producer = KeepProducing(bootstrap, topic)
    producer.start()
    consumer = ConfluentConsumer(
        bootstrap, topic, odd_partition_group(), "c0", **{"group.protocol": "consumer"}
    )
    consumer.start()
    await committing_since(consumer, 0)
    return placement, consumer, producer, bootstrap


async def roll_threads(pods: Pods, placement: dict[int, Any], consumers: list[ConfluentConsumer]) -> None:
    """What the operator does for threadsPerShard 1 -> 2, one shard at a time; every consumer
    commits after each step."""
    for shard in (0, 1):
        placement = place(STATE_PARTITIONS, [1 - shard], placement)  # move its partitions away
        await pods.kube.publish(pods.name, placement)
        old = pods.shards[shard]
        old.send_signal(signal.SIGTERM)  # it drains until its partitions are gone, then exits
        assert await asyncio.to_thread(old.wait, 40) == 0
        pods.start_shard(shard, threads=2)
        await pods.ready(shard)
        placement = place(STATE_PARTITIONS, [0, 1], placement)  # it gets its share back
        await pods.kube.publish(pods.name, placement)
        since = time.monotonic() + 1
        await asyncio.gather(*(committing_since(c, since) for c in consumers))
    leader = placement[partition_for(consumers[0].group, STATE_PARTITIONS)].leader
    assert any(p % 2 == 1 for p, a in placement.items() if a.leader == leader)
    since = time.monotonic() + 1
    await asyncio.gather(*(committing_since(c, since) for c in consumers))


async def test_gateway_follows_a_rolling_threads_change(pods: Pods) -> None:
    """The gateway runs as ``groupcoord gateway --processes 2``: each process follows the
    resource itself, as two gateway pods would, so the rolling threads change goes by without
    an error for consumers whose connections the kernel spread over both processes."""
    metrics_port = free_port()
    placement, consumer, producer, bootstrap = await start_cluster(
        pods, "--processes", "2", "--metrics-port", str(metrics_port)
    )
    consumers = [consumer] + [
        ConfluentConsumer(bootstrap, consumer.topic, odd_partition_group(), f"c{i}", **{"group.protocol": "consumer"})
        for i in range(1, 4)
    ]
    try:
        for c in consumers[1:]:
            c.start()
        await asyncio.gather(*(committing_since(c, 0) for c in consumers[1:]))
        await roll_threads(pods, placement, consumers)
        served = await asyncio.to_thread(requests_by_process, f"http://127.0.0.1:{metrics_port}/metrics")
        assert set(served) == {"0", "1"} and min(served.values()) > 0, served
    finally:
        producer.stop.set()
        await asyncio.to_thread(producer.join, 30)
        for c in consumers:
            await asyncio.to_thread(c.stop)
    assert [c.history.errors for c in consumers] == [[], [], [], []]



async def test_gateway_asks_again_when_a_worker_refuses(pods: Pods) -> None:
    """Same placement, same epochs, but the shard came back with two workers: the gateway's
    table said one, worker 0 answers NOT_COORDINATOR for the odd partition, the gateway asks
    the shard again and routes to worker 1."""
    placement, consumer, producer, _ = await start_cluster(pods)
    try:
        leader = placement[partition_for(consumer.group, STATE_PARTITIONS)].leader
        old = pods.shards[leader]
        os.killpg(old.pid, signal.SIGKILL)  # no drain, no placement change
        await asyncio.to_thread(old.wait, 30)
        pods.start_shard(leader, threads=2)  # it reads the same placement and leads again
        await pods.ready(leader)
        await committing_since(consumer, time.monotonic() + 1)
    finally:
        producer.stop.set()
        await asyncio.to_thread(producer.join, 30)
        await asyncio.to_thread(consumer.stop)
    # the kill is a failover the gateway holds; nothing reaches the client
    assert consumer.history.errors == []


async def test_one_gateway_serves_two_listeners_each_with_its_own_security(pods: Pods, tmp_path: Path) -> None:
    """Strimzi's listeners[] as the operator writes them: the gateway's bootstrap listener is
    plaintext, a second one (``--extra-listeners``, in the environment variable the operator
    sets) wants TLS and SCRAM from a credential store. One process serves both from the same
    shards: a KIP-848 consumer commits over SASL_SSL, and a plaintext admin client sees that
    group's offsets on the other listener. Each listener's Metadata names its own broker ports;
    a plaintext client gets nothing from the secure one."""
    from confluent_kafka import Consumer, KafkaException  # noqa: PLC0415

    pki = make_pki(tmp_path / "pki")
    users = tmp_path / "users.json"
    users.write_text(json.dumps({"alice": "alice-secret"}))
    secure_port = free_port()
    extra = [
        {
            "name": "secure",
            "port": secure_port,
            "security": {
                "ssl_certfile": str(pki.server_cert),
                "ssl_keyfile": str(pki.server_key),
                "sasl": "credentials",
                "sasl_mechanisms": "SCRAM-SHA-512",
                "sasl_credentials": str(users),
            },
        }
    ]
    pods.env["GROUPCOORD_EXTRA_LISTENERS"] = json.dumps(extra)
    await pods.kube.publish(pods.name, place(STATE_PARTITIONS, [0, 1]), new=True)
    for shard in (0, 1):
        pods.start_shard(shard, threads=1)
    pods.start_gateway()
    await asyncio.gather(pods.ready(0), pods.ready(1))
    plain = {"bootstrap.servers": f"127.0.0.1:{pods.gateway_port}"}
    secure = {
        "bootstrap.servers": f"127.0.0.1:{secure_port}",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
        "ssl.ca.location": str(pki.ca),
    }
    topic, group = f"two-{uuid.uuid4().hex[:6]}", f"two-g-{uuid.uuid4().hex[:6]}"

    def scenario() -> None:
        admin = AdminClient(plain)
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
        producer = KeepProducing(plain["bootstrap.servers"], topic)
        producer.start()
        try:
            consumer = Consumer(
                {**secure, "group.id": group, "group.protocol": "consumer", "auto.offset.reset": "earliest",
                 "enable.auto.commit": False}
            )  # fmt: skip
            consumer.subscribe([topic])
            seen, deadline = 0, time.monotonic() + 60
            while seen < 5 and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                seen += message is not None and message.error() is None
            consumer.commit(asynchronous=False)
            consumer.close()
            assert seen >= 5
        finally:
            producer.stop.set()
            producer.join(30)
        # the group the secure listener's client committed in, seen on the plain listener
        offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
        assert sum(tp.offset for tp in offsets.topic_partitions if tp.offset > 0) >= 5
        plain_ports = {b.port for b in admin.list_topics(timeout=20).brokers.values()}
        secure_ports = {b.port for b in AdminClient(secure).list_topics(timeout=20).brokers.values()}
        assert plain_ports and secure_ports and not plain_ports & secure_ports, (plain_ports, secure_ports)
        with pytest.raises(KafkaException):
            AdminClient({"bootstrap.servers": secure["bootstrap.servers"]}).list_topics(timeout=5)

    await asyncio.to_thread(scenario)
