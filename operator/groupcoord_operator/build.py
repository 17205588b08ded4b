"""Every Kubernetes object the operator writes, as pure ``build_*`` functions.

The reconcile (:mod:`groupcoord_operator.reconcile`) only reads, calls these and writes the
diff; keeping construction pure means unit tests check the exact objects (and validate them against the Kubernetes schemas) without
any API server, and re-running a reconcile produces byte-identical objects (idempotence).

Workload command lines (implemented by ``groupcoord shard`` / ``groupcoord gateway``)::

    groupcoord shard --shard-id <ordinal> --threads <T> --kafka <bootstrap> --state-topic <topic>
        --partitions <P> --replication-factor <R> --min-insync-replicas <M>
        --grpc-port 50051 --metrics-port 9100 --drain-timeout 20 --leadership kubernetes:<namespace>/<name>
        --internal-tls-dir /etc/groupcoord/internal-tls --health-port 50050
    groupcoord gateway --port <listener port> --advertised-host $(GROUPCOORD_ADVERTISED_HOST)
        --broker-ports <N> --kafka <bootstrap> --metrics-port 9100 --leadership kubernetes:<namespace>/<name>
        --shard-address-template '<name>-shard-{shard}.<name>-shard.<namespace>.svc:50051'
        --state-topic <topic> --internal-tls-dir /etc/groupcoord/internal-tls

Shards serve gRPC with mutual TLS only (``groupcoord.common.internal_tls``): the gateway and the
shards mount a TLS Secret each, ``<name>-internal-tls-gateway`` / ``-shard`` (the chart
generates them; the operator never touches Secrets) or the ones ``spec.internalTls.secrets``
names (cert-manager's); the kubelet probes health on a plaintext port that serves nothing else. NetworkPolicies (:func:`.network.build_network_policies`) let
only gateway and operator pods reach the shards' gRPC ports, and metrics only from where
``spec.networkPolicy.metricsFrom`` says; metrics have a ClusterIP Service of their own.

Addresses clients can reach follow Strimzi's listener model (:func:`advertised_host_env`): a
gateway pod advertises its pod IP (``internal``), its node's IP with every listener port as a
hostPort (``nodeport``), or the load balancer's address (``loadbalancer``); the bootstrap
address of each listener is in ``status.listeners`` (:func:`.resource_status.build_listener_status`). Every
gateway pod serves every listener of ``spec.gateway.listeners`` (the first through ``--port`` and
``GROUPCOORD_LISTENER_*``, the others through ``GROUPCOORD_EXTRA_LISTENERS``: see
:func:`extra_listeners_env`), and each listener has a Service of its own (:func:`listener_service_name`).

Kafka security, group defaults and the log format reach the processes as ``GROUPCOORD_*``
environment variables (see :func:`kafka_env`, :func:`group_defaults_env` and :func:`log_format_env`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from groupcoord_operator.crd import API_VERSION, KIND
from groupcoord_operator.spec import Listener, PodTemplate, Spec

GRPC_PORT = 50051
HEALTH_PORT = 50050  # grpc.health.v1 alone, plaintext, for the kubelet's probes
INTERNAL_TLS_MOUNT = "/etc/groupcoord/internal-tls"
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
TEMPLATE_HASH = "groupcoord.io/template-hash"
RESTART = "groupcoord.io/restart"
"""On the GroupCoordinator: a new value (any string, a timestamp say) rolls every pod once, the
shards one at a time, each after its partitions moved away. ``kubectl rollout restart`` on the
shard StatefulSet would restart its pods at once, leaders included: every restart a failover."""
PAUSE_RECONCILIATION = "groupcoord.io/pause-reconciliation"
"""On the GroupCoordinator: ``"true"`` stops the operator changing anything of it (workloads,
leadership), as Strimzi's ``strimzi.io/pause-reconciliation`` does, until it is removed."""
ADVERTISED_HOST_ENV = "GROUPCOORD_ADVERTISED_HOST"
SUPERVISOR_CPU_MILLIS = 100  # the shard's supervisor process, on top of its workers


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


def internal_tls_secret_name(name: str, spec: Spec, component: str) -> str:
    """The TLS Secret ``component`` (shard or gateway) mounts for mutual TLS between them: the
    one ``spec.internalTls.secrets`` names (e.g. cert-manager's), else the one the chart makes."""
    return str(spec.internal_tls_secrets.get(component) or f"{name}-internal-tls-{component}")


