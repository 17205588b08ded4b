"""A client's upstream link carries the gateway's own requests for that client (``ask``) in the
same FIFO as the client's forwarded ones: each answer reaches its asker, the client's in order."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest

from groupcoord.common.kafka_wire import codec
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.gateway.messages.framed_request import Request
from groupcoord.gateway.proxy.upstream import UpstreamLink, UpstreamUnavailable

METADATA = MetadataRequest(
    topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
)
VERSIONS = ApiVersionsRequest(client_software_name="t", client_software_version="0")


async def _unchanged(_key: int, _version: int, payload: bytes) -> bytes:
    return payload


def _link(address: tuple[str, int], delivered: list[tuple[int, bytes]], failures: list[str]) -> UpstreamLink:
    return UpstreamLink(
        address,
        lambda seq, payload: delivered.append((seq, payload)),
        failures.append,
        frozenset(),
        _unchanged,
    )


def _client_request(seq: int, correlation_id: int) -> Request:
    return Request(
        seq, ApiKey.API_VERSIONS, 3, correlation_id, codec.encode_request(correlation_id, "client", VERSIONS)
    )


@pytest.mark.broker
async def test_asks_and_forwarded_requests_share_the_link_in_order(broker: EmbeddedBroker) -> None:
    delivered: list[tuple[int, bytes]] = []
    failures: list[str] = []
    link = _link((broker.host, broker.port), delivered, failures)
    try:
        await link.send(_client_request(0, 7), True)
        asked = asyncio.create_task(link.ask(METADATA))
        await asyncio.sleep(0)  # the ask is written between the client's two requests
        await link.send(_client_request(1, 7), True)  # the client's ids may collide with the link's
        metadata = await asyncio.wait_for(asked, 10)
        async with asyncio.timeout(10):
            while len(delivered) < 2:
                await asyncio.sleep(0.01)
    finally:
        link.close()
    assert metadata.brokers and not failures
    assert [seq for seq, _ in delivered] == [0, 1]
    for _, payload in delivered:
        correlation_id, body = codec.decode_response(ApiKey.API_VERSIONS, 3, payload)
        assert correlation_id == 7 and body.api_keys


@contextlib.asynccontextmanager
async def _hangs_up() -> AsyncIterator[tuple[str, int]]:
    """An "upstream" that reads one request and closes the connection."""

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 16)
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    try:
        yield "127.0.0.1", server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def test_an_ask_whose_link_breaks_is_upstream_unavailable_and_the_client_stays() -> None:
    """Nothing of the client's own was waiting on the link: its connection has no answer to
    miss, so it stays (the ask's caller answers its request with an error)."""
    failures: list[str] = []
    async with _hangs_up() as address:
        link = _link(address, [], failures)
        try:
            with pytest.raises(UpstreamUnavailable, match="upstream closed the connection"):
                await link.ask(METADATA)
        finally:
            link.close()
    assert failures == []


async def test_a_forwarded_request_whose_link_breaks_ends_the_client() -> None:
    """Its answer will never come, and the client's answers go in request order."""
    failures: list[str] = []
    async with _hangs_up() as address:
        link = _link(address, [], failures)
        try:
            await link.send(_client_request(0, 7), True)
            async with asyncio.timeout(10):
                while not failures:
                    await asyncio.sleep(0.01)
        finally:
            link.close()
    assert len(failures) == 1 and "upstream closed the connection" in failures[0]


async def test_a_link_the_clients_own_sasl_authenticated_ends_the_client_even_idle() -> None:
    """Passthrough: the connection carried the client's identity, which a new one would not."""
    failures: list[str] = []
    async with _hangs_up() as address:
        link = UpstreamLink(
            address, lambda *_: None, failures.append, frozenset(), _unchanged, reconnectable=False
        )
        try:
            with pytest.raises(UpstreamUnavailable):
                await link.ask(METADATA)
        finally:
            link.close()
    assert len(failures) == 1


@pytest.mark.broker
async def test_a_link_that_broke_idle_connects_again_for_the_next_request(broker: EmbeddedBroker) -> None:
    """A broker connection lost while nothing was forwarded on it (a broker restart, or the
    broker behind a coordinator connection dying) costs the client nothing."""
    delivered: list[tuple[int, bytes]] = []
    failures: list[str] = []
    link = _link((broker.host, broker.port), delivered, failures)
    try:
        await link.send(_client_request(0, 7), True)
        async with asyncio.timeout(10):
            while not delivered:
                await asyncio.sleep(0.01)
        assert link.writer is not None
        link.writer.transport.abort()  # the connection breaks while idle
        async with asyncio.timeout(10):
            while link.writer is not None:
                await asyncio.sleep(0.01)
        await link.send(_client_request(1, 8), True)
        async with asyncio.timeout(10):
            while len(delivered) < 2:
                await asyncio.sleep(0.01)
    finally:
        link.close()
    assert failures == [] and [seq for seq, _ in delivered] == [0, 1]


async def test_an_unanswered_ask_times_out_as_upstream_unavailable() -> None:
    async def silent(reader: asyncio.StreamReader, _writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 16)
        await asyncio.sleep(5)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    link = _link(("127.0.0.1", server.sockets[0].getsockname()[1]), [], [])
    try:
        with pytest.raises(UpstreamUnavailable, match="did not answer"):
            await link.ask(METADATA, timeout_s=0.3)
    finally:
        link.close()
        server.close()
