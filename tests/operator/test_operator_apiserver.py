"""The operator as a platform team installs it, against a real Kubernetes API server with RBAC on.

What kmock cannot tell us, a real ``kube-apiserver`` (built from Kubernetes' Go modules; see
``kube_apiserver.py``) does: the chart's CRD is a valid structural schema whose defaults,
validation rules and pruning the server applies; status and scale are subresources (a patch of the
resource never writes its status); and every call the operator makes is authorized against the
chart's own Roles, because the operator runs as the chart's ServiceAccount with a token the server
issued, started with the arguments and environment of the chart's Deployment.

No controller manager or kubelet runs: the test creates shard pods from the StatefulSet's
template, as the StatefulSet controller would, and reports them Ready through ``pods/status``,
as the kubelet would.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from api_calls import condition, eventually, get, leaders, send
from kube_apiserver import (
    RELEASE_NAME,
    ApiError,
    KubeApiServer,
    create,
    install,
    path_of,
    service_account_token,
    start_operator,
    wait_established,
)

from groupcoord.embedded_broker import stop_process_group

NAME = RELEASE_NAME

pytestmark = [pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeApiServer]:
    with KubeApiServer(tmp_path_factory.mktemp("kube-apiserver")) as server:
        yield server


_namespaces = iter(range(1, 1000))


@pytest.fixture
async def admin(apiserver: KubeApiServer) -> AsyncIterator[aiohttp.ClientSession]:
    async with apiserver.admin_session() as session:
        yield session


@pytest.fixture
def namespace() -> str:
    """Each test installs the chart into a namespace of its own (one API server per module)."""
    return f"kafka-{next(_namespaces)}"


@pytest.fixture
async def run_operator(
    apiserver: KubeApiServer, admin: aiohttp.ClientSession, tmp_path: Path
) -> AsyncIterator[Any]:
    """Starts the chart's operator as its ServiceAccount; stopped (and its log kept) at the end."""
    started: list[subprocess.Popen[bytes]] = []

    async def start(deployment: dict[str, Any], namespace: str) -> Path:
        process, log = await start_operator(apiserver, admin, deployment, namespace, tmp_path)
        started.append(process)
        return log

    yield start
    for proc in started:
        stop_process_group(proc)


def ready_pod(sts: dict[str, Any], index: int) -> dict[str, Any]:
    """What the StatefulSet controller makes for ordinal ``index`` from the template."""
    template = copy.deepcopy(sts["spec"]["template"])
    meta = template["metadata"]
    meta["name"] = f"{sts['metadata']['name']}-{index}"
    meta["namespace"] = sts["metadata"]["namespace"]
    meta.setdefault("labels", {})["apps.kubernetes.io/pod-index"] = str(index)
    meta["labels"]["statefulset.kubernetes.io/pod-name"] = meta["name"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}


async def set_pod_ready(k: aiohttp.ClientSession, sts: dict[str, Any], index: int, ready: bool) -> None:
    """Create shard ``index``'s pod if needed, then report its readiness as the kubelet does."""
    pod = ready_pod(sts, index)
    if await get(k, path_of(pod)) is None:
        await create(k, pod)
    status = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    await send(k, "patch", f"{path_of(pod)}/status", {"status": status})


