"""One request upstream on a connection of its own: every way the broker can fail to answer is
one UpstreamUnavailable (the caller closes or answers the client once, whatever went wrong)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from groupcoord.gateway.proxy.upstream import UpstreamUnavailable, ask_upstream

REQUEST = ApiVersionsRequest(client_software_name="t", client_software_version="0")
Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def serve(answer: Answer) -> AsyncIterator[tuple[str, int]]:
    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 16)
        await answer(reader, writer)
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    try:
        yield "127.0.0.1", server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def impossible_size(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    w.write(struct.pack(">i", -5))


async def cut_short(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    w.write(struct.pack(">i", 100) + b"\x00\x00\x00\x01")


async def garbage(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    w.write(struct.pack(">i", 6) + b"\x00\x00\x00\x01\xff\xff")


async def silent(_r: asyncio.StreamReader, _w: asyncio.StreamWriter) -> None:
    await asyncio.sleep(5)


@pytest.mark.parametrize("answer", [impossible_size, cut_short, garbage, silent])
async def test_a_broken_answer_is_upstream_unavailable(answer: Answer) -> None:
    async with serve(answer) as address:
        with pytest.raises(UpstreamUnavailable, match=f"upstream broker 127.0.0.1:{address[1]}"):
            await ask_upstream(address, REQUEST, timeout_s=0.5)


async def test_a_refused_connection_is_upstream_unavailable() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        address = s.getsockname()
    with pytest.raises(UpstreamUnavailable):
        await ask_upstream(address, REQUEST, timeout_s=2)
