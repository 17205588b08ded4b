"""Calls from the gateway to coordinator shard workers over pipelined gRPC streams.

One bidirectional ``Coordinator.Batches`` stream per worker address (``streams_per_worker``),
shared by every client connection: many requests in flight, replies matched by correlation id.
Python gRPC costs far more per message than per byte (each stream write waits for its
completion), so each stream sends everything queued since its last write as one
``CoordinatorBatch``, and the worker answers with batches of the replies that are ready
together. One stream batches best: with four, steady heartbeats cost the coordinator 18 % more
CPU each at saturation and 8-12 % more at 2,000-3,000/s (``bench/run.py e2e-heartbeat``,
2026-11-28: 12,074/s against 10,431/s closed loop, p99 at 3,000/s 12 ms against 17 ms). A broken stream fails
its in-flight calls with COORDINATOR_NOT_AVAILABLE (retriable: clients look the coordinator up
again and retry, exactly as after a Kafka broker failure) and is reopened on the next call; a
shard that stopped answering pings breaks its streams the same way (``grpc_keepalive``).
Batches stay under :data:`~groupcoord.common.grpc_limits.MAX_MESSAGE_BYTES` (the largest legal
Kafka request and its envelope); an envelope larger than that is refused alone
(UNKNOWN_SERVER_ERROR) and never sent, so it cannot break the stream of the other groups.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from google.protobuf.message import Message
from kio.schema.errors import ErrorCode

from groupcoord.common import grpc_keepalive, grpc_limits, internal_tls
from groupcoord.common.internal_tls import InternalTls
from groupcoord.rpc.v1 import coordinator_pb2 as pb
from groupcoord.rpc.v1 import coordinator_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)
Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ShardReply:
    """A shard's answer: the response message (the reply's ``response`` oneof, the same API as
    the request's), or a request-level Kafka error code."""

    error_code: int
    error_message: str
    response: Message | None


def failed(code: ErrorCode, message: str) -> ShardReply:
    return ShardReply(int(code.value), message, None)


# Envelopes per gRPC message at most (and their bytes: grpc_limits)
MAX_BATCH = 256