async def test_the_chart_installs_and_its_operator_runs_the_resource_as_its_service_account(
    admin: aiohttp.ClientSession, namespace: str, run_operator: Any
) -> None:
    _, deployment = await install(admin, namespace)
    log = await run_operator(deployment, namespace)
    cr_path = f"/apis/groupcoord.io/v1alpha1/namespaces/{namespace}/groupcoordinators/{NAME}"
    sts_path = f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{NAME}-shard"
    k = admin

    # the chart's resource, as the API server stored it: the CRD's defaults are filled in
    cr = await get(k, cr_path)
    assert cr is not None and cr["spec"]["shards"] == 3

    # the operator makes the workloads, within what its Roles allow
    sts = await eventually(k, sts_path, lambda o: o["spec"]["replicas"] == 3, "shard StatefulSet", timeout=60)
    assert sts["metadata"]["ownerReferences"][0]["name"] == NAME
    await eventually(
        k, f"/apis/apps/v1/namespaces/{namespace}/deployments/{NAME}-gateway", lambda o: True, "gateway"
    )
    for svc in (f"{NAME}-shard", f"{NAME}-gateway"):
        await eventually(k, f"/api/v1/namespaces/{namespace}/services/{svc}", lambda o: True, svc)
    for pdb in ("shard", "gateway"):
        path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{NAME}-{pdb}"
        await eventually(k, path, lambda o: True, f"{pdb} PodDisruptionBudget")
    cr = await eventually(k, cr_path, lambda o: len(o["status"]["partitions"]) == 12, "placement in status")
    assert sorted(Counter(leaders(cr).values()).values()) == [4, 4, 4]
    lease = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{NAME}-operator"
    assert (await get(k, lease))["spec"]["holderIdentity"], "the operator leads through the chart's Lease"

    # shards come up → Ready
    for i in range(3):
        await set_pod_ready(k, sts, i, True)
    cr = await eventually(k, cr_path, lambda o: condition(o, "Ready")["status"] == "True", "Ready")
    assert cr["status"]["replicas"] == 3

    # `kubectl scale groupcoordinator gc-groupcoord --replicas=4`: the scale subresource
    await send(k, "patch", f"{cr_path}/scale", {"spec": {"replicas": 4}})
    await eventually(k, sts_path, lambda o: o["spec"]["replicas"] == 4, "replicas=4")
    await set_pod_ready(k, sts, 3, True)
    await eventually(k, cr_path, lambda o: 3 in leaders(o).values(), "partitions on shard 3")

    # shard 1 fails: its partitions move
    await set_pod_ready(k, sts, 1, False)
    cr = await eventually(k, cr_path, lambda o: 1 not in leaders(o).values(), "failover away from shard 1")
    assert condition(cr, "Degraded")["reason"] == "ShardFailed"
    # a refusal's status or reason in any message; not in a line's timestamp (",403" milliseconds)
    text = log.read_text()
    messages = re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", "", text, flags=re.MULTILINE)
    assert "Forbidden" not in messages and "403" not in messages, text[-3000:]


