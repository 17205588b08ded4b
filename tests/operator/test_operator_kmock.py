"""The real kopf operator, run in-process against kmock's stateful Kubernetes API emulator.

The operator's stories that a real API server can tell run against one
(``test_operator_apiserver.py``). These stay on kmock because they need what only an emulator
gives: its request log (every write the operator made, in order: idempotence, the order of a
rolling update's steps) and a spec the CRD's schema would refuse reaching the operator (which must
still mark it Degraded, as it would after a CRD downgrade). kmock stores objects, merges patches
and serves watch streams, but runs no controllers: the test plays the StatefulSet controller and
the kubelet itself.

The story: create a GroupCoordinator → workloads and leadership appear; pods become Ready → the
resource is Ready; threads and shards are edited → workloads and leadership follow with minimal
moves; a shard pod goes NotReady → its partitions move with epoch + 1; a bad spec → Degraded,
with workloads and leadership left alone.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import kmock
import pytest

os.environ.setdefault("GROUPCOORD_OPERATOR_RESYNC_SECONDS", "1")

import kopf  # noqa: E402
from api_calls import DEADLINE_S, condition, eventually, get, leaders, send  # noqa: E402
from kmock_resources import declare_resources  # noqa: E402

from groupcoord.controlplane.placement import placement_from_status  # noqa: E402
from groupcoord_operator.build import PAUSE_RECONCILIATION, RESTART, TEMPLATE_HASH  # noqa: E402

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


def shard_pod(index: int, ready: bool, template_hash: str | None = None) -> dict[str, Any]:
    """What the StatefulSet controller and kubelet would produce for shard ``index``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{NAME}-shard-{index}",
            "namespace": NS,
            "annotations": {TEMPLATE_HASH: template_hash or "initial"},
            "labels": {
                "app.kubernetes.io/name": "groupcoord",
                "app.kubernetes.io/instance": NAME,
                "app.kubernetes.io/component": "shard",
                "app.kubernetes.io/managed-by": "groupcoord-operator",
                "apps.kubernetes.io/pod-index": str(index),
            },
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


async def set_pod_ready(k: Any, index: int, ready: bool, template_hash: str | None = None) -> None:
    """Create or update shard ``index``'s pod; with ``template_hash``, it now runs that template."""
    path = f"/api/v1/namespaces/{NS}/pods/{NAME}-shard-{index}"
    pod = shard_pod(index, ready, template_hash)
    if await get(k, path) is None:
        await send(k, "post", f"/api/v1/namespaces/{NS}/pods", pod)
    else:
        patch: dict[str, Any] = {"status": pod["status"]}
        if template_hash:
            patch["metadata"] = {"annotations": pod["metadata"]["annotations"]}
        await send(k, "patch", path, patch)


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
GW = f"/apis/apps/v1/namespaces/{NS}/deployments/{NAME}-gateway"
CR = f"{CR_PATH}/{NAME}"


def workload_and_status_writes(k: Any) -> int:
    """Writes the operator made so far to workloads, Services or the resource status."""
    targets = ("/statefulsets", "/deployments", "/services", "/poddisruptionbudgets")
    count = 0
    for r in list(k):  # the emulator's request log
        path = str(r.url.path)
        if str(r.method.value).upper() in ("POST", "PATCH", "PUT") and (
            any(t in path for t in targets) or path.endswith("/status")
        ):
            count += 1
    return count


def shard_args(sts: dict[str, Any]) -> list[str]:
    return sts["spec"]["template"]["spec"]["containers"][0]["args"]


