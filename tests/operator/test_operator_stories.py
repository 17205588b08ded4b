"""The operator's stories on a real Kubernetes API server with RBAC on (``kube_apiserver.py``):
the chart installed, the operator run as the chart's Deployment runs it, as its ServiceAccount.

No controller manager or kubelet runs, so the test plays the StatefulSet controller and the
kubelet: it makes shard pods from the StatefulSet's template, replaces them (delete, create) when
the template changes, and reports their readiness through ``pods/status``. What the operator wrote,
and in which order, is read from the server's audit log (:meth:`KubeApiServer.writes`).

The story: create a GroupCoordinator → workloads and leadership appear; pods become Ready → the
resource is Ready; threads and shards are edited → workloads and leadership follow with minimal
moves; a shard pod goes NotReady → its partitions move with epoch + 1; a spec the CRD refuses never
reaches the operator; rollouts move partitions away before a pod is replaced, one at a time.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from api_calls import BAD_SPEC, CR_PATH, DEADLINE_S, NAME, NS, SPEC, condition, eventually, get, leaders, send
from kube_apiserver import RELEASE_NAME, KubeApiServer, Write, install, start_operator

from groupcoord.controlplane.placement import placement_from_status
from groupcoord.embedded_broker import stop_process_group
from groupcoord_operator.build import PAUSE_RECONCILIATION, RESTART, TEMPLATE_HASH

OPERATOR_USER = f"system:serviceaccount:{NS}:{RELEASE_NAME}-operator"

pytestmark = [pytest.mark.timeout(180)]


class Cluster:
    """The administrator's session (``get``/``post``/``patch``/``delete`` as aiohttp's) and the
    server, whose audit log is the request log."""

    def __init__(self, session: aiohttp.ClientSession, server: KubeApiServer) -> None:
        self.session, self.server = session, server

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)

    def writes(self) -> list[Write]:
        return self.server.writes()


async def start(tmp_path: Path, probe_kafka: bool = False) -> tuple[KubeApiServer, Any, Any]:
    server = KubeApiServer(tmp_path / "kube-apiserver").start()
    session = server.admin_session()
    _, deployment = await install(session, NS, resource=False)
    extra = {"GROUPCOORD_OPERATOR_KAFKA_PROBE": "true"} if probe_kafka else {}
    process, _ = await start_operator(server, session, deployment, NS, tmp_path, extra)
    return server, session, process


@pytest.fixture
async def operator(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Cluster]:
    """A fresh API server with the chart in ``kafka`` and its operator running; ``probe_kafka``
    (indirect parameter) lets the operator ask the Kafka cluster for its brokers."""
    server, session, process = await start(tmp_path, getattr(request, "param", False))
    try:
        yield Cluster(session, server)
    finally:
        stop_process_group(process)
        await session.close()
        server.stop()


STS = f"/apis/apps/v1/namespaces/{NS}/statefulsets/{NAME}-shard"
GW = f"/apis/apps/v1/namespaces/{NS}/deployments/{NAME}-gateway"
CR = f"{CR_PATH}/{NAME}"


async def create_resource(k: Any, spec: dict[str, Any]) -> None:
    body = {
        "apiVersion": "groupcoord.io/v1alpha1",
        "kind": "GroupCoordinator",
        "metadata": {"name": NAME},
        "spec": spec,
    }
    await send(k, "post", CR_PATH, body)


async def set_pod_ready(k: Any, index: int, ready: bool, template_hash: str | None = None) -> None:
    """Shard ``index``'s pod as the StatefulSet controller makes it from the current template
    (replaced — deleted and made again — when it runs another than ``template_hash``), then its
    readiness as the kubelet reports it."""
    sts = await eventually(k, STS, lambda o: True, "shard StatefulSet")
    path = f"/api/v1/namespaces/{NS}/pods/{NAME}-shard-{index}"
    pod = await get(k, path)
    if (
        pod is not None
        and template_hash
        and pod["metadata"]["annotations"].get(TEMPLATE_HASH) != template_hash
    ):
        async with k.delete(path) as resp:
            assert resp.status < 300, await resp.text()
        pod = None
    if pod is None:
        template = sts["spec"]["template"]
        meta = {
            "name": f"{NAME}-shard-{index}",
            "labels": {**template["metadata"]["labels"], "apps.kubernetes.io/pod-index": str(index)},
            "annotations": dict(template["metadata"].get("annotations") or {}),
        }
        await send(k, "post", f"/api/v1/namespaces/{NS}/pods", {"metadata": meta, "spec": template["spec"]})
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    await send(k, "patch", f"{path}/status", {"status": status})


def operator_writes(k: Cluster) -> list[Write]:
    """What the operator's account wrote (the test's own writes are the administrator's)."""
    return [w for w in k.writes() if w.user == OPERATOR_USER]


async def settled_writes(k: Cluster) -> int:
    """:func:`workload_and_status_writes` once the audit log has caught up: the server logs a
    write after answering it, so a status the test just read may not be in the log yet."""
    count = workload_and_status_writes(k)
    while True:
        await asyncio.sleep(0.3)
        now = workload_and_status_writes(k)
        if now == count:
            return count
        count = now


