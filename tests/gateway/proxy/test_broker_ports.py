"""Fixed per-broker listener ports: every gateway of a fleet means the same broker by a port.

Behind one Service or load balancer, a client's connections to "broker 1" may land on any
gateway pod; with ``broker_ports`` the port depends only on the broker's node id, not on the
order in which brokers happened to be named to that pod. Real sockets on a free port block.
"""

from __future__ import annotations

import asyncio

from groupcoord.controlplane.local import free_port_block
from groupcoord.gateway.proxy.listeners import BrokerListeners


async def _noop(*_args: object) -> None:
    return None


def test_ports_follow_node_ids_whatever_the_naming_order():
    async def run() -> tuple[dict, dict, int]:
        base = free_port_block(8)
        first = BrokerListeners("127.0.0.1", base, "gw.example", broker_ports=3)
        second = BrokerListeners("127.0.0.1", base + 4, "gw.example", broker_ports=3)
        brokers = {0: ("kafka-0", 9092), 1: ("kafka-1", 9092), 2: ("kafka-2", 9092)}
        try:
            await first.open_bootstrap(("kafka", 9092), _noop)
            await second.open_bootstrap(("kafka", 9092), _noop)
            for node in (2, 0, 1):
                await first.listener_for(brokers[node], node)
            for node in (1, 2, 0):
                await second.listener_for(brokers[node], node)
            a = {n: first.listeners[b].address[1] - base for n, b in brokers.items()}
            b = {n: second.listeners[b].address[1] - base - 4 for n, b in brokers.items()}
            # a node id beyond the range still gets a listener, on some free port
            stray = await first.listener_for(("kafka-7", 9092), 7)
            assert stray.address[0] == "gw.example"
            return a, b, stray.address[1] - base
        finally:
            first.close()
            second.close()

    first, second, stray = asyncio.run(run())
    assert first == second == {0: 1, 1: 2, 2: 3}, "port + 1 + node id on every gateway"
    assert stray not in (0, 1, 2, 3)


def test_without_broker_ports_the_nth_broker_named_gets_port_plus_n():
    async def run() -> list[int]:
        base = free_port_block(4)
        listeners = BrokerListeners("127.0.0.1", base, None)
        try:
            await listeners.open_bootstrap(("kafka", 9092), _noop)
            ports = [
                (await listeners.listener_for((f"kafka-{n}", 9092), n)).address[1] - base for n in (2, 0)
            ]
            return ports
        finally:
            listeners.close()

    assert asyncio.run(run()) == [1, 2]


def test_a_real_client_reaches_the_broker_at_its_fixed_port(broker, tmp_path):
    """``groupcoord gateway --broker-ports``, as the operator runs it, in front of tansu (node id
    111) named by another address, so the broker needs a listener of its own: librdkafka is told
    port + 1 + 111, produces, fetches and commits through it (a plain proxy: the group
    coordinator is the upstream's)."""
    import subprocess
    import sys
    import time
    import uuid

    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    base = free_port_block(113)
    log = (tmp_path / "gateway.log").open("wb")
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "groupcoord.cli", "gateway"),
            *("--kafka", f"localhost:{broker.port}", "--host", "127.0.0.1", "--port", str(base)),
            *("--broker-ports", "112", "--advertised-host", "127.0.0.1"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        topic = f"fixed-{uuid.uuid4().hex[:8]}"
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{base}", "message.timeout.ms": 20000})
        for i in range(5):
            producer.produce(topic, f"m{i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer(
            {
                "bootstrap.servers": f"127.0.0.1:{base}",
                "group.id": f"g-{topic}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        try:
            brokers = consumer.list_topics(timeout=10).brokers
            assert {n: (b.host, b.port) for n, b in brokers.items()} == {111: ("127.0.0.1", base + 112)}
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
            got = []
            deadline = time.monotonic() + 40
            while len(got) < 5 and time.monotonic() < deadline:
                message = consumer.poll(1)
                if message is not None and not message.error():
                    got.append(message.value())
            assert sorted(got) == [f"m{i}".encode() for i in range(5)]
            consumer.commit(asynchronous=False)
            committed = consumer.committed(consumer.assignment(), timeout=10)
            assert sum(max(tp.offset, 0) for tp in committed) == 5
        finally:
            consumer.close()
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def test_processes_of_one_gateway_share_the_fixed_ports_and_keep_the_named_order_ones_apart():
    """Two processes of one gateway (``reuse_port``, :mod:`groupcoord.gateway.processes`): both
    bind the bootstrap port and the node-id ports; a broker named in order gets a port of each
    process's own, since the order (and so port + n) differs between processes."""

    async def run() -> tuple[list[int], list[int], list[int]]:
        base = free_port_block(4)
        fixed = [BrokerListeners("127.0.0.1", base, None, broker_ports=2, reuse_port=True) for _ in range(2)]
        ordered = [BrokerListeners("127.0.0.1", base + 3, None, reuse_port=True) for _ in range(2)]
        try:
            for listeners in (*fixed, *ordered):
                await listeners.open_bootstrap(("kafka", 9092), _noop)
            shared = [(await lst.listener_for(("kafka-1", 9092), 1)).address[1] - base for lst in fixed]
            own = [(await lst.listener_for(("kafka-1", 9092), 1)).address[1] for lst in ordered]
            bootstrap = [lst.listeners[("kafka", 9092)].address[1] - base for lst in (*fixed, *ordered)]
            return shared, own, bootstrap
        finally:
            for listeners in (*fixed, *ordered):
                listeners.close()

    shared, own, bootstrap = asyncio.run(run())
    assert shared == [2, 2] and bootstrap == [0, 0, 3, 3]
    assert len(set(own)) == 2, "each process's own port for a broker named in order"