async def test_the_api_server_applies_the_crd_schema(admin: aiohttp.ClientSession, namespace: str) -> None:
    """Defaults, validation and pruning come from the API server, before any operator sees them."""
    await install(admin, namespace)
    collection = f"/apis/groupcoord.io/v1alpha1/namespaces/{namespace}/groupcoordinators"

    def resource(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        meta = {"name": name, "namespace": namespace}
        return {
            "apiVersion": "groupcoord.io/v1alpha1",
            "kind": "GroupCoordinator",
            "metadata": meta,
            "spec": spec,
        }

    required = {"kafka": {"bootstrapServers": "kafka:9092"}, "stateTopic": {"partitions": 6}, "shards": 2}
    stored = await create(admin, resource("minimal", {**required, "surprise": 1}))
    assert "surprise" not in stored["spec"], "unknown fields are pruned"
    assert stored["spec"]["threadsPerShard"] == 2 and stored["spec"]["standbysPerPartition"] == 0, "defaults"
    assert stored["spec"]["stateTopic"]["name"] == "__groupcoord_state"

    refusals = {
        "threads": ({**required, "threadsPerShard": 0}, "spec.threadsPerShard"),
        "no-shards": (
            {"kafka": required["kafka"], "stateTopic": required["stateTopic"]},
            "spec.shards: Required",
        ),
        "standbys": (
            {**required, "standbysPerPartition": 2},
            "standbysPerPartition must be smaller than shards",
        ),
        "heartbeat": (
            {**required, "groupDefaults": {"heartbeatIntervalMs": 60000, "sessionTimeoutMs": 45000}},
            "heartbeatIntervalMs must be smaller than sessionTimeoutMs",
        ),
        "listener-twice": (
            {**required, "gateway": {"listeners": [{"name": "a", "port": 9092}, {"name": "a", "port": 9192}]}},
            "Duplicate value",
        ),
        "listeners-overlap": (
            {**required, "gateway": {"listeners": [{"name": "a", "port": 9092}, {"name": "b", "port": 9094}]}},
            "listeners' ports overlap",
        ),
        "listener-named-kafka": (
            {**required, "gateway": {"listeners": [{"name": "kafka", "port": 9092}]}},
            "not a listener name",
        ),
        "listener-and-listeners": (
            {**required, "gateway": {"listener": {}, "listeners": [{"name": "a", "port": 9092}]}},
            "exclude each other",
        ),
        "listeners-and-security": (
            {
                **required,
                "gateway": {
                    "security": {"sasl": {"mode": "passthrough"}},
                    "listeners": [{"name": "a", "port": 9092}],
                },
            },
            "set per listener",
        ),
        "listener-credentials": (
            {
                **required,
                "gateway": {"listeners": [{"name": "a", "port": 9092, "authentication": {"mode": "credentials"}}]},
            },
            "mode credentials needs credentialsSecret",
        ),
    }
    for name, (spec, said) in refusals.items():
        with pytest.raises(ApiError) as refused:
            await create(admin, resource(name, spec))
        assert refused.value.status == 422 and said in refused.value.body["message"], refused.value.body
        assert await get(admin, f"{collection}/{name}") is None

    # status is a subresource: a patch of the resource cannot write it
    await send(admin, "patch", f"{collection}/minimal", {"status": {"replicas": 99}})
    assert "replicas" not in ((await get(admin, f"{collection}/minimal")).get("status") or {})


async def test_a_role_missing_one_verb_stops_the_operator_and_says_which(
    admin: aiohttp.ClientSession, namespace: str, run_operator: Any
) -> None:
    """The chart's Role without ``create`` on StatefulSets: the API server refuses the operator
    (403), and the resource's status says what was refused, so a cluster admin sees it."""

    def without_statefulset_create(objects: list[dict[str, Any]]) -> None:
        role = next(o for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == f"{NAME}-operator")
        for rule in role["rules"]:
            if "statefulsets" in rule["resources"]:
                rule["verbs"] = [v for v in rule["verbs"] if v != "create"]

    _, deployment = await install(admin, namespace, edit=without_statefulset_create)
    await run_operator(deployment, namespace)
    cr_path = f"/apis/groupcoord.io/v1alpha1/namespaces/{namespace}/groupcoordinators/{NAME}"
    cr = await eventually(
        admin,
        cr_path,
        lambda o: condition(o, "Degraded")["reason"] == "Rejected",
        "Degraded: Rejected",
        timeout=60,
    )
    message = condition(cr, "Degraded")["message"]
    assert "HTTP 403" in message and "statefulsets" in message, message
    assert await get(admin, f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{NAME}-shard") is None


async def test_the_aggregated_roles_let_namespace_users_manage_and_view_resources(
    admin: aiohttp.ClientSession, namespace: str
) -> None:
    """The chart's own admin and view roles, bound directly."""
    objects: list[dict[str, Any]] = []

    def keep(applied: list[dict[str, Any]]) -> None:
        objects.extend(applied)

    await install(admin, namespace, edit=keep)
    roles = {o["metadata"]["name"] for o in objects if o["kind"] == "ClusterRole"}
    admin_role = next(r for r in roles if r.startswith(f"{NAME}-admin"))
    view_role = next(r for r in roles if r.startswith(f"{NAME}-view"))
    await an_admin_manages_and_a_viewer_reads(admin, namespace, admin_role, view_role)


async def an_admin_manages_and_a_viewer_reads(
    admin: aiohttp.ClientSession, namespace: str, admin_role: str, view_role: str
) -> None:
    """alice bound to ``admin_role`` creates, scales and deletes a GroupCoordinator in
    ``namespace``; victor bound to ``view_role`` reads it and can change nothing (the API server's
    RBAC decides: the test's administrator impersonates them)."""
    for user, role in (("alice", admin_role), ("victor", view_role)):
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"{user}-groupcoord", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }
        await create(admin, binding)

    collection = f"/apis/groupcoord.io/v1alpha1/namespaces/{namespace}/groupcoordinators"
    body = {
        "apiVersion": "groupcoord.io/v1alpha1",
        "kind": "GroupCoordinator",
        "metadata": {"name": "team", "namespace": namespace},
        "spec": {"kafka": {"bootstrapServers": "kafka:9092"}, "stateTopic": {"partitions": 6}, "shards": 1},
    }

    async def call(user: str, method: str, path: str, json: Any = None) -> int:
        headers = {"Impersonate-User": user}
        if method == "patch":
            headers["Content-Type"] = "application/merge-patch+json"
        async with admin.request(method.upper(), path, json=json, headers=headers) as resp:
            return resp.status

    # The API server's RBAC authorizer reads roles and bindings from its informers, a moment
    # behind their writes (an aggregated rule, a binding just made): alice is refused until they
    # catch up, and then allowed for good
    deadline = asyncio.get_running_loop().time() + 30
    while (created := await call("alice", "post", collection, body)) == 403:
        assert asyncio.get_running_loop().time() < deadline, "alice's binding never took effect"
        await asyncio.sleep(0.2)
    assert created == 201
    assert await call("alice", "patch", f"{collection}/team/scale", {"spec": {"replicas": 2}}) == 200
    assert await call("victor", "get", f"{collection}/team") == 200
    assert await call("victor", "get", f"{collection}/team/scale") == 200
    assert await call("victor", "patch", f"{collection}/team", {"spec": {"shards": 5}}) == 403
    assert await call("victor", "delete", f"{collection}/team") == 403
    assert await call("alice", "delete", f"{collection}/team") == 200


@pytest.fixture
def own_apiserver(tmp_path: Path) -> Iterator[KubeApiServer]:
    """A server of its own: this test starts without the CRD and deletes nothing of others'."""
    with KubeApiServer(tmp_path / "kube-apiserver") as server:
        yield server


async def test_the_crd_hook_creates_then_updates_the_crd_as_its_own_service_account(
    own_apiserver: KubeApiServer, tmp_path: Path
) -> None:
    """The chart's pre-install/pre-upgrade Job (``--apply-crd``, which Helm's ``crds/`` cannot do
    on upgrade), run with its container's command as the Job's ServiceAccount: it creates the CRD,
    leaves an identical one alone, and replaces one an older release left behind."""
    namespace = "kafka"
    crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/groupcoordinators.groupcoord.io"
    async with own_apiserver.admin_session() as admin:
        objects, _ = await install(admin, namespace, crd=False)
        job = next(o for o in objects if o["kind"] == "Job")
        (container,) = job["spec"]["template"]["spec"]["containers"]
        assert container["command"][:3] == ["python", "-m", "groupcoord_operator"]
        account = job["spec"]["template"]["spec"]["serviceAccountName"]
        token = await service_account_token(admin, namespace, account)
        kubeconfig = own_apiserver.kubeconfig(tmp_path / "kubeconfig", token, namespace)

        async def run_hook() -> str:
            env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
            done = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, *container["command"][1:]],
                env=env | {"KUBECONFIG": str(kubeconfig)},
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr[-2000:]
            return done.stdout.strip()

        assert await run_hook() == "CustomResourceDefinition created"
        await wait_established(admin, "groupcoordinators.groupcoord.io")
        assert await run_hook() == "CustomResourceDefinition unchanged"

        # an older release's CRD: another schema description; the hook puts this release's back
        older = await get(admin, crd_path)
        assert older is not None
        schema = older["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        current_description = schema.get("description")
        schema["description"] = "an older release"
        async with admin.put(crd_path, json=older) as resp:
            assert resp.status == 200, await resp.text()
        assert await run_hook() == "CustomResourceDefinition updated"
        stored = await get(admin, crd_path)
        assert (
            stored["spec"]["versions"][0]["schema"]["openAPIV3Schema"].get("description")
            == current_description
        )


def cr_path(namespace: str) -> str:
    return f"/apis/groupcoord.io/v1alpha1/namespaces/{namespace}/groupcoordinators/{NAME}"


def sts_path(namespace: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{NAME}-shard"


async def test_what_the_api_server_refuses_is_reported(
    admin: aiohttp.ClientSession, namespace: str, run_operator: Any
) -> None:
    """A pod affinity the CRD lets through (it keeps core/v1's fields as they come) but the
    StatefulSet's validation refuses: the real API server answers 422, the StatefulSet stays as it
    was, and the resource says what was refused for as long as the spec asks for it."""
    _, deployment = await install(admin, namespace)
    await run_operator(deployment, namespace)
    before = await eventually(admin, sts_path(namespace), lambda o: True, "shard StatefulSet", timeout=60)
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}
    await send(admin, "patch", cr_path(namespace), {"spec": {"template": {"shard": {"affinity": affinity}}}})
    cr = await eventually(
        admin,
        cr_path(namespace),
        lambda o: condition(o, "Degraded")["reason"] == "Rejected",
        "Degraded: Rejected",
    )
    message = condition(cr, "Degraded")["message"]
    assert f"StatefulSet/{NAME}-shard" in message and "HTTP 422" in message and "nodeSelectorTerms" in message
    sts = await get(admin, sts_path(namespace))
    assert sts is not None and "affinity" not in sts["spec"]["template"]["spec"]
    assert sts["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

    await send(admin, "patch", cr_path(namespace), {"spec": {"template": {"shard": {"affinity": None}}}})
    await eventually(
        admin,
        cr_path(namespace),
        lambda o: condition(o, "Degraded")["reason"] != "Rejected",
        "no longer Rejected",
    )


async def test_a_load_balancer_address_reaches_the_gateways_and_the_status(
    admin: aiohttp.ClientSession, namespace: str, run_operator: Any
) -> None:
    """Two listeners (Strimzi's listeners[]): ``plain`` inside the cluster, ``external`` on a load
    balancer. The test plays the cloud's service controller, which fills in a LoadBalancer
    Service's ingress (the Service's status subresource) some time after it is created: until
    then nothing is guessed; then the gateway pods advertise that address on the external
    listener and status.listeners names it, while the plain listener keeps its Service."""
    _, deployment = await install(admin, namespace)
    listeners = [
        {"name": "plain", "port": 9092},
        {"name": "external", "port": 9192, "type": "loadbalancer", "brokerPorts": 2},
    ]
    # the chart's resource names one listener: a merge patch replaces it by the list
    patch = {"spec": {"gateway": {"listener": None, "listeners": listeners}}}
    await send(admin, "patch", cr_path(namespace), patch)
    await run_operator(deployment, namespace)
    svc_path = f"/api/v1/namespaces/{namespace}/services/{NAME}-gateway-external"
    svc = await eventually(
        admin, svc_path, lambda o: o["spec"]["type"] == "LoadBalancer", "LB Service", timeout=60
    )
    assert [p["port"] for p in svc["spec"]["ports"]] == [9192, 9193, 9194]
    assert all(p.get("nodePort") for p in svc["spec"]["ports"]), "the API server allocated node ports"
    plain = await get(admin, f"/api/v1/namespaces/{namespace}/services/{NAME}-gateway")
    assert plain["spec"]["type"] == "ClusterIP" and [p["port"] for p in plain["spec"]["ports"]] == [
        9092, 9093, 9094, 9095
    ]  # fmt: skip
    cr = await eventually(
        admin, cr_path(namespace), lambda o: len(o["status"].get("listeners") or ()) == 2, "listeners"
    )
    assert cr["status"]["listeners"][0]["bootstrapServers"] == f"{NAME}-gateway.{namespace}.svc:9092"
    assert "bootstrapServers" not in cr["status"]["listeners"][1], "no address before the cloud gives one"

    ingress = {"status": {"loadBalancer": {"ingress": [{"hostname": "kafka.example.com"}]}}}
    await send(admin, "patch", f"{svc_path}/status", ingress)
    cr = await eventually(
        admin,
        cr_path(namespace),
        lambda o: o["status"]["listeners"][1].get("bootstrapServers") == "kafka.example.com:9192",
        "the load balancer's address in status.listeners",
    )
    assert cr["status"]["listeners"][1]["addresses"] == [{"host": "kafka.example.com", "port": 9192}]
    gateway = f"/apis/apps/v1/namespaces/{namespace}/deployments/{NAME}-gateway"

    def env(dep: dict[str, Any]) -> dict[str, Any]:
        return {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}

    dep = await eventually(
        admin,
        gateway,
        lambda o: env(o)["GROUPCOORD_ADVERTISED_HOST_EXTERNAL"].get("value") == "kafka.example.com",
        "advertised LB host",
    )
    assert "valueFrom" in env(dep)["GROUPCOORD_ADVERTISED_HOST"], "the plain listener advertises the pod IP"
    (extra,) = json.loads(env(dep)["GROUPCOORD_EXTRA_LISTENERS"]["value"])
    assert extra["name"] == "external" and extra["advertisedHostEnv"] == "GROUPCOORD_ADVERTISED_HOST_EXTERNAL"

    # the external listener dropped from the list: its Service goes (the chart's Role may delete
    # Services), the gateways serve the plain listener alone
    await send(admin, "patch", cr_path(namespace), {"spec": {"gateway": {"listeners": listeners[:1]}}})
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while await get(admin, svc_path) is not None:
        assert loop.time() < deadline, "the external listener's Service was not deleted"
        await asyncio.sleep(0.5)
    dep = await eventually(
        admin, gateway, lambda o: "GROUPCOORD_EXTRA_LISTENERS" not in env(o), "one listener left"
    )
    assert await get(admin, f"/api/v1/namespaces/{namespace}/services/{NAME}-gateway") is not None


async def test_only_the_lease_holder_acts(
    admin: aiohttp.ClientSession, namespace: str, run_operator: Any
) -> None:
    """Another replica holds the chart's Lease: this one touches nothing until it is released,
    then takes it over (through the leader-election Role alone) and reconciles."""
    from groupcoord_operator.election import format_microtime  # noqa: PLC0415

    _, deployment = await install(admin, namespace)
    leases = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    renew = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)
    held = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": f"{NAME}-operator", "namespace": namespace},
        "spec": {
            "holderIdentity": "other-replica",
            "leaseDurationSeconds": 15,
            "renewTime": format_microtime(renew),
        },
    }
    await send(admin, "post", leases, held)
    await run_operator(deployment, namespace)
    await asyncio.sleep(3)  # several resync periods (1 s): a negative check needs some wait
    assert await get(admin, sts_path(namespace)) is None, "a follower must not touch workloads"
    assert not ((await get(admin, cr_path(namespace))).get("status") or {}).get("partitions"), (
        "nor leadership"
    )

    await send(admin, "patch", f"{leases}/{NAME}-operator", {"spec": {"holderIdentity": ""}})
    lease = await eventually(
        admin,
        f"{leases}/{NAME}-operator",
        lambda o: o["spec"]["holderIdentity"] not in ("", "other-replica"),
        "takeover",
    )
    assert lease["spec"]["leaseTransitions"] == 1
    await eventually(
        admin, sts_path(namespace), lambda o: o["spec"]["replicas"] == 3, "workloads once leading"
    )


