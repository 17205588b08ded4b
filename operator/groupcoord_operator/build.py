"""Every Kubernetes object the operator writes, as pure ``build_*`` functions.

The reconcile (:mod:`groupcoord_operator.reconcile`) only reads, calls these and writes the
diff; keeping construction pure means unit tests check the exact objects (and validate them against the Kubernetes schemas) without
any API server, and re-running a reconcile produces byte-identical objects (idempotence).

Workload command lines (implemented by ``groupcoord shard`` / ``groupcoord gateway``)::

    groupcoord shard --shard-id <ordinal> --threads <T> --kafka <bootstrap> --state-topic <topic>
        --partitions <P> --grpc-port 50051 --metrics-port 9100 --drain-timeout 20
        --leadership kubernetes:<namespace>/<name>
    groupcoord gateway --port 9092 --kafka <bootstrap> --metrics-port 9100
        --leadership kubernetes:<namespace>/<name>
        --shard-address-template '<name>-shard-{shard}.<name>-shard.<namespace>.svc:50051'

Kafka security and group defaults reach the processes as ``GROUPCOORD_*`` environment
variables (see :func:`kafka_env` and :func:`group_defaults_env`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from groupcoord.controlplane.placement import Placement, placement_to_status
from groupcoord_operator.crd import API_VERSION, KIND
from groupcoord_operator.spec import Spec

GRPC_PORT = 50051
KAFKA_PORT = 9092
METRICS_PORT = 9100
# A stopping shard reports NOT_SERVING and waits this long for its partitions to be moved away
# (inside the pod's terminationGracePeriodSeconds of 30).
SHARD_DRAIN_S = 20
DEFAULT_IMAGE = "ghcr.io/groupcoord/groupcoord:0.1.0"
MANAGED_BY = "groupcoord-operator"
TLS_MOUNT = "/etc/groupcoord/kafka-tls"

SHARD = "shard"
GATEWAY = "gateway"


def labels(name: str, component: str) -> dict[str, str]:
    """Labels on every object; ``instance`` + ``component`` select the pods of one cluster."""
    return {
        "app.kubernetes.io/name": "groupcoord",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }


def selector(name: str, component: str) -> dict[str, str]:
    """The immutable subset used in StatefulSet/Deployment selectors and Services."""
    return {"app.kubernetes.io/instance": name, "app.kubernetes.io/component": component}


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """Owner reference to the GroupCoordinator, so deleting it garbage-collects the workloads."""
    meta = owner["metadata"]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def leadership_ref(namespace: str, name: str) -> str:
    return f"kubernetes:{namespace}/{name}"


def shard_service_name(name: str) -> str:
    return f"{name}-shard"


def shard_address_template(name: str, namespace: str) -> str:
    """Stable per-pod DNS names of the headless shard Service; ``{shard}`` is the ordinal."""
    return f"{name}-shard-{{shard}}.{shard_service_name(name)}.{namespace}.svc:{GRPC_PORT}"


def kafka_env(spec: Spec) -> list[dict[str, Any]]:
    """Kafka security settings; secrets stay in Secrets (env ``valueFrom`` / mounted files)."""
    tls = bool(spec.tls.get("enabled"))
    sasl = bool(spec.sasl)
    protocol = {(False, False): "PLAINTEXT", (True, False): "SSL", (False, True): "SASL_PLAINTEXT"}.get(
        (tls, sasl), "SASL_SSL"
    )
    env: list[dict[str, Any]] = [{"name": "GROUPCOORD_KAFKA_SECURITY_PROTOCOL", "value": protocol}]
    if tls:
        if spec.tls.get("caSecret"):
            env.append({"name": "GROUPCOORD_KAFKA_SSL_CAFILE", "value": f"{TLS_MOUNT}/ca.crt"})
        if spec.tls.get("certSecret"):
            env.append({"name": "GROUPCOORD_KAFKA_SSL_CERTFILE", "value": f"{TLS_MOUNT}/tls.crt"})
            env.append({"name": "GROUPCOORD_KAFKA_SSL_KEYFILE", "value": f"{TLS_MOUNT}/tls.key"})
    if sasl:
        env.append({"name": "GROUPCOORD_KAFKA_SASL_MECHANISM", "value": spec.sasl["mechanism"]})
        for var, ref in (("USERNAME", "usernameSecret"), ("PASSWORD", "passwordSecret")):
            secret = spec.sasl[ref]
            env.append(
                {
                    "name": f"GROUPCOORD_KAFKA_SASL_{var}",
                    "valueFrom": {"secretKeyRef": {"name": secret["name"], "key": secret["key"]}},
                }
            )
    return env


def group_defaults_env(spec: Spec) -> list[dict[str, Any]]:
    gd = spec.group_defaults
    return [
        {"name": "GROUPCOORD_GROUP_SESSION_TIMEOUT_MS", "value": str(gd.session_timeout_ms)},
        {"name": "GROUPCOORD_GROUP_HEARTBEAT_INTERVAL_MS", "value": str(gd.heartbeat_interval_ms)},
        {"name": "GROUPCOORD_GROUP_ASSIGNORS", "value": ",".join(gd.assignors)},
        {"name": "GROUPCOORD_GROUP_MAX_SIZE", "value": str(gd.max_group_size)},
        {"name": "GROUPCOORD_GROUP_MIGRATION_POLICY", "value": gd.migration_policy},
    ]


def _tls_volume(spec: Spec) -> list[dict[str, Any]]:
    if not spec.tls.get("enabled"):
        return []
    sources = []
    for ref, path in (("caSecret", "ca.crt"), ("certSecret", "tls.crt"), ("keySecret", "tls.key")):
        secret = spec.tls.get(ref)
        if secret:
            sources.append(
                {"secret": {"name": secret["name"], "items": [{"key": secret["key"], "path": path}]}}
            )
    return [{"name": "kafka-tls", "projected": {"sources": sources, "defaultMode": 0o440}}]


def _container_security() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }


def _pod_spec(spec: Spec, container: dict[str, Any]) -> dict[str, Any]:
    # the root filesystem is read-only; /tmp is the one scratch space the processes get
    volumes = [{"name": "tmp", "emptyDir": {}}, *_tls_volume(spec)]
    container["volumeMounts"] = [{"name": "tmp", "mountPath": "/tmp"}]
    if len(volumes) > 1:
        container["volumeMounts"].append({"name": "kafka-tls", "mountPath": TLS_MOUNT, "readOnly": True})
    # empty lists/maps are left out: the API server drops them, and a field that never reads
    # back as written would make every reconcile look like a change
    if not container.get("resources"):
        container.pop("resources", None)
    pod: dict[str, Any] = {
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": volumes,
    }
    if spec.service_account:
        pod["serviceAccountName"] = spec.service_account
    return pod


def shard_args(name: str, namespace: str, spec: Spec) -> list[str]:
    """The shard command line; ``$(SHARD_ID)`` is expanded by the kubelet from the pod index.
    ``--threads`` keeps the resource's word: the shard pod runs that many worker processes, each
    one event loop over its share of the shard's partitions."""
    return [
        "shard",
        "--shard-id",
        "$(SHARD_ID)",
        "--threads",
        str(spec.threads),
        "--kafka",
        spec.bootstrap_servers,
        "--state-topic",
        spec.state_topic,
        "--partitions",
        str(spec.partitions),
        "--grpc-port",
        str(GRPC_PORT),
        "--metrics-port",
        str(METRICS_PORT),
        "--drain-timeout",
        str(SHARD_DRAIN_S),
        "--leadership",
        leadership_ref(namespace, name),
    ]


