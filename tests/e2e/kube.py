"""Helpers for tests that run real shard/gateway processes following a GroupCoordinator on a
Kubernetes API server (the ``workload_namespace`` fixture), probing them the way a kubelet does
(grpc.health.v1)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def check(port: int, service: str = "", worker: int = 0, address: str = "127.0.0.1") -> int | None:
    """One grpc.health.v1 Check as the kubelet makes it; None when nothing answers."""
    async with grpc.aio.insecure_channel(f"{address}:{port + worker}") as channel:
        try:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=1
            )
        except grpc.aio.AioRpcError:
            return None
        return int(reply.status)


async def until(what: str, predicate: Callable[[], Awaitable[bool]], timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await predicate():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def has_status(status: Awaitable[int | None], expected: int) -> bool:
    return await status == expected