@pytest.fixture
def aggregating_apiserver(tmp_path: Path) -> Iterator[KubeApiServer]:
    """A server with the controller manager's ClusterRole aggregation running beside it."""
    with KubeApiServer(tmp_path / "kube-apiserver", controllers=("clusterrole-aggregation",)) as server:
        yield server


async def test_namespace_admins_manage_and_viewers_read_through_the_built_in_roles(
    aggregating_apiserver: KubeApiServer,
) -> None:
    """The chart's ClusterRoles carry ``aggregate-to-admin/edit/view``: the controller manager
    folds their rules into Kubernetes' own ``admin``, ``edit`` and ``view`` roles, so whoever is
    a namespace's admin manages GroupCoordinators there without a binding of ours."""
    namespace = "team"
    async with aggregating_apiserver.admin_session() as admin:
        await install(admin, namespace, resource=False)

        async def aggregated(role: str) -> bool:
            cluster_role = await get(admin, f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role}")
            return any(
                "groupcoord.io" in r.get("apiGroups", ()) for r in (cluster_role or {}).get("rules") or ()
            )

        for role in ("admin", "edit", "view"):
            deadline = asyncio.get_running_loop().time() + 30
            while not await aggregated(role):
                assert asyncio.get_running_loop().time() < deadline, f"{role} never aggregated our rules"
                await asyncio.sleep(0.2)
        await an_admin_manages_and_a_viewer_reads(admin, namespace, "admin", "view")


