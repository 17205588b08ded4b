"""A real Kubernetes API server for the operator tests, as controller-runtime's envtest runs one.

``kube-apiserver`` and ``etcd`` are built from their published Go modules
(``tests/operator/apiserver/go.mod``; ``scripts/test`` builds them into the cache). The server
runs with RBAC on, client certificates for the test's administrator (group ``system:masters``)
and service-account tokens it signs itself, so the operator can run as the chart's
ServiceAccount with exactly the rights the chart's Roles give it. No controller manager or
kubelet runs: StatefulSets make no pods and pods never start, so a test that needs pods creates
them from the StatefulSet's template itself, as the StatefulSet controller would, and sets their
status through the ``status`` subresource, as the kubelet would.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import helm_python as helm
import yaml
from real_parts import unavailable

from groupcoord.common.run_dirs import cache_dir
from groupcoord.embedded_broker import free_port, stop_process_group
from tests.security.tls import KubePki, make_kube_pki

GO_MODULE = Path(__file__).parent / "apiserver"


def binaries_dir() -> Path:
    """Where ``scripts/test`` builds ``kube-apiserver`` and ``etcd``: ``$GROUPCOORD_KUBE_BIN``,
    else the per-user cache under the first 16 hex digits of ``go.sum``'s SHA-256 (kept between
    runs; a version change builds anew)."""
    explicit = os.environ.get("GROUPCOORD_KUBE_BIN")
    if explicit:
        return Path(explicit)
    digest = hashlib.sha256((GO_MODULE / "go.sum").read_bytes()).hexdigest()[:16]
    return cache_dir() / "kubernetes" / digest


def _binary(name: str) -> str:
    path = binaries_dir() / name
    if not path.exists():
        unavailable(f"{path} is missing (scripts/test builds kube-apiserver and etcd with Go)")
    return str(path)


#: the audit policy: every write at the Request level (with its body), nothing else
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [{"level": "Request", "verbs": ["create", "update", "patch", "delete"]}, {"level": "None"}],
}
HTTP_METHODS = {"create": "POST", "update": "PUT", "patch": "PATCH", "delete": "DELETE"}


@dataclass(frozen=True)
class Write:
    """One write from the server's audit log: what a request log of the API shows."""

    path: str
    method: str
    data: dict[str, Any]
    user: str
    code: int


