"""The REST calls the operator stories make, on either API: kmock's emulator or a real
``kube-apiserver`` through an ``aiohttp`` session (both answer ``k.get(path)`` and friends as
``aiohttp`` does); the resource they tell of; and what they read back from its status."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from groupcoord.controlplane.placement import placement_from_status

DEADLINE_S = 30.0

# The stories' resource: ``orders`` in ``kafka``, 3 shards of 2 threads over 12 state partitions.
NS = "kafka"
NAME = "orders"
CR_PATH = f"/apis/groupcoord.io/v1alpha1/namespaces/{NS}/groupcoordinators"
SPEC = {
    "kafka": {"bootstrapServers": "kafka:9092"},
    "stateTopic": {"partitions": 12},
    "shards": 3,
    "threadsPerShard": 2,
    "standbysPerPartition": 1,
}
#: a spec change the CRD refuses on four counts at once (schema, CEL, immutability)
BAD_SPEC = {
    "shards": 2,
    "groupDefaults": {"heartbeatIntervalMs": 60000},
    "stateTopic": {"partitions": 24},
    "threadsPerShard": 0,
}


async def get(k: Any, path: str) -> dict[str, Any] | None:
    async with k.get(path) as resp:
        return await resp.json() if resp.status == 200 else None


async def send(k: Any, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    headers = {"Content-Type": "application/merge-patch+json"} if method == "patch" else {}
    async with getattr(k, method)(path, json=body, headers=headers) as resp:
        assert resp.status < 300, await resp.text()
        return await resp.json()


async def eventually(
    k: Any, path: str, check: Callable[[dict[str, Any]], bool], what: str, timeout: float = DEADLINE_S
) -> dict[str, Any]:
    """Poll until ``check(obj)`` holds; operators converge asynchronously, so no fixed sleeps."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    obj: dict[str, Any] | None = None
    while loop.time() < deadline:
        obj = await get(k, path)
        if obj is not None:
            try:
                if check(obj):
                    return obj
            except (KeyError, TypeError, StopIteration):
                pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; last seen: {obj}")


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == type_)


def leaders(obj: dict[str, Any]) -> dict[int, int]:
    return {p: a.leader for p, a in placement_from_status(obj["status"]["partitions"]).items()}
