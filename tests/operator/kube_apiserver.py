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
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from real_parts import unavailable

from groupcoord.common.run_dirs import cache_dir
from groupcoord.embedded_broker import free_port, stop_process_group, wait_for_port
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


@dataclass
class KubeApiServer:
    """etcd and kube-apiserver on loopback ports under ``workdir``; ``url`` is the API."""

    workdir: Path
    pki: KubePki | None = None
    url: str = ""
    _etcd: subprocess.Popen[bytes] | None = None
    _apiserver: subprocess.Popen[bytes] | None = None

    def start(self) -> KubeApiServer:
        apiserver, etcd = _binary("kube-apiserver"), _binary("etcd")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.pki = pki = make_kube_pki(self.workdir / "pki")
        client, peer, secure = free_port(), free_port(), free_port()
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
            self.workdir / "etcd.log",
        )
        wait_for_port("127.0.0.1", client, timeout=30)
        self._apiserver = _spawn(
            [
                apiserver,
                f"--etcd-servers=http://127.0.0.1:{client}",
                "--bind-address=127.0.0.1",
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
                "--v=0",
            ],
            self.workdir / "kube-apiserver.log",
        )
        self.url = f"https://127.0.0.1:{secure}"
        self._wait_ready(timeout=90)
        return self

    def stop(self) -> None:
        stop_process_group(self._apiserver)
        stop_process_group(self._etcd)

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

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
                raise RuntimeError(f"kube-apiserver exited; see {self.workdir / 'kube-apiserver.log'}")
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", context=self.admin_ssl(), timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError as exc:
                last = exc
            time.sleep(0.25)
        raise TimeoutError(f"kube-apiserver not ready after {timeout}s: {last}")

    def kubeconfig(self, path: Path, token: str, namespace: str) -> Path:
        """A kubeconfig that authenticates with a service account's ``token``: what the operator
        gets in a pod, in the form ``kubernetes.config.load_kube_config`` reads outside one."""
        assert self.pki is not None
        ca = base64.b64encode(self.pki.ca.read_bytes()).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "test", "cluster": {"server": self.url, "certificate-authority-data": ca}}],
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