@dataclass
class KubeApiServer:
    """etcd and kube-apiserver on loopback ports under ``workdir``; ``url`` is the API."""

    workdir: Path
    #: addresses besides loopback the server listens on and is reached at (a Docker network's
    #: gateway, for containers); its certificate names them
    more_ips: tuple[str, ...] = ()
    #: kube-controller-manager controllers to run beside the server (none by default: the tests
    #: play the controllers they need); e.g. ``("clusterrole-aggregation",)``
    controllers: tuple[str, ...] = ()
    pki: KubePki | None = None
    url: str = ""
    port: int = 0
    _etcd: subprocess.Popen[bytes] | None = None
    _apiserver: subprocess.Popen[bytes] | None = None
    _controller_manager: subprocess.Popen[bytes] | None = None

    def start(self) -> KubeApiServer:
        apiserver, etcd = _binary("kube-apiserver"), _binary("etcd")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.pki = make_kube_pki(self.workdir / "pki", self.more_ips)
        (self.workdir / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))
        client = self._start_etcd(etcd)
        for attempt in range(1, 6):  # a secure port found free can be taken before it is bound
            secure = free_port("0.0.0.0" if self.more_ips else "127.0.0.1")
            if self._start_apiserver(apiserver, client, secure, attempt):
                break
        else:
            raise RuntimeError(f"kube-apiserver did not start; see {self.workdir}/kube-apiserver-*.log")
        if self.controllers:
            self.start_controller_manager(self.controllers)
        return self

    def _start_apiserver(self, apiserver: str, client: int, secure: int, attempt: int) -> bool:
        """kube-apiserver on ``secure``; False when it exited (its port taken meanwhile)."""
        pki = self.pki
        assert pki is not None
        self._apiserver = _spawn(
            [
                apiserver,
                f"--etcd-servers=http://127.0.0.1:{client}",
                f"--bind-address={'0.0.0.0' if self.more_ips else '127.0.0.1'}",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",  # no `kubernetes` Service endpoints on loopback
                f"--secure-port={secure}",
                f"--tls-cert-file={pki.server_cert}",
                f"--tls-private-key-file={pki.server_key}",
                f"--client-ca-file={pki.ca}",
                "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki.service_account_public}",
                f"--service-account-signing-key-file={pki.service_account_key}",
                "--service-cluster-ip-range=10.96.0.0/16",
                # the ServiceAccount admission plugin waits for each namespace's "default" account,
                # which only the controller manager makes; pods here name their account explicitly
                "--disable-admission-plugins=ServiceAccount",
                "--enable-priority-and-fairness=false",
                # every write, with its body: the request log the operator stories read (writes())
                f"--audit-policy-file={self.workdir / 'audit-policy.yaml'}",
                f"--audit-log-path={self.workdir / 'audit.log'}",
                "--audit-log-mode=blocking",
                "--v=0",
            ],
            self.workdir / f"kube-apiserver-{attempt}.log",
        )
        self.port = secure
        self.url = f"https://127.0.0.1:{secure}"
        try:
            self._wait_ready(timeout=90)
        except ProcessLookupError:
            return False
        return True

    def _start_etcd(self, etcd: str, attempts: int = 5) -> int:
        """etcd on two free ports; its client port. A port found free can be taken by another
        process before etcd binds it (many processes start in a test run): then etcd exits at
        once, and is started again on other ports."""
        for attempt in range(1, attempts + 1):
            client, peer = free_port(), free_port()
            shutil.rmtree(self.workdir / "etcd", ignore_errors=True)
            self._etcd = _spawn(
                [
                    etcd,
                    f"--data-dir={self.workdir / 'etcd'}",
                    f"--listen-client-urls=http://127.0.0.1:{client}",
                    f"--advertise-client-urls=http://127.0.0.1:{client}",
                    f"--listen-peer-urls=http://127.0.0.1:{peer}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                    f"--initial-cluster=default=http://127.0.0.1:{peer}",
                    "--unsafe-no-fsync",  # a test's etcd: durability is not the point, speed is
                    "--log-level=warn",
                ],
                self.workdir / f"etcd-{attempt}.log",
            )
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and self._etcd.poll() is None:
                # etcd's own health answer: a port that merely listens may be someone else's
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{client}/health", timeout=1) as r:
                        if r.status == 200 and self._etcd.poll() is None:
                            return client
                except OSError:
                    time.sleep(0.1)
            stop_process_group(self._etcd)
        raise RuntimeError(f"etcd did not start in {attempts} attempts; see {self.workdir}/etcd-*.log")

    def start_controller_manager(self, controllers: tuple[str, ...]) -> None:
        """kube-controller-manager with only ``controllers``. Its garbage collector learns the
        resource types that exist when it starts (then every 30 s): start it after the CRDs."""
        self._controller_manager = _spawn(
            [
                _binary("kube-controller-manager"),
                f"--kubeconfig={self.admin_kubeconfig()}",
                f"--controllers={','.join(controllers)}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--cert-dir={self.workdir / 'controller-manager'}",
                "--authentication-skip-lookup=true",
            ],
            self.workdir / "kube-controller-manager.log",
        )

    def stop(self) -> None:
        stop_process_group(self._controller_manager)
        stop_process_group(self._apiserver)
        stop_process_group(self._etcd)

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def writes(self) -> list[Write]:
        """Every write the server answered so far, in the order it received them."""
        log = self.workdir / "audit.log"
        events = (
            [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
            if log.exists()
            else []
        )
        events.sort(key=lambda e: e["requestReceivedTimestamp"])
        return [
            Write(
                path=e["requestURI"].split("?")[0],
                method=HTTP_METHODS[e["verb"]],
                data=e.get("requestObject") or {},
                user=e["user"]["username"],
                code=(e.get("responseStatus") or {}).get("code", 0),
            )
            for e in events
        ]

    def admin_ssl(self) -> ssl.SSLContext:
        assert self.pki is not None
        context = ssl.create_default_context(cafile=str(self.pki.ca))
        context.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return context

    def admin_session(self) -> aiohttp.ClientSession:
        """An HTTP session acting as the cluster's administrator; paths are relative to the API."""
        return aiohttp.ClientSession(base_url=self.url, connector=aiohttp.TCPConnector(ssl=self.admin_ssl()))

    def _wait_ready(self, timeout: float) -> None:
        import urllib.request  # noqa: PLC0415

        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            assert self._apiserver is not None
            if self._apiserver.poll() is not None:
                raise ProcessLookupError(f"kube-apiserver exited; see {self.workdir}")
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", context=self.admin_ssl(), timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError as exc:
                last = exc
            time.sleep(0.25)
        raise TimeoutError(f"kube-apiserver not ready after {timeout}s: {last}")

    def admin_kubeconfig(self) -> Path:
        """A kubeconfig with the administrator's client certificate (for the controller manager)."""
        assert self.pki is not None
        path = self.workdir / "admin.kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "test", "cluster": {"server": self.url, "certificate-authority": str(self.pki.ca)}}
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {
                        "client-certificate": str(self.pki.admin_cert),
                        "client-key": str(self.pki.admin_key),
                    },
                }
            ],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
            "current-context": "test",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def kubeconfig(self, path: Path, token: str, namespace: str, host: str = "127.0.0.1") -> Path:
        """A kubeconfig that authenticates with a service account's ``token`` (what a pod's
        projected service account gives it), reaching the server at ``host``."""
        assert self.pki is not None
        ca = base64.b64encode(self.pki.ca.read_bytes()).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "test",
                    "cluster": {"server": f"https://{host}:{self.port}", "certificate-authority-data": ca},
                }
            ],
            "users": [{"name": "sa", "user": {"token": token}}],
            "contexts": [
                {"name": "test", "context": {"cluster": "test", "user": "sa", "namespace": namespace}}
            ],
            "current-context": "test",
        }
        path.write_text(yaml.safe_dump(config))
        return path