async def test_deleting_the_resource_deletes_what_the_operator_made_without_it(
    own_apiserver: KubeApiServer, tmp_path: Path
) -> None:
    """``kubectl delete groupcoordinator`` with the operator gone (uninstalled, crashed): no
    finalizer holds the resource, and the garbage collector removes every object the operator
    made, through their owner references."""
    namespace = "kafka"
    async with own_apiserver.admin_session() as admin:
        _, deployment = await install(admin, namespace)
        own_apiserver.start_controller_manager(("garbagecollector",))  # after the CRD: it knows the kind
        process, _ = await start_operator(own_apiserver, admin, deployment, namespace, tmp_path)
        made = [
            f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{NAME}-shard",
            f"/apis/apps/v1/namespaces/{namespace}/deployments/{NAME}-gateway",
            f"/api/v1/namespaces/{namespace}/services/{NAME}-shard",
            f"/api/v1/namespaces/{namespace}/services/{NAME}-gateway",
            f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{NAME}-shard",
        ]
        try:
            for path in made:
                await eventually(admin, path, lambda o: True, path, timeout=60)
        finally:
            stop_process_group(process)
        async with admin.delete(cr_path(namespace)) as resp:
            assert resp.status == 200, await resp.text()
        assert await get(admin, cr_path(namespace)) is None, "no finalizer waits for the operator"
        for path in made:
            deadline = asyncio.get_running_loop().time() + 60
            while await get(admin, path) is not None:
                assert asyncio.get_running_loop().time() < deadline, f"{path} outlived its resource"
                await asyncio.sleep(0.2)
