"""Pods as Docker containers: what the StatefulSet/Deployment controllers, the kubelet and
cluster DNS would do with the operator's objects, done with ``docker run`` on a private network.

Real: the image, the container's command, args, env, ports and security context exactly as
the pod template says (``$(VAR)`` expanded as the kubelet does, downward-API fields filled in),
the probes run as the kubelet runs them (gRPC ``grpc.health.v1.Health/Check``, HTTP GET,
TCP connect) against the pod's IP, the API server (a real one, reached as a pod reaches it: the
``KUBERNETES_SERVICE_*`` variables and the projected service account). Emulated: cluster DNS
(Docker network aliases carry the names Services give: ``svc``, ``svc.ns``, ``svc.ns.svc``,
``svc.ns.svc.cluster.local`` and, for a headless Service, ``pod.svc...``) and the controllers
(this module).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import socket
import tempfile
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from .docker_env import Docker

CLUSTER_DOMAIN = "cluster.local"
SERVICE_ACCOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class ApiAccess:
    """What the kubelet gives every pod to reach the API server: its address (the
    ``KUBERNETES_SERVICE_*`` variables) and the projected service account (``token``, ``ca.crt``,
    ``namespace`` in ``account_dir``, mounted where client-go and our client look)."""

    host: str
    port: int
    account_dir: Path
_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_LABEL_FIELD = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")


def expand(value: str, env: Mapping[str, str]) -> str:
    """The kubelet's ``$(VAR)`` expansion (``$$`` escapes; unknown names stay as written)."""
    out, i = [], 0
    while i < len(value):
        if value.startswith("$$", i):
            out.append("$")
            i += 2
            continue
        m = _VAR.match(value, i)
        if m:
            out.append(env.get(m.group(1), m.group(0)))
            i = m.end()
            continue
        out.append(value[i])
        i += 1
    return "".join(out)


@dataclass
class Pod:
    """One pod of a workload, run as one container (single-container pods only)."""

    name: str
    namespace: str
    labels: dict[str, str]
    spec: dict[str, Any]
    ip: str
    hostname: str | None = None
    subdomain: str | None = None
    ready: bool = False
    container_id: str | None = None
    aliases: list[str] = field(default_factory=list)
    replacing: bool = False  # a controller is replacing this pod: the kubelet leaves it alone
    host_ip: str = ""  # status.hostIP: the Docker network's gateway, the "node" it runs on
    annotations: dict[str, str] = field(default_factory=dict)  # the template's, as controllers copy them
    # the container's name on the Docker Engine: the network's name before the pod's, so that two
    # suites sharing one engine (or a run killed before its clean-up) never claim the same name
    docker_name: str = ""

    @property
    def container(self) -> dict[str, Any]:
        (container,) = self.spec["containers"]
        return container

    def field(self, path: str) -> str:
        """A downward-API ``fieldRef``."""
        simple = {
            "metadata.name": self.name,
            "metadata.namespace": self.namespace,
            "status.podIP": self.ip,
            "status.podIPs": self.ip,
            "status.hostIP": self.host_ip,
            "status.hostIPs": self.host_ip,
            "spec.nodeName": "docker",
            "spec.serviceAccountName": self.spec.get("serviceAccountName", "default"),
        }
        if path in simple:
            return simple[path]
        m = _LABEL_FIELD.fullmatch(path)
        if m:
            return (self.labels if m.group(1) == "labels" else self.annotations)[m.group(2)]
        raise NotImplementedError(f"fieldRef {path} is not emulated")

    def env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for var in self.container.get("env", []):
            if "value" in var:
                env[var["name"]] = expand(var["value"], env)
            elif "fieldRef" in var.get("valueFrom", {}):
                env[var["name"]] = self.field(var["valueFrom"]["fieldRef"]["fieldPath"])
            else:
                raise NotImplementedError(f"env {var['name']}: only value and fieldRef are emulated")
        return env

    def port(self, ref: int | str) -> int:
        if isinstance(ref, int) or str(ref).isdigit():
            return int(ref)
        return next(int(p["containerPort"]) for p in self.container.get("ports", []) if p.get("name") == ref)