def _spawn(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


# ---- the few REST verbs the tests need, as an administrator -------------------------------------

#: kind → (API prefix, plural, namespaced) for what the chart and the tests apply
RESOURCES: dict[str, tuple[str, str, bool]] = {
    "Namespace": ("/api/v1", "namespaces", False),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "Secret": ("/api/v1", "secrets", True),
    "Pod": ("/api/v1", "pods", True),
    "Service": ("/api/v1", "services", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "CustomResourceDefinition": ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False),
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "StatefulSet": ("/apis/apps/v1", "statefulsets", True),
    "PodDisruptionBudget": ("/apis/policy/v1", "poddisruptionbudgets", True),
    "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies", True),
    "GroupCoordinator": ("/apis/groupcoord.io/v1alpha1", "groupcoordinators", True),
}


def collection(kind: str, namespace: str | None = None) -> str:
    prefix, plural, namespaced = RESOURCES[kind]
    return f"{prefix}/namespaces/{namespace}/{plural}" if namespaced else f"{prefix}/{plural}"


def path_of(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{collection(obj['kind'], meta.get('namespace'))}/{meta['name']}"


async def create(session: aiohttp.ClientSession, obj: dict[str, Any]) -> dict[str, Any]:
    async with session.post(collection(obj["kind"], obj["metadata"].get("namespace")), json=obj) as resp:
        body = await resp.json()
        if resp.status >= 300:
            raise ApiError(resp.status, body)
        return body


async def wait_established(session: aiohttp.ClientSession, crd_name: str, timeout: float = 30) -> None:
    """A new CRD serves its resource only once the API server says it is Established."""
    path = f"{collection('CustomResourceDefinition')}/{crd_name}"
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        async with session.get(path) as resp:
            conditions = ((await resp.json()).get("status") or {}).get("conditions") or []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"CRD {crd_name} not Established after {timeout}s")


