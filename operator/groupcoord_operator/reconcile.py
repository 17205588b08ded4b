"""One level-triggered reconcile of a GroupCoordinator: read everything, decide, write the diff.

Every trigger (create/update/resume of the resource, a shard pod changing, the periodic
resync) runs the same :func:`reconcile`, under a per-resource lock, on freshly read state, so
it does not matter which event arrived first or whether an event was missed. Writes happen only
when something differs (idempotent), leadership is published *before* workloads change (a
shard being scaled away has already been replaced as leader, at a higher epoch, when its pod
goes), and an invalid spec never touches workloads or leadership: it only sets Degraded.
A changed shard pod template is rolled one shard at a time, each drained of its partitions
before its pod is replaced (:mod:`groupcoord_operator.rollout`).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from groupcoord.common.topic_replication import fit_replication
from groupcoord.controlplane.placement import Placement, PlacementError, place, placement_from_status
from groupcoord_operator import build, metrics, network, resource_status
from groupcoord_operator.health import FAILED, placement_candidates, shard_states, states_from_status
from groupcoord_operator.kafka_probe import broker_node_ids
from groupcoord_operator.kube import Kube, KubeError, collection_path, object_path
from groupcoord_operator.rollout import RolloutStep, plan_rollout
from groupcoord_operator.spec import Spec, SpecError, parse_spec

log = logging.getLogger(__name__)

_locks: dict[tuple[str, str], threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock_for(namespace: str, name: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault((namespace, name), threading.Lock())


def is_subset(desired: Any, actual: Any) -> bool:
    """True when every field we set already has that value (the server may add defaults)."""
    if isinstance(desired, Mapping):
        return isinstance(actual, Mapping) and all(is_subset(v, actual.get(k)) for k, v in desired.items())
    if isinstance(desired, list):
        return (
            isinstance(actual, list)
            and len(desired) == len(actual)
            and all(is_subset(d, a) for d, a in zip(desired, actual, strict=True))
        )
    return desired == actual


@dataclass
class Outcome:
    """What one reconcile did, for logs and tests."""

    status: dict[str, Any] | None
    changed_objects: list[str]
    status_written: bool


def _path(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return object_path(obj["kind"], meta["namespace"], meta["name"])


def _wanted(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the operator owns of ``obj``: the merge patch that makes an existing object it."""
    meta = obj["metadata"]
    wanted_meta = {"labels": meta.get("labels"), "ownerReferences": meta.get("ownerReferences")}
    return {"metadata": {k: v for k, v in wanted_meta.items() if v is not None}, "spec": obj["spec"]}


def differs(obj: Mapping[str, Any], current: Mapping[str, Any] | None) -> bool:
    """Whether :func:`apply` would write ``obj`` over ``current`` (absent, or not what the
    operator owns of it)."""
    return current is None or not is_subset(_wanted(obj), current)


def apply(kube: Kube, obj: Mapping[str, Any], current: Mapping[str, Any] | None) -> bool:
    """Create ``obj`` or merge-patch it when it differs from ``current`` (as read this
    reconcile); returns whether anything was written."""
    path = _path(obj)
    if current is None:
        kube.create(collection_path(obj["kind"], obj["metadata"]["namespace"]), obj)
        return True
    wanted = _wanted(obj)
    if is_subset(wanted, current):
        return False
    kube.merge_patch(path, wanted)
    return True


def prune_listener_services(
    kube: Kube, name: str, namespace: str, objects: list[dict[str, Any]], owner: Mapping[str, Any]
) -> list[str]:
    """Delete the Services of listeners the spec no longer lists: gateway Services this
    resource owns that the build did not make (a listener removed from ``gateway.listeners``)."""
    wanted = {o["metadata"]["name"] for o in objects if o["kind"] == "Service"}
    uid = (owner.get("metadata") or {}).get("uid")
    deleted = []
    for svc in kube.list(collection_path("Service", namespace), build.selector(name, build.GATEWAY)):
        meta = svc.get("metadata") or {}
        owned = any(ref.get("uid") == uid for ref in meta.get("ownerReferences") or ())
        if owned and meta.get("name") not in wanted:
            kube.delete(object_path("Service", namespace, meta["name"]))
            deleted.append(f"Service/{meta['name']} (deleted)")
    return deleted


def reconcile(
    kube: Kube, namespace: str, name: str, *, image: str | None = None, now: dt.datetime | None = None
) -> Outcome | None:
    """Bring one resource's workloads and status in line with its spec and its pods."""
    with _lock_for(namespace, name):
        return _reconcile(kube, namespace, name, image=image, now=now or dt.datetime.now(dt.UTC))


