"""Reading a GroupCoordinator spec: validate it, apply defaults, hand back a typed value.

Defaults are applied here as well as by the API server (CRD ``default``), because an older
object, a server without structural defaulting, or a test's mock API server may not have
them; the operator must behave the same either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from groupcoord_operator.crd import spec_schema, strict

#: port names of the gateway container that a listener's name would collide with
RESERVED_LISTENER_NAMES = ("kafka", "broker", "metrics")


class SpecError(ValueError):
    """The spec cannot be acted on; the message goes into the Degraded condition verbatim."""


@dataclass(frozen=True)
class GroupDefaults:
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    assignors: tuple[str, ...] = ("uniform", "range")
    max_group_size: int = 1000
    migration_policy: str = "bidirectional"
    # KIP-1191's broker configs for share groups' dead-letter queues, which the coordinator
    # writes with its own identity: the required topic name prefix, and topic creation
    share_dlq_topic_name_prefix: str = "dlq."
    share_dlq_auto_create_topics: bool = False


@dataclass(frozen=True)
class Listener:
    """How clients reach the gateway: Strimzi's listener model, one listener with its security."""

    name: str = "plain"
    type: str = "internal"  # internal | nodeport | loadbalancer
    port: int = 9092
    broker_ports: int = 3
    advertised_host: str | None = None
    tls: Mapping[str, Any] = field(default_factory=dict)  # the CRD's listener TLS (secretName...)
    authentication: Mapping[str, Any] = field(default_factory=dict)  # the CRD's SASL (mode...)

    @property
    def ports(self) -> list[int]:
        """The bootstrap port, then the port of the broker with node id i (port + 1 + i)."""
        return [self.port + n for n in range(self.broker_ports + 1)]


OPERATOR_PODS: Mapping[str, Any] = {
    "namespaceSelector": {},
    "podSelector": {
        "matchLabels": {"app.kubernetes.io/name": "groupcoord", "app.kubernetes.io/component": "operator"}
    },
}
SAME_NAMESPACE: Mapping[str, Any] = {"podSelector": {}}


@dataclass(frozen=True)
class NetworkPolicy:
    """Who may reach what (``spec.networkPolicy``): NetworkPolicyPeers."""

    metrics_from: tuple[Mapping[str, Any], ...] = (SAME_NAMESPACE,)
    operator_from: tuple[Mapping[str, Any], ...] = (OPERATOR_PODS,)