async def service_account_token(session: aiohttp.ClientSession, namespace: str, name: str) -> str:
    """A token for the ServiceAccount (the TokenRequest API, as the kubelet gets one for a pod)."""
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    async with session.post(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", json=body
    ) as resp:
        answer = await resp.json()
        if resp.status >= 300:
            raise ApiError(resp.status, answer)
        return str(answer["status"]["token"])


class ApiError(RuntimeError):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {json.dumps(body)[:800]}")
        self.status = status
        self.body = body


# ---- the chart, installed as `helm install` would ------------------------------------------------

CHART = Path(__file__).resolve().parents[2] / "helm" / "groupcoord"
RELEASE = "gc"
RELEASE_NAME = "gc-groupcoord"  # the chart's GroupCoordinator, operator and roles are named after it


def render_chart(namespace: str, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The chart's objects as ``helm install`` would send them (hooks included, run first)."""
    manifests = helm.Chart.load(CHART).render(values, name=RELEASE, namespace=namespace, is_install=True)
    objects = []
    for path, text in sorted(manifests.items()):
        if not path.endswith("NOTES.txt"):
            objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    for obj in objects:
        if obj["kind"] not in ("ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "Namespace"):
            obj["metadata"].setdefault("namespace", namespace)
    return objects


def cluster_scoped_names(objects: list[dict[str, Any]], namespace: str) -> None:
    """Cluster-wide names carry the namespace, so installs in several namespaces of one API
    server do not collide (a real cluster has one release of a given name per namespace too)."""
    renamed = {}
    for obj in objects:
        if obj["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            old = obj["metadata"]["name"]
            renamed[old] = obj["metadata"]["name"] = f"{old}-{namespace}"
    for obj in objects:
        ref = obj.get("roleRef")
        if ref and ref["kind"] == "ClusterRole":
            ref["name"] = renamed.get(ref["name"], ref["name"])


async def install(
    admin: aiohttp.ClientSession, namespace: str, edit: Any = None, crd: bool = True, resource: bool = True
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Install the chart into ``namespace`` (the CRD from ``crds/`` once per server, unless not
    ``crd``; the chart's own GroupCoordinator unless not ``resource``); returns the objects applied
    and the chart's operator Deployment. ``edit(objects)`` may change them first."""
    if crd:
        await install_crd(admin)
    await create(admin, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    objects = render_chart(namespace)
    cluster_scoped_names(objects, namespace)
    if edit is not None:
        edit(objects)
    deployment = next(
        o
        for o in objects
        if o["kind"] == "Deployment" and o["metadata"]["name"] == f"{RELEASE_NAME}-operator"
    )
    # what `helm install` sends; the crd-upgrade hook's Job is not run (no controller manager)
    # and the operator's Deployment is run by the test itself, as its pod would be
    order = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Secret")
    for kind in order:
        for obj in objects:
            if obj["kind"] == kind:
                await create(admin, obj)
    for obj in objects:
        if obj["kind"] == "GroupCoordinator" and crd and resource:
            await create(admin, obj)
    return objects, deployment


async def install_crd(admin: aiohttp.ClientSession) -> None:
    """The chart's ``crds/`` (Helm installs them before anything else, once per cluster)."""
    crd = yaml.safe_load((CHART / "crds" / "groupcoord.io_groupcoordinators.yaml").read_text())
    try:
        await create(admin, crd)
    except ApiError as exc:
        if exc.status != 409:
            raise
    await wait_established(admin, crd["metadata"]["name"])


def operator_command(deployment: dict[str, Any], namespace: str) -> tuple[list[str], dict[str, str]]:
    """The chart's operator container as a local process: its arguments and environment, with
    the values the downward API would fill in; ports moved to free ones."""
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["python", "-m", "groupcoord_operator"]
    fields = {"metadata.name": f"{RELEASE_NAME}-operator-0", "metadata.namespace": namespace}
    env = {}
    for var in container.get("env") or ():
        if "value" in var:
            env[var["name"]] = str(var["value"])
        else:
            env[var["name"]] = fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
    env |= {
        "GROUPCOORD_OPERATOR_RESYNC_SECONDS": "1",
        "GROUPCOORD_OPERATOR_RENEW_SECONDS": "1",
        "GROUPCOORD_OPERATOR_KAFKA_PROBE": "false",  # no Kafka behind this resource
    }
    args = [*container["args"], f"--liveness=http://127.0.0.1:{free_port()}/healthz", "--metrics-port=0"]
    return [sys.executable, "-m", "groupcoord_operator", *args], env


async def start_operator(
    apiserver: KubeApiServer,
    admin: aiohttp.ClientSession,
    deployment: dict[str, Any],
    namespace: str,
    workdir: Path,
    extra_env: Mapping[str, str] | None = None,
) -> tuple[subprocess.Popen[bytes], Path]:
    """The chart's operator Deployment run as a local process, as the chart's ServiceAccount
    (a token the API server issued, in a kubeconfig); returns the process and its log."""
    token = await service_account_token(admin, namespace, f"{RELEASE_NAME}-operator")
    kubeconfig = apiserver.kubeconfig(workdir / "operator-kubeconfig", token, namespace)
    command, env = operator_command(deployment, namespace)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("GROUPCOORD_OPERATOR_")}
    environment |= env | dict(extra_env or {}) | {"KUBECONFIG": str(kubeconfig)}
    log = workdir / "operator.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, env=environment, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return process, log


# ---- a namespace as shard and gateway processes see it -------------------------------------------


@dataclass
class WorkloadNamespace:
    """The chart installed in ``namespace`` without its own resource; ``kubeconfig`` authenticates
    as the chart's workload account (what shard and gateway pods run as: read-only on
    GroupCoordinators). The test plays the operator through ``admin``: :meth:`publish`."""

    admin: aiohttp.ClientSession
    namespace: str
    kubeconfig: Path

    @property
    def collection(self) -> str:
        return collection("GroupCoordinator", self.namespace)

    async def publish(self, name: str, placement: Any, *, shards: int = 2, new: bool = False) -> None:
        """Write ``placement`` to the resource's status as the operator does (making the
        resource first when ``new``)."""
        from groupcoord.controlplane.placement import placement_to_status  # noqa: PLC0415

        if new:
            spec = {"kafka": {"bootstrapServers": "kafka:9092"}, "stateTopic": {"partitions": len(placement)}}
            body = {
                "apiVersion": "groupcoord.io/v1alpha1",
                "kind": "GroupCoordinator",
                "metadata": {"name": name, "namespace": self.namespace},
                "spec": {**spec, "shards": shards},
            }
            await create(self.admin, body)
        status = {"status": {"partitions": placement_to_status(placement)}}
        async with self.admin.patch(
            f"{self.collection}/{name}/status",
            json=status,
            headers={"Content-Type": "application/merge-patch+json"},
        ) as resp:
            if resp.status >= 300:
                raise ApiError(resp.status, await resp.json())


async def workload_namespace(
    server: KubeApiServer, admin: aiohttp.ClientSession, namespace: str, workdir: Path
) -> WorkloadNamespace:
    await install(admin, namespace, resource=False)
    token = await service_account_token(admin, namespace, f"{RELEASE_NAME}-workload")
    return WorkloadNamespace(admin, namespace, server.kubeconfig(workdir / "kubeconfig", token, namespace))