def docker_run_args(
    pod: Pod, network: str, image_user: str, api: ApiAccess, volumes_on_host: Mapping[str, Path] | None = None
) -> list[str]:
    """``docker run`` arguments for the pod's one container, from its spec alone (and the host
    folders :func:`secret_volumes` filled for its Secret volumes)."""
    c = pod.container
    env = pod.env()
    pod_sec = pod.spec.get("securityContext", {})
    sec = {**pod_sec, **c.get("securityContext", {})}
    args = ["run", "-d", "--name", pod.docker_name, "--hostname", pod.hostname or pod.name]
    args += ["--network", network, "--ip", pod.ip]
    for alias in pod.aliases:
        args += ["--network-alias", alias]
    user = sec.get("runAsUser")
    if user is not None:
        args += ["--user", f"{user}:{sec.get('runAsGroup', user)}"]
    if sec.get("runAsNonRoot"):
        uid = str(user if user is not None else image_user.split(":")[0])
        assert uid.isdigit() and uid != "0", (
            f"runAsNonRoot needs a numeric non-root user, image has {image_user!r}"
        )
    if sec.get("readOnlyRootFilesystem"):
        args.append("--read-only")
    if sec.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    for cap in sec.get("capabilities", {}).get("drop", []):
        args += ["--cap-drop", cap]
    for cap in sec.get("capabilities", {}).get("add", []):
        args += ["--cap-add", cap]
    volumes = {v["name"]: v for v in pod.spec.get("volumes", [])}
    for mount in c.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if "secret" in volume and volumes_on_host and mount["name"] in volumes_on_host:
            args += ["-v", f"{volumes_on_host[mount['name']]}:{mount['mountPath']}:ro"]
            continue
        if "emptyDir" not in volume:
            raise NotImplementedError(f"volume {mount['name']}: only emptyDir and Secrets are emulated")
        args += ["--tmpfs", f"{mount['mountPath']}:mode=1777"]
    # What the kubelet adds to every pod: the API server's address and the service account.
    args += ["-v", f"{api.account_dir}:{SERVICE_ACCOUNT_PATH}:ro"]
    args += ["-e", f"KUBERNETES_SERVICE_HOST={api.host}", "-e", f"KUBERNETES_SERVICE_PORT={api.port}"]
    for name, value in env.items():
        args += ["-e", f"{name}={value}"]
    command = [expand(a, env) for a in c.get("command", [])]
    if command:
        args += ["--entrypoint", command[0]]
    args.append(c["image"])
    args += command[1:]
    args += [expand(a, env) for a in c.get("args", [])]
    return args


def probe(pod: Pod, spec: Mapping[str, Any] | None, timeout_s: float = 1.0) -> bool:
    """One probe as the kubelet runs it, against the pod IP."""
    if not spec:
        return True
    timeout_s = float(spec.get("timeoutSeconds", timeout_s))
    try:
        if "grpc" in spec:
            from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: PLC0415

            target = f"{pod.ip}:{pod.port(spec['grpc']['port'])}"
            with grpc.insecure_channel(target) as channel:
                reply = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=spec["grpc"].get("service", "")), timeout=timeout_s
                )
            return reply.status == health_pb2.HealthCheckResponse.SERVING
        if "httpGet" in spec:
            get = spec["httpGet"]
            url = f"http://{pod.ip}:{pod.port(get['port'])}{get.get('path', '/')}"
            with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 - a pod's probe
                return 200 <= resp.status < 400
        if "tcpSocket" in spec:
            with socket.create_connection((pod.ip, pod.port(spec["tcpSocket"]["port"])), timeout=timeout_s):
                return True
    except (OSError, grpc.RpcError):
        return False
    raise NotImplementedError(f"probe {spec} is not emulated")


def service_names(name: str, namespace: str) -> list[str]:
    return [
        name,
        f"{name}.{namespace}",
        f"{name}.{namespace}.svc",
        f"{name}.{namespace}.svc.{CLUSTER_DOMAIN}",
    ]


