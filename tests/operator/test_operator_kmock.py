"""The one operator story no real API server can tell: a spec the CRD's schema would refuse
reaching the operator (after a CRD downgrade, or with the CRD's validation bypassed), told on
kmock's emulator, which validates nothing. The operator must still refuse it itself, naming every
problem at once, and leave workloads and leadership as they were. Every other story runs on a real
API server (``test_operator_stories.py``, ``test_operator_apiserver.py``).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator
from typing import Any

import kmock
import pytest

os.environ.setdefault("GROUPCOORD_OPERATOR_RESYNC_SECONDS", "1")

import kopf  # noqa: E402
from api_calls import BAD_SPEC, CR_PATH, NAME, NS, SPEC, condition, eventually, get, send  # noqa: E402
from kmock_resources import declare_resources  # noqa: E402

pytestmark = [pytest.mark.timeout(120)]


@pytest.fixture
async def operator(kmock: kmock.KubernetesEmulator, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    declare_resources(kmock)
    monkeypatch.setenv("GROUPCOORD_OPERATOR_API_SERVER", str(kmock.url).rstrip("/"))
    monkeypatch.setenv("GROUPCOORD_OPERATOR_NAMESPACE", NS)
    monkeypatch.setenv("GROUPCOORD_OPERATOR_RENEW_SECONDS", "1")
    import groupcoord_operator.handlers as handlers

    # kopf gets its own thread and event loop: on exit it cancels every task it did not start,
    # which in a shared loop would include pytest-asyncio's own. The emulator keeps serving on
    # the test's loop, which the test leaves free by awaiting.
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(kopf.operator(clusterwide=True, standalone=True, stop_flag=stop))
        except BaseException as exc:  # reported to the test below
            errors.append(exc)

    thread = threading.Thread(target=run, name="kopf-operator", daemon=True)
    thread.start()
    try:
        yield kmock
    finally:
        stop.set()
        await asyncio.to_thread(thread.join, 20)
        handlers.PROCESS.close()
    assert not thread.is_alive(), "the operator did not stop"
    assert not errors, errors


async def create_resource(k: Any, spec: dict[str, Any]) -> None:
    body = {
        "apiVersion": "groupcoord.io/v1alpha1",
        "kind": "GroupCoordinator",
        "metadata": {
            "name": NAME,
            "namespace": NS,
            "uid": "5b0e8a4c-0000-4000-8000-000000000001",
            "resourceVersion": "1",  # the emulator keeps what it is given; kopf's patches test it
        },
        "spec": spec,
    }
    await send(k, "post", CR_PATH, body)


STS = f"/apis/apps/v1/namespaces/{NS}/statefulsets/{NAME}-shard"
CR = f"{CR_PATH}/{NAME}"


async def test_a_spec_the_crd_would_refuse_is_refused_by_the_operator_too(operator: Any) -> None:
    k = operator
    await create_resource(k, SPEC)
    sts = await eventually(k, STS, lambda o: o["spec"]["replicas"] == 3, "shard StatefulSet")
    cr = await eventually(k, CR, lambda o: len(o["status"]["partitions"]) == 12, "initial placement")
    leadership = cr["status"]["partitions"]

    bad = {**BAD_SPEC, "surprise": True}  # and an unknown field (a real API server prunes it)
    await send(k, "patch", CR, {"spec": bad})
    cr = await eventually(
        k, CR, lambda o: condition(o, "Degraded")["reason"] == "InvalidSpec", "Degraded: InvalidSpec"
    )
    message = condition(cr, "Degraded")["message"]
    assert "heartbeatIntervalMs (60000) must be smaller than sessionTimeoutMs (45000)" in message
    assert "partitions cannot change from 12 to 24" in message, "every problem is named at once"
    assert "threadsPerShard: 0 is less than the minimum of 1" in message
    assert "'surprise' was unexpected" in message
    assert cr["status"]["partitions"] == leadership
    assert (await get(k, STS))["spec"] == sts["spec"]

    # fixing the spec recovers (and the shrink to 2 shards is then carried out)
    fixed = {
        "groupDefaults": {"heartbeatIntervalMs": 3000},
        "stateTopic": {"partitions": 12},
        "threadsPerShard": 2,
        "surprise": None,
    }
    await send(k, "patch", CR, {"spec": fixed})
    await eventually(k, CR, lambda o: condition(o, "Degraded")["reason"] != "InvalidSpec", "valid again")
    await eventually(k, STS, lambda o: o["spec"]["replicas"] == 2, "replicas=2")
