"""The leadership watcher shards and gateways run, against a real Kubernetes API server
(``tests/operator/kube_apiserver.py``) with RBAC on, as the chart's workload ServiceAccount (which
may only get, list and watch GroupCoordinators).

The operator writes ``status.partitions``; a process following ``kubernetes:<ns>/<name>`` must
see the current placement first and then every change, ignore other resources, and keep
following across the server's ends of a watch (``timeoutSeconds``).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from groupcoord.common.kubernetes_api import KubernetesApi, kubeconfig_config
from groupcoord.controlplane.kubernetes_leadership import KubernetesLeadership, parse_ref
from groupcoord.controlplane.placement import place, placement_to_status
from tests.operator.kube_apiserver import RELEASE_NAME, KubeApiServer, install, service_account_token

NS = "leadership"  # a namespace of its own on the session's API server
COLLECTION = f"/apis/groupcoord.io/v1alpha1/namespaces/{NS}/groupcoordinators"

pytestmark = [pytest.mark.timeout(90)]


@pytest.fixture(scope="module")
def workload_api(kube_apiserver: KubeApiServer, tmp_path_factory: pytest.TempPathFactory) -> KubernetesApi:
    """The API as a shard or gateway pod reaches it: the chart installed (without its own
    resource), and the chart's workload account's token."""

    async def token() -> str:
        async with kube_apiserver.admin_session() as admin:
            await install(admin, NS, resource=False)
            return await service_account_token(admin, NS, f"{RELEASE_NAME}-workload")

    path = kube_apiserver.kubeconfig(
        tmp_path_factory.mktemp("workload") / "kubeconfig", asyncio.run(token()), NS
    )
    return KubernetesApi(kubeconfig_config(path))


@pytest.fixture
async def k(kube_apiserver: KubeApiServer) -> AsyncIterator[aiohttp.ClientSession]:
    async with kube_apiserver.admin_session() as session:
        yield session


def test_parse_ref():
    assert parse_ref("kubernetes:kafka/orders") == ("kafka", "orders")
    for bad in ("kafka/orders", "kubernetes:orders", "kubernetes:/orders", "kubernetes:a/b/c"):
        with pytest.raises(ValueError, match="kubernetes:"):
            parse_ref(bad)


def resource(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "groupcoord.io/v1alpha1",
        "kind": "GroupCoordinator",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"kafka": {"bootstrapServers": "kafka:9092"}, "stateTopic": {"partitions": 4}, "shards": 2},
    }


def status(placement) -> dict[str, Any]:
    return {"status": {"partitions": placement_to_status(placement)}}


async def create(k: Any, name: str, placement) -> None:
    """The resource, then its placement through the status subresource, as the operator writes it."""
    await send(k, "post", COLLECTION, resource(name))
    await send(k, "patch", f"{COLLECTION}/{name}/status", status(placement))


async def send(k: Any, method: str, path: str, body: dict[str, Any]) -> None:
    headers = {"Content-Type": "application/merge-patch+json"} if method == "patch" else {}
    async with getattr(k, method)(path, json=body, headers=headers) as resp:
        assert resp.status < 300, await resp.text()


async def test_watch_yields_current_then_every_change(
    k: aiohttp.ClientSession, workload_api: KubernetesApi
) -> None:
    first = place(4, [0, 1])
    await create(k, "orders", first)
    await create(k, "payments", place(4, [0]))

    source = KubernetesLeadership.from_ref(f"kubernetes:{NS}/orders", workload_api)
    assert await asyncio.to_thread(source.current) == first

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
        await send(k, "patch", f"{COLLECTION}/payments/status", status(place(4, [1])))
        # shard 1 fails over to shard 0: the new epochs arrive
        second = place(4, [0], first)
        await send(k, "patch", f"{COLLECTION}/orders/status", status(second))
        got = await asyncio.to_thread(seen.get, True, 10)
        assert got == second
        assert {a.leader for a in got.values()} == {0}
        assert seen.empty()
    finally:
        stop.set()
        # the watch notices the stop flag at the next event; give it one
        await send(k, "patch", f"{COLLECTION}/orders", {"metadata": {"labels": {"poke": "1"}}})
        await asyncio.to_thread(thread.join, 10)
    assert not thread.is_alive()


async def test_follow_delivers_each_placement_on_the_loop_until_cancelled(
    k: aiohttp.ClientSession, workload_api: KubernetesApi
) -> None:
    """What shard workers and gateways run: the watch on a thread of its own, every placement
    handed to the caller on its event loop, in order; cancelling stops the watch thread."""
    first = place(4, [0, 1])
    await create(k, "billing", first)
    source = KubernetesLeadership.from_ref(f"kubernetes:{NS}/billing", workload_api)

    loop = asyncio.get_running_loop()
    seen: asyncio.Queue = asyncio.Queue()

    def on_placement(placement) -> None:
        assert asyncio.get_running_loop() is loop  # called on the follower's loop, not the thread
        seen.put_nowait(placement)

    following = asyncio.create_task(source.follow(on_placement))
    try:
        assert await asyncio.wait_for(seen.get(), 10) == first
        second = place(4, [1], first)
        await send(k, "patch", f"{COLLECTION}/billing/status", status(second))
        assert await asyncio.wait_for(seen.get(), 10) == second
    finally:
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following
        # the watch notices the stop flag at the next event; give it one
        await send(k, "patch", f"{COLLECTION}/billing", {"metadata": {"labels": {"poke": "1"}}})
    for _ in range(100):
        if not any(t.name == "leadership-watch" for t in threading.enumerate()):
            break
        await asyncio.sleep(0.1)
    assert not any(t.name == "leadership-watch" for t in threading.enumerate())


async def test_the_watch_follows_across_the_servers_ends_of_it(
    k: aiohttp.ClientSession, workload_api: KubernetesApi
) -> None:
    """The server ends every watch after ``timeoutSeconds`` (here 1 s): the watcher reads the
    resource again and watches on, and a change made between two watches is not missed."""
    first = place(4, [0, 1])
    await create(k, "invoices", first)
    source = KubernetesLeadership.from_ref(f"kubernetes:{NS}/invoices", workload_api)
    seen: queue.Queue = queue.Queue()
    stop = threading.Event()

    def follow() -> None:
        for placement in source.watch(stop, timeout_s=1):
            seen.put(placement)

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        assert await asyncio.to_thread(seen.get, True, 10) == first
        await asyncio.sleep(2.5)  # two watches ended by the server meanwhile
        second = place(4, [1], first)
        await send(k, "patch", f"{COLLECTION}/invoices/status", status(second))
        assert await asyncio.to_thread(seen.get, True, 10) == second
        assert seen.empty(), "the re-reads after each end of a watch yield nothing new"
    finally:
        stop.set()
        await asyncio.to_thread(thread.join, 10)
    assert not thread.is_alive()


async def test_a_workload_account_may_read_but_never_write(workload_api: KubernetesApi) -> None:
    """The chart gives shard and gateway pods read access only: a process that tried to write
    leadership itself would be refused by the API server."""
    status_path = f"{COLLECTION}/orders/status"
    code, _ = await asyncio.to_thread(
        workload_api.request, "PATCH", status_path, (), {"status": {}}, "application/merge-patch+json"
    )
    assert code == 403
