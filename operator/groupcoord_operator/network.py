"""The operator's Services, NetworkPolicies and PodDisruptionBudgets, as pure ``build_*`` functions.

Apart from :mod:`.build` (the workloads) because they are what a platform team reviews on its
own: which ports are published where, who may reach each one, how many pods may be down.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from groupcoord_operator.build import (
    GATEWAY,
    GRPC_PORT,
    HEALTH_PORT,
    METRICS_PORT,
    SHARD,
    gateway_service_name,
    labels,
    listener_port_names,
    listener_ports,
    listener_service_name,
    owner_reference,
    selector,
    shard_service_name,
)
from groupcoord_operator.spec import Spec


def build_services(
    name: str, namespace: str, spec: Spec, owner: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """A headless shard Service (per-pod DNS for the gateway), the client-facing gateway
    Service, the gateway's metrics Service, and a Service for each further listener.

    A listener's Service carries its bootstrap port and every per-broker port, under the type
    the listener asks for (ClusterIP, NodePort, LoadBalancer), and nothing else: a
    LoadBalancer would publish whatever port it carries. Metrics are on a ClusterIP Service
    of their own (which the chart's ServiceMonitor selects by its ``metrics`` port).

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
    service_type = {"internal": "ClusterIP", "nodeport": "NodePort", "loadbalancer": "LoadBalancer"}
    listener_svcs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": listener_service_name(name, spec, listener),
                "namespace": namespace,
                "labels": labels(name, GATEWAY),
            },
            "spec": {
                "type": service_type[listener.type],
                "selector": selector(name, GATEWAY),
                "ports": [
                    {"name": port_name, "port": port, "targetPort": port_name, "protocol": "TCP"}
                    for port_name, port in listener_ports(spec, listener)
                ],
            },
        }
        for listener in spec.listeners
    ]
    metrics_svc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": f"{gateway_service_name(name)}-metrics",
            "namespace": namespace,
            "labels": labels(name, GATEWAY),
        },
        "spec": {
            "type": "ClusterIP",
            "selector": selector(name, GATEWAY),
            "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"}],
        },
    }
    services = [shard_svc, listener_svcs[0], metrics_svc, *listener_svcs[1:]]
    if owner is not None:
        for svc in services:
            svc["metadata"]["ownerReferences"] = [owner_reference(owner)]
    return services


def build_network_policies(
    name: str, namespace: str, spec: Spec, owner: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Each port open to its callers only: a shard's gRPC ports (one per worker) to the
    gateway pods and the operator's, its health port to anyone (health only: the kubelet's
    probes), metrics to ``spec.networkPolicy.metricsFrom`` (default: pods of this namespace),
    and the gateway's client listeners to anyone — clients reach the gateway and nothing else.
    Ingress only: what the pods reach (Kafka, the API server) is not narrowed here."""
    gateway_pods = {"podSelector": {"matchLabels": selector(name, GATEWAY)}}
    metrics_port = {"port": METRICS_PORT, "protocol": "TCP"}
    # an empty ``from`` would admit everyone: no peers named means nobody scrapes
    metrics_from = [dict(p) for p in spec.network_policy.metrics_from]
    metrics_rule = [{"from": metrics_from, "ports": [metrics_port]}] if metrics_from else []
    grpc_ports: dict[str, Any] = {"port": GRPC_PORT, "protocol": "TCP"}
    if spec.threads > 1:
        grpc_ports["endPort"] = GRPC_PORT + spec.threads - 1
    shard_rules = [
        {
            "from": [gateway_pods, *(dict(p) for p in spec.network_policy.operator_from)],
            "ports": [grpc_ports],
        },
        {"ports": [{"port": HEALTH_PORT, "protocol": "TCP"}]},
        *metrics_rule,
    ]
    gateway_rules = [
        {"ports": [{"port": port, "protocol": "TCP"} for _, port in listener_port_names(spec)]},
        *metrics_rule,
    ]
    policies = []
    for component, rules in ((SHARD, shard_rules), (GATEWAY, gateway_rules)):
        policy: dict[str, Any] = {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {
                "name": f"{name}-{component}",
                "namespace": namespace,
                "labels": labels(name, component),
            },
            "spec": {
                "podSelector": {"matchLabels": selector(name, component)},
                "policyTypes": ["Ingress"],
                "ingress": rules,
            },
        }
        if owner is not None:
            policy["metadata"]["ownerReferences"] = [owner_reference(owner)]
        policies.append(policy)
    return policies


def build_pod_disruption_budgets(
    name: str, namespace: str, spec: Spec, owner: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """By default at most one shard and one gateway pod down at a time for voluntary disruptions
    (node drains, cluster upgrades): a second shard down would double the partitions in failover.
    ``template.<component>.podDisruptionBudget.maxUnavailable`` changes it (0 blocks drains)."""
    budgets = []
    for component, template in ((SHARD, spec.shard_template), (GATEWAY, spec.gateway_template)):
        pdb: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {
                "name": f"{name}-{component}",
                "namespace": namespace,
                "labels": labels(name, component),
            },
            "spec": {
                "maxUnavailable": template.max_unavailable,
                "selector": {"matchLabels": selector(name, component)},
            },
        }
        if owner is not None:
            pdb["metadata"]["ownerReferences"] = [owner_reference(owner)]
        budgets.append(pdb)
    return budgets