#: Mode of every mounted Secret's files: they are root's (the pods set no fsGroup) and the
#: container runs as a non-root user, so 0440 would leave them unreadable to the process;
#: the container holds no other user.
SECRET_MODE = 0o444


def _internal_tls(pod: dict[str, Any], container: dict[str, Any], secret: str) -> None:
    pod["volumes"].append({"name": "internal-tls", "secret": {"secretName": secret, "defaultMode": SECRET_MODE}})
    container["volumeMounts"].append(
        {"name": "internal-tls", "mountPath": INTERNAL_TLS_MOUNT, "readOnly": True}
    )


def gateway_service_name(name: str) -> str:
    return f"{name}-gateway"


def label_selector_string(name: str, component: str) -> str:
    """``selector()`` as a label-selector string (the scale subresource's labelSelectorPath)."""
    return ",".join(f"{k}={v}" for k, v in sorted(selector(name, component).items()))


def cpu_millis(quantity: str | int | float) -> int:
    """A Kubernetes CPU quantity (``500m``, ``2``, ``0.5``) in millicores."""
    text = str(quantity).strip()
    if text.endswith("m"):
        return int(float(text[:-1]))
    return int(round(float(text) * 1000))


def shard_resources(spec: Spec) -> dict[str, Any]:
    """The shard container's resources: the CPU request grows with the worker processes.

    Every worker is one busy event loop, so a shard with ``threadsPerShard`` workers needs that
    many times the CPU of one (``resources.cpuPerShardThread``) plus a little for its
    supervisor. An explicit ``resources.shard.requests.cpu`` wins.
    """
    resources = {k: dict(v) for k, v in spec.shard_resources.items() if v}
    requests = resources.setdefault("requests", {})
    if "cpu" not in requests:
        requests["cpu"] = f"{cpu_millis(spec.cpu_per_shard_thread) * spec.threads + SUPERVISOR_CPU_MILLIS}m"
    return resources


def template_hash(pod_template: Mapping[str, Any]) -> str:
    """A short digest of a pod template: pods carry it, so the operator sees which run the
    current one (:mod:`groupcoord_operator.rollout`)."""
    return hashlib.sha256(json.dumps(pod_template, sort_keys=True).encode()).hexdigest()[:16]


def is_first(spec: Spec, listener: Listener) -> bool:
    """The first listener keeps the names one listener always had (the gateway Service, the
    ``kafka`` and ``broker-<i>`` ports, ``GROUPCOORD_ADVERTISED_HOST``): adding listeners never
    renames what clients and probes already use."""
    return listener == spec.listeners[0]


def advertised_host_env_name(spec: Spec, listener: Listener) -> str:
    return (
        ADVERTISED_HOST_ENV if is_first(spec, listener) else f"{ADVERTISED_HOST_ENV}_{listener.name.upper()}"
    )


def advertised_host_env(
    spec: Spec, listener: Listener, load_balancer_hosts: Mapping[str, str | None] | None = None
) -> dict[str, Any]:
    """Where a gateway pod tells clients of ``listener`` to connect, by its type (Strimzi's model).

    ``internal``: its pod IP (downward API), reachable from every pod of the cluster network;
    ``nodeport``: its node's IP (the listener ports are hostPorts, so node:port is this pod);
    ``loadbalancer``: the load balancer's address (``advertisedHost``, else the ingress the
    cloud assigned to the listener's Service, by listener name in ``load_balancer_hosts``;
    until then the pod IP, for clients inside).
    """
    env_name = advertised_host_env_name(spec, listener)
    assigned = (load_balancer_hosts or {}).get(listener.name)
    if listener.type == "loadbalancer" and (listener.advertised_host or assigned):
        return {"name": env_name, "value": listener.advertised_host or assigned}
    field_path = "status.hostIP" if listener.type == "nodeport" else "status.podIP"
    return {"name": env_name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


def listener_ports(spec: Spec, listener: Listener) -> list[tuple[str, int]]:
    """``(name, port)`` of ``listener``'s bootstrap port and each per-broker port (``port + 1 + i``,
    the listener of the upstream broker with node id ``i`` on every gateway pod: ``groupcoord
    gateway --broker-ports``): ``kafka`` and ``broker-<i>`` for the first listener, ``<name>``
    and ``<name>-<i>`` for the others."""
    bootstrap, broker = ("kafka", "broker") if is_first(spec, listener) else (listener.name, listener.name)
    ports = listener.ports
    return [(bootstrap, ports[0])] + [(f"{broker}-{n}", port) for n, port in enumerate(ports[1:])]


def listener_port_names(spec: Spec) -> list[tuple[str, int]]:
    """``(name, port)`` of every port of every listener (:func:`listener_ports`)."""
    return [entry for listener in spec.listeners for entry in listener_ports(spec, listener)]


def listener_service_name(name: str, spec: Spec, listener: Listener) -> str:
    """The first listener's Service is the gateway Service; another's ``<name>-gateway-<listener>``
    (Strimzi's ``<cluster>-kafka-<listener>-bootstrap``)."""
    service = gateway_service_name(name)
    return service if is_first(spec, listener) else f"{service}-{listener.name}"


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
        {"name": "GROUPCOORD_GROUP_SHARE_DLQ_TOPIC_NAME_PREFIX", "value": gd.share_dlq_topic_name_prefix},
        {
            "name": "GROUPCOORD_GROUP_SHARE_DLQ_AUTO_CREATE_TOPICS",
            "value": "true" if gd.share_dlq_auto_create_topics else "false",
        },
    ]