def workload_and_status_writes(k: Cluster) -> int:
    """Writes the operator made so far to workloads, Services or the resource status."""
    targets = ("/statefulsets", "/deployments", "/services", "/poddisruptionbudgets")
    return sum(
        1
        for w in operator_writes(k)
        if w.method in ("POST", "PATCH", "PUT")
        and (any(t in w.path for t in targets) or w.path.endswith("/status"))
    )


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
    writes = await settled_writes(k)
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

    # a bad spec: the API server refuses it whole, naming every problem at once (the CRD's schema
    # and CEL rules); the operator never sees it, workloads and leadership stay as they were
    leadership = cr["status"]["partitions"]
    async with k.patch(
        CR, json={"spec": BAD_SPEC}, headers={"Content-Type": "application/merge-patch+json"}
    ) as resp:
        assert resp.status == 422, await resp.text()
        message = (await resp.json())["message"]
    assert "spec.threadsPerShard" in message
    assert "stateTopic.partitions is immutable" in message
    assert "heartbeatIntervalMs must be smaller than sessionTimeoutMs" in message
    await asyncio.sleep(1.5)  # a resync: nothing to do
    cr = await get(k, CR)
    assert cr is not None and cr["status"]["partitions"] == leadership
    assert (await get(k, STS))["spec"]["replicas"] == 4

    # a good one is carried out: the shrink to 2 shards
    await send(k, "patch", CR, {"spec": {"shards": 2}})
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


def rollout_timeline(writes: list[Write]) -> list[tuple[str, Any]]:
    """The operator's and the kubelet's writes, in the order the API server received them:
    ``("status", busy shards)``, ``("partition", p)``, ``("ready", shard)`` of a pod on a new template
    (its first Ready after the test replaced it)."""
    timeline: list[tuple[str, Any]] = []
    replaced: set[str] = set()
    pods = f"/api/v1/namespaces/{NS}/pods/{NAME}-shard-"
    for w in writes:
        if w.method == "DELETE" and w.path.startswith(pods):
            replaced.add(w.path)
        if w.method != "PATCH":
            continue
        if w.path == f"{CR}/status" and "partitions" in (w.data.get("status") or {}):
            timeline.append(("status", busy_shards(w.data["status"]["partitions"])))
        elif w.path == STS:
            rolling = ((w.data.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate") or {}
            if "partition" in rolling:
                timeline.append(("partition", rolling["partition"]))
        elif (
            w.path.startswith(pods)
            and w.path.endswith("/status")
            and w.path.removesuffix("/status") in replaced
            and w.data["status"]["conditions"][0]["status"] == "True"
        ):
            replaced.discard(w.path.removesuffix("/status"))
            timeline.append(("ready", int(w.path.removesuffix("/status").rsplit("-", 1)[1])))
    return timeline


async def test_changing_threads_rolls_shards_one_at_a_time_moving_partitions_first(operator: Any) -> None:
    k = operator
    await create_resource(k, SPEC)
    for i in range(3):
        await set_pod_ready(k, i, True)
    cr = await eventually(k, CR, lambda o: condition(o, "Ready")["status"] == "True", "Ready")
    old_hash = sts_hash(await get(k, STS))
    first_request = len(k.writes())

    await send(k, "patch", CR, {"spec": {"threadsPerShard": 4}})
    sts = await eventually(k, STS, lambda o: arg(shard_args(o), "--threads") == "4", "new template")
    assert sts_hash(sts) != old_hash
    replaced: list[int] = []
    await asyncio.wait_for(play_statefulset_controller(k, 3, replaced), DEADLINE_S)
    assert replaced == [2, 1, 0], "highest ordinal first, each pod once"

    timeline = rollout_timeline(k.writes()[first_request:])
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
    for w in k.writes()[first_request:]:
        if w.path == f"{CR}/status" and w.method == "PATCH":
            for c in w.data.get("status", {}).get("conditions") or ():
                assert not (c["type"] == "Degraded" and c["status"] == "True"), c
    assert sorted(Counter(leaders(cr).values()).values()) == [4, 4, 4]


@pytest.mark.parametrize("operator", [True], indirect=True, ids=["probing-kafka"])
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
    writes = await settled_writes(k)
    await send(k, "patch", CR, {"spec": {"threadsPerShard": 4}})
    await set_pod_ready(k, 2, False)
    await asyncio.sleep(3)  # three resyncs (GROUPCOORD_OPERATOR_RESYNC_SECONDS=1) and the watch events
    sts = await get(k, STS)
    assert sts is not None and arg(shard_args(sts), "--threads") == "2"
    assert workload_and_status_writes(k) == writes, "a paused resource's status is not rewritten"
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
    first_request = len(k.writes())

    await send(k, "patch", CR, {"spec": {"gateway": {"replicas": 3}}})
    await eventually(k, GW, lambda o: o["spec"]["replicas"] == 3, "the gateway change, applied")
    writes = [
        (w.path, w.data)
        for w in k.writes()[first_request:]
        if w.method == "PATCH" and w.path in (GW, f"{CR}/status")
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