def _reconcile(
    kube: Kube, namespace: str, name: str, *, image: str | None, now: dt.datetime
) -> Outcome | None:
    path = object_path("GroupCoordinator", namespace, name)
    body = kube.get(path)
    if body is None or (body.get("metadata") or {}).get("deletionTimestamp"):
        metrics.forget(namespace, name)
        return None  # gone or going: owner references garbage-collect the workloads
    status = body.get("status") or {}
    generation = (body.get("metadata") or {}).get("generation")
    previous = placement_from_status(status.get("partitions"))
    previous_states = states_from_status(status)
    conditions = status.get("conditions")

    def write_status(new_status: dict[str, Any]) -> bool:
        if is_subset(new_status, status) and is_subset(status, new_status):
            return False
        # a merge patch keeps keys it does not name: name the ones that are gone as null
        gone = {key: None for key in status if key not in new_status}
        kube.merge_patch(f"{path}/status", {"status": {**new_status, **gone}})
        return True

    def status_for(
        placement: Any, states: Any, problem: tuple[str, str] | None, **more: Any
    ) -> dict[str, Any]:
        # conditions are read when called: after a status write they are the written ones
        return resource_status.build_status(
            placement=placement,
            shard_states=states,
            generation=generation,
            previous_conditions=conditions,
            now=now,
            problem=problem,
            **more,
        )

    if build.reconciliation_paused(body):
        paused = resource_status.build_paused_status(status, generation, now)
        return Outcome(paused, [], write_status(paused))

    try:
        spec = parse_spec(body.get("spec"), current_partitions=len(previous))
    except SpecError as exc:
        log.warning("%s/%s: invalid spec: %s", namespace, name, exc)
        new_status = status_for(previous, previous_states, ("InvalidSpec", str(exc)))
        # what runs is unchanged, so is what the status says about it (listeners, rollout...)
        new_status = {**{k: v for k, v in status.items() if k not in new_status}, **new_status}
        return Outcome(new_status, [], write_status(new_status))

    pods = kube.list(collection_path("Pod", namespace), build.selector(name, build.SHARD))
    sts_path = object_path("StatefulSet", namespace, f"{name}-shard")
    current_sts = kube.get(sts_path)
    busy = {a.leader for a in previous.values()} | {s for a in previous.values() for s in a.standbys}
    step = plan_rollout(
        spec.shards,
        current_sts,
        build.build_shard_statefulset(name, namespace, spec, body, image),
        pods,
        busy,
        (status.get("rollout") or {}).get("replacingShard"),
    )
    replacing = () if step.replacing is None else (step.replacing,)
    states = shard_states(spec.shards, pods, previous_states, replacing=replacing)
    candidates = placement_candidates(states, (a.leader for a in previous.values()))
    live = [s for s in candidates if s not in step.drain] or candidates  # one shard: nowhere to drain to
    placement, problem = _leadership(spec.partitions, live, previous, spec.standbys, states)
    moved = sorted(p for p, a in placement.items() if p in previous and previous[p].leader != a.leader)
    if moved:
        log.info("%s/%s: partitions %s change leader (live shards %s)", namespace, name, moved, live)

    metrics.export(namespace, name, spec.partitions, placement, states)
    observed, load_balancer_hosts = _observed(kube, name, namespace, spec, pods, step)

    objects = [
        build.build_shard_statefulset(name, namespace, spec, body, image, partition=step.partition),
        build.build_gateway_deployment(name, namespace, spec, body, image, load_balancer_hosts),
        *network.build_services(name, namespace, spec, body),
        *network.build_pod_disruption_budgets(name, namespace, spec, body),
        *network.build_network_policies(name, namespace, spec, body),
    ]
    # leadership first, so a shard about to be removed is already deposed when its pod stops;
    # and a status written before the workloads change says they are about to (Progressing),
    # never Ready with the old ones (kubectl wait --for=condition=Ready would return early)
    current = [kube.get(_path(obj)) for obj in objects]  # read once: for this status and for apply
    if not observed["rollout_pending"]:
        updating = [
            f"{o['kind']}/{o['metadata']['name']}"
            for o, existing in zip(objects, current, strict=True)
            if differs(o, existing)
        ]
        if updating:
            observed["rollout_pending"] = True
            observed["rollout_message"] = "updating " + ", ".join(updating)
    pre_status = status_for(placement, states, problem, **observed)
    written = write_status(pre_status)
    if written:
        status, conditions = pre_status, pre_status["conditions"]
    changed, rejected = _apply_objects(kube, name, namespace, objects, current, body)
    final = pre_status
    if rejected:
        problem = ("Rejected", "the API server refused: " + "; ".join(rejected))
        final = status_for(placement, states, problem, **observed)
        written = write_status(final) or written
    elif changed:
        log.info("%s/%s: updated %s", namespace, name, changed)
        final = status_for(placement, states, problem, **{**observed, "rollout_pending": True})
        written = write_status(final) or written
    return Outcome(final, changed, written)