def log_format_env(spec: Spec) -> list[dict[str, Any]]:
    """``spec.logging.format`` as ``GROUPCOORD_LOG_FORMAT`` (the default ``--log-format`` of
    ``groupcoord`` and of the workers it starts). Absent for text, the default: pod templates
    of resources that do not ask for JSON stay as they were (no rollout on an operator upgrade)."""
    if spec.log_format == "text":
        return []
    return [{"name": "GROUPCOORD_LOG_FORMAT", "value": spec.log_format}]


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
    return [{"name": "kafka-tls", "projected": {"sources": sources, "defaultMode": SECRET_MODE}}]


def _container_security() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }


def _annotation(owner: Mapping[str, Any] | None, key: str) -> str | None:
    value = (((owner or {}).get("metadata") or {}).get("annotations") or {}).get(key)
    return None if value is None else str(value)


def restart_request(owner: Mapping[str, Any] | None) -> dict[str, str]:
    """The pod-template annotation that carries the resource's restart request: a new value is a
    new template, which the operator rolls as any other (:mod:`groupcoord_operator.rollout`)."""
    value = _annotation(owner, RESTART)
    return {RESTART: value} if value else {}


def reconciliation_paused(owner: Mapping[str, Any] | None) -> bool:
    return (_annotation(owner, PAUSE_RECONCILIATION) or "").strip().lower() == "true"


def _apply_pod_template(
    pod: dict[str, Any], metadata: dict[str, Any], template: PodTemplate, name: str, component: str
) -> None:
    """Strimzi-style pod overrides; the operator's own labels and annotations win."""
    if template.labels:
        metadata["labels"] = {**template.labels, **metadata["labels"]}
    if template.annotations:
        metadata["annotations"] = {**template.annotations, **metadata.get("annotations", {})}
    if template.affinity:
        pod["affinity"] = dict(template.affinity)
    if template.tolerations:
        pod["tolerations"] = [dict(t) for t in template.tolerations]
    if template.topology_spread_constraints:
        pod["topologySpreadConstraints"] = [
            {"labelSelector": {"matchLabels": selector(name, component)}, **c}
            for c in template.topology_spread_constraints
        ]
    if template.node_selector:
        pod["nodeSelector"] = dict(template.node_selector)
    if template.priority_class_name:
        pod["priorityClassName"] = template.priority_class_name
    if template.security_context:
        pod["securityContext"] = {**pod["securityContext"], **template.security_context}
    (container,) = pod["containers"]
    if template.container_security_context:
        container["securityContext"] = {**container["securityContext"], **template.container_security_context}
    own = {e["name"] for e in container["env"]}
    container["env"].extend(dict(e) for e in template.env if e["name"] not in own)
    for probe, timings in (
        ("livenessProbe", template.liveness_probe),
        ("readinessProbe", template.readiness_probe),
    ):
        if timings:
            container[probe] = {**container[probe], **timings}


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
        "--replication-factor",
        str(spec.replication_factor),
        "--min-insync-replicas",
        str(spec.min_insync_replicas),
        "--grpc-port",
        str(GRPC_PORT),
        "--metrics-port",
        str(METRICS_PORT),
        "--drain-timeout",
        str(SHARD_DRAIN_S),
        "--leadership",
        leadership_ref(namespace, name),
        "--internal-tls-dir",
        INTERNAL_TLS_MOUNT,
        "--health-port",
        str(HEALTH_PORT),
    ]