@dataclass(frozen=True)
class PodTemplate:
    """Pod overrides of one component (Strimzi's ``template.pod``)."""

    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    affinity: Mapping[str, Any] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    topology_spread_constraints: tuple[Mapping[str, Any], ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    priority_class_name: str | None = None
    security_context: Mapping[str, Any] = field(default_factory=dict)
    container_security_context: Mapping[str, Any] = field(default_factory=dict)
    env: tuple[Mapping[str, Any], ...] = ()
    liveness_probe: Mapping[str, int] = field(default_factory=dict)
    readiness_probe: Mapping[str, int] = field(default_factory=dict)
    max_unavailable: int = 1  # the component's PodDisruptionBudget


def _pod_template(raw: Mapping[str, Any] | None) -> PodTemplate:
    raw = raw or {}
    meta = raw.get("metadata") or {}
    budget = raw.get("podDisruptionBudget") or {}
    return PodTemplate(
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        affinity=dict(raw.get("affinity") or {}),
        tolerations=tuple(raw.get("tolerations") or ()),
        topology_spread_constraints=tuple(raw.get("topologySpreadConstraints") or ()),
        node_selector=dict(raw.get("nodeSelector") or {}),
        priority_class_name=raw.get("priorityClassName") or None,
        security_context=dict(raw.get("securityContext") or {}),
        container_security_context=dict(raw.get("containerSecurityContext") or {}),
        env=tuple(dict(e) for e in raw.get("env") or ()),
        liveness_probe=dict(raw.get("livenessProbe") or {}),
        readiness_probe=dict(raw.get("readinessProbe") or {}),
        max_unavailable=int(budget.get("maxUnavailable", 1)),
    )


@dataclass(frozen=True)
class Spec:
    """A validated spec with every default filled in."""

    bootstrap_servers: str
    partitions: int
    shards: int
    threads: int = 2
    standbys: int = 0
    state_topic: str = "__groupcoord_state"
    image: str | None = None
    image_pull_policy: str = "IfNotPresent"
    service_account: str | None = None
    replication_factor: int = 3
    min_insync_replicas: int = 2
    gateway_replicas: int = 2
    #: every client listener, the first the bootstrap one (gateway.listeners, else gateway.listener
    #: with gateway.security's TLS and SASL)
    listeners: tuple[Listener, ...] = (Listener(),)
    tls: Mapping[str, Any] = field(default_factory=dict)
    sasl: Mapping[str, Any] = field(default_factory=dict)
    gateway_security: Mapping[str, Any] = field(default_factory=dict)  # spec.gateway.security
    authorization: Mapping[str, Any] = field(default_factory=dict)  # spec.authorization
    group_defaults: GroupDefaults = field(default_factory=GroupDefaults)
    shard_resources: Mapping[str, Any] = field(default_factory=dict)
    gateway_resources: Mapping[str, Any] = field(default_factory=dict)
    cpu_per_shard_thread: str = "500m"
    shard_template: PodTemplate = field(default_factory=PodTemplate)
    gateway_template: PodTemplate = field(default_factory=PodTemplate)
    internal_tls_secrets: Mapping[str, str] = field(default_factory=dict)  # component -> Secret name
    network_policy: NetworkPolicy = field(default_factory=NetworkPolicy)
    log_format: str = "text"  # spec.logging.format

    @property
    def listener(self) -> Listener:
        """The first listener: the gateway Service's, the one probes and per-broker warnings use."""
        return self.listeners[0]


def _schema_messages(spec: Mapping[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(strict(spec_schema()))
    messages = []
    for error in sorted(validator.iter_errors(spec), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in error.absolute_path) or "(spec)"
        messages.append(f"spec.{where}: {error.message}" if error.absolute_path else f"spec: {error.message}")
    return messages


def _rule_messages(raw: Mapping[str, Any], current_partitions: int) -> list[str]:
    """The CRD's CEL rules (and what only the operator knows), checked again for servers that do
    not evaluate them; on the raw spec, so they are reported along with any schema error (a
    value of the wrong type is the schema's to report, and skipped here)."""

    def number(node: Any, key: str, default: int | None = None) -> int | None:
        value = node.get(key, default) if isinstance(node, Mapping) else default
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    problems = []
    gd = raw.get("groupDefaults") or {}
    heartbeat, session = number(gd, "heartbeatIntervalMs", 5000), number(gd, "sessionTimeoutMs", 45000)
    if heartbeat is not None and session is not None and heartbeat >= session:
        problems.append(
            f"spec.groupDefaults.heartbeatIntervalMs ({heartbeat}) must be smaller than sessionTimeoutMs ({session})"
        )
    standbys, shards = number(raw, "standbysPerPartition", 0), number(raw, "shards")
    if standbys and shards is not None and standbys >= shards:
        problems.append(
            f"spec.standbysPerPartition ({standbys}) must be smaller than spec.shards ({shards}): "
            "a standby lives on another shard"
        )
    topic = raw.get("stateTopic") or {}
    factor, min_isr = number(topic, "replicationFactor", 3), number(topic, "minInsyncReplicas", 2)
    if factor is not None and min_isr is not None and min_isr > factor:
        problems.append(
            f"spec.stateTopic.minInsyncReplicas ({min_isr}) must not exceed replicationFactor ({factor})"
        )
    gateway = raw.get("gateway") or {}
    problems += _advertised_host_problem(gateway.get("listener") or {}, "spec.gateway.listener")
    if isinstance(gateway, Mapping) and isinstance(gateway.get("listeners"), list):
        problems += _listeners_messages(gateway)
    partitions = number(topic, "partitions")
    if current_partitions and partitions is not None and partitions != current_partitions:
        problems.append(
            f"spec.stateTopic.partitions cannot change from {current_partitions} to {partitions}: "
            "groups are placed by hash(group id) mod partitions, so their state would be stranded"
        )
    tls = (raw.get("kafka") or {}).get("tls") or {}
    if (
        isinstance(tls, Mapping)
        and tls.get("enabled")
        and bool(tls.get("certSecret")) != bool(tls.get("keySecret"))
    ):
        problems.append("spec.kafka.tls: certSecret and keySecret must be given together")
    sasl = ((raw.get("gateway") or {}).get("security") or {}).get("sasl") or {}
    problems += _credentials_problem(sasl, "spec.gateway.security.sasl")
    authorization = raw.get("authorization") or {}
    if (
        isinstance(authorization, Mapping)
        and authorization
        and authorization.get("aclSource", "file") == "file"
        and not authorization.get("aclConfigMap")
    ):
        problems.append("spec.authorization: aclSource file needs aclConfigMap")
    return problems


def _advertised_host_problem(listener: Any, where: str) -> list[str]:
    """A listener (``gateway.listener`` or an entry of ``gateway.listeners``) naming an
    advertised host without being a load balancer."""
    if isinstance(listener, Mapping) and listener.get("advertisedHost") and listener.get("type") != "loadbalancer":
        return [f"{where}.advertisedHost is only for type loadbalancer"]
    return []


def _credentials_problem(sasl: Any, where: str) -> list[str]:
    """Listener SASL in mode credentials without the Secret holding them."""
    if isinstance(sasl, Mapping) and sasl.get("mode") == "credentials" and not sasl.get("credentialsSecret"):
        return [f"{where}: mode credentials needs credentialsSecret"]
    return []


def _listeners_messages(gateway: Mapping[str, Any]) -> list[str]:
    """``gateway.listeners``' CEL rules and list-map keys, for servers that check neither."""
    problems = []
    if "listener" in gateway:
        problems.append("spec.gateway.listener and spec.gateway.listeners exclude each other")
    security = gateway.get("security") or {}
    if isinstance(security, Mapping) and (security.get("tls") or security.get("sasl")):
        problems.append(
            "spec.gateway.listeners: TLS and SASL are set per listener (tls, authentication), "
            "not in spec.gateway.security"
        )
    entries = [e for e in gateway["listeners"] if isinstance(e, Mapping)]
    names = [e.get("name") for e in entries]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"spec.gateway.listeners: the name {name!r} is used twice")
    for entry in entries:
        where = f"spec.gateway.listeners[{entry.get('name')}]"
        if entry.get("name") in RESERVED_LISTENER_NAMES:
            problems.append(f"{where}: kafka, broker and metrics name the gateway's own ports")
        problems += _advertised_host_problem(entry, where)
        problems += _credentials_problem(entry.get("authentication") or {}, f"{where}.authentication")
    spans = [
        (e.get("name"), e["port"], e["port"] + e.get("brokerPorts", 3))
        for e in entries
        if isinstance(e.get("port"), int) and isinstance(e.get("brokerPorts", 3), int)
    ]
    for i, (a, a_first, a_last) in enumerate(spans):
        for b, b_first, b_last in spans[i + 1 :]:
            if a_first <= b_last and b_first <= a_last:
                problems.append(
                    f"spec.gateway.listeners: {a!r} ({a_first}..{a_last}) and {b!r} ({b_first}..{b_last}) "
                    "share ports: each listener takes port .. port + brokerPorts"
                )
    return problems


def _listeners(gateway: Mapping[str, Any]) -> tuple[Listener, ...]:
    def listener(raw: Mapping[str, Any], tls: Mapping[str, Any], sasl: Mapping[str, Any]) -> Listener:
        return Listener(
            name=raw.get("name", "plain"),
            type=raw.get("type", "internal"),
            port=raw.get("port", 9092),
            broker_ports=raw.get("brokerPorts", 3),
            advertised_host=raw.get("advertisedHost") or None,
            tls=dict(tls or {}),
            authentication=dict(sasl or {}),
        )

    if gateway.get("listeners"):
        return tuple(
            listener(e, e.get("tls") or {}, e.get("authentication") or {}) for e in gateway["listeners"]
        )
    security = gateway.get("security") or {}
    return (listener(gateway.get("listener") or {}, security.get("tls") or {}, security.get("sasl") or {}),)


def parse_spec(raw: Mapping[str, Any] | None, current_partitions: int = 0) -> Spec:
    """Validate ``raw`` (the resource's ``spec``) and return it with defaults applied.

    ``current_partitions`` is the partition count in force (from the status; 0 before the
    first placement). It cannot change: groups map to ``hash(group id) mod partitions``, like
    Kafka's ``offsets.topic.num.partitions``, so a new count would strand every group's state. Raises :class:`SpecError` with every
    problem found, so a user fixes them in one go.
    """
    raw = dict(raw or {})
    problems = _schema_messages(raw) + _rule_messages(raw, current_partitions)
    if problems:
        raise SpecError("; ".join(problems))
    topic = raw["stateTopic"]
    gd_raw = raw.get("groupDefaults") or {}
    gd = GroupDefaults(
        session_timeout_ms=gd_raw.get("sessionTimeoutMs", 45000),
        heartbeat_interval_ms=gd_raw.get("heartbeatIntervalMs", 5000),
        assignors=tuple(gd_raw.get("assignors") or ("uniform", "range")),
        max_group_size=gd_raw.get("maxGroupSize", 1000),
        migration_policy=gd_raw.get("migrationPolicy", "bidirectional"),
        share_dlq_topic_name_prefix=gd_raw.get("shareDlqTopicNamePrefix", "dlq."),
        share_dlq_auto_create_topics=bool(gd_raw.get("shareDlqAutoCreateTopics", False)),
    )
    gateway = raw.get("gateway") or {}
    resources = raw.get("resources") or {}
    template = raw.get("template") or {}
    policy = raw.get("networkPolicy") or {}
    spec = Spec(
        bootstrap_servers=raw["kafka"]["bootstrapServers"],
        partitions=topic["partitions"],
        shards=raw["shards"],
        threads=raw.get("threadsPerShard", 2),
        standbys=raw.get("standbysPerPartition", 0),
        state_topic=topic.get("name", "__groupcoord_state"),
        image=raw.get("image") or None,
        image_pull_policy=raw.get("imagePullPolicy", "IfNotPresent"),
        service_account=raw.get("serviceAccountName") or None,
        replication_factor=topic.get("replicationFactor", 3),
        min_insync_replicas=topic.get("minInsyncReplicas", 2),
        gateway_replicas=gateway.get("replicas", 2),
        listeners=_listeners(gateway),
        tls=raw["kafka"].get("tls") or {},
        sasl=raw["kafka"].get("sasl") or {},
        gateway_security=gateway.get("security") or {},
        authorization=raw.get("authorization") or {},
        group_defaults=gd,
        shard_resources=resources.get("shard") or {},
        gateway_resources=resources.get("gateway") or {},
        cpu_per_shard_thread=str(resources.get("cpuPerShardThread", "500m")),
        shard_template=_pod_template(template.get("shard")),
        gateway_template=_pod_template(template.get("gateway")),
        internal_tls_secrets=dict((raw.get("internalTls") or {}).get("secrets") or {}),
        network_policy=NetworkPolicy(
            metrics_from=tuple(policy.get("metricsFrom", (SAME_NAMESPACE,))),
            operator_from=tuple(policy.get("operatorFrom") or (OPERATOR_PODS,)),
        ),
        log_format=(raw.get("logging") or {}).get("format", "text"),
    )
    return spec
