"""The resource's ``status`` (leaders, listeners, conditions), as pure ``build_*`` functions.

Apart from :mod:`.build` (the objects the operator writes) because the status is what the
operator reports, not what it deploys: the reconcile reads the pods and Services it made and
writes this.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from groupcoord.common.topic_replication import Replication
from groupcoord.controlplane.placement import Placement, placement_to_status
from groupcoord_operator.build import PAUSE_RECONCILIATION, listener_service_name
from groupcoord_operator.spec import Spec


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


def load_balancer_host(service: Mapping[str, Any] | None) -> str | None:
    """The first ingress address (hostname preferred) the cloud gave a LoadBalancer Service."""
    for ingress in ((service or {}).get("status") or {}).get("loadBalancer", {}).get("ingress") or ():
        host = ingress.get("hostname") or ingress.get("ip")
        if host:
            return str(host)
    return None


def build_listener_status(
    name: str,
    namespace: str,
    spec: Spec,
    gateway_pods: Sequence[Mapping[str, Any]] = (),
    listener_services: Mapping[str, Mapping[str, Any] | None] | None = None,
) -> list[dict[str, Any]]:
    """``status.listeners`` as Strimzi writes it: per listener its bootstrap addresses.

    ``internal``: the listener Service's DNS name; ``nodeport``: the node IPs of Ready gateway
    pods (their hostPorts); ``loadbalancer``: the advertised host or the ingress of the
    listener's Service (``listener_services``, by listener name). Addresses not known yet (no
    Ready pod, no ingress) are left out rather than guessed.
    """
    entries = []
    for listener in spec.listeners:
        port = listener.port
        if listener.type == "internal":
            hosts = [f"{listener_service_name(name, spec, listener)}.{namespace}.svc"]
        elif listener.type == "nodeport":
            hosts = sorted(
                {
                    str(p["status"]["hostIP"])
                    for p in gateway_pods
                    if _pod_ready(p) and (p.get("status") or {}).get("hostIP")
                }
            )
        else:
            lb = listener.advertised_host or load_balancer_host((listener_services or {}).get(listener.name))
            hosts = [lb] if lb else []
        entry: dict[str, Any] = {"name": listener.name, "type": listener.type}
        if hosts:
            entry["addresses"] = [{"host": h, "port": port} for h in hosts]
            entry["bootstrapServers"] = ",".join(f"{h}:{port}" for h in hosts)
        entries.append(entry)
    return entries


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


def build_paused_status(
    status: Mapping[str, Any], generation: int | None, now: dt.datetime
) -> dict[str, Any]:
    """The status while reconciliation is paused: the last reconcile's, plus a
    ``ReconciliationPaused`` condition. ``observedGeneration`` stays the last one acted on, so
    nothing waiting for a spec change to be applied mistakes the pause for it."""
    previous = status.get("conditions") or ()
    if any(c.get("type") == "ReconciliationPaused" and c.get("status") == "True" for c in previous):
        # already said: a spec change meanwhile (a new generation) changes nothing, not even this
        return dict(status)
    conditions = [c for c in previous if c.get("type") != "ReconciliationPaused"]
    conditions.append(
        build_condition(
            "ReconciliationPaused",
            True,
            "AnnotationSet",
            f"{PAUSE_RECONCILIATION} is true: workloads and partition leadership are left as they are "
            "(a failed shard's partitions do not move) until the annotation is removed",
            generation,
            previous,
            now,
        )
    )
    return {**status, "conditions": conditions}


def build_status(
    *,
    placement: Placement,
    shard_states: Mapping[int, str],
    generation: int | None,
    previous_conditions: Sequence[Mapping[str, Any]] | None,
    now: dt.datetime,
    problem: tuple[str, str] | None = None,
    rollout_pending: bool = False,
    rollout_message: str = "",
    warning: tuple[str, str] | None = None,
    listeners: Sequence[Mapping[str, Any]] | None = None,
    replicas: int | None = None,
    label_selector: str | None = None,
    replication: Replication | None = None,
    kafka_brokers: int | None = None,
    replacing_shard: int | None = None,
) -> dict[str, Any]:
    """The full ``status`` the operator writes: leadership, shard health, conditions.

    ``problem`` — ``(reason, message)``: an invalid spec, or no live shard — makes the resource
    Degraded with that message; leadership stays as it was so a mistake in the spec never disrupts running groups.
    ``warning`` — ``(reason, message)``: something runs, but not as asked (e.g. the state
    topic's replication clamped to a small Kafka cluster): a ``Warning`` condition, as Strimzi's.
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
            else ((rollout_message or "rollout pending") if rollout_pending else "stable"),
            generation,
            previous_conditions,
            now,
        ),
        build_condition(
            "Degraded", degraded[0], degraded[1], degraded[2], generation, previous_conditions, now
        ),
    ]
    if warning is not None:
        conditions.append(
            build_condition("Warning", True, warning[0], warning[1], generation, previous_conditions, now)
        )
    status: dict[str, Any] = {
        "partitions": placement_to_status(placement),
        "shards": [
            {"shard": s, "state": shard_states[s], "leaders": leaders.get(s, 0)} for s in sorted(shard_states)
        ],
        "readyShards": ready,
        "conditions": conditions,
    }
    if replacing_shard is not None:
        status["rollout"] = {"replacingShard": replacing_shard}
    if replicas is not None:
        status["replicas"] = replicas
    if label_selector is not None:
        status["labelSelector"] = label_selector
    if listeners is not None:
        status["listeners"] = [dict(entry) for entry in listeners]
    if replication is not None:
        topic = {
            "replicationFactor": replication.replication_factor,
            "minInsyncReplicas": replication.min_insync_replicas,
        }
        if kafka_brokers is not None:
            topic["kafkaBrokers"] = kafka_brokers
        status["stateTopic"] = topic
    if generation is not None:
        status["observedGeneration"] = generation
    return status
