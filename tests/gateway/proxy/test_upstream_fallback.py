"""A crashed upstream broker strands nothing of the gateway's own: its requests go to another
bootstrap address, and it names a live broker's listener group coordinator (Kafka lists no dead
broker in Metadata, and a client waits forever for a coordinator its metadata does not list).
Real sockets; the fallback reaches the session's real broker."""

from __future__ import annotations

import asyncio
import datetime

import pytest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse, MetadataResponseBroker
from kio.schema.types import BrokerId
from kio.static.primitive import i32, i32Timedelta

from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.embedded_broker import EmbeddedBroker, free_port
from groupcoord.gateway.proxy.listeners import BrokerListeners
from groupcoord.gateway.proxy.upstream import Upstream


async def _noop(*_args: object) -> None:
    return None


def metadata(*nodes: int) -> MetadataResponse:
    return MetadataResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        brokers=tuple(
            MetadataResponseBroker(node_id=BrokerId(n), host=f"kafka-{n}", port=i32(9092), rack=None) for n in nodes
        ),
        cluster_id="c",
        controller_id=BrokerId(nodes[0]),
        topics=(),
    )


def test_the_coordinator_named_is_a_live_broker_listener() -> None:
    async def run() -> list[int]:
        listeners = BrokerListeners("127.0.0.1", 0, None)
        upstream = Upstream(("kafka-1", 9092), listeners)
        try:
            await listeners.open_bootstrap(("kafka-1", 9092), _noop)
            await listeners.rewrite(ApiKey.METADATA, metadata(1, 2, 3))
            on_one = listeners.listeners[("kafka-1", 9092)].address
            named = [(await upstream.coordinator_node(on_one))[0]]
            await listeners.rewrite(ApiKey.METADATA, metadata(2, 3))  # broker 1 crashed
            node, host, port = await upstream.coordinator_node(on_one)
            assert (host, port) == listeners.listeners[(f"kafka-{node}", 9092)].address
            named.append(node)
            await listeners.rewrite(ApiKey.METADATA, metadata(1, 2, 3))  # and came back
            named.append((await upstream.coordinator_node(on_one))[0])
            return named
        finally:
            listeners.close()

    assert asyncio.run(run()) == [1, 2, 1]


@pytest.mark.broker
def test_the_gateways_own_requests_go_to_the_next_bootstrap_address(broker: EmbeddedBroker) -> None:
    dead = ("127.0.0.1", free_port("127.0.0.1"))

    async def run() -> tuple[int, list[tuple[str, int]]]:
        listeners = BrokerListeners("127.0.0.1", 0, None)
        upstream = Upstream(dead, listeners, bootstrap_servers=(dead, (broker.host, broker.port)))
        try:
            await listeners.open_bootstrap(dead, _noop)
            versions = await upstream.versions()
            response = await upstream.request(
                MetadataRequest(topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False)
            )
            return len(versions) + len(response.brokers), upstream.addresses()
        finally:
            listeners.close()

    answered, order = asyncio.run(run())
    assert answered > 0
    assert order[0] == (broker.host, broker.port), "the broker that answered is asked first next time"