def gateway_args(name: str, namespace: str, spec: Spec) -> list[str]:
    """The first listener's port and address are flags; the others are in
    ``GROUPCOORD_EXTRA_LISTENERS`` (:func:`extra_listeners_env`)."""
    return [
        "gateway",
        "--port",
        str(spec.listener.port),
        "--advertised-host",
        f"$({ADVERTISED_HOST_ENV})",
        "--broker-ports",
        str(spec.listener.broker_ports),
        "--kafka",
        spec.bootstrap_servers,
        "--metrics-port",
        str(METRICS_PORT),
        "--leadership",
        leadership_ref(namespace, name),
        "--shard-address-template",
        shard_address_template(name, namespace),
        "--state-topic",  # transactions add the group's state partition (AddOffsetsToTxn)
        spec.state_topic,
        "--internal-tls-dir",
        INTERNAL_TLS_MOUNT,
    ]


def build_shard_statefulset(
    name: str,
    namespace: str,
    spec: Spec,
    owner: Mapping[str, Any] | None = None,
    image: str | None = None,
    partition: int = 0,
) -> dict[str, Any]:
    """The shard StatefulSet: stable ordinals are the shard ids placement talks about.

    ``Parallel`` pod management because shards are independent (leadership comes from the
    resource status, not from start order). The ordinal reaches the process through the
    ``apps.kubernetes.io/pod-index`` label (Kubernetes >= 1.28). Pods are replaced by a
    ``RollingUpdate`` whose ``partition`` the operator lowers one ordinal at a time, after
    moving that shard's partitions away (:mod:`groupcoord_operator.rollout`); the pod template
    carries its own digest so the operator sees which pods run it.
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
            *log_format_env(spec),
        ],
        "ports": [
            {"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"},
            {"name": "health", "containerPort": HEALTH_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
        ],
        # grpc.health.v1 on worker 0 (groupcoord.coordinator.server.health): "" is SERVING when
        # every worker can lead partitions; "liveness" when no worker is wedged. The answer
        # comes from worker 0's event loop: a busy loop may take more than the 1 s default.
        # On the plaintext health port: gRPC probes cannot do TLS, the gRPC port wants a certificate.
        "readinessProbe": {
            "grpc": {"port": HEALTH_PORT, "service": ""},
            "periodSeconds": 5,
            "timeoutSeconds": 3,
            "failureThreshold": 2,
        },
        "livenessProbe": {
            "grpc": {"port": HEALTH_PORT, "service": "liveness"},
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 6,
        },
        "resources": shard_resources(spec),
        "securityContext": _container_security(),
    }
    pod_meta: dict[str, Any] = {
        "labels": labels(name, SHARD),
        "annotations": {"kubectl.kubernetes.io/default-container": SHARD},
    }
    pod = {**_pod_spec(spec, container), "terminationGracePeriodSeconds": 30}
    _internal_tls(pod, container, internal_tls_secret_name(name, spec, SHARD))
    _apply_pod_template(pod, pod_meta, spec.shard_template, name, SHARD)
    pod_meta["annotations"].update(restart_request(owner))
    template = {"metadata": pod_meta, "spec": pod}
    pod_meta["annotations"][TEMPLATE_HASH] = template_hash(template)
    obj: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": f"{name}-shard", "namespace": namespace, "labels": labels(name, SHARD)},
        "spec": {
            "serviceName": shard_service_name(name),
            "replicas": spec.shards,
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}},
            "selector": {"matchLabels": selector(name, SHARD)},
            "template": template,
        },
    }
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [owner_reference(owner)]
    return obj


LISTENER_TLS_MOUNT = "/etc/groupcoord/listener-tls"
SASL_USERS_MOUNT = "/etc/groupcoord/sasl-users"
ACLS_MOUNT = "/etc/groupcoord/acls"


Mounts = tuple[list[dict[str, Any]], list[dict[str, Any]]]  # (volumes, volume mounts)


def _mount(mounts: Mounts, volume: str, path: str, source: dict[str, Any]) -> None:
    mounts[0].append({"name": volume, **source})
    mounts[1].append({"name": volume, "mountPath": path, "readOnly": True})


def listener_security_settings(
    listener: Listener, mounts: Mounts, paths: tuple[str, str], volume_names: tuple[str, str]
) -> dict[str, str]:
    """``listener``'s TLS and SASL as the gateway's listener settings (the ``--listener-*``
    names: ``ssl_certfile``...), its TLS and credentials Secrets mounted read-only at ``paths``
    as the volumes ``volume_names``."""
    tls_mount, sasl_mount = paths
    settings: dict[str, str] = {}
    tls, sasl = listener.tls, listener.authentication
    if tls:
        secret = {"secret": {"secretName": tls["secretName"], "defaultMode": SECRET_MODE}}
        _mount(mounts, volume_names[0], tls_mount, secret)
        settings["ssl_certfile"] = f"{tls_mount}/{tls.get('certificate', 'tls.crt')}"
        settings["ssl_keyfile"] = f"{tls_mount}/{tls.get('key', 'tls.key')}"
        client_auth = tls.get("clientAuth", "none")
        if client_auth != "none":
            settings["ssl_client_auth"] = client_auth
            settings["ssl_cafile"] = f"{tls_mount}/{tls.get('caCertificate', 'ca.crt')}"
    if sasl:
        settings["sasl"] = sasl["mode"]
        if sasl.get("mechanisms"):
            settings["sasl_mechanisms"] = ",".join(sasl["mechanisms"])
        if sasl["mode"] == "credentials":
            secret = {"secret": {"secretName": sasl["credentialsSecret"], "defaultMode": SECRET_MODE}}
            _mount(mounts, volume_names[1], sasl_mount, secret)
            settings["sasl_credentials"] = sasl_mount
        if sasl.get("sessionLifetimeMs"):
            settings["sasl_session_lifetime_ms"] = str(sasl["sessionLifetimeMs"])
    return settings


#: the ``GROUPCOORD_LISTENER_*`` variable of each listener setting (groupcoord's ``listener_security.ENV``)
LISTENER_SETTING_ENV = {
    "ssl_certfile": "GROUPCOORD_LISTENER_SSL_CERTFILE",
    "ssl_keyfile": "GROUPCOORD_LISTENER_SSL_KEYFILE",
    "ssl_client_auth": "GROUPCOORD_LISTENER_SSL_CLIENT_AUTH",
    "ssl_cafile": "GROUPCOORD_LISTENER_SSL_CAFILE",
    "sasl": "GROUPCOORD_LISTENER_SASL",
    "sasl_mechanisms": "GROUPCOORD_LISTENER_SASL_MECHANISMS",
    "sasl_credentials": "GROUPCOORD_LISTENER_SASL_CREDENTIALS",
    "sasl_session_lifetime_ms": "GROUPCOORD_LISTENER_SASL_SESSION_LIFETIME_MS",
}
EXTRA_LISTENERS_ENV = "GROUPCOORD_EXTRA_LISTENERS"
LISTENERS_MOUNT = "/etc/groupcoord/listeners"


def extra_listeners_env(spec: Spec, mounts: Mounts) -> list[dict[str, Any]]:
    """``GROUPCOORD_EXTRA_LISTENERS``: every listener after the first, as ``groupcoord gateway
    --extra-listeners`` reads them (``groupcoord.gateway.extra_listeners``), each with its own
    advertised-host variable and its Secrets mounted under ``/etc/groupcoord/listeners/<name>``."""
    entries = []
    for listener in spec.listeners[1:]:
        base = f"{LISTENERS_MOUNT}/{listener.name}"
        security = listener_security_settings(
            listener,
            mounts,
            (f"{base}/tls", f"{base}/sasl-users"),
            (f"listener-{listener.name}-tls", f"listener-{listener.name}-sasl-users"),
        )
        entry: dict[str, Any] = {
            "name": listener.name,
            "port": listener.port,
            "brokerPorts": listener.broker_ports,
            "advertisedHostEnv": advertised_host_env_name(spec, listener),
        }
        if security:
            entry["security"] = security
        entries.append(entry)
    if not entries:
        return []
    return [{"name": EXTRA_LISTENERS_ENV, "value": json.dumps(entries, separators=(",", ":"))}]


def gateway_security(spec: Spec) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(env, volumes, volume mounts) of the gateway for its listeners' security and
    ``spec.authorization``: the ``GROUPCOORD_LISTENER_*`` (first listener),
    ``GROUPCOORD_EXTRA_LISTENERS`` (the others) and ``GROUPCOORD_ACL_*`` variables the gateway
    reads, pointing at Secrets and a ConfigMap mounted read-only."""
    mounts: Mounts = ([], [])
    volumes, volume_mounts = mounts
    first = listener_security_settings(
        spec.listener, mounts, (LISTENER_TLS_MOUNT, SASL_USERS_MOUNT), ("listener-tls", "sasl-users")
    )
    env: list[dict[str, Any]] = [{"name": LISTENER_SETTING_ENV[k], "value": v} for k, v in first.items()]
    env += extra_listeners_env(spec, mounts)

    def mount(volume: str, path: str, source: dict[str, Any]) -> None:
        _mount(mounts, volume, path, source)

    if spec.gateway_security.get("allowSharedUpstreamIdentity"):
        env.append({"name": "GROUPCOORD_ALLOW_SHARED_UPSTREAM_IDENTITY", "value": "true"})
    authorization = spec.authorization
    if authorization:
        source = authorization.get("aclSource", "file")
        env.append({"name": "GROUPCOORD_ACL_SOURCE", "value": source})
        config_map = authorization.get("aclConfigMap") or {}
        if source == "file" and config_map:
            mount("acls", ACLS_MOUNT, {"configMap": {"name": config_map["name"]}})
            env.append(
                {"name": "GROUPCOORD_ACL_FILE", "value": f"{ACLS_MOUNT}/{config_map.get('key', 'acls.json')}"}
            )
        if authorization.get("superUsers"):
            env.append({"name": "GROUPCOORD_SUPER_USERS", "value": ";".join(authorization["superUsers"])})
        if authorization.get("allowEveryoneIfNoAclFound"):
            env.append({"name": "GROUPCOORD_ALLOW_EVERYONE_IF_NO_ACL_FOUND", "value": "true"})
    return env, volumes, volume_mounts


