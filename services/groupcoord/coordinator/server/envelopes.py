"""Envelope streams into a worker's runtime (the transport of the Coordinator service).

A client keeps bidirectional streams to a worker (the gateway: a few ``Coordinator.Batches``
streams per worker, each partition always on the same one) and sends
``{correlation_id, partition, oneof request}`` envelopes without waiting, many per message;
each runs on its partition's loop and the reply
``{correlation_id, error_code, oneof response}`` goes back when its write is committed (a read:
at once), out of order. Measured here, unary Python gRPC does ~1.3–3.6k calls/s
while a stream with many messages in flight does 7–10k/s, hence streams. A service shaped
this way brings one table from its oneof field names to typed operations on the coordinator
shard (the group coordinator's: ``core/group_operations.py``); the dispatcher itself knows no
API. An operation whose answer tells the metrics what it did says so itself (its ``answered``
hook, called with the runtime's metrics facade once the answer is ready). A service may hold an
envelope back until something outside the log is ready for it (``hold``: the group
coordinator's waits for the topics a subscription names); the others go on meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import grpc
from google.protobuf import text_format
from google.protobuf.message import Message
from kio.schema.errors import ErrorCode

from groupcoord.common import grpc_limits
from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.contract import CoordinatorOperation
from groupcoord.coordinator.runtime.worker_runtime import WorkerRuntime

log = logging.getLogger(__name__)

class EnvelopeDispatcher:
    """Runs envelope streams against a runtime; see the module docstring."""

    def __init__(
        self,
        runtime: WorkerRuntime,
        reply_type: type[Message],
        operations: Mapping[str, Callable[[Any], CoordinatorOperation[Any, Any]]],
        *,
        request_oneof: str = "request",
        audited: frozenset[str] = frozenset(),
        hold: Callable[[str, Message], Awaitable[None] | None] | None = None,
        hold_at_most_s: float = 2.0,
    ) -> None:
        self.runtime = runtime
        self.reply_type = reply_type
        self.operations = operations
        self.request_oneof = request_oneof
        # Operations logged with the client principal the envelope names (who deleted what):
        # the shard never sees the client, the gateway authorized it.
        self.audited = audited
        # hold(api, request): None to submit at once, or what to wait for first (at most
        # hold_at_most_s; if it fails or takes longer, the request runs as it would have)
        self.hold = hold
        self.hold_at_most_s = hold_at_most_s
        self._held: set[asyncio.Task[None]] = set()

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
            reply.error_code = int(ErrorCode.unknown_server_error)
            reply.error_message = f"{type(exc).__name__}: {exc}"
        return reply

    async def batches(
        self,
        batches: AsyncIterator[Any],
        context: grpc.aio.ServicerContext,
        reply_batch: Callable[[list[Message]], Message],
    ) -> AsyncIterator[Message]:
        """Run a stream of envelope batches; yield reply batches. Many envelopes per gRPC
        message each way: Python gRPC costs far more per message than per byte, so a client
        sends whatever it has queued as one batch, and the replies that are ready together go
        back as one batch."""

        async def envelopes() -> AsyncIterator[Any]:
            async for batch in batches:
                for envelope in batch.envelopes:
                    yield envelope

        async for replies in self._replies(envelopes()):
            # under the gRPC message limit: a reply too large for any message fails alone
            fitting = [r if grpc_limits.fits(r) else self._too_large(r) for r in replies]
            for chunk in grpc_limits.packed(fitting):
                yield reply_batch(chunk)

    async def _submit_after(
        self,
        wait: Awaitable[None],
        partition: int,
        op: CoordinatorOperation[Any, Any],
        done: Callable[[asyncio.Future[Any]], None],
    ) -> None:
        try:
            await asyncio.wait_for(wait, self.hold_at_most_s)
        except Exception as exc:  # noqa: BLE001 - what it waited for is an optimization only
            log.info("%s: submitted without waiting further: %r", op.name, exc)
        self.runtime.submit(partition, op).add_done_callback(done)

    def _too_large(self, reply: Message) -> Message:
        size = reply.ByteSize()
        log.error("a reply of %d bytes exceeds the gRPC message limit; answering an error instead", size)
        return self.reply_type(
            correlation_id=reply.correlation_id,  # type: ignore[attr-defined]
            error_code=int(ErrorCode.unknown_server_error),
            error_message=f"reply of {size} bytes exceeds the {grpc_limits.MAX_MESSAGE_BYTES} bytes of a shard message",
        )

    async def _replies(self, requests: AsyncIterator[Any]) -> AsyncIterator[list[Message]]:
        replies: asyncio.Queue[Message | None] = asyncio.Queue()
        outstanding = 0
        reading_done = False

        metrics = self.runtime.metrics

        def answered(
            envelope: Any, api: str, op: CoordinatorOperation[Any, Any], started: float
        ) -> Callable[[asyncio.Future[Any]], None]:
            def done(fut: asyncio.Future[Any]) -> None:
                if metrics is not None:
                    metrics.observe_request(
                        api,
                        time.perf_counter() - started,
                        partition=envelope.partition,
                        group=getattr(getattr(envelope, api), "group_id", None) or None,
                    )
                    if op.answered is not None and not fut.cancelled() and fut.exception() is None:
                        op.answered(metrics, fut.result())  # what the answer says it did
                replies.put_nowait(self.reply_for(envelope, fut, api))

            return done

        async def read() -> None:
            nonlocal outstanding, reading_done
            try:
                async for envelope in requests:
                    api = envelope.WhichOneof(self.request_oneof)
                    outstanding += 1
                    operation = self.operations.get(api) if api is not None else None
                    if operation is None:
                        replies.put_nowait(
                            self.reply_type(
                                correlation_id=envelope.correlation_id,
                                error_code=int(ErrorCode.invalid_request),
                                error_message="no request",
                            )
                        )
                        continue
                    if api in self.audited:
                        log.info(
                            "%s by %s on partition %d: %s",
                            api,
                            getattr(envelope, "principal", "") or "(no principal)",
                            envelope.partition,
                            text_format.MessageToString(getattr(envelope, api), as_one_line=True)[:500],
                        )
                    request = getattr(envelope, api)
                    op = operation(request)
                    done = answered(envelope, api, op, time.perf_counter())
                    wait = self.hold(api, request) if self.hold is not None else None
                    if wait is None:
                        self.runtime.submit(envelope.partition, op).add_done_callback(done)
                    else:
                        task = asyncio.create_task(self._submit_after(wait, envelope.partition, op, done))
                        self._held.add(task)
                        task.add_done_callback(self._held.discard)
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
                while not replies.empty():
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
