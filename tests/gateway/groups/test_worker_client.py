"""The gateway's calls to a shard worker that takes a stream and never answers (a wedged
worker): each call is answered REQUEST_TIMED_OUT once its own deadline passes — the later
call later, not at the first one's — and nothing of them stays behind."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc

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
                replies.replies.add(correlation_id=envelope.correlation_id, error_code=15)
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