def _leadership(
    partitions: int, live: list[int], previous: Placement, standbys: int, states: Mapping[int, str]
) -> tuple[Placement, tuple[str, str] | None]:
    """The placement over the live shards, or, with none live, the last one kept (nobody better
    exists) and the problem the status reports."""
    try:
        return place(partitions, live, previous, standbys), None
    except PlacementError:
        failed = sorted(s for s, st in states.items() if st == FAILED)
        return previous, (
            "NoLiveShard",
            f"no live shard to lead partitions (failed: {failed}); leadership left as it was",
        )


def _cluster_warning(spec: Spec, node_ids: Sequence[int] | None, replication: Any) -> tuple[str, str] | None:
    """What the status warns about the Kafka cluster behind: a state topic's replication clamped
    to the brokers there are, brokers a listener has no per-broker port for."""
    warnings = []
    if replication.clamped:
        warnings.append(("StateTopicReplicationClamped", replication.message))
    for listener in spec.listeners:
        beyond = [n for n in node_ids or () if n >= listener.broker_ports]
        if beyond:
            warnings.append(
                (
                    "TooFewBrokerPorts",
                    f"Kafka brokers with node ids {beyond} have no port among listener {listener.name}'s "
                    f"{listener.broker_ports} per-broker ports (its brokerPorts must exceed the largest node "
                    "id): its clients reach them only at a gateway pod's own address",
                )
            )
    return (warnings[0][0], "; ".join(m for _, m in warnings)) if warnings else None


def _apply_objects(
    kube: Kube,
    name: str,
    namespace: str,
    objects: list[dict[str, Any]],
    current: list[dict[str, Any] | None],
    owner: Mapping[str, Any],
) -> tuple[list[str], list[str]]:
    """Each built object applied over what the API server has (read once, ``current``), and the
    listener Services no longer built pruned: (what changed, what the API server refused)."""
    changed = []
    rejected = []
    for obj, existing in zip(objects, current, strict=True):
        try:
            if apply(kube, obj, existing):
                changed.append(f"{obj['kind']}/{obj['metadata']['name']}")
        except KubeError as exc:
            if exc.status not in (400, 403, 422):
                raise
            # the API server refused what the spec asks (e.g. an affinity it cannot parse), or
            # the operator's Role lacks a verb: the object stays as it was, and the resource
            # says why, where whoever can fix it looks (a log line alone goes unseen)
            rejected.append(f"{obj['kind']}/{obj['metadata']['name']}: {exc}")
    try:
        changed += prune_listener_services(kube, name, namespace, objects, owner)
    except KubeError as exc:
        if exc.status not in (403,):
            raise
        rejected.append(f"Service deletion: {exc}")
    return changed, rejected


def _observed(
    kube: Kube, name: str, namespace: str, spec: Spec, pods: list[dict[str, Any]], step: RolloutStep
) -> tuple[dict[str, Any], dict[str, str | None]]:
    """What the status reports besides leadership (listeners, replication, the scale
    subresource, the rollout), and each load-balanced listener's address for the gateway pods."""
    secured = bool(spec.tls.get("enabled") or spec.sasl)
    node_ids = broker_node_ids(spec.bootstrap_servers, secured=secured)
    brokers = len(node_ids) if node_ids else None
    replication = fit_replication(spec.replication_factor, spec.min_insync_replicas, brokers)
    warning = _cluster_warning(spec, node_ids, replication)
    gateway_pods = (
        kube.list(collection_path("Pod", namespace), build.selector(name, build.GATEWAY))
        if any(listener.type == "nodeport" for listener in spec.listeners)
        else []
    )
    listener_services = {
        listener.name: kube.get(
            object_path("Service", namespace, build.listener_service_name(name, spec, listener))
        )
        for listener in spec.listeners
        if listener.type == "loadbalancer"
    }
    load_balancer_hosts = {n: resource_status.load_balancer_host(svc) for n, svc in listener_services.items()}
    observed = {
        "warning": warning,
        "listeners": resource_status.build_listener_status(name, namespace, spec, gateway_pods, listener_services),
        "replicas": sum(1 for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")),
        "label_selector": build.label_selector_string(name, build.SHARD),
        "replication": replication,
        "kafka_brokers": brokers,
        "rollout_pending": step.pending,
        "rollout_message": step.message,
        "replacing_shard": step.replacing,
    }
    return observed, load_balancer_hosts