def arg(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


async def test_lifecycle_create_scale_fail_over_and_bad_spec(operator: Any) -> None:
    k = operator
    await create_resource(k, SPEC)

    # creating the resource creates the workloads and publishes leadership
    sts = await eventually(k, STS, lambda o: o["spec"]["replicas"] == 3, "shard StatefulSet")
    assert arg(shard_args(sts), "--threads") == "2"
    assert arg(shard_args(sts), "--leadership") == f"kubernetes:{NS}/{NAME}"
    assert sts["metadata"]["ownerReferences"][0]["name"] == NAME
    await eventually(k, GW, lambda o: o["spec"]["replicas"] == 2, "gateway Deployment")
    for svc in (f"{NAME}-shard", f"{NAME}-gateway"):
        assert await eventually(k, f"/api/v1/namespaces/{NS}/services/{svc}", lambda o: True, svc)
    cr = await eventually(k, CR, lambda o: len(o["status"]["partitions"]) == 12, "initial placement")
    assert sorted(Counter(leaders(cr).values()).values()) == [4, 4, 4]
    assert all(p["epoch"] == 1 for p in cr["status"]["partitions"])
    assert not cr["metadata"].get("finalizers"), "deleting the resource must never wait for the operator"

    # shards come up → Ready
    for i in range(3):
        await set_pod_ready(k, i, True)
    cr = await eventually(k, CR, lambda o: condition(o, "Ready")["status"] == "True", "Ready")
    assert condition(cr, "Degraded")["status"] == "False"
    before = placement_from_status(cr["status"]["partitions"])

    # idempotent: with nothing changing, resyncs (every 1 s here) write nothing
    writes = workload_and_status_writes(k)
    assert writes >= 5, "creating 6 objects and the status were writes"
    await asyncio.sleep(2.5)  # a negative check needs some wait
    assert workload_and_status_writes(k) == writes

    # the status says where clients connect, and what `kubectl scale` needs
    (listener,) = cr["status"]["listeners"]
    assert listener["bootstrapServers"] == f"{NAME}-gateway.{NS}.svc:9092" and listener["type"] == "internal"
    assert cr["status"]["replicas"] == 3
    assert (
        cr["status"]["labelSelector"]
        == f"app.kubernetes.io/component=shard,app.kubernetes.io/instance={NAME}"
    )
    for pdb in ("shard", "gateway"):
        path = f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/{NAME}-{pdb}"
        budget = await eventually(k, path, lambda o: True, f"{pdb} PodDisruptionBudget")
        assert budget["metadata"]["ownerReferences"][0]["name"] == NAME

    # scaling shards 3 → 4: replicas follow at once; leadership moves once the new shard is
    # Ready (the healthy leaders serve meanwhile), and only what balance needs, to the new shard
    await send(k, "patch", CR, {"spec": {"shards": 4}})
    await eventually(k, STS, lambda o: o["spec"]["replicas"] == 4, "replicas=4")
    cr = await eventually(k, CR, lambda o: condition(o, "Progressing")["status"] == "True", "Progressing")
    assert placement_from_status(cr["status"]["partitions"]) == before, (
        "nothing moves to a shard still starting"
    )
    await set_pod_ready(k, 3, True)
    cr = await eventually(k, CR, lambda o: 3 in leaders(o).values(), "partitions on shard 3")
    after = placement_from_status(cr["status"]["partitions"])
    moved = [p for p in after if after[p].leader != before[p].leader]
    assert len(moved) == 3 and all(after[p].leader == 3 for p in moved)
    assert all(after[p].epoch == before[p].epoch + 1 for p in moved)
    assert all(after[p].epoch == before[p].epoch for p in after if p not in moved)
    cr = await eventually(k, CR, lambda o: condition(o, "Ready")["status"] == "True", "Ready with 4 shards")

    # shard 1 goes NotReady: its partitions move to live shards with new epochs
    before = placement_from_status(cr["status"]["partitions"])
    orphans = [p for p, a in before.items() if a.leader == 1]
    await set_pod_ready(k, 1, False)
    cr = await eventually(k, CR, lambda o: 1 not in leaders(o).values(), "failover away from shard 1")
    after = placement_from_status(cr["status"]["partitions"])
    for p in orphans:
        assert after[p].leader in (0, 2, 3)
        assert after[p].epoch == before[p].epoch + 1
    assert all(1 not in a.standbys for a in after.values())
    for p in set(before) - set(orphans):  # survivors keep leader and epoch (balance allowing)
        assert (after[p].leader, after[p].epoch) == (before[p].leader, before[p].epoch)
    degraded = condition(cr, "Degraded")
    assert (
        degraded["status"] == "True" and degraded["reason"] == "ShardFailed" and "[1]" in degraded["message"]
    )

    # a bad spec: Degraded with a clear message; workloads and leadership stay as they were
    leadership = cr["status"]["partitions"]
    bad = {
        "shards": 2,
        "groupDefaults": {"heartbeatIntervalMs": 60000},
        "stateTopic": {"partitions": 24},
        "threadsPerShard": 0,
        "surprise": True,  # an unknown field (a real API server prunes it; kmock keeps it)
    }
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
    assert (await get(k, STS))["spec"]["replicas"] == 4

    # fixing the spec recovers (and the shrink to 2 shards is then carried out)
    fixed = {
        "groupDefaults": {"heartbeatIntervalMs": 3000},
        "stateTopic": {"partitions": 12},
        "threadsPerShard": 2,
        "surprise": None,
    }
    await send(k, "patch", CR, {"spec": fixed})
    cr = await eventually(
        k, CR, lambda o: set(leaders(o).values()) <= {0} or set(leaders(o).values()) == {0, 1}, "2 shards"
    )
    await eventually(k, STS, lambda o: o["spec"]["replicas"] == 2, "replicas=2")


async def test_no_live_shard_keeps_leadership_and_says_so(operator: Any) -> None:
    k = operator
    await create_resource(k, {**SPEC, "shards": 2, "standbysPerPartition": 0})
    for i in range(2):
        await set_pod_ready(k, i, True)
    await eventually(k, CR, lambda o: condition(o, "Ready")["status"] == "True", "Ready")
    await set_pod_ready(k, 0, False)
    cr = await eventually(k, CR, lambda o: set(leaders(o).values()) == {1}, "all on shard 1")
    leadership = cr["status"]["partitions"]
    await set_pod_ready(k, 1, False)
    cr = await eventually(
        k, CR, lambda o: condition(o, "Degraded")["reason"] == "NoLiveShard", "Degraded: NoLiveShard"
    )
    assert cr["status"]["partitions"] == leadership, "nobody better exists: no pointless epoch bumps"
    assert "no live shard" in condition(cr, "Degraded")["message"]
    # shard 0 returns: it takes over every partition, at a new epoch where the leader changed
    await set_pod_ready(k, 0, True)
    cr = await eventually(k, CR, lambda o: set(leaders(o).values()) == {0}, "all on shard 0")
    old = placement_from_status(leadership)
    new = placement_from_status(cr["status"]["partitions"])
    assert all(new[p].epoch == old[p].epoch + 1 for p in new), "every partition changed leader: 1 → 0"


def sts_partition(sts: dict[str, Any]) -> int:
    return sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"]


def sts_hash(sts: dict[str, Any]) -> str:
    return sts["spec"]["template"]["metadata"]["annotations"][TEMPLATE_HASH]


def busy_shards(partitions: list[dict[str, Any]]) -> set[int]:
    """Shards that lead or stand by for any partition."""
    return {p["leader"] for p in partitions} | {s for p in partitions for s in p.get("standbys") or ()}


async def play_statefulset_controller(k: Any, shards: int, replaced: list[int]) -> None:
    """The StatefulSet controller's RollingUpdate: a pod at an ordinal >= partition that does not
    run the current template is replaced — its new pod starts NotReady, then turns Ready."""
    while True:
        sts = await get(k, STS)
        want, partition = sts_hash(sts), sts_partition(sts)
        pods = {i: await get(k, f"/api/v1/namespaces/{NS}/pods/{NAME}-shard-{i}") for i in range(shards)}
        stale = [
            i for i in range(partition, shards) if pods[i]["metadata"]["annotations"][TEMPLATE_HASH] != want
        ]
        if stale:
            i = stale[-1]
            replaced.append(i)
            await set_pod_ready(k, i, False, want)
            await asyncio.sleep(0.3)  # the new process starting
            await set_pod_ready(k, i, True, want)
        elif partition == 0 and all(
            p["metadata"]["annotations"][TEMPLATE_HASH] == want for p in pods.values()
        ):
            return
        await asyncio.sleep(0.05)


def rollout_timeline(k: Any) -> list[tuple[str, Any]]:
    """The operator's and the kubelet's writes, in the order the API server received them:
    ``("status", busy shards)``, ``("partition", p)``, ``("ready", shard)`` of a pod on a new template."""
    timeline: list[tuple[str, Any]] = []
    for r in list(k):
        path, method, data = str(r.url.path), str(r.method.value).upper(), r.data or {}
        if method != "PATCH":
            continue
        if path == f"{CR}/status" and "partitions" in (data.get("status") or {}):
            timeline.append(("status", busy_shards(data["status"]["partitions"])))
        elif path == STS:
            rolling = ((data.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate") or {}
            if "partition" in rolling:
                timeline.append(("partition", rolling["partition"]))
        elif (
            path.startswith(f"/api/v1/namespaces/{NS}/pods/{NAME}-shard-")
            and "metadata" in data
            and data["status"]["conditions"][0]["status"] == "True"
        ):
            timeline.append(("ready", int(path.rsplit("-", 1)[1])))
    return timeline


async def test_changing_threads_rolls_shards_one_at_a_time_moving_partitions_first(operator: Any) -> None:
    k = operator
    await create_resource(k, SPEC)
    for i in range(3):
        await set_pod_ready(k, i, True)
    cr = await eventually(k, CR, lambda o: condition(o, "Ready")["status"] == "True", "Ready")
    old_hash = sts_hash(await get(k, STS))
    first_request = len(list(k))

    await send(k, "patch", CR, {"spec": {"threadsPerShard": 4}})
    sts = await eventually(k, STS, lambda o: arg(shard_args(o), "--threads") == "4", "new template")
    assert sts_hash(sts) != old_hash
    replaced: list[int] = []
    await asyncio.wait_for(play_statefulset_controller(k, 3, replaced), DEADLINE_S)
    assert replaced == [2, 1, 0], "highest ordinal first, each pod once"

    timeline = rollout_timeline(list(k)[first_request:])
    # the new template is written with every pod held (partition = shards)
    assert timeline[timeline.index(("partition", 3))] == ("partition", 3)
    for shard in (2, 1, 0):
        replace_at = timeline.index(("partition", shard))
        drained = [
            i
            for i, (what, busy) in enumerate(timeline[:replace_at])
            if what == "status" and shard not in busy
        ]
        assert drained, f"shard {shard}'s partitions moved away before its pod was replaced"
        later = timeline[replace_at + 1 :]
        ready_at = later.index(("ready", shard))
        lower = [i for i, (what, p) in enumerate(later) if what == "partition" and p < shard]
        assert not lower or lower[0] > ready_at, f"shard {shard}'s new pod was Ready before the next one went"
    assert timeline[-1] == ("partition", 0) or ("partition", 0) in timeline

    cr = await eventually(
        k,
        CR,
        lambda o: condition(o, "Ready")["status"] == "True" and len(set(leaders(o).values())) == 3,
        "balanced",
    )
    # no failover storm: nobody was ever marked Failed, so no status said Degraded
    for r in list(k)[first_request:]:
        if str(r.url.path) == f"{CR}/status" and str(r.method.value).upper() == "PATCH":
            for c in (r.data or {}).get("status", {}).get("conditions") or ():
                assert not (c["type"] == "Degraded" and c["status"] == "True"), c
    assert sorted(Counter(leaders(cr).values()).values()) == [4, 4, 4]


async def test_replication_clamped_to_a_small_kafka_is_said_in_a_condition(
    operator: Any, broker: Any
) -> None:
    """A real one-broker Kafka (tansu): asked for 3 / 2, the state topic gets 1 / 1 and the
    resource says so; nothing else is held back."""
    k = operator
    await create_resource(k, {**SPEC, "kafka": {"bootstrapServers": broker.bootstrap}})
    cr = await eventually(k, CR, lambda o: condition(o, "Warning")["status"] == "True", "Warning")
    warning = condition(cr, "Warning")
    assert warning["reason"] == "StateTopicReplicationClamped"
    assert "1 broker(s): state topic replication factor 3 clamped to 1" in warning["message"]
    assert cr["status"]["stateTopic"] == {"replicationFactor": 1, "minInsyncReplicas": 1, "kafkaBrokers": 1}
    sts = await eventually(k, STS, lambda o: True, "shard StatefulSet")
    assert arg(shard_args(sts), "--replication-factor") == "3", "shards get what was asked, and clamp alike"
    assert len(cr["status"]["partitions"]) == 12


async def test_a_restart_request_rolls_every_pod_once_moving_partitions_first(operator: Any) -> None:
    """``kubectl annotate groupcoordinator orders groupcoord.io/restart=<now>``: the same drained
    rollout as a template change (highest ordinal first, each pod once), nothing else changed."""
    k = operator
    await create_resource(k, SPEC)
    for i in range(3):
        await set_pod_ready(k, i, True)
    before = await eventually(k, STS, lambda o: True, "shard StatefulSet")
    await eventually(k, CR, lambda o: condition(o, "Ready")["status"] == "True", "Ready")
    assert RESTART not in before["spec"]["template"]["metadata"]["annotations"]

    when = "2026-11-27T03:00:00Z"
    await send(k, "patch", CR, {"metadata": {"annotations": {RESTART: when}}})
    sts = await eventually(
        k, STS, lambda o: o["spec"]["template"]["metadata"]["annotations"].get(RESTART) == when, "restart"
    )
    assert sts_hash(sts) != sts_hash(before)
    assert sts["spec"]["template"]["spec"] == before["spec"]["template"]["spec"], "only the request differs"
    await eventually(
        k, GW, lambda o: o["spec"]["template"]["metadata"]["annotations"][RESTART] == when, "gateway restart"
    )
    replaced: list[int] = []
    await asyncio.wait_for(play_statefulset_controller(k, 3, replaced), DEADLINE_S)
    assert replaced == [2, 1, 0], "highest ordinal first, each pod once"
    await eventually(k, CR, lambda o: condition(o, "Ready")["status"] == "True", "Ready again")


async def test_paused_reconciliation_changes_nothing_until_the_annotation_goes(operator: Any) -> None:
    """``groupcoord.io/pause-reconciliation: "true"`` (Strimzi's habit): a spec change and a
    failing shard change nothing while it is set, the resource says it is paused; removing it
    applies what was asked meanwhile."""
    k = operator
    await create_resource(k, SPEC)
    for i in range(3):
        await set_pod_ready(k, i, True)
    await eventually(k, STS, lambda o: True, "shard StatefulSet")
    ready = await eventually(k, CR, lambda o: condition(o, "Ready")["status"] == "True", "Ready")

    await send(k, "patch", CR, {"metadata": {"annotations": {PAUSE_RECONCILIATION: "true"}}})
    paused = await eventually(
        k, CR, lambda o: condition(o, "ReconciliationPaused")["status"] == "True", "ReconciliationPaused"
    )
    writes = workload_and_status_writes(k)
    await send(k, "patch", CR, {"spec": {"threadsPerShard": 4}})
    await set_pod_ready(k, 2, False)
    await asyncio.sleep(3)  # three resyncs (GROUPCOORD_OPERATOR_RESYNC_SECONDS=1) and the watch events
    sts = await get(k, STS)
    assert sts is not None and arg(shard_args(sts), "--threads") == "2"
    assert workload_and_status_writes(k) == writes
    still = await get(k, CR)
    assert still is not None and still["status"] == paused["status"], "nothing re-evaluated while paused"
    assert leaders(still) == leaders(ready), "shard 2's partitions stay while paused"

    await send(k, "patch", CR, {"metadata": {"annotations": {PAUSE_RECONCILIATION: None}}})
    await eventually(k, STS, lambda o: arg(shard_args(o), "--threads") == "4", "the change, applied")
    resumed = await eventually(
        k,
        CR,
        lambda o: (
            all(c["type"] != "ReconciliationPaused" for c in o["status"]["conditions"])
            and 2 not in set(leaders(o).values())
        ),
        "reconciling again: shard 2's partitions moved",
    )
    assert condition(resumed, "Degraded")["reason"] == "ShardFailed"


async def test_a_status_written_before_the_workloads_change_says_they_are_about_to(operator: Any) -> None:
    """The operator writes leadership before it applies the workloads. That write must not say
    Ready with nothing in progress while a gateway change is still to be applied: whoever waits
    for Ready after a change (kubectl wait) would return before the gateway rolled."""
    k = operator
    await create_resource(k, SPEC)
    for i in range(3):
        await set_pod_ready(k, i, True)
    await eventually(k, GW, lambda o: True, "gateway Deployment")
    await eventually(k, CR, lambda o: condition(o, "Ready")["status"] == "True", "Ready")
    await asyncio.sleep(1.5)  # a resync with nothing to do
    first_request = len(list(k))

    await send(k, "patch", CR, {"spec": {"gateway": {"replicas": 3}}})
    await eventually(k, GW, lambda o: o["spec"]["replicas"] == 3, "the gateway change, applied")
    writes = [
        (str(r.url.path), r.data or {})
        for r in list(k)[first_request:]
        if str(r.method.value).upper() == "PATCH" and str(r.url.path) in (GW, f"{CR}/status")
    ]
    first_status = next((i for i, (path, _) in enumerate(writes) if path == f"{CR}/status"), len(writes))
    gateway_patch = next(i for i, (path, _) in enumerate(writes) if path == GW)
    assert first_status < gateway_patch, (
        f"no status said the change was coming before it came: {[p for p, _ in writes]}"
    )
    said = {c["type"]: c for c in writes[first_status][1]["status"]["conditions"]}
    assert said["Ready"]["status"] == "False" and said["Progressing"]["status"] == "True", said
    assert f"Deployment/{NAME}-gateway" in said["Progressing"]["message"]
    await eventually(k, CR, lambda o: condition(o, "Ready")["status"] == "True", "Ready again")
