"""The Kubernetes API over HTTP(S) with the standard library, configured as client-go configures
itself: the pod's service account when running in a cluster, else ``$KUBECONFIG`` (or
``~/.kube/config``) with bearer tokens, client certificates or exec credential plugins (how EKS,
GKE and AKS kubeconfigs authenticate today).

Why not the ``kubernetes`` package: shard and gateway pods only read and watch one resource, and
the operator sends a handful of JSON requests; the package and its dependencies were about 80 MB
of every pod's image (its generated models alone 40 MB) for that. ``kopf``'s own login has no
exec plugins, so it cannot stand in for a kubeconfig either.

Calls are synchronous (the operator's handlers and the leadership watch run in threads); a
request opens its own connection, so threads share nothing but the configuration.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import datetime as dt
import http.client
import json
import os
import ssl
import subprocess
import tempfile
import threading
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubernetesConfigError(RuntimeError):
    """Neither a service account nor a usable kubeconfig: say which and why."""


@dataclass
class Credentials:
    """What a request presents: a bearer token and/or a client certificate (file paths)."""

    token: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    expires: dt.datetime | None = None  # exec plugins: ask again after this


@dataclass
class KubernetesConfig:
    """Where the API is and how to authenticate. ``token_file`` is re-read for every request:
    projected service-account tokens rotate while the pod runs."""

    server: str
    ca_file: str | None = None
    insecure: bool = False
    token: str | None = None
    token_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    exec_plugin: Mapping[str, Any] | None = None
    namespace: str | None = None
    _exec_cache: Credentials | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def credentials(self) -> Credentials:
        if self.exec_plugin is not None:
            with self._lock:
                cached = self._exec_cache
                if cached is None or (cached.expires and cached.expires <= _now() + dt.timedelta(seconds=30)):
                    cached = self._exec_cache = run_exec_plugin(self.exec_plugin)
            return cached
        token = self.token
        if self.token_file:
            token = Path(self.token_file).read_text().strip()
        return Credentials(token, self.cert_file, self.key_file)

    def forget_exec_credentials(self) -> None:
        """After a 401: the plugin's token was revoked or expired early; ask it again."""
        with self._lock:
            self._exec_cache = None

    def ssl_context(self, credentials: Credentials) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca_file)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if credentials.cert_file and credentials.key_file:
            context.load_cert_chain(credentials.cert_file, credentials.key_file)
        return context


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def in_cluster_config(directory: Path = SERVICE_ACCOUNT_DIR) -> KubernetesConfig | None:
    """The pod's service account (as ``rest.InClusterConfig``), or None outside a pod."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    token = directory / "token"
    if not host or not port or not token.exists():
        return None
    if ":" in host:  # IPv6
        host = f"[{host}]"
    namespace = directory / "namespace"
    return KubernetesConfig(
        server=f"https://{host}:{port}",
        ca_file=str(directory / "ca.crt"),
        token_file=str(token),
        namespace=namespace.read_text().strip() if namespace.exists() else None,
    )


def kubeconfig_config(path: str | os.PathLike[str] | None = None, context: str | None = None) -> KubernetesConfig:
    """The current (or named) context of a kubeconfig: ``path``, else the first file of
    ``$KUBECONFIG``, else ``~/.kube/config``. Inline ``*-data`` fields are written to private
    temporary files, since Python's ``ssl`` loads certificates from files."""
    if path is None:
        env = os.environ.get("KUBECONFIG", "")
        path = next((p for p in env.split(os.pathsep) if p), None) or Path.home() / ".kube" / "config"
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise KubernetesConfigError(f"no service account and no kubeconfig at {path}: {exc.strerror}") from None
    base = path.parent

    def named(kind: str, name: str | None) -> dict[str, Any]:
        for item in doc.get(kind) or ():
            if item.get("name") == name:
                return dict(item.get(kind[:-1]) or {})
        raise KubernetesConfigError(f"{path}: no {kind[:-1]} named {name!r}")

    ctx = named("contexts", context or doc.get("current-context"))
    cluster = named("clusters", ctx.get("cluster"))
    user = named("users", ctx.get("user")) if ctx.get("user") else {}

    def file_or_data(key: str) -> str | None:
        if user.get(f"{key}-data") or cluster.get(f"{key}-data"):
            data = base64.b64decode(user.get(f"{key}-data") or cluster[f"{key}-data"])
            return _private_file(data)
        value = user.get(key) or cluster.get(key)
        return str(base / value) if value else None

    exec_plugin = user.get("exec")
    if exec_plugin:
        exec_plugin = {**exec_plugin, "_cluster": cluster, "_base": str(base)}
    if not cluster.get("server"):
        raise KubernetesConfigError(f"{path}: cluster {ctx.get('cluster')!r} names no server")
    return KubernetesConfig(
        server=str(cluster["server"]).rstrip("/"),
        ca_file=file_or_data("certificate-authority"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        token=user.get("token"),
        token_file=str(base / user["tokenFile"]) if user.get("tokenFile") else None,
        cert_file=file_or_data("client-certificate"),
        key_file=file_or_data("client-key"),
        exec_plugin=exec_plugin,
        namespace=ctx.get("namespace"),
    )


def load_config() -> KubernetesConfig:
    """In a pod its service account, else the kubeconfig (client-go's order)."""
    return in_cluster_config() or kubeconfig_config()


def run_exec_plugin(plugin: Mapping[str, Any]) -> Credentials:
    """Run a kubeconfig ``exec`` credential plugin (client.authentication.k8s.io) once."""
    command = str(plugin["command"])
    base = Path(str(plugin.get("_base", ".")))
    if "/" in command and not command.startswith("/"):
        command = str(base / command)  # relative to the kubeconfig, as client-go does
    env = dict(os.environ)
    env.update({str(e["name"]): str(e["value"]) for e in plugin.get("env") or ()})
    api_version = str(plugin.get("apiVersion") or "client.authentication.k8s.io/v1")
    info: dict[str, Any] = {"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    if plugin.get("provideClusterInfo"):
        cluster = plugin.get("_cluster") or {}
        info["spec"]["cluster"] = {k: v for k, v in cluster.items() if k in ("server", "certificate-authority-data")}
    env["KUBERNETES_EXEC_INFO"] = json.dumps(info)
    try:
        done = subprocess.run(
            [command, *map(str, plugin.get("args") or ())],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except OSError as exc:
        raise KubernetesConfigError(f"exec credential plugin {command!r} could not run: {exc}") from None
    if done.returncode != 0:
        raise KubernetesConfigError(f"exec credential plugin {command!r} failed: {done.stderr.strip()[:300]}")
    status = (json.loads(done.stdout) or {}).get("status") or {}
    expires = status.get("expirationTimestamp")
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    return Credentials(
        token=status.get("token"),
        cert_file=_private_file(cert.encode()) if cert else None,
        key_file=_private_file(key.encode()) if key else None,
        expires=dt.datetime.fromisoformat(expires.replace("Z", "+00:00")) if expires else None,
    )


def _private_file(data: bytes) -> str:
    """``data`` in a file only this user can read, removed when the process exits."""
    fd, name = tempfile.mkstemp(prefix="groupcoord-kube-", suffix=".pem")  # mode 0600
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    atexit.register(_remove, name)
    return name


def _remove(name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name)


class KubernetesApi:
    """JSON requests and watch streams to one API server."""

    def __init__(self, config: KubernetesConfig | str) -> None:
        # a bare URL: no credentials (``kubectl proxy``, an emulator in tests)
        self.config = KubernetesConfig(server=config.rstrip("/")) if isinstance(config, str) else config
        url = urllib.parse.urlsplit(self.config.server)
        self._https = url.scheme == "https"
        self._host = url.hostname or "localhost"
        self._port = url.port or (443 if self._https else 80)
        self._prefix = url.path.rstrip("/")

    def _connect(self, timeout: float | None) -> tuple[http.client.HTTPConnection, Credentials]:
        credentials = self.config.credentials()
        if self._https:
            context = self.config.ssl_context(credentials)
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=context), credentials
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout), credentials

    def _send(
        self, method: str, path: str, query: Sequence[tuple[str, str]], body: Any, content_type: str, timeout: float | None
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send one request; the caller reads (or streams) the response, then closes the connection."""
        target = self._prefix + path + (f"?{urllib.parse.urlencode(list(query))}" if query else "")
        for attempt in (1, 2):
            connection, credentials = self._connect(timeout)
            headers = {"Accept": "application/json"}
            if credentials.token:
                headers["Authorization"] = f"Bearer {credentials.token}"
            payload = None
            if body is not None:
                payload = json.dumps(body).encode()
                headers["Content-Type"] = content_type
            try:
                connection.request(method, target, body=payload, headers=headers)
                response = connection.getresponse()
            except BaseException:
                connection.close()
                raise
            if response.status == 401 and attempt == 1 and self.config.exec_plugin is not None:
                connection.close()
                self.config.forget_exec_credentials()
                continue
            return connection, response
        raise AssertionError("unreachable")

    def request(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = 30,
    ) -> tuple[int, bytes]:
        """One request: the status and the whole body."""
        connection, response = self._send(method, path, query, body, content_type, timeout)
        try:
            return response.status, response.read()
        finally:
            connection.close()

    def lines(self, path: str, query: Sequence[tuple[str, str]], timeout: float) -> Iterator[bytes]:
        """A watch: one JSON event per line until the server ends the stream (``timeoutSeconds``)."""
        connection, response = self._send("GET", path, query, None, "application/json", timeout)
        try:
            if response.status != 200:
                raise KubernetesApiError(response.status, response.read()[:300].decode(errors="replace"))
            while line := response.readline():
                if line.strip():
                    yield line
        finally:
            connection.close()


class KubernetesApiError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