def gateway_args(name: str, namespace: str, spec: Spec) -> list[str]:
    return [
        "gateway",
        "--port",
        str(KAFKA_PORT),
        "--kafka",
        spec.bootstrap_servers,
        "--metrics-port",
        str(METRICS_PORT),
        "--leadership",
        leadership_ref(namespace, name),
        "--shard-address-template",
        shard_address_template(name, namespace),
    ]


def build_shard_statefulset(
    name: str, namespace: str, spec: Spec, owner: Mapping[str, Any] | None = None, image: str | None = None
) -> dict[str, Any]:
    """The shard StatefulSet: stable ordinals are the shard ids placement talks about.

    ``Parallel`` pod management because shards are independent (leadership comes from the
    resource status, not from start order). The ordinal reaches the process through the
    ``apps.kubernetes.io/pod-index`` label (Kubernetes >= 1.28).
    """
    container = {
        "name": SHARD,
        "image": spec.image or image or DEFAULT_IMAGE,
        "imagePullPolicy": spec.image_pull_policy,
        "command": ["groupcoord"],
        "args": shard_args(name, namespace, spec),
        "env": [
            {
                "name": "SHARD_ID",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}},
            },
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            *kafka_env(spec),
            *group_defaults_env(spec),
        ],
        "ports": [
            {"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
        ],
        # grpc.health.v1 on worker 0 (groupcoord.coordinator.server.health): "" is SERVING when
        # every worker can lead partitions; "liveness" when no worker is wedged.
        "readinessProbe": {"grpc": {"port": GRPC_PORT, "service": ""}, "periodSeconds": 5, "failureThreshold": 2},
        "livenessProbe": {
            "grpc": {"port": GRPC_PORT, "service": "liveness"},
            "periodSeconds": 10,
            "failureThreshold": 6,
        },
        "resources": dict(spec.shard_resources),
        "securityContext": _container_security(),
    }
    obj: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": f"{name}-shard", "namespace": namespace, "labels": labels(name, SHARD)},
        "spec": {
            "serviceName": shard_service_name(name),
            "replicas": spec.shards,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": selector(name, SHARD)},
            "template": {
                "metadata": {
                    "labels": labels(name, SHARD),
                    "annotations": {"kubectl.kubernetes.io/default-container": SHARD},
                },
                "spec": {**_pod_spec(spec, container), "terminationGracePeriodSeconds": 30},
            },
        },
    }
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [owner_reference(owner)]
    return obj


