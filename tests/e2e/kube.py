"""Helpers for tests that run real shard/gateway processes against kmock's Kubernetes API
emulator, probing them the way a kubelet does (grpc.health.v1)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def kubeconfig(path: Path, url: str) -> Path:
    """A kubeconfig naming kmock's URL (what the processes read through ``KUBECONFIG``)."""
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: kmock\n"
        f"clusters: [{{name: kmock, cluster: {{server: '{url}'}}}}]\n"
        "users: [{name: kmock, user: {token: test}}]\n"
        "contexts: [{name: kmock, context: {cluster: kmock, user: kmock}}]\n"
    )
    return path


async def send(k: Any, method: str, path: str, body: dict[str, Any]) -> None:
    headers = {"Content-Type": "application/merge-patch+json"} if method == "patch" else {}
    async with getattr(k, method)(path, json=body, headers=headers) as resp:
        assert resp.status < 300, await resp.text()


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
