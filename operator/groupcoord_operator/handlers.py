"""The kopf wiring: thin handlers that all run the same level-triggered reconcile.

Triggers: the resource is created/updated/resumed; a shard pod changes (fast failover); a
periodic resync of every resource (catches anything missed, and lets a freshly elected replica
take over). Every trigger first asks the Lease elector whether this replica leads; followers do
nothing. The resync is a plain thread rather than a kopf timer because kopf puts a finalizer on
every object with a timer, and then deleting a GroupCoordinator would hang whenever the
operator is not running.

Configuration (environment):

* ``GROUPCOORD_OPERATOR_NAMESPACE`` — where the Lease lives (the operator's own namespace).
* ``GROUPCOORD_OPERATOR_LEASE`` — Lease name (default ``groupcoord-operator``).
* ``GROUPCOORD_OPERATOR_LEADER_ELECTION`` — ``false`` for a single replica during development.
* ``GROUPCOORD_OPERATOR_IMAGE`` — workload image when a resource does not name one.
* ``GROUPCOORD_OPERATOR_RESYNC_SECONDS`` — resync interval (default 10).
* ``GROUPCOORD_OPERATOR_LEASE_SECONDS`` / ``..._RENEW_SECONDS`` — Lease timing (15 / 5).
* ``GROUPCOORD_OPERATOR_KAFKA_PROBE`` — ``false``: never ask the Kafka cluster for its brokers
  (the state-topic replication clamp and brokerPorts are then not reported).
* ``GROUPCOORD_OPERATOR_API_SERVER`` — talk to this URL without credentials (a local
  ``kubectl proxy``, or a mock API server in tests) instead of in-cluster/kubeconfig config.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Any

import kopf

from groupcoord.common.kubernetes_api import KubernetesApi, KubernetesConfigError, load_config
from groupcoord_operator.build import MANAGED_BY, SHARD
from groupcoord_operator.crd import GROUP, PLURAL, VERSION
from groupcoord_operator.election import LeaseElector
from groupcoord_operator.kube import Kube, KubeError
from groupcoord_operator.reconcile import reconcile

log = logging.getLogger(__name__)

RESYNC_SECONDS = float(os.environ.get("GROUPCOORD_OPERATOR_RESYNC_SECONDS", "10"))
SHARD_PODS = {"app.kubernetes.io/managed-by": MANAGED_BY, "app.kubernetes.io/component": SHARD}


class OperatorProcess:
    """What this operator process holds for every handler: the API client, the Lease elector
    and the resync thread."""

    def __init__(self) -> None:
        self.kube: Kube | None = None
        self.elector: LeaseElector | None = None
        self.image = os.environ.get("GROUPCOORD_OPERATOR_IMAGE") or None
        self.namespaces: list[str] = []  # empty: all namespaces
        self._stop = threading.Event()
        self._resync: threading.Thread | None = None

    def connect(self, api: KubernetesApi) -> None:
        if self.kube is not None:
            return
        self.kube = Kube(api)
        if os.environ.get("GROUPCOORD_OPERATOR_LEADER_ELECTION", "true").lower() != "false":
            self.elector = LeaseElector(
                self.kube,
                os.environ.get("GROUPCOORD_OPERATOR_NAMESPACE", "default"),
                os.environ.get("GROUPCOORD_OPERATOR_LEASE", "groupcoord-operator"),
                os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}",
                lease_seconds=int(os.environ.get("GROUPCOORD_OPERATOR_LEASE_SECONDS", "15")),
                renew_seconds=float(os.environ.get("GROUPCOORD_OPERATOR_RENEW_SECONDS", "5")),
            )
            self.elector.step()  # decide at once, so the first events are not skipped
            self.elector.start()
        self._stop.clear()
        self._resync = threading.Thread(target=self._resync_loop, name="resync", daemon=True)
        self._resync.start()

    def _resync_loop(self) -> None:
        while not self._stop.wait(RESYNC_SECONDS):
            if not self.leads():
                continue
            assert self.kube is not None
            paths = [f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/{PLURAL}" for ns in self.namespaces]
            try:
                items = [i for p in paths or [f"/apis/{GROUP}/{VERSION}/{PLURAL}"] for i in self.kube.list(p)]
            except KubeError as exc:
                log.warning("resync: cannot list resources: %s", exc)
                continue
            for item in items:
                meta = item.get("metadata") or {}
                try:
                    reconcile(self.kube, meta["namespace"], meta["name"], image=self.image)
                except Exception:  # one broken resource must not stop the others' resync
                    log.exception("resync of %s/%s failed", meta.get("namespace"), meta.get("name"))

    def leads(self) -> bool:
        return self.kube is not None and (self.elector is None or self.elector.is_leader())

    def close(self) -> None:
        self._stop.set()
        if self._resync is not None:
            self._resync.join(timeout=10)
            self._resync = None
        if self.elector is not None:
            self.elector.stop()
            self.elector = None
        self.kube = None


PROCESS = OperatorProcess()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # progress and diff-base in annotations: the CRD's structural schema prunes unknown status
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING
    settings.peering.standalone = True  # the Lease elects; see groupcoord_operator.election


@kopf.on.login()
def login(**_: Any) -> kopf.ConnectionInfo:
    """The same API and credentials for kopf's watches and for our own calls."""
    server = os.environ.get("GROUPCOORD_OPERATOR_API_SERVER")
    if server:
        PROCESS.connect(KubernetesApi(server))
        return kopf.ConnectionInfo(server=server, insecure=True)
    try:
        config = load_config()
    except KubernetesConfigError as exc:
        raise kopf.LoginError(str(exc)) from exc
    PROCESS.connect(KubernetesApi(config))
    credentials = config.credentials()
    return kopf.ConnectionInfo(
        server=config.server,
        ca_path=config.ca_file,
        insecure=config.insecure,
        scheme="Bearer" if credentials.token else None,
        token=credentials.token,
        certificate_path=credentials.cert_file,
        private_key_path=credentials.key_file,
        default_namespace=config.namespace,
        expiration=credentials.expires,
    )


@kopf.on.cleanup()
def shutdown(**_: Any) -> None:
    PROCESS.close()


def _reconcile(namespace: str, name: str) -> None:
    if not PROCESS.leads():
        log.debug("%s/%s: not the leader, skipping", namespace, name)
        return
    assert PROCESS.kube is not None
    try:
        reconcile(PROCESS.kube, namespace, name, image=PROCESS.image)
    except KubeError as exc:
        raise kopf.TemporaryError(f"API error: {exc}", delay=5) from exc


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
def on_resource(namespace: str, name: str, **_: Any) -> None:
    _reconcile(namespace, name)


@kopf.on.event("pods", labels=SHARD_PODS)
def on_shard_pod(namespace: str, labels: dict[str, str], **_: Any) -> None:
    instance = labels.get("app.kubernetes.io/instance")
    if instance:
        _reconcile(namespace, instance)
