"""The operator's own pod specs, run as real containers, serve a client that knows only the
gateway Service's name.

A real Kubernetes API server (``tests/operator/kube_apiserver.py``) with RBAC on holds the chart's
CRD, accounts and Roles; the real kopf operator runs as the chart's operator Deployment would, as
its ServiceAccount, and writes its StatefulSet, Deployment and Services for a
``GroupCoordinator``. This test then plays the controllers, the kubelet and cluster DNS
(:mod:`.kubelet`), through the same API server: each pod of those objects
runs as a container of our image with exactly its command, args, env, ports and security
context, on a private Docker network whose aliases are the names the Services give; the probes
run as a kubelet runs them and their result is the pod's Ready condition the operator sees.
Upstream Kafka is tansu from our image's ``local`` target, as a container too. Then, from client containers that
know only ``<name>-gateway.<namespace>.svc:9092``:

1. aiokafka produces, consumes in a group, commits and reads the committed offset back;
2. librdkafka applications (classic and KIP-848) commit after every message while the container
   of the shard coordinating their groups is killed: its partitions move (new leader, epoch + 1),
   the kubelet starts it again, and every acknowledged commit reads back, without an error;
2b. partitions, not only crashes (issue 23): the shard leading the most partitions is cut off
   for 30 s while two members per group (classic, KIP-848) commit, first off the network (a
   zombie: ``docker network disconnect``), then off the Kafka cluster alone (iptables in its
   network namespace). Each time its partitions move while it still runs, commits are
   acknowledged during the cut, none is lost, no partition is owned twice, the clients see no
   error beyond retriable ones, the fencing counters are exported (and printed with the cut's
   figures), and the same container, never restarted, is Ready again and leads partitions again;
3. ``threadsPerShard`` 1 -> 2: the shard pods are replaced one at a time (never two down at
   once, none while its shard still leads a partition) while the applications commit; no error beyond retriable ones, no commit lost, and
   commits acknowledged after the roll;
4. a real Prometheus scrapes every pod's metrics port, and each shard pod's port shows the
   active partitions of all its worker processes (as many as the status says its shard leads).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import random
import subprocess
import time
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from groupcoord.common import internal_tls
from groupcoord.common.partitioning import partition_for
from groupcoord.controlplane.placement import placement_from_status
from groupcoord.embedded_broker import stop_process_group
from tests.operator.kube_apiserver import (
    RELEASE_NAME,
    KubeApiServer,
    install,
    service_account_token,
    start_operator,
)
from tests.security.tls import issue_server_pems

from . import kubelet
from .docker_env import Docker

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(720)]
NS, NAME = "kafka", "orders"
WORKLOAD_ACCOUNT = f"{RELEASE_NAME}-workload"  # the chart's account for shard and gateway pods
CR_PATH = f"/apis/groupcoord.io/v1alpha1/namespaces/{NS}/groupcoordinators"
CLIENT = Path(__file__).with_name("kafka_roundtrip.py")
LISTENER_TLS = "gateway-listener-tls"  # the secure listener's certificate Secret
LISTENER_USERS = "gateway-users"  # its SCRAM users' Secret
COMMITTING = Path(__file__).with_name("committing_clients.py")
CLIENT_SECONDS = 30
READY_TIMEOUT_S = 180.0
CUT_S = 30.0  # how long the zombie phase keeps a shard off the network


@pytest.fixture
def network(docker: Docker) -> Iterator[tuple[str, str, str]]:
    """A private network with a subnet of our choosing (pod IPs are fixed before start, as the
    downward API's status.podIP needs); yields (name, subnet, gateway = the host's address)."""
    name = f"gc-deploy-{random.randrange(16**6):06x}"
    for _ in range(20):
        third = random.randrange(1, 250)
        subnet, gateway = f"10.213.{third}.0/24", f"10.213.{third}.1"
        made = docker.run("network", "create", "--subnet", subnet, "--gateway", gateway, name, check=False)
        if made.returncode == 0:
            break
    else:
        pytest.fail(f"no free subnet for a Docker network: {made.stderr}")
    try:
        yield name, subnet, gateway
    finally:
        ids = docker.run("ps", "-aq", "--filter", f"network={name}", check=False).stdout.split()
        if ids:
            docker.run("rm", "-f", *ids, check=False)
        docker.run("network", "rm", name, check=False)


@pytest.fixture
async def cluster(
    network: tuple[str, str, str], tmp_path: Path
) -> AsyncIterator[tuple[aiohttp.ClientSession, kubelet.ApiAccess]]:
    """A real API server the containers reach at the network's gateway (the host), the chart
    installed in ``kafka`` (without its own resource: the test makes one), and the chart's operator
    running as its ServiceAccount. Yields an administrator's session (the test plays the
    controllers and the kubelet with it) and what the kubelet gives pods to reach the server."""
    _, _, host_ip = network
    server = KubeApiServer(tmp_path / "kube-apiserver", more_ips=(host_ip,)).start()
    operator: subprocess.Popen[bytes] | None = None
    try:
        async with server.admin_session() as admin:
            _, deployment = await install(admin, NS, resource=False)
            operator, log = await start_operator(server, admin, deployment, NS, tmp_path)
            # the pods' projected service account: the chart's workload account, as the resource names it
            account = tmp_path / "serviceaccount"
            account.mkdir()
            (account / "token").write_text(await service_account_token(admin, NS, WORKLOAD_ACCOUNT))
            (account / "ca.crt").write_bytes(server.pki.ca.read_bytes())  # type: ignore[union-attr]
            (account / "namespace").write_text(NS)
            for f in (account, *account.iterdir()):
                f.chmod(0o755 if f.is_dir() else 0o644)
            try:
                yield admin, kubelet.ApiAccess(host_ip, server.port, account)
            finally:
                stop_process_group(operator)
                print(f"\noperator log (tail):\n{log.read_text()[-2000:]}")
    finally:
        stop_process_group(operator)
        server.stop()


async def api(k: Any, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any] | None:
    headers = {"Content-Type": "application/merge-patch+json"} if method == "patch" else {}
    async with getattr(k, method)(path, json=body, headers=headers) as resp:
        if method == "get" and resp.status == 404:
            return None
        assert resp.status < 300, f"{method} {path}: {resp.status} {await resp.text()}"
        return await resp.json()


async def create_pod(k: Any, pod: kubelet.Pod) -> None:
    """The pod object as the controller creates it, then its status as the kubelet reports it."""
    obj = kubelet.kube_pod_object(pod)
    status = obj.pop("status")
    path = f"/api/v1/namespaces/{NS}/pods"
    await api(k, "post", path, obj)
    await api(k, "patch", f"{path}/{pod.name}/status", {"status": status})


async def eventually(what: str, check: Any, timeout_s: float = 60.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    last: Any = None
    while loop.time() < deadline:
        with contextlib.suppress(KeyError, TypeError, StopIteration, IndexError):
            last = await check()
            if last:
                return last
        await asyncio.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}; last seen: {last}")


async def workloads(k: Any) -> list[dict[str, Any]]:
    """Every StatefulSet and Deployment the operator made for the resource."""
    found = []
    for group_path in (
        f"/apis/apps/v1/namespaces/{NS}/statefulsets",
        f"/apis/apps/v1/namespaces/{NS}/deployments",
    ):
        listing = await api(k, "get", group_path) or {"items": []}
        kind = "StatefulSet" if group_path.endswith("statefulsets") else "Deployment"
        for item in listing["items"]:
            if item["metadata"].get("labels", {}).get("app.kubernetes.io/instance") == NAME:
                found.append({**item, "kind": kind})
    return found


def load_prometheus() -> Any:
    """tests/observability's PrometheusServer (Debian's prometheus binary, which scripts/test
    installs), loaded by path: that test folder is not a package."""
    import importlib.util  # noqa: PLC0415

    from .docker_env import ROOT  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location(
        "gc_test_prometheus", ROOT / "tests/observability/prometheus.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if module.prometheus_binary() is None:
        pytest.fail("no prometheus binary (scripts/test installs Debian's prometheus)")
    return module.PrometheusServer


class Kubelet:
    """Runs the probes of every pod and mirrors readiness into the API server (readiness every
    second, faster than the pods' periods, so that a test sees a change at once); restarts a
    container whose liveness probe, run every ``periodSeconds`` as the kubelet does, fails
    ``failureThreshold`` times in a row (a pod cut off the network for less than that long is
    NotReady meanwhile, never restarted)."""

    RESTART_BACKOFF_S = 10.0  # the kubelet's first CrashLoopBackOff delay

    def __init__(self, docker: Docker, k: Any, pods: list[kubelet.Pod]) -> None:
        self.docker, self.k, self.pods = docker, k, pods
        self.restarts: dict[str, int] = {p.name: 0 for p in pods}  # liveness failures
        self.revived: dict[str, int] = {p.name: 0 for p in pods}  # exited containers started again
        self.task: asyncio.Task[None] | None = None

    def _running(self, pod: kubelet.Pod) -> bool:
        state = self.docker.run("inspect", "--format", "{{.State.Running}}", pod.docker_name, check=False)
        return state.stdout.strip() == "true"

    async def _pod(self, pod: kubelet.Pod) -> None:
        live_failures = 0
        path = f"/api/v1/namespaces/{NS}/pods/{pod.name}"
        loop = asyncio.get_running_loop()
        exited_at: float | None = None
        live_probed_at = loop.time()
        while True:
            await asyncio.sleep(1.0)
            if pod.replacing:
                exited_at, live_failures, live_probed_at = None, 0, loop.time()
                continue
            ready_spec, live_spec = pod.container.get("readinessProbe"), pod.container.get("livenessProbe")
            if not await asyncio.to_thread(self._running, pod):  # restartPolicy: Always
                exited_at = exited_at or loop.time()
                if loop.time() - exited_at >= self.RESTART_BACKOFF_S:
                    await asyncio.to_thread(self.docker.run, "start", pod.docker_name)
                    self.revived[pod.name] += 1
                    exited_at = None
            ready = await asyncio.to_thread(kubelet.probe, pod, ready_spec)
            if ready != pod.ready:
                pod.ready = ready
                await api(self.k, "patch", f"{path}/status", {"status": kubelet.kube_pod_object(pod)["status"]})
            if exited_at is not None:
                live_failures, live_probed_at = 0, loop.time()
            elif loop.time() - live_probed_at >= float((live_spec or {}).get("periodSeconds", 10)):
                live_probed_at = loop.time()
                live = await asyncio.to_thread(kubelet.probe, pod, live_spec)
                live_failures = 0 if live else live_failures + 1
            if live_failures >= int((live_spec or {}).get("failureThreshold", 3)):
                self.restarts[pod.name] += 1
                await asyncio.to_thread(self.docker.run, "restart", pod.docker_name)
                live_failures = 0

    async def __aenter__(self) -> Kubelet:
        self.task = asyncio.ensure_future(asyncio.gather(*(self._pod(p) for p in self.pods)))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


class StatefulSetController:
    """Replaces a StatefulSet's pods when its template changes, as the controller does: with
    ``RollingUpdate`` one pod at a time from the highest ordinal at or above
    ``rollingUpdate.partition``, each only once every pod is Ready; with ``OnDelete`` (or whenever someone deletes a pod) when the pod object is deleted.
    Each replacement terminates the container as the kubelet does and starts the new one under
    the same name, IP and DNS names. ``down`` records every pod's (stopped, Ready again) times."""

    def __init__(self, docker: Docker, k: Any, name: str, pods: list[kubelet.Pod], start: Any) -> None:
        self.docker, self.k, self.name, self.pods, self.start = docker, k, name, pods, start
        self.down: list[tuple[str, float, float | None]] = []
        self.led_at_stop: dict[str, int] = {}  # partitions the pod's shard led when it was stopped
        self.task: asyncio.Task[None] | None = None

    async def _replace(self, pod: kubelet.Pod, template: dict[str, Any]) -> None:
        loop = asyncio.get_running_loop()
        pod.replacing, pod.ready = True, False
        stopped = loop.time()
        path = f"/api/v1/namespaces/{NS}/pods/{pod.name}"
        if await api(self.k, "get", path) is not None:
            await api(self.k, "patch", f"{path}/status", {"status": kubelet.kube_pod_object(pod)["status"]})
        cr = await api(self.k, "get", f"{CR_PATH}/{NAME}")
        shard = int(pod.labels["apps.kubernetes.io/pod-index"])
        placement = placement_from_status(((cr or {}).get("status") or {}).get("partitions"))
        self.led_at_stop[pod.name] = sum(1 for a in placement.values() if a.leader == shard)
        await asyncio.to_thread(kubelet.stop, self.docker, pod)
        pod.spec = template["spec"]
        pod.annotations = dict(template["metadata"].get("annotations") or {})
        pod.labels = {**template["metadata"].get("labels", {}), **{
            k: v for k, v in pod.labels.items() if k.startswith(("apps.kubernetes.io/", "statefulset."))
        }}  # fmt: skip
        # a pod's spec cannot change: the controller deletes the old pod object and makes a new one
        if await api(self.k, "get", path) is not None:
            await api(self.k, "delete", path)
        await create_pod(self.k, pod)
        await asyncio.to_thread(self.start, pod)
        pod.replacing = False
        index = len(self.down)
        self.down.append((pod.name, stopped, None))
        while not pod.ready:
            await asyncio.sleep(0.5)
        self.down[index] = (pod.name, stopped, loop.time())

    async def _run(self) -> None:
        path = f"/apis/apps/v1/namespaces/{NS}/statefulsets/{self.name}"
        while True:
            await asyncio.sleep(1.0)
            sts = await api(self.k, "get", path)
            template = sts["spec"]["template"]
            strategy = (sts["spec"].get("updateStrategy") or {}).get("type", "RollingUpdate")
            for pod in self.pods:
                if await api(self.k, "get", f"/api/v1/namespaces/{NS}/pods/{pod.name}") is None:
                    await self._replace(pod, template)
            # RollingUpdate replaces only ordinals >= rollingUpdate.partition (the operator
            # lowers it one ordinal at a time, after moving that shard's partitions away).
            partition = int(
                ((sts["spec"].get("updateStrategy") or {}).get("rollingUpdate") or {}).get("partition", 0)
            )
            outdated = [
                p
                for p in self.pods
                if p.spec != template["spec"] and int(p.labels["apps.kubernetes.io/pod-index"]) >= partition
            ]
            if strategy == "RollingUpdate" and outdated and all(p.ready for p in self.pods):
                await self._replace(
                    max(outdated, key=lambda p: int(p.labels["apps.kubernetes.io/pod-index"])), template
                )

    async def __aenter__(self) -> StatefulSetController:
        self.task = asyncio.ensure_future(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def cluster_evidence(docker: Docker, k: Any, pods: list[kubelet.Pod], tail: int = 60) -> str:
    """What a failed phase prints beside the clients' report: the placement the resource
    publishes and the last log lines of every pod (the gateway's say which layout it routes by
    and which shards did not answer; the shards' which partitions they load or give up)."""
    cr = await api(k, "get", f"{CR_PATH}/{NAME}")
    parts = [f"status.partitions: {json.dumps(((cr or {}).get('status') or {}).get('partitions'))}"]
    for pod in pods:
        logs = await asyncio.to_thread(docker.run, "logs", "--tail", str(tail), pod.docker_name, check=False)
        parts.append(f"--- {pod.name} (ready={pod.ready})\n{logs.stdout[-4000:]}{logs.stderr[-4000:]}")
        parts.append(f"--- {pod.name} metrics\n{await asyncio.to_thread(_telling_series, pod)}")
    return "\n".join(parts)


def _telling_series(pod: kubelet.Pod) -> str:
    """The series of a pod's metrics port that say where requests stop: event queues,
    partition states and loads, requests answered per API and error."""
    wanted = (
        "groupcoord_event_queue_size",
        "groupcoord_partition_count",
        "groupcoord_partition_loads_total",
        "groupcoord_request_latency_seconds_count",
        "groupcoord_gateway_partitions_without_leader",
    )
    try:
        text = metrics_text(pod)
    except (OSError, KeyError, StopIteration) as exc:
        return f"(no metrics: {exc!r})"
    return "\n".join(line for line in text.splitlines() if line.startswith(wanted))[-4000:]


async def run_committing_clients(
    docker: Docker,
    client_image: str,
    net: str,
    bootstrap: str,
    name: str,
    topic: str,
    groups: list[str],
    evidence: Callable[[], Awaitable[str]] | None = None,
) -> None:
    """Start the committing applications (detached) and wait until every group consumes; if
    they do not, fail with their report and ``evidence()``."""
    await asyncio.to_thread(
        docker.run,
        "run", "-d", "--name", name, "--network", net, "--read-only", "--tmpfs", "/tmp",
        "-v", f"{COMMITTING}:/client/committing_clients.py:ro", "--entrypoint", "python3",
        client_image, "/client/committing_clients.py", bootstrap, topic, "600", *groups,
    )  # fmt: skip

    async def consuming() -> bool:
        logs = (await asyncio.to_thread(docker.run, "logs", name, check=False)).stdout
        if "consumed nothing" in logs:
            raise AssertionError(f"the committing clients {name} did not all consume:\n{logs[-20000:]}")
        return "consuming" in logs

    # the clients give up after creating the topic and 120 s of consuming, and say what they saw
    try:
        await eventually(f"the committing clients {name}", consuming, 180)
    except AssertionError as exc:
        logs = await asyncio.to_thread(docker.run, "logs", "--tail", "60", name, check=False)
        seen = "" if evidence is None else await evidence()
        raise AssertionError(f"{exc}\n{logs.stdout[-3000:]}\n{logs.stderr[-3000:]}\n{seen}") from None


async def committing_report(docker: Docker, name: str) -> dict[str, Any]:
    """Stop the committing applications and check what they report: every acknowledged commit
    reads back, and no error beyond retriable ones reached the application."""
    await asyncio.to_thread(docker.run, "exec", name, "touch", "/tmp/stop")
    done = await asyncio.to_thread(docker.run, "wait", name, timeout=240)
    logs = await asyncio.to_thread(docker.run, "logs", name, check=False)
    assert done.stdout.strip() == "0", f"{logs.stdout}\n{logs.stderr[-3000:]}"
    report = json.loads(logs.stdout.strip().splitlines()[-1])
    print(f"\n{name}: {json.dumps(report)}")
    for group, seen in report.items():
        assert seen["consumed"] > 0 and seen["acked"], (group, seen)
        for partition, offset in seen["acked"].items():
            assert seen["committed"][partition] >= offset, f"{group} lost an acknowledged commit: {seen}"
        assert not seen["errors"], f"{group} saw errors: {seen['errors']}"
    return report


def metrics_text(pod: kubelet.Pod) -> str:
    """The exposition of a pod's metrics port."""
    url = f"http://{pod.ip}:{pod.port('metrics')}/metrics"
    with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - a pod of the test
        return resp.read().decode()  # type: ignore[no-any-return]


def shard_metric(pod: kubelet.Pod, family: str, **labels: str) -> float | None:
    """The sum of a family's series on a shard pod's metrics port (every worker process), over
    the series carrying ``labels``; None if the port shows no such series."""
    text = metrics_text(pod)
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    total: float | None = None
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        series, _, value = line.rpartition(" ")
        if series.split("{", 1)[0] == family and all(w in series for w in wanted):
            total = (total or 0.0) + float(value)
    return total


def container_started(docker: Docker, name: str) -> str:
    """When the container's process was last started, and how often Docker restarted it."""
    return docker.run("inspect", "--format", "{{.State.StartedAt}} {{.RestartCount}}", name).stdout.strip()


class NetworkCut:
    """The zombie's shard pod loses its only interface (``docker network disconnect``): the
    kubelet, the operator, the gateway and the state topic's other writer see a pod that
    stopped answering; the shard sees nothing go, keeps believing it leads (it cannot read the
    status either) and keeps its in-flight writes. Healing connects it again under the same IP
    and DNS names."""

    label = "zombie"

    def __init__(self, docker: Docker, net: str) -> None:
        self.docker, self.net = docker, net

    def cut(self, pod: kubelet.Pod) -> None:
        self.docker.run("network", "disconnect", self.net, pod.docker_name)

    def heal(self, pod: kubelet.Pod) -> None:
        aliases = [arg for alias in pod.aliases for arg in ("--alias", alias)]
        self.docker.run("network", "connect", "--ip", pod.ip, *aliases, self.net, pod.docker_name)


class UpstreamCut:
    """The shard pod loses the Kafka cluster only: packets between its network namespace and
    the broker's container are dropped (iptables in the pod's namespace, as a NetworkPolicy or
    a broken route would), while the gateway, the operator, the API server and the kubelet still
    reach it and it reaches them. Healing deletes the rules."""

    label = "upstream"

    def __init__(self, docker: Docker, broker: str) -> None:
        self.docker = docker
        address = "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}"
        self.broker_ip = docker.run("inspect", "--format", address, broker).stdout.strip()
        self.rules = [("OUTPUT", "-d"), ("INPUT", "-s")]

    def _iptables(self, pod: kubelet.Pod, action: str) -> None:
        pid = self.docker.run("inspect", "--format", "{{.State.Pid}}", pod.docker_name).stdout.strip()
        for chain, side in self.rules:
            done = subprocess.run(
                ["nsenter", "-t", pid, "-n", "iptables", action, chain, side, self.broker_ip, "-j", "DROP"],
                capture_output=True,
                text=True,
                check=False,
            )
            assert done.returncode == 0, f"iptables {action} {chain} in {pod.name}: {done.stderr}"

    def cut(self, pod: kubelet.Pod) -> None:
        self._iptables(pod, "-I")

    def heal(self, pod: kubelet.Pod) -> None:
        self._iptables(pod, "-D")


async def cut_off_phase(
    cutter: NetworkCut | UpstreamCut,
    docker: Docker,
    k: Any,
    kl: Kubelet,
    net: str,
    client_image: str,
    bootstrap: str,
    shard_pods: list[kubelet.Pod],
    all_ready: Any,
    evidence: Callable[[], Awaitable[str]],
) -> dict[str, Any]:
    """Issue 23: a shard that is alive but cut off (see ``cutter``) for CUT_S, the shard that
    leads the most partitions, while two members per group (classic and KIP-848) commit in
    groups it coordinates.

    Checked: its partitions move (epoch + 1) and commits are acknowledged during the cut; no
    acknowledged commit is lost; no partition is owned by two members at once; the clients see
    only retriable errors; the zombie's late writes count nowhere (every commit reads back, and
    the fencing counters say what was fenced); and the same container (never restarted) is
    Ready again and leads partitions again, serving them on its metrics port. Returns the
    figures it prints."""
    cr = await api(k, "get", f"{CR_PATH}/{NAME}")
    placement = placement_from_status(cr["status"]["partitions"])
    shard = Counter(a.leader for a in placement.values()).most_common(1)[0][0]
    zombie = next(p for p in shard_pods if int(p.labels["apps.kubernetes.io/pod-index"]) == shard)
    others = [p for p in shard_pods if p is not zombie]
    cut_off = {p: a.epoch for p, a in placement.items() if a.leader == shard}
    groups = [
        f"{next(g for i in range(1000) if partition_for(g := f'{cutter.label}-{kind}-{i}', len(placement)) in cut_off)}"
        f":{protocol}:2"
        for kind, protocol in (("classic", "classic"), ("kip848", "consumer"))
    ]
    clients = f"{net}-{cutter.label}"
    await run_committing_clients(
        docker, client_image, net, bootstrap, clients, cutter.label, groups, evidence
    )
    started = await asyncio.to_thread(container_started, docker, zombie.docker_name)
    restarts, revived = kl.restarts[zombie.name], kl.revived[zombie.name]
    fenced_families = ("groupcoord_state_records_fenced_total", "groupcoord_partitions_fenced_total")
    fenced_before = {
        (p.name, f): await asyncio.to_thread(shard_metric, p, f) for p in shard_pods for f in fenced_families
    }

    cut_at = time.time()
    await asyncio.to_thread(cutter.cut, zombie)
    try:

        async def deposed() -> bool:
            now = placement_from_status((await api(k, "get", f"{CR_PATH}/{NAME}"))["status"]["partitions"])
            return all(now[p].leader != shard and now[p].epoch > epoch for p, epoch in cut_off.items())

        await eventually("the cut-off shard's partitions on another shard", deposed, CUT_S)
        deposed_s = time.time() - cut_at
        await asyncio.sleep(max(0.0, cut_at + CUT_S - time.time()))
    finally:
        await asyncio.to_thread(cutter.heal, zombie)
    reconnected_at = time.time()

    async def zombie_ready() -> bool:
        return zombie.ready and await all_ready()

    await eventually("the cut-off shard Ready again", zombie_ready, READY_TIMEOUT_S)
    led_again: dict[str, Any] = {}

    async def leads_again() -> bool:
        now = placement_from_status((await api(k, "get", f"{CR_PATH}/{NAME}"))["status"]["partitions"])
        led = {p: a.epoch for p, a in now.items() if a.leader == shard}
        try:
            active = await asyncio.to_thread(
                shard_metric, zombie, "groupcoord_partition_count", state="active"
            )
        except OSError as exc:
            active = repr(exc)
        led_again.update(led=led, active=active)
        return bool(led) and active == len(led) and all(e > cut_off.get(p, 0) for p, e in led.items())

    await eventually("the reconnected shard leading (and serving) partitions again", leads_again, 120)
    rejoined_at = time.time()
    await asyncio.sleep(5)  # commits go on once it leads again
    report = await committing_report(docker, clients)
    restarted = (await asyncio.to_thread(container_started, docker, zombie.docker_name), kl.restarts[zombie.name])
    fenced_after = {
        (p.name, f): await asyncio.to_thread(shard_metric, p, f) for p in shard_pods for f in fenced_families
    }
    fenced = {
        f: sum((fenced_after[(p.name, f)] or 0.0) - (fenced_before[(p.name, f)] or 0.0) for p in shard_pods)
        for f in fenced_families
    }
    during = {
        group: sum(n for sec, n in seen["ack_seconds"].items() if cut_at <= int(sec) < reconnected_at)
        for group, seen in report.items()
    }
    figures = {
        "shard": shard,
        "cut_s": round(reconnected_at - cut_at, 1),
        "deposed_after_s": round(deposed_s, 1),
        "rejoined_after_reconnect_s": round(rejoined_at - reconnected_at, 1),
        "acked_during_cut": during,
        "fenced": fenced,
        "fenced_on": {
            p.name: {f: fenced_after[(p.name, f)] for f in fenced_families} for p in [zombie, *others]
        },
        "led_again": {str(p): e for p, e in led_again["led"].items()},
        "retriable": {g: (s["retriable_count"], s["retriable"][-5:]) for g, s in report.items()},
    }
    print(f"\n{cutter.label} phase: {json.dumps(figures)}")
    assert restarted[0] == started, "the cut-off shard's container was restarted"
    assert (restarted[1], kl.revived[zombie.name]) == (restarts, revived)
    for group, seen in report.items():
        assert seen["members"] == 2, seen
        assert not seen["owned_twice"], f"{group}: a partition owned twice: {seen['owned_twice']}"
        assert during[group] > 0, f"{group} committed nothing while the shard was cut off: {seen}"
        assert seen["last_ack_wall"] > rejoined_at, f"{group} committed nothing after the rejoin: {seen}"
    assert all(v is not None for v in fenced_after.values()), f"a fencing counter is missing: {fenced_after}"
    return figures


def shard_refuses_strangers(pod: kubelet.Pod, issued: dict[str, internal_tls.InternalTls]) -> tuple[str, ...]:
    """How a shard pod's gRPC port answers callers that are not the gateway: ShardControl.Ping
    without a certificate and with another CA's (no TLS handshake), and a Coordinator stream
    with the control plane's certificate (an identity that may not open one)."""
    import grpc  # noqa: PLC0415

    from groupcoord.rpc.v1 import coordinator_pb2 as pb  # noqa: PLC0415
    from groupcoord.rpc.v1 import coordinator_pb2_grpc as pb_grpc  # noqa: PLC0415
    from groupcoord.rpc.v1 import shard_control_pb2 as sc  # noqa: PLC0415
    from groupcoord.rpc.v1 import shard_control_pb2_grpc as sc_grpc  # noqa: PLC0415

    target = f"{pod.ip}:{pod.port('grpc')}"
    foreign = internal_tls.issue_pems()[internal_tls.GATEWAY]
    credentials = grpc.ssl_channel_credentials(foreign.ca, foreign.key, foreign.cert)
    control = issued[internal_tls.CONTROL_PLANE]
    name = [("grpc.ssl_target_name_override", internal_tls.SHARD_NAME)]
    channels = [
        ("ping", grpc.insecure_channel(target)),
        ("ping", grpc.secure_channel(target, credentials, options=name)),
        (
            "batches",
            grpc.secure_channel(
                target, grpc.ssl_channel_credentials(control.ca, control.key, control.cert), options=name
            ),
        ),
    ]
    codes = []
    for call, channel in channels:
        with channel:
            try:
                if call == "ping":
                    sc_grpc.ShardControlStub(channel).Ping(sc.ShardPingRequest(), timeout=5)
                else:
                    batch = pb.CoordinatorBatch(envelopes=[pb.CoordinatorEnvelope(correlation_id=1)])
                    next(iter(pb_grpc.CoordinatorStub(channel).Batches(iter([batch]), timeout=5)))
                codes.append("SERVED")
            except grpc.RpcError as exc:
                codes.append(exc.code().name)
    return tuple(codes)


async def test_the_operators_pods_as_containers_serve_a_client_through_the_gateway_service(
    cluster: tuple[aiohttp.ClientSession, kubelet.ApiAccess],
    docker: Docker,
    image: str,
    local_image: str,
    network: tuple[str, str, str],
    tmp_path: Path,
    client_image: str,
) -> None:
    k, api_access = cluster
    net, subnet, host_ip = network
    ips = kubelet.address_pool(subnet)
    image_user = json.loads(docker.run("image", "inspect", image).stdout)[0]["Config"]["User"]

    # Upstream Kafka: tansu from our image's `local` target, at the address the resource names.
    docker.run(
        "run", "-d", "--name", f"{net}-tansu", "--network", net, "--network-alias", "tansu",
        "--read-only", "--entrypoint", "tansu", local_image,
        "broker", "--listener-url", "tcp://0.0.0.0:9092", "--advertised-listener-url", "tcp://tansu:9092",
        "--storage-engine", "memory://tansu/",
    )  # fmt: skip

    await api(
        k,
        "post",
        CR_PATH,
        {
            "apiVersion": "groupcoord.io/v1alpha1",
            "kind": "GroupCoordinator",
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {
                "serviceAccountName": WORKLOAD_ACCOUNT,
                "kafka": {"bootstrapServers": "tansu:9092"},
                "stateTopic": {"partitions": 6},
                "shards": 2,
                "threadsPerShard": 1,
                "gateway": {
                    "replicas": 1,
                    # two listeners: plaintext, and TLS + SCRAM from Secrets (Strimzi's listeners[])
                    "listeners": [
                        {"name": "plain", "port": 9092},
                        {
                            "name": "secure",
                            "port": 9192,
                            "tls": {"secretName": LISTENER_TLS},
                            "authentication": {
                                "mode": "credentials",
                                "credentialsSecret": LISTENER_USERS,
                                "mechanisms": ["SCRAM-SHA-512"],
                            },
                        },
                    ],
                },
                "image": image,
                "imagePullPolicy": "Never",
            },
        },
    )

    async def made() -> list[dict[str, Any]]:
        found = await workloads(k)
        return found if {w["kind"] for w in found} == {"StatefulSet", "Deployment"} else []

    objects = await eventually("the operator's workloads", made)

    async def services_made() -> list[dict[str, Any]]:
        # one reconcile writes the workloads, then the Services: they may lag behind by a write
        items = (await api(k, "get", f"/api/v1/namespaces/{NS}/services") or {"items": []})["items"]
        wanted = {f"{NAME}-shard", f"{NAME}-gateway", f"{NAME}-gateway-secure"}
        return items if {s["metadata"]["name"] for s in items} >= wanted else []

    services = await eventually("the operator's Services (shard, gateway, secure listener)", services_made)

    # The internal mutual-TLS Secrets the chart generates (helm/.../048-Secret-internal-tls.yaml).
    issued = internal_tls.issue_pems()
    secrets = {
        f"{NAME}-internal-tls-{component}": {"ca.crt": tls.ca, "tls.crt": tls.cert, "tls.key": tls.key}
        for component, tls in (("gateway", issued[internal_tls.GATEWAY]), ("shard", issued[internal_tls.SHARD_NAME]))
    }
    pods = [pod for workload in objects for pod in kubelet.pods_of(workload, ips)]
    # the secure listener's certificate, as cert-manager would issue it: its Service's names and
    # the gateway pods' IPs (what they advertise); the users' Secret, one key per user
    gateway_ips = tuple(p.ip for p in pods if p.labels.get("app.kubernetes.io/component") == "gateway")
    secure_names = tuple(kubelet.service_names(f"{NAME}-gateway-secure", NS))
    secrets[LISTENER_TLS] = issue_server_pems(secure_names, gateway_ips)
    secrets[LISTENER_USERS] = {"alice": b"alice-secret"}
    (tmp_path / "listener-ca.crt").write_bytes(secrets[LISTENER_TLS]["ca.crt"])
    for pod in pods:
        pod.aliases = kubelet.dns_aliases(pod, services)
        pod.host_ip = host_ip
        await create_pod(k, pod)
        await asyncio.to_thread(kubelet.start, docker, pod, net, image_user, api_access, secrets)

    def start_pod(pod: kubelet.Pod) -> None:
        kubelet.start(docker, pod, net, image_user, api_access, secrets)

    evidence = functools.partial(cluster_evidence, docker, k, pods)
    shard_sts = next(w for w in objects if w["kind"] == "StatefulSet")
    shard_pods = [p for p in pods if p.labels.get("apps.kubernetes.io/pod-index") is not None]
    async with (
        Kubelet(docker, k, pods) as kl,
        StatefulSetController(
            docker, k, shard_sts["metadata"]["name"], shard_pods, start_pod
        ) as sts_controller,
    ):

        async def all_ready() -> bool:
            return all(p.ready for p in pods)

        try:
            await eventually("every pod Ready", all_ready, READY_TIMEOUT_S)
        except AssertionError:
            logs = {p.name: docker.run("logs", "--tail", "40", p.docker_name, check=False) for p in pods}
            details = "\n".join(
                f"--- {p.name} ready={p.ready}\n{logs[p.name].stdout}{logs[p.name].stderr}" for p in pods
            )
            raise AssertionError(f"not every pod became Ready:\n{details}") from None

        # A client that knows only the gateway Service's DNS name.
        bootstrap = f"{NAME}-gateway.{NS}.svc:9092"
        client = await asyncio.to_thread(
            docker.run,
            "run", "--rm", "--network", net, "--read-only", "--tmpfs", "/tmp",
            "-v", f"{CLIENT}:/client/kafka_roundtrip.py:ro", "--entrypoint", "python3",
            image, "/client/kafka_roundtrip.py", bootstrap, "deployed", "deployed-group",
            check=False, timeout=180,
        )  # fmt: skip
        assert client.returncode == 0, f"{client.stdout}\n{client.stderr[-3000:]}"
        result = json.loads(client.stdout.strip().splitlines()[-1])
        assert result["consumed"] == result["committed"] == result["reread"] == 5
        # ... and one that knows the secure listener's Service, a SCRAM user and the CA
        client = await asyncio.to_thread(
            docker.run,
            "run", "--rm", "--network", net, "--read-only", "--tmpfs", "/tmp",
            "-v", f"{CLIENT}:/client/kafka_roundtrip.py:ro", "-v", f"{tmp_path}/listener-ca.crt:/client/ca.crt:ro",
            "--entrypoint", "python3", image, "/client/kafka_roundtrip.py",
            f"{NAME}-gateway-secure.{NS}.svc:9192", "deployed-secure", "deployed-secure-group",
            "alice", "alice-secret", "/client/ca.crt",
            check=False, timeout=180,
        )  # fmt: skip
        assert client.returncode == 0, f"{client.stdout}\n{client.stderr[-3000:]}"
        result = json.loads(client.stdout.strip().splitlines()[-1])
        assert result["consumed"] == result["committed"] == result["reread"] == 5
        # A caller without the gateway's certificate is refused by a shard (the kubelet's
        # plaintext probes reach health on a port of its own: the pods are Ready).
        refused = await asyncio.to_thread(shard_refuses_strangers, shard_pods[0], issued)
        assert refused == ("UNAVAILABLE", "UNAVAILABLE", "PERMISSION_DENIED"), refused
        restarted = [p.name for p in pods if kl.restarts[p.name]]
        assert not restarted, "a liveness probe failed:\n" + "\n".join(
            f"--- {name}\n{docker.run('logs', '--tail', '25', name, check=False).stderr}" for name in restarted
        )

        # librdkafka applications, classic and KIP-848, in groups coordinated by shard 0, keep
        # committing while shard 0's container is killed: its partitions move, no commit is lost.
        cr = await api(k, "get", f"{CR_PATH}/{NAME}")
        placement = placement_from_status(cr["status"]["partitions"])
        victim = next(p for p in shard_pods if p.labels["apps.kubernetes.io/pod-index"] == "0")
        moved = {p: a.epoch for p, a in placement.items() if a.leader == 0}
        groups = [
            f"{next(g for i in range(1000) if partition_for(g := f'{kind}-{i}', len(placement)) in moved)}:{protocol}"
            for kind, protocol in (("classic", "classic"), ("kip848", "consumer"))
        ]
        clients = f"{net}-failover"
        await run_committing_clients(
            docker, client_image, net, bootstrap, clients, "failover", groups, evidence
        )
        killed_at = time.time()
        await asyncio.to_thread(docker.run, "kill", victim.docker_name)

        async def moved_away() -> bool:
            now = placement_from_status((await api(k, "get", f"{CR_PATH}/{NAME}"))["status"]["partitions"])
            return all(now[p].leader != 0 and now[p].epoch > epoch for p, epoch in moved.items())

        await eventually("shard 0's partitions on the other shard", moved_away, 60)
        await asyncio.sleep(5)  # commits go on after the move
        report = await committing_report(docker, clients)
        for group, seen in report.items():
            assert seen["last_ack_wall"] > killed_at, f"{group} committed nothing after the kill: {seen}"
        await eventually("the killed shard Ready again", all_ready, READY_TIMEOUT_S)
        assert kl.revived[victim.name] >= 1, "the killed shard's container was not started again"

        # A zombie leader: the shard leading the most partitions is cut off the network for
        # CUT_S (alive, reaching nothing, reached by nothing) under committing applications.
        await cut_off_phase(
            NetworkCut(docker, net), docker, k, kl, net, client_image, bootstrap, shard_pods, all_ready, evidence
        )
        # ... and one cut off the Kafka cluster alone: it still reaches (and is reached by) the
        # gateway, the operator and the kubelet; its readiness must say it cannot write.
        upstream_cut = UpstreamCut(docker, f"{net}-tansu")
        await cut_off_phase(
            upstream_cut, docker, k, kl, net, client_image, bootstrap, shard_pods, all_ready, evidence
        )

        # threadsPerShard 1 -> 2: the shard pods are replaced one at a time while the same kind
        # of applications commit; none sees an error beyond retriable ones, no commit is lost.
        clients = f"{net}-threads"
        groups = ["threads-classic:classic", "threads-kip848:consumer"]
        await run_committing_clients(
            docker, client_image, net, bootstrap, clients, "threads", groups, evidence
        )
        before = json.dumps(shard_sts["spec"]["template"], sort_keys=True)
        await api(k, "patch", f"{CR_PATH}/{NAME}", {"spec": {"threadsPerShard": 2}})

        async def rolled() -> bool:
            sts = await api(
                k, "get", f"/apis/apps/v1/namespaces/{NS}/statefulsets/{shard_sts['metadata']['name']}"
            )
            template = sts["spec"]["template"]
            return json.dumps(template, sort_keys=True) != before and all(
                p.spec == template["spec"] and p.ready and not p.replacing for p in shard_pods
            )

        await eventually("the shards rolled to threadsPerShard=2", rolled, 300)
        rolled_at = time.time()
        await asyncio.sleep(5)
        report = await committing_report(docker, clients)
        for group, seen in report.items():
            assert seen["last_ack_wall"] > rolled_at, f"{group} committed nothing after the roll: {seen}"
        downs = sorted((start, end) for name, start, end in sts_controller.down)
        assert len(downs) >= len(shard_pods) and all(end is not None for _, end in downs)
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(downs)), (
            f"two shard pods were down at once: {sts_controller.down}"
        )
        assert sts_controller.led_at_stop == {p.name: 0 for p in shard_pods}, (
            f"a shard pod was stopped while leading partitions: {sts_controller.led_at_stop}"
        )

        # A real Prometheus scrapes every pod's metrics port; each shard pod's series cover the
        # partitions its shard leads, from every worker process.
        targets = {f"{p.ip}:{p.port('metrics')}": p for p in pods}
        with load_prometheus()(list(targets), tmp_path) as prom:

            async def every_target_up() -> bool:
                up = await asyncio.to_thread(prom.query, "up")
                return len(up) == len(targets) and all(r["value"][1] == "1" for r in up)

            await eventually("Prometheus scraping every pod", every_target_up, 60)

            observed: dict[str, tuple[int | None, int]] = {}

            async def every_worker_seen() -> bool:
                cr = await api(k, "get", f"{CR_PATH}/{NAME}")
                led = Counter(a.leader for a in placement_from_status(cr["status"]["partitions"]).values())
                active = await asyncio.to_thread(
                    prom.query, 'sum by (instance) (groupcoord_partition_count{state="active"})'
                )
                seen = {r["metric"]["instance"]: int(float(r["value"][1])) for r in active}
                for p in shard_pods:
                    shard = int(p.labels["apps.kubernetes.io/pod-index"])
                    observed[p.name] = (seen.get(f"{p.ip}:{p.port('metrics')}"), led[shard])
                return all(on_port == leads for on_port, leads in observed.values())

            try:
                await eventually("every worker's partitions on each shard pod's port", every_worker_seen, 60)
            except AssertionError as exc:
                raise AssertionError(
                    f"{exc}; (active partitions on the pod's port, led): {observed}"
                ) from None
