"""The gateway's calls to shard workers: to a worker that takes a stream and never answers (a
wedged worker) each call is answered REQUEST_TIMED_OUT once its own deadline passes — the later
call later, not at the first one's — and nothing of them stays behind; a connection gone silent
(a shard cut off the network) is dropped by its keepalive and the next call is served."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from groupcoord.common import grpc_keepalive
from groupcoord.gateway.groups.worker_client import WorkerClient
from groupcoord.rpc.v1 import coordinator_pb2 as pb
from groupcoord.rpc.v1 import coordinator_pb2_grpc as pb_grpc
from groupcoord.rpc.v1 import offsets_pb2


class SilentWorker(pb_grpc.CoordinatorServicer):
    """Reads every batch, answers none of them."""

    def __init__(self) -> None:
        self.received = 0

    async def Batches(  # noqa: N802 - the gRPC method's name
        self, request_iterator: AsyncIterator[pb.CoordinatorBatch], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.CoordinatorReplyBatch]:
        async for batch in request_iterator:
            self.received += len(batch.envelopes)
        if False:  # an async generator that yields nothing
            yield pb.CoordinatorReplyBatch()


def fetch() -> pb.CoordinatorEnvelope:
    return pb.CoordinatorEnvelope(offset_fetch=offsets_pb2.OffsetFetchRequest(api_version=8), partition=3)


async def test_calls_to_a_silent_worker_time_out_each_at_its_own_deadline() -> None:
    worker = SilentWorker()
    server = grpc.aio.server()
    pb_grpc.add_CoordinatorServicer_to_server(worker, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    client = WorkerClient(timeout_s=0.5)
    loop = asyncio.get_running_loop()
    try:
        started = loop.time()
        first = asyncio.create_task(client.call(("127.0.0.1", port), fetch()))
        await asyncio.sleep(0.3)
        second = asyncio.create_task(client.call(("127.0.0.1", port), fetch()))
        reply = await first
        first_at = loop.time() - started
        assert reply.error_code == 7 and "did not answer" in reply.error_message  # REQUEST_TIMED_OUT
        assert 0.45 <= first_at < 0.75, first_at
        assert not second.done(), "the second call has time left"
        reply = await second
        assert reply.error_code == 7 and loop.time() - started >= 0.75
        assert worker.received == 2
        stream = next(iter(client._streams.values()))
        assert not stream.waiting and not stream.deadlines and stream.sweeper is None, "nothing left behind"
    finally:
        await client.close()
        await server.stop(None)


class EchoWorker(pb_grpc.CoordinatorServicer):
    """Answers every envelope at once (an error reply: enough for the client's bookkeeping)."""

    async def Batches(  # noqa: N802 - the gRPC method's name
        self, request_iterator: AsyncIterator[pb.CoordinatorBatch], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.CoordinatorReplyBatch]:
        async for batch in request_iterator:
            replies = pb.CoordinatorReplyBatch()
            for envelope in batch.envelopes:
                replies.replies.add(correlation_id=envelope.correlation_id, error_code=15, error_message="echo")
            yield replies


async def test_answered_calls_leave_nothing_behind_however_many() -> None:
    """The deadlines of answered calls do not pile up for a whole timeout: at most those after
    the oldest call still unanswered are kept."""
    server = grpc.aio.server()
    pb_grpc.add_CoordinatorServicer_to_server(EchoWorker(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    client = WorkerClient(timeout_s=60)
    try:
        for _ in range(2_000):
            reply = await client.call(("127.0.0.1", port), fetch())
            assert reply.error_code == 15
        stream = next(iter(client._streams.values()))
        assert not stream.waiting and len(stream.deadlines) <= 1, len(stream.deadlines)
    finally:
        await client.close()
        await server.stop(None)


class Blackhole:
    """A TCP relay to the worker whose connections can all go silent at once, as a shard cut off
    the network: nothing is forwarded any more and nothing is closed (no FIN, no RST). A
    connection made after the cut is relayed again: the shard is reachable anew, while the old
    connection would resume only at the kernel's next retransmission, minutes later."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.connections: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter, list[bool]]] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        silent = [False]
        self.connections.append((writer, up_writer, silent))

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while data := await src.read(65536):
                if not silent[0]:
                    dst.write(data)
                    await dst.drain()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer), return_exceptions=True)

    def cut(self) -> None:
        for _, _, silent in self.connections:
            silent[0] = True

    async def close(self) -> None:
        for writer, up_writer, _ in self.connections:
            writer.close()
            up_writer.close()
        assert self.server is not None
        self.server.close()


async def test_a_stream_to_a_shard_gone_silent_breaks_within_the_keepalive_and_the_next_call_is_served(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 23's zombie shard, seen from the gateway: the connection under its streams goes
    silent (cut off the network, never closed). The gateway's pings go unanswered, the stream
    fails its calls COORDINATOR_NOT_AVAILABLE (retriable) well before the request timeout, and
    the next call, on a new connection, is answered — not REQUEST_TIMED_OUT call after call
    until the old connection happens to resume."""
    ping_ms = 500
    short = {"grpc.keepalive_time_ms": ping_ms, "grpc.keepalive_timeout_ms": ping_ms, "grpc.http2.ping_timeout_ms": ping_ms}
    options = tuple((name, short.get(name, value)) for name, value in grpc_keepalive.CHANNEL_OPTIONS)
    assert dict(options).keys() >= short.keys()
    monkeypatch.setattr(grpc_keepalive, "CHANNEL_OPTIONS", options)
    server = grpc.aio.server(
        options=[("grpc.keepalive_permit_without_calls", 1), ("grpc.http2.min_ping_interval_without_data_ms", ping_ms // 2)]
    )
    pb_grpc.add_CoordinatorServicer_to_server(EchoWorker(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    relay = Blackhole(port)
    address = ("127.0.0.1", await relay.start())
    client = WorkerClient(timeout_s=30)
    loop = asyncio.get_running_loop()
    try:
        assert (await client.call(address, fetch())).error_message == "echo", "served through the relay"
        relay.cut()
        started = loop.time()
        reply = await client.call(address, fetch())
        assert reply.error_code == 15 and reply.error_message == "shard stream closed", reply  # COORDINATOR_NOT_AVAILABLE
        assert loop.time() - started < 10, "the silent connection was noticed by its pings, not by the call's timeout"
        reply = await client.call(address, fetch())
        assert reply.error_message == "echo", f"the next call is served on a new connection: {reply}"
        assert len(relay.connections) == 2
    finally:
        await client.close()
        await relay.close()
        await server.stop(None)