def selects(service: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    selector = service["spec"].get("selector") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def dns_aliases(pod: Pod, services: list[dict[str, Any]]) -> list[str]:
    """The names cluster DNS would resolve to this pod: every Service selecting it, and for a
    headless Service its per-pod name when the pod's subdomain is that Service."""
    names: list[str] = []
    for svc in services:
        if not selects(svc, pod.labels):
            continue
        svc_name = svc["metadata"]["name"]
        names += service_names(svc_name, pod.namespace)
        if svc["spec"].get("clusterIP") == "None" and pod.subdomain == svc_name and pod.hostname:
            names += [f"{pod.hostname}.{n}" for n in service_names(svc_name, pod.namespace)[1:]]
    return list(dict.fromkeys(names))


def pods_of(workload: Mapping[str, Any], ips: Any) -> list[Pod]:
    """The pods a StatefulSet or Deployment controller would create (ordinals / hashed names)."""
    meta, spec = workload["metadata"], workload["spec"]
    template = spec["template"]
    pods = []
    for i in range(int(spec.get("replicas", 1))):
        labels = dict(template["metadata"].get("labels", {}))
        if workload["kind"] == "StatefulSet":
            name = f"{meta['name']}-{i}"
            labels["apps.kubernetes.io/pod-index"] = str(i)
            labels["statefulset.kubernetes.io/pod-name"] = name
            hostname, subdomain = name, spec.get("serviceName")
        else:
            name = f"{meta['name']}-6b9f7d5c4-x{i}k2q"  # <deployment>-<replicaset hash>-<suffix>
            hostname, subdomain = template["spec"].get("hostname"), template["spec"].get("subdomain")
        pod = Pod(name, meta["namespace"], labels, template["spec"], next(ips), hostname, subdomain)
        pod.annotations = dict(template["metadata"].get("annotations") or {})
        pods.append(pod)
    return pods


def address_pool(subnet: str) -> Any:
    """Pod IPs of a Docker network's subnet, past the gateway and a few for other containers."""
    hosts = ipaddress.ip_network(subnet).hosts()
    for _ in range(10):
        next(hosts)
    return (str(h) for h in hosts)


def secret_volumes(pod: Pod, secrets: Mapping[str, Mapping[str, bytes]]) -> dict[str, Path]:
    """The pod's Secret volumes as the kubelet writes them: one file per key, owned by root
    (no fsGroup) with the volume's ``defaultMode``, so a mode the container's user cannot read
    fails here as it would in a cluster. Volume name -> host folder."""
    folders = {}
    for volume in pod.spec.get("volumes", []):
        if "secret" not in volume:
            continue
        data = secrets[volume["secret"]["secretName"]]  # a missing Secret: the pod cannot start
        folder = Path(tempfile.mkdtemp(prefix=f"{pod.name}-{volume['name']}-"))
        folder.chmod(0o755)
        for key, content in data.items():
            (folder / key).write_bytes(content)
            os.chmod(folder / key, volume["secret"].get("defaultMode", 0o644))
        folders[volume["name"]] = folder
    return folders


def start(
    docker: Docker,
    pod: Pod,
    network: str,
    image_user: str,
    api: ApiAccess,
    secrets: Mapping[str, Mapping[str, bytes]] | None = None,
) -> None:
    """Run the pod; ``secrets`` (name -> key -> bytes) are what its Secret volumes mount."""
    on_host = secret_volumes(pod, secrets or {})
    pod.docker_name = f"{network}-{pod.name}"
    pod.container_id = docker.run(*docker_run_args(pod, network, image_user, api, on_host)).stdout.strip()


def stop(docker: Docker, pod: Pod) -> None:
    """Terminate the pod as the kubelet does: its preStop hook, then SIGTERM, then SIGKILL after
    ``terminationGracePeriodSeconds``; the container is removed."""
    hook = pod.container.get("lifecycle", {}).get("preStop", {})
    grace = int(pod.spec.get("terminationGracePeriodSeconds", 30))
    if "exec" in hook:
        docker.run("exec", pod.docker_name, *hook["exec"]["command"], check=False, timeout=grace)
    elif "httpGet" in hook:
        get = hook["httpGet"]
        url = f"http://{pod.ip}:{pod.port(get['port'])}{get.get('path', '/')}"
        with contextlib.suppress(OSError):
            urllib.request.urlopen(url, timeout=grace).close()  # noqa: S310 - a pod's hook
    elif "sleep" in hook:
        time.sleep(float(hook["sleep"]["seconds"]))
    docker.run("stop", "-t", str(grace), pod.docker_name, check=False, timeout=grace + 30)
    docker.run("rm", "-f", pod.docker_name, check=False)


def kube_pod_object(pod: Pod) -> dict[str, Any]:
    """The Pod as the API server would show it (for the operator, which watches shard pods)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "labels": pod.labels,
            "annotations": pod.annotations,
        },
        "spec": pod.spec,
        "status": {
            "phase": "Running",
            "podIP": pod.ip,
            "podIPs": [{"ip": pod.ip}],
            "conditions": [{"type": "Ready", "status": "True" if pod.ready else "False"}],
        },
    }
