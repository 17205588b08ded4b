"""The leadership watcher shards and gateways run, against kmock's Kubernetes API emulator.

The operator writes ``status.partitions``; a process following ``kubernetes:<ns>/<name>`` must
see the current placement first and then every change, and ignore other resources.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from typing import Any

import kmock
import pytest

from groupcoord.common.kubernetes_api import KubernetesApi
from groupcoord.controlplane.kubernetes_leadership import KubernetesLeadership, parse_ref
from groupcoord.controlplane.placement import place, placement_to_status

NS = "kafka"
COLLECTION = f"/apis/groupcoord.io/v1alpha1/namespaces/{NS}/groupcoordinators"

pytestmark = [pytest.mark.timeout(60)]


def test_parse_ref():
    assert parse_ref("kubernetes:kafka/orders") == ("kafka", "orders")
    for bad in ("kafka/orders", "kubernetes:orders", "kubernetes:/orders", "kubernetes:a/b/c"):
        with pytest.raises(ValueError, match="kubernetes:"):
            parse_ref(bad)


def resource(name: str, placement) -> dict[str, Any]:
    return {
        "apiVersion": "groupcoord.io/v1alpha1",
        "kind": "GroupCoordinator",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"shards": 2},
        "status": {"partitions": placement_to_status(placement)},
    }


async def send(k: Any, method: str, path: str, body: dict[str, Any]) -> None:
    headers = {"Content-Type": "application/merge-patch+json"} if method == "patch" else {}
    async with getattr(k, method)(path, json=body, headers=headers) as resp:
        assert resp.status < 300, await resp.text()


async def test_watch_yields_current_then_every_change(kmock: kmock.KubernetesEmulator) -> None:
    kmock.resources["groupcoord.io/v1alpha1/groupcoordinators"] = kmock.ResourceInfo(
        kind="GroupCoordinator", namespaced=True, verbs={"get", "list", "watch"}, subresources={"status"}
    )
    first = place(4, [0, 1])
    await send(kmock, "post", COLLECTION, resource("orders", first))
    await send(kmock, "post", COLLECTION, resource("payments", place(4, [0])))

    source = KubernetesLeadership.from_ref(f"kubernetes:{NS}/orders", KubernetesApi(str(kmock.url)))
    assert await asyncio.to_thread(source.current) == first  # the loop must keep serving kmock

    seen: queue.Queue = queue.Queue()
    stop = threading.Event()

    def follow() -> None:
        for placement in source.watch(stop):
            seen.put(placement)

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        assert await asyncio.to_thread(seen.get, True, 10) == first

        # another resource changes: nothing for us
        await send(kmock, "patch", f"{COLLECTION}/payments/status", {"status": {"partitions": []}})
        # shard 1 fails over to shard 0: the new epochs arrive
        second = place(4, [0], first)
        await send(kmock, "patch", f"{COLLECTION}/orders/status", {"status": resource("x", second)["status"]})
        got = await asyncio.to_thread(seen.get, True, 10)
        assert got == second
        assert {a.leader for a in got.values()} == {0}
        assert seen.empty()
    finally:
        stop.set()
        # the watch notices the stop flag at the next event; give it one
        await send(kmock, "patch", f"{COLLECTION}/orders", {"metadata": {"labels": {"poke": "1"}}})
        await asyncio.to_thread(thread.join, 10)
    assert not thread.is_alive()


async def test_follow_delivers_each_placement_on_the_loop_until_cancelled(
    kmock: kmock.KubernetesEmulator,
) -> None:
    """What shard workers and gateways run: the watch on a thread of its own, every placement
    handed to the caller on its event loop, in order; cancelling stops the watch thread."""
    kmock.resources["groupcoord.io/v1alpha1/groupcoordinators"] = kmock.ResourceInfo(
        kind="GroupCoordinator", namespaced=True, verbs={"get", "list", "watch"}, subresources={"status"}
    )
    first = place(4, [0, 1])
    await send(kmock, "post", COLLECTION, resource("billing", first))
    source = KubernetesLeadership.from_ref(f"kubernetes:{NS}/billing", KubernetesApi(str(kmock.url)))

    loop = asyncio.get_running_loop()
    seen: asyncio.Queue = asyncio.Queue()

    def on_placement(placement) -> None:
        assert asyncio.get_running_loop() is loop  # called on the follower's loop, not the thread
        seen.put_nowait(placement)

    following = asyncio.create_task(source.follow(on_placement))
    try:
        assert await asyncio.wait_for(seen.get(), 10) == first
        second = place(4, [1], first)
        await send(
            kmock, "patch", f"{COLLECTION}/billing/status", {"status": resource("x", second)["status"]}
        )
        assert await asyncio.wait_for(seen.get(), 10) == second
    finally:
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following
        # the watch notices the stop flag at the next event; give it one
        await send(kmock, "patch", f"{COLLECTION}/billing", {"metadata": {"labels": {"poke": "1"}}})
    for _ in range(100):
        if not any(t.name == "leadership-watch" for t in threading.enumerate()):
            break
        await asyncio.sleep(0.1)
    assert not any(t.name == "leadership-watch" for t in threading.enumerate())
