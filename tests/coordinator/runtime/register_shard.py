"""The register shard: a small, real coordinator shard for exercising the runtime on its own.

Test code, so it lives with the tests: the runtime's tests and benchmarks import it (the
benchmarks put this directory on ``sys.path``), and shard processes host it when started with
``register_shard_process.py`` (:data:`REGISTER_SHARDS`) instead of ``groupcoord shard``.

It follows the coordinator shard contract exactly (handlers return records and never mutate; ``replay`` is
the only mutation; timers return records), so the runtime's tests and benchmarks run against
a real state machine without depending on the group coordinator. A register is a named int64 with
optional opaque padding (benchmarks size records like offset commits) and an optional expiry
timer that deletes it (exercises timers on the partition loop).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import register_pb2
import register_pb2_grpc

from groupcoord.common.records import FIRST_OUTSIDE_TYPE_ID, RECORD_TYPES
from groupcoord.coordinator.core.contract import (
    PENDING,
    ArmedTimers,
    CoordinatorOperation,
    CoordinatorRecord,
    CoordinatorResult,
    ScheduleTimer,
    TimerIntent,
    read_operation,
    write_operation,
)
from groupcoord.coordinator.runtime.worker_runtime import WorkerRuntime
from groupcoord.coordinator.server.envelopes import EnvelopeDispatcher
from groupcoord.coordinator.server.hosted_shards import HostedShards

REGISTER_TYPE_ID = FIRST_OUTSIDE_TYPE_ID  # the first id outside the product's (groupcoord.common.records)
RECORD_TYPES.register(REGISTER_TYPE_ID, register_pb2.RegisterKey, register_pb2.RegisterValue)


class RegisterMetrics:
    """The register shard's CoordinatorMetricsShard: a count for the partition status, no
    groups to export and nothing its writes count. It holds the registers, not the shard: a
    shard -> metrics -> shard cycle would keep every replaced replica (a million registers in
    bench/takeover.py) alive until a full collection, which showed as +45 % on a warm takeover."""

    def __init__(self, values: dict[str, int]) -> None:
        self._values = values

    def group_counts(self) -> dict[str, int]:
        return {"register": len(self._values)}

    def export(self, partition: int, sink: Any) -> None:
        sink.set_group_counts(partition, {})  # no groups of any protocol

    def observe_written(
        self, partition: int, records: Any, sink: Any, seen: dict[Any, Any], *, by_timer: bool
    ) -> None:
        return None


class RegisterShard:
    """All registers hashed to one state-topic partition."""

    def __init__(self, partition: int, armed: ArmedTimers) -> None:
        self.partition = partition  # ``armed``: registers only schedule (intents), never ask
        self.values: dict[str, int] = {}
        self.loaded_at_ms: int | None = None
        # Requests waiting for a register to appear (not state: they die with leadership).
        self._waiting: dict[str, list[Any]] = {}

    def replay(self, record: CoordinatorRecord) -> None:
        key = record.key
        assert isinstance(key, register_pb2.RegisterKey)
        if record.value is None:
            self.values.pop(key.name, None)
        else:
            self.values[key.name] = record.value.value  # type: ignore[attr-defined]

    def put(
        self, request: register_pb2.RegisterPutRequest, now_ms: int
    ) -> CoordinatorResult[register_pb2.RegisterPutResponse]:
        record = CoordinatorRecord(
            register_pb2.RegisterKey(name=request.name),
            register_pb2.RegisterValue(value=request.value, padding=request.padding),
        )
        timers: list[TimerIntent] = []
        if request.expire_after_ms > 0:
            name, value = request.name, request.value
            timers.append(
                ScheduleTimer(f"expire:{name}", request.expire_after_ms, lambda: self._expire(name, value))
            )
        previous = self.values.get(request.name, 0)
        found = register_pb2.RegisterGetResponse(found=True, value=request.value)
        completions = [(token, found) for token in self._waiting.pop(request.name, ())]
        return CoordinatorResult(
            [record], register_pb2.RegisterPutResponse(previous=previous), completions, timers
        )

    def wait(
        self, request: register_pb2.RegisterGetRequest, now_ms: int, token: Any
    ) -> CoordinatorResult[register_pb2.RegisterGetResponse]:
        """Answer once the register exists: a delayed response, like a classic JoinGroup."""
        value = self.values.get(request.name)
        if value is not None:
            return CoordinatorResult([], register_pb2.RegisterGetResponse(found=True, value=value))
        self._waiting.setdefault(request.name, []).append(token)
        return CoordinatorResult([], PENDING)

    def get(
        self, request: register_pb2.RegisterGetRequest, now_ms: int
    ) -> CoordinatorResult[register_pb2.RegisterGetResponse]:
        value = self.values.get(request.name)
        if request.work:
            _busy(request.work)
        return CoordinatorResult(
            [], register_pb2.RegisterGetResponse(found=value is not None, value=value or 0)
        )

    def on_loaded(self, now_ms: int) -> CoordinatorResult[None]:
        """Called by the runtime once the partition is loaded (where the group coordinator re-arms timers)."""
        self.loaded_at_ms = now_ms
        return CoordinatorResult()

    def transactions(self) -> None:
        """Registers are written outside any client transaction."""
        return None

    def _expire(self, name: str, value: int) -> CoordinatorResult[None]:
        # Re-validate: the register may have been overwritten since the timer was armed.
        if self.values.get(name) != value:
            return CoordinatorResult()
        return CoordinatorResult([CoordinatorRecord(register_pb2.RegisterKey(name=name), None)])

    def metrics(self) -> RegisterMetrics:
        return RegisterMetrics(self.values)  # restore() replaces the dict: made per call

    @property
    def data(self) -> dict[str, int]:
        return self.values

    def restore(self, data: dict[str, int]) -> None:
        self.values = dict(data)
        self._waiting = {}  # PENDING requests die with a revert (the runtime failed them)


def _busy(iterations: int) -> int:
    """Deterministic CPU work (see ``RegisterGetRequest.work``)."""
    acc = 0
    for i in range(iterations):
        acc = (acc * 31 + i) & 0xFFFFFFFF
    return acc


OPERATIONS: dict[str, Callable[[Any], CoordinatorOperation[Any, Any]]] = {
    "put": lambda r: write_operation("put", lambda shard, now, _: shard.put(r, now)),
    "wait": lambda r: write_operation("wait", lambda shard, now, token: shard.wait(r, now, token)),
    "get": lambda r: read_operation("get", lambda shard, now, _: shard.get(r, now)),
}
"""The Register service's oneof field → the operation serving it."""


class RegisterServicer(register_pb2_grpc.RegisterServicer):
    """The Register gRPC service of a worker: envelope batches into its runtime."""

    def __init__(self, runtime: WorkerRuntime) -> None:
        self.dispatcher = EnvelopeDispatcher(runtime, register_pb2.RegisterReply, OPERATIONS)

    async def Batches(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        def batch(replies: list[Any]) -> register_pb2.RegisterReplyBatch:
            return register_pb2.RegisterReplyBatch(replies=replies)

        async for reply in self.dispatcher.batches(request_iterator, context, batch):
            yield reply


def add_register_service(server: grpc.aio.Server, runtime: WorkerRuntime) -> None:
    register_pb2_grpc.add_RegisterServicer_to_server(RegisterServicer(runtime), server)


REGISTER_SHARDS = HostedShards(RegisterShard, add_register_service)
"""What a worker hosts in the runtime's tests: register shards behind the Register service."""
