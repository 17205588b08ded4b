"""gRPC faces of a shard worker: envelope streams into the runtime, and ShardControl.

Envelope streams: a client (the gateway) keeps one bidirectional stream per worker and sends
``{correlation_id, partition, oneof request}`` envelopes without waiting; each runs on its
partition's loop and the reply ``{correlation_id, error_code, oneof response}`` goes back when
its write is confirmed, out of order. Measured here, unary Python gRPC does ~1.3–3.6k calls/s
while a stream with many messages in flight does 7–10k/s, hence streams. The oneof field name
*is* the core's handler name (``put`` → ``shard.put``), so one dispatcher serves any service
shaped this way (the register service, the coordinator service).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

import grpc
from google.protobuf.message import Message

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.shard.partition import PartitionState
from groupcoord.coordinator.shard.runtime import ShardRuntime
from groupcoord.rpc.v1 import shard_control_pb2 as sc
from groupcoord.rpc.v1 import shard_control_pb2_grpc as sc_grpc

log = logging.getLogger(__name__)


_STATES = {
    PartitionState.LOADING: sc.PARTITION_STATE_LOADING,
    PartitionState.ACTIVE: sc.PARTITION_STATE_ACTIVE,
    PartitionState.FAILED: sc.PARTITION_STATE_FAILED,
    PartitionState.STANDBY: sc.PARTITION_STATE_STANDBY,
    PartitionState.STOPPED: sc.PARTITION_STATE_UNSPECIFIED,
}


class EnvelopeDispatcher:
    """Runs envelope streams against a runtime; see the module docstring."""

    def __init__(
        self,
        runtime: ShardRuntime,
        reply_type: type[Message],
        read_only: Collection[str] = (),
        *,
        request_oneof: str = "request",
    ) -> None:
        self.runtime = runtime
        self.reply_type = reply_type
        self.read_only = frozenset(read_only)
        self.request_oneof = request_oneof

    def reply_for(self, envelope: Any, fut: asyncio.Future[Any], api: str) -> Message:
        reply = self.reply_type(correlation_id=envelope.correlation_id)
        exc = fut.exception()
        if exc is None:
            response = fut.result()
            if response is not None:
                getattr(reply, api).CopyFrom(response)
        elif isinstance(exc, CoordinatorError):
            reply.error_code = int(exc.code)
            reply.error_message = exc.message or ""
        else:
            reply.error_code = -1  # UNKNOWN_SERVER_ERROR
            reply.error_message = f"{type(exc).__name__}: {exc}"
        return reply

    async def batches(
        self,
        batches: AsyncIterator[Any],
        context: grpc.aio.ServicerContext,
        reply_batch: Callable[[list[Message]], Message],
    ) -> AsyncIterator[Message]:
        """Like :meth:`stream`, with many envelopes per gRPC message each way: Python gRPC
        costs far more per message than per byte, so a client sends whatever it has queued
        as one batch, and the replies that are ready together go back as one batch."""

        async def envelopes() -> AsyncIterator[Any]:
            async for batch in batches:
                for envelope in batch.envelopes:
                    yield envelope

        async for replies in self._replies(envelopes(), batched=True):
            yield reply_batch(replies)

    async def stream(
        self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Message]:
        async for replies in self._replies(requests, batched=False):
            for reply in replies:
                yield reply

    async def _replies(self, requests: AsyncIterator[Any], batched: bool) -> AsyncIterator[list[Message]]:
        replies: asyncio.Queue[Message | None] = asyncio.Queue()
        outstanding = 0
        reading_done = False

        metrics = self.runtime.metrics

        def answered(envelope: Any, api: str, started: float) -> Callable[[asyncio.Future[Any]], None]:
            def done(fut: asyncio.Future[Any]) -> None:
                if metrics is not None:
                    metrics.observe_request(api, time.perf_counter() - started, partition=envelope.partition)
                replies.put_nowait(self.reply_for(envelope, fut, api))

            return done

        async def read() -> None:
            nonlocal outstanding, reading_done
            try:
                async for envelope in requests:
                    api = envelope.WhichOneof(self.request_oneof)
                    outstanding += 1
                    if api is None:
                        replies.put_nowait(
                            self.reply_type(
                                correlation_id=envelope.correlation_id,
                                error_code=42,
                                error_message="no request",
                            )
                        )
                        continue
                    fut = self.runtime.submit(
                        envelope.partition, api, getattr(envelope, api), read_only=api in self.read_only
                    )
                    fut.add_done_callback(answered(envelope, api, time.perf_counter()))
            finally:
                reading_done = True
                replies.put_nowait(None)

        reader = asyncio.create_task(read())
        try:
            while True:
                reply = await replies.get()
                if reply is None:
                    if outstanding == 0:
                        return
                    continue
                ready = [reply]
                while batched and not replies.empty():
                    more = replies.get_nowait()
                    if more is None:
                        replies.put_nowait(None)  # keep the end-of-input mark for the next turn
                        break
                    ready.append(more)
                outstanding -= len(ready)
                yield ready
                if reading_done and outstanding == 0:
                    return
        finally:
            reader.cancel()


class ShardControlServicer(sc_grpc.ShardControlServicer):
    """Leadership pushed by a control plane. Worker 0 fans out to the other workers."""

    def __init__(self, runtime: ShardRuntime, host: str, base_port: int) -> None:
        self.runtime = runtime
        self.host = host
        self.base_port = base_port
        self._peers: dict[int, sc_grpc.ShardControlStub] = {}

    def _peer(self, worker: int) -> sc_grpc.ShardControlStub:
        stub = self._peers.get(worker)
        if stub is None:
            channel = grpc.aio.insecure_channel(f"{self.host}:{self.base_port + worker}")
            stub = self._peers[worker] = sc_grpc.ShardControlStub(channel)
        return stub

    def _others(self, forwarded: bool) -> list[int]:
        if forwarded or self.runtime.worker != 0:
            return []
        return list(range(1, self.runtime.workers))

    async def SetLeadership(
        self, request: sc.SetLeadershipRequest, context: grpc.aio.ServicerContext
    ) -> sc.SetLeadershipResponse:
        leaders = {pe.partition: pe.epoch for pe in request.leaders}
        standbys = set(request.standbys) - set(leaders)
        self.runtime.apply_leadership(leaders, standbys)
        fwd = sc.SetLeadershipRequest(leaders=request.leaders, standbys=request.standbys, forwarded=True)
        await asyncio.gather(
            *(self._peer(w).SetLeadership(fwd, timeout=10) for w in self._others(request.forwarded))
        )
        return sc.SetLeadershipResponse()

    async def Status(self, request: sc.StatusRequest, context: grpc.aio.ServicerContext) -> sc.StatusResponse:
        out = sc.StatusResponse(shard_id=self.runtime.shard_id)
        for info in self.runtime.status():
            out.partitions.add(
                partition=info.partition,
                state=_STATES[info.state],
                epoch=info.epoch,
                worker=self.runtime.worker,
                group_counts=info.group_counts,
                load_time_ms=info.load_time_ms or 0,
                queue_size=info.queue_size,
                error=info.error or "",
            )
        others = await asyncio.gather(
            *(
                self._peer(w).Status(sc.StatusRequest(forwarded=True), timeout=10)
                for w in self._others(request.forwarded)
            )
        )
        for o in others:
            out.partitions.extend(o.partitions)
        out.partitions.sort(key=lambda p: p.partition)
        return out

    async def Ping(
        self, request: sc.ShardPingRequest, context: grpc.aio.ServicerContext
    ) -> sc.ShardPingResponse:
        return sc.ShardPingResponse(
            shard_id=self.runtime.shard_id, worker=self.runtime.worker, workers=self.runtime.workers
        )