def build_gateway_deployment(
    name: str, namespace: str, spec: Spec, owner: Mapping[str, Any] | None = None, image: str | None = None
) -> dict[str, Any]:
    """The stateless gateway Deployment clients bootstrap to."""
    container = {
        "name": GATEWAY,
        "image": spec.image or image or DEFAULT_IMAGE,
        "imagePullPolicy": spec.image_pull_policy,
        "command": ["groupcoord"],
        "args": gateway_args(name, namespace, spec),
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            *kafka_env(spec),
        ],
        "ports": [
            {"name": "kafka", "containerPort": KAFKA_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
        ],
        "readinessProbe": {"tcpSocket": {"port": "kafka"}, "periodSeconds": 5},
        "livenessProbe": {"httpGet": {"path": "/metrics", "port": "metrics"}, "periodSeconds": 10},
        "resources": dict(spec.gateway_resources),
        "securityContext": _container_security(),
    }
    obj: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"{name}-gateway", "namespace": namespace, "labels": labels(name, GATEWAY)},
        "spec": {
            "replicas": spec.gateway_replicas,
            "selector": {"matchLabels": selector(name, GATEWAY)},
            "template": {
                "metadata": {
                    "labels": labels(name, GATEWAY),
                    "annotations": {"kubectl.kubernetes.io/default-container": GATEWAY},
                },
                "spec": _pod_spec(spec, container),
            },
        },
    }
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [owner_reference(owner)]
    return obj