class _Stream:
    def __init__(
        self, address: Address, max_message_bytes: int, tls: InternalTls | None, timeout_s: float = 60.0
    ) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self.max_message_bytes = max_message_bytes
        self.channel = internal_tls.channel(
            tls,
            f"{address[0]}:{address[1]}",
            options=[
                ("grpc.so_reuseport", 0),
                ("grpc.enable_retries", 0),
                *grpc_limits.OPTIONS,
                *grpc_keepalive.CHANNEL_OPTIONS,
            ],
        )
        self.held: pb.CoordinatorEnvelope | None = None  # the first of the next batch (did not fit)
        self.outbox: asyncio.Queue[pb.CoordinatorEnvelope | None] = asyncio.Queue()
        self.waiting: dict[int, asyncio.Future[ShardReply]] = {}
        # (deadline, correlation id) in send order: one timeout for every call, so deadlines
        # only grow and one timer for the oldest serves them all (no timer per call)
        self.deadlines: collections.deque[tuple[float, int]] = collections.deque()
        self.sweeper: asyncio.TimerHandle | None = None
        self.task = asyncio.create_task(self._run())
        self.broken = False

    async def _requests(self) -> AsyncIterator[pb.CoordinatorBatch]:
        """One batch per write: whatever queued up while the previous write was in flight, as
        much as fits one message (the rest starts the next batch)."""
        while True:
            item, self.held = self.held, None
            if item is None and (item := await self.outbox.get()) is None:
                return
            batch = pb.CoordinatorBatch()
            batch.envelopes.append(item)
            size = item.ByteSize() + grpc_limits.PER_ITEM_OVERHEAD
            while len(batch.envelopes) < MAX_BATCH and not self.outbox.empty():
                more = self.outbox.get_nowait()
                if more is None:
                    yield batch
                    return
                more_size = more.ByteSize() + grpc_limits.PER_ITEM_OVERHEAD
                if size + more_size > self.max_message_bytes:
                    self.held = more
                    break
                batch.envelopes.append(more)
                size += more_size
            yield batch

    async def _run(self) -> None:
        stub = pb_grpc.CoordinatorStub(self.channel)
        try:
            async for replies in stub.Batches(self._requests()):
                for reply in replies.replies:
                    fut = self.waiting.pop(reply.correlation_id, None)
                    if fut is None or fut.done():
                        continue
                    which = reply.WhichOneof("response")
                    fut.set_result(
                        ShardReply(
                            reply.error_code, reply.error_message, getattr(reply, which) if which else None
                        )
                    )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - any stream failure is a shard failure
            log.info("stream to shard %s:%s ended: %s", *self.address, exc)
        finally:
            self.broken = True
            for fut in self.waiting.values():
                if not fut.done():
                    fut.set_result(failed(ErrorCode.coordinator_not_available, "shard stream closed"))
            self.waiting.clear()

    def send(self, envelope: pb.CoordinatorEnvelope) -> asyncio.Future[ShardReply]:
        """The reply to ``envelope``, or REQUEST_TIMED_OUT after ``timeout_s``."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[ShardReply] = loop.create_future()
        self.waiting[envelope.correlation_id] = fut
        self._drop_answered()
        self.deadlines.append((loop.time() + self.timeout_s, envelope.correlation_id))
        if self.sweeper is None:
            self.sweeper = loop.call_at(self.deadlines[0][0], self._sweep)
        self.outbox.put_nowait(envelope)
        return fut

    def _drop_answered(self) -> None:
        """Forget the deadlines of answered calls at the head: the deque then holds only what
        follows the oldest unanswered call, and its head is the next deadline that matters."""
        while self.deadlines and self.deadlines[0][1] not in self.waiting:
            self.deadlines.popleft()

    def _sweep(self) -> None:
        """Answer the calls whose deadline passed REQUEST_TIMED_OUT; wake again for the next."""
        self.sweeper = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self.deadlines and self.deadlines[0][0] <= now:
            _, correlation_id = self.deadlines.popleft()
            fut = self.waiting.pop(correlation_id, None)
            if fut is not None and not fut.done():
                fut.set_result(
                    failed(ErrorCode.request_timed_out, f"shard {self.address[0]}:{self.address[1]} did not answer")
                )
        self._drop_answered()
        if self.deadlines:
            self.sweeper = loop.call_at(self.deadlines[0][0], self._sweep)

    async def close(self) -> None:
        if self.sweeper is not None:
            self.sweeper.cancel()
        self.outbox.put_nowait(None)
        self.task.cancel()
        await self.channel.close()


class WorkerClient:
    """Sends coordinator envelopes to shard workers over shared streams (mutual TLS with the
    gateway's certificate ``tls``; plaintext without)."""

    def __init__(
        self,
        timeout_s: float = 60.0,
        streams_per_worker: int = 1,
        max_message_bytes: int = grpc_limits.MAX_MESSAGE_BYTES,
        tls: InternalTls | None = None,
    ) -> None:
        self.tls = tls
        self.timeout_s = timeout_s
        self.streams_per_worker = streams_per_worker
        self.max_message_bytes = max_message_bytes
        self._streams: dict[tuple[Address, int], _Stream] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)

    async def call(self, address: Address, envelope: pb.CoordinatorEnvelope) -> ShardReply:
        """Send ``envelope`` (its request and partition set; the correlation id is set here) to
        the worker at ``address`` and wait for the reply."""
        if not grpc_limits.fits(envelope, self.max_message_bytes):
            return failed(
                ErrorCode.unknown_server_error,
                f"request of {envelope.ByteSize()} bytes exceeds the {self.max_message_bytes} bytes of a shard message",
            )
        # A partition always uses the same stream: its requests stay in order.
        key = (address, envelope.partition % self.streams_per_worker)
        stream = self._streams.get(key)
        if stream is None or stream.broken:
            if stream is not None:  # its channel would stay open (a failover retries every 0.25 s)
                self._closing.add(task := asyncio.create_task(stream.close()))
                task.add_done_callback(self._closing.discard)
            stream = self._streams[key] = _Stream(address, self.max_message_bytes, self.tls, self.timeout_s)
        envelope.correlation_id = next(self._ids)
        return await stream.send(envelope)

    async def close(self) -> None:
        streams, self._streams = self._streams, {}
        for stream in streams.values():
            await stream.close()
