"""Every way a pod or a workstation authenticates to Kubernetes, against a real API server
(``tests/operator/kube_apiserver.py``) with RBAC on: the pod's service account (token file and CA
as the kubelet mounts them), and kubeconfigs with inline client certificates, a token file, or an
exec credential plugin (how cloud kubeconfigs authenticate), whose token is asked for again after
a 401. Each identity reads only what RBAC lets it: a request that got through as someone else
would show."""

from __future__ import annotations

import asyncio
import base64
import json
import stat
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from groupcoord.common.kubernetes_api import (
    KubernetesApi,
    KubernetesConfigError,
    in_cluster_config,
    kubeconfig_config,
    load_config,
)
from tests.operator.kube_apiserver import KubeApiServer, service_account_token

NS = "default"
WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


@pytest.fixture(scope="module")
def token(kube_apiserver: KubeApiServer) -> str:
    """A token of ServiceAccount default/reader, which may list namespaces and nothing else."""
    return asyncio.run(_reader_token(kube_apiserver))


async def _reader_token(kube_apiserver: KubeApiServer) -> str:
    async with kube_apiserver.admin_session() as admin:
        account = {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "reader", "namespace": NS},
        }
        async with admin.post(f"/api/v1/namespaces/{NS}/serviceaccounts", json=account) as resp:
            assert resp.status == 201, await resp.text()
        role = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "namespace-reader"},
            "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]}],
        }
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "namespace-reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "namespace-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": NS}],
        }
        for path, body in (
            ("/apis/rbac.authorization.k8s.io/v1/clusterroles", role),
            ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding),
        ):
            async with admin.post(path, json=body) as resp:
                assert resp.status == 201, await resp.text()
        return await service_account_token(admin, NS, "reader")


def whoami(api: KubernetesApi) -> str:
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    status, body = api.request("POST", WHOAMI, body=review)
    assert status == 201, body
    return str(json.loads(body)["status"]["userInfo"]["username"])


def kubeconfig(path: Path, server: str, cluster: dict, user: dict, namespace: str = "team") -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": namespace}}],
                "current-context": "x",
            }
        )
    )
    return path


def test_in_a_pod_the_mounted_service_account_is_used(
    kube_apiserver: KubeApiServer, token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert kube_apiserver.pki is not None
    mounted = tmp_path / "serviceaccount"
    mounted.mkdir()
    (mounted / "token").write_text(token)
    (mounted / "ca.crt").write_bytes(kube_apiserver.pki.ca.read_bytes())
    (mounted / "namespace").write_text(NS)
    assert in_cluster_config(mounted) is None, "outside a pod (no KUBERNETES_SERVICE_HOST) it stays out"
    host, port = kube_apiserver.url.removeprefix("https://").split(":")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    config = in_cluster_config(mounted)
    assert config is not None and config.namespace == NS
    api = KubernetesApi(config)
    assert whoami(api) == f"system:serviceaccount:{NS}:reader"
    assert api.request("GET", "/api/v1/namespaces")[0] == 200
    assert api.request("GET", f"/api/v1/namespaces/{NS}/secrets")[0] == 403
    (mounted / "token").write_text("rotated-and-not-valid")  # the kubelet rotates the file
    assert api.request("GET", "/api/v1/namespaces")[0] == 401, "the token file is read for every request"


def test_a_kubeconfig_with_inline_client_certificates(kube_apiserver: KubeApiServer, tmp_path: Path) -> None:
    assert kube_apiserver.pki is not None
    pki = kube_apiserver.pki

    def data(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    path = kubeconfig(
        tmp_path / "config",
        kube_apiserver.url,
        {"certificate-authority-data": data(pki.ca)},
        {"client-certificate-data": data(pki.admin_cert), "client-key-data": data(pki.admin_key)},
    )
    config = kubeconfig_config(path)
    assert config.namespace == "team"
    assert stat.S_IMODE(Path(config.key_file or "").stat().st_mode) == 0o600, "the key is written privately"
    assert whoami(KubernetesApi(config)) == "admin"


def test_kubeconfig_from_the_environment_with_a_token_file(
    kube_apiserver: KubeApiServer, token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert kube_apiserver.pki is not None
    (tmp_path / "token").write_text(token)
    path = kubeconfig(
        tmp_path / "config",
        kube_apiserver.url,
        {"certificate-authority": str(kube_apiserver.pki.ca)},
        {"tokenFile": "token"},  # relative to the kubeconfig's folder
    )
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", f"{path}{':'}{tmp_path / 'absent'}")
    assert whoami(KubernetesApi(load_config())) == f"system:serviceaccount:{NS}:reader"


def test_an_exec_plugin_is_run_once_and_again_after_a_401(
    kube_apiserver: KubeApiServer, token: str, tmp_path: Path
) -> None:
    assert kube_apiserver.pki is not None
    runs = tmp_path / "runs"
    tokens = tmp_path / "tokens"
    tokens.write_text(f"not-yet-valid\n{token}\n")
    plugin = tmp_path / "credential-plugin"
    plugin.write_text(
        textwrap.dedent(
            f"""\
            #!{sys.executable}
            import json, os, pathlib
            info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
            assert info["spec"]["interactive"] is False and os.environ["PLUGIN_ENV"] == "set"
            runs = pathlib.Path({str(runs)!r})
            n = len(runs.read_text().splitlines()) if runs.exists() else 0
            runs.write_text("run\\n" * (n + 1))
            token = pathlib.Path({str(tokens)!r}).read_text().splitlines()[min(n, 1)]
            print(json.dumps({{"apiVersion": info["apiVersion"], "kind": "ExecCredential",
                               "status": {{"token": token}}}}))
            """
        )
    )
    plugin.chmod(0o755)
    exec_user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "./credential-plugin",  # relative to the kubeconfig, as client-go resolves it
            "env": [{"name": "PLUGIN_ENV", "value": "set"}],
            "interactiveMode": "Never",
        }
    }
    path = kubeconfig(
        tmp_path / "config",
        kube_apiserver.url,
        {"certificate-authority": str(kube_apiserver.pki.ca)},
        exec_user,
    )
    api = KubernetesApi(kubeconfig_config(path))
    assert whoami(api) == f"system:serviceaccount:{NS}:reader", "the first token was refused: asked again"
    assert whoami(api) == f"system:serviceaccount:{NS}:reader"
    assert len(runs.read_text().splitlines()) == 2, "a token is reused until refused"


def test_no_service_account_and_no_kubeconfig_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nothing-here"))
    with pytest.raises(KubernetesConfigError, match="no service account and no kubeconfig at .*nothing-here"):
        load_config()