def build_gateway_deployment(
    name: str,
    namespace: str,
    spec: Spec,
    owner: Mapping[str, Any] | None = None,
    image: str | None = None,
    load_balancer_hosts: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """The stateless gateway Deployment clients bootstrap to.

    Every port of every listener it may open (the bootstrap port and one per upstream broker) is
    a container port — a hostPort too for ``nodeport`` listeners, where the node's IP is what
    the pod advertises (so the scheduler never puts two gateway pods on one node).
    ``load_balancer_hosts``: the ingress the cloud gave each ``loadbalancer`` listener's Service.
    """
    host_ports = any(listener.type == "nodeport" for listener in spec.listeners)
    container_ports = [
        {
            "name": port_name,
            "containerPort": port,
            "protocol": "TCP",
            **({"hostPort": port} if listener.type == "nodeport" else {}),
        }
        for listener in spec.listeners
        for port_name, port in listener_ports(spec, listener)
    ]
    container = {
        "name": GATEWAY,
        "image": spec.image or image or DEFAULT_IMAGE,
        "imagePullPolicy": spec.image_pull_policy,
        "command": ["groupcoord"],
        "args": gateway_args(name, namespace, spec),
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            *(advertised_host_env(spec, listener, load_balancer_hosts) for listener in spec.listeners),
            *kafka_env(spec),
            *log_format_env(spec),
        ],
        "ports": [*container_ports, {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": "kafka"}, "periodSeconds": 5},
        "livenessProbe": {"httpGet": {"path": "/metrics", "port": "metrics"}, "periodSeconds": 10},
        "resources": dict(spec.gateway_resources),
        "securityContext": _container_security(),
    }
    pod_meta: dict[str, Any] = {
        "labels": labels(name, GATEWAY),
        "annotations": {"kubectl.kubernetes.io/default-container": GATEWAY},
    }
    pod = _pod_spec(spec, container)
    security_env, security_volumes, security_mounts = gateway_security(spec)
    container["env"].extend(security_env)
    pod["volumes"].extend(security_volumes)
    container["volumeMounts"].extend(security_mounts)
    _internal_tls(pod, container, internal_tls_secret_name(name, spec, GATEWAY))
    _apply_pod_template(pod, pod_meta, spec.gateway_template, name, GATEWAY)
    pod_meta["annotations"].update(restart_request(owner))
    obj: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": gateway_service_name(name),
            "namespace": namespace,
            "labels": labels(name, GATEWAY),
        },
        "spec": {
            "replicas": spec.gateway_replicas,
            "selector": {"matchLabels": selector(name, GATEWAY)},
            "template": {"metadata": pod_meta, "spec": pod},
        },
    }
    if host_ports:
        # a surge pod would need a node whose hostPorts are free: replace in place instead
        obj["spec"]["strategy"] = {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
        }
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [owner_reference(owner)]
    return obj
