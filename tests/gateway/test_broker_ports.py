"""Fixed per-broker listener ports: every gateway of a fleet means the same broker by a port.

Behind one Service or load balancer, a client's connections to "broker 1" may land on any
gateway pod; with ``broker_ports`` the port depends only on the broker's node id, not on the
order in which brokers happened to be named to that pod. Real sockets on a free port block.
"""

from __future__ import annotations

import asyncio

from groupcoord.controlplane.local import free_port_block
from groupcoord.gateway.listeners import BrokerListeners


async def _noop(*_args: object) -> None:
    return None


def test_ports_follow_node_ids_whatever_the_naming_order():
    async def run() -> tuple[dict, dict, int]:
        base = free_port_block(8)
        first = BrokerListeners("127.0.0.1", base, "gw.example", _noop, broker_ports=3)
        second = BrokerListeners("127.0.0.1", base + 4, "gw.example", _noop, broker_ports=3)
        brokers = {0: ("kafka-0", 9092), 1: ("kafka-1", 9092), 2: ("kafka-2", 9092)}
        try:
            await first.open_bootstrap(("kafka", 9092))
            await second.open_bootstrap(("kafka", 9092))
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
        listeners = BrokerListeners("127.0.0.1", base, None, _noop)
        try:
            await listeners.open_bootstrap(("kafka", 9092))
            ports = [
                (await listeners.listener_for((f"kafka-{n}", 9092), n)).address[1] - base for n in (2, 0)
            ]
            return ports
        finally:
            listeners.close()

    assert asyncio.run(run()) == [1, 2]