def build_services(
    name: str, namespace: str, spec: Spec, owner: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """A headless shard Service (per-pod DNS for the gateway) and the client-facing gateway Service.

    The shard Service publishes not-ready addresses: a loading shard must still be reachable
    so the gateway gets COORDINATOR_LOAD_IN_PROGRESS (retriable) rather than a connect error.
    """
    shard_svc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": shard_service_name(name), "namespace": namespace, "labels": labels(name, SHARD)},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector(name, SHARD),
            "ports": [
                {"name": "grpc", "port": GRPC_PORT, "targetPort": "grpc", "protocol": "TCP"},
                {"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"},
            ],
        },
    }
    gateway_svc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{name}-gateway", "namespace": namespace, "labels": labels(name, GATEWAY)},
        "spec": {
            "type": spec.gateway_service_type,
            "selector": selector(name, GATEWAY),
            "ports": [
                {"name": "kafka", "port": KAFKA_PORT, "targetPort": "kafka", "protocol": "TCP"},
                {"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"},
            ],
        },
    }
    services = [shard_svc, gateway_svc]
    if owner is not None:
        for svc in services:
            svc["metadata"]["ownerReferences"] = [owner_reference(owner)]
    return services


def build_condition(
    type_: str,
    status: bool,
    reason: str,
    message: str,
    generation: int | None,
    previous: Sequence[Mapping[str, Any]] | None,
    now: dt.datetime,
) -> dict[str, Any]:
    """One condition; ``lastTransitionTime`` only moves when the status flips (kubectl wait semantics)."""
    value = "True" if status else "False"
    stamp = now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for old in previous or ():
        if old.get("type") == type_ and old.get("status") == value and old.get("lastTransitionTime"):
            stamp = old["lastTransitionTime"]
    cond = {"type": type_, "status": value, "reason": reason, "message": message, "lastTransitionTime": stamp}
    if generation is not None:
        cond["observedGeneration"] = generation
    return cond


def build_status(
    *,
    placement: Placement,
    shard_states: Mapping[int, str],
    generation: int | None,
    previous_conditions: Sequence[Mapping[str, Any]] | None,
    now: dt.datetime,
    problem: tuple[str, str] | None = None,
    rollout_pending: bool = False,
) -> dict[str, Any]:
    """The full ``status`` the operator writes: leadership, shard health, conditions.

    ``problem`` — ``(reason, message)``: an invalid spec, or no live shard — makes the resource
    Degraded with that message; leadership stays as it was so a mistake in the spec never disrupts running groups.
    """
    leaders = {s: 0 for s in shard_states}
    for a in placement.values():
        leaders[a.leader] = leaders.get(a.leader, 0) + 1
    failed = sorted(s for s, st in shard_states.items() if st == "Failed")
    starting = sorted(s for s, st in shard_states.items() if st == "Starting")
    ready = sum(1 for st in shard_states.values() if st == "Ready")
    if problem is not None:
        degraded = (True, problem[0], problem[1])
    elif failed:
        degraded = (True, "ShardFailed", f"shards {failed} failed; their partitions moved to live shards")
    else:
        degraded = (False, "AsExpected", "no failed shard")
    progressing = bool(starting) or rollout_pending
    all_ready = problem is None and not failed and not starting and not rollout_pending and bool(placement)
    ready_msg = (
        f"{len(placement)} partitions led by {ready} ready shards"
        if all_ready
        else f"{ready}/{len(shard_states)} shards ready"
    )
    conditions = [
        build_condition(
            "Ready",
            all_ready,
            "AllShardsReady" if all_ready else "NotReady",
            ready_msg,
            generation,
            previous_conditions,
            now,
        ),
        build_condition(
            "Progressing",
            progressing,
            "ShardsStarting" if progressing else "Stable",
            f"shards {starting} starting"
            if starting
            else ("rollout pending" if rollout_pending else "stable"),
            generation,
            previous_conditions,
            now,
        ),
        build_condition(
            "Degraded", degraded[0], degraded[1], degraded[2], generation, previous_conditions, now
        ),
    ]
    status: dict[str, Any] = {
        "partitions": placement_to_status(placement),
        "shards": [
            {"shard": s, "state": shard_states[s], "leaders": leaders.get(s, 0)} for s in sorted(shard_states)
        ],
        "readyShards": ready,
        "conditions": conditions,
    }
    if generation is not None:
        status["observedGeneration"] = generation
    return status
