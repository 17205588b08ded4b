"""One level-triggered reconcile of a GroupCoordinator: read everything, decide, write the diff.

Every trigger (create/update/resume of the resource, a shard pod changing, the periodic
resync) runs the same :func:`reconcile`, under a per-resource lock, on freshly read state, so
it does not matter which event arrived first or whether an event was missed. Writes happen only
when something differs (idempotent), leadership is published *before* workloads change (a
shard being scaled away has already been replaced as leader, at a higher epoch, when its pod
goes), and an invalid spec never touches workloads or leadership: it only sets Degraded.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from groupcoord.controlplane.placement import PlacementError, place, placement_from_status
from groupcoord_operator import build, metrics
from groupcoord_operator.health import FAILED, placement_candidates, shard_states, states_from_status
from groupcoord_operator.kube import Kube, collection_path, object_path
from groupcoord_operator.spec import SpecError, parse_spec

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


def apply(kube: Kube, obj: Mapping[str, Any]) -> bool:
    """Create ``obj`` or merge-patch it when it differs; returns whether anything was written."""
    meta = obj["metadata"]
    path = object_path(obj["kind"], meta["namespace"], meta["name"])
    current = kube.get(path)
    if current is None:
        kube.create(collection_path(obj["kind"], meta["namespace"]), obj)
        return True
    wanted = {"metadata": {"labels": meta.get("labels"), "ownerReferences": meta.get("ownerReferences")}}
    wanted["spec"] = obj["spec"]
    wanted["metadata"] = {k: v for k, v in wanted["metadata"].items() if v is not None}
    if is_subset(wanted, current):
        return False
    kube.merge_patch(path, wanted)
    return True


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
        kube.merge_patch(f"{path}/status", {"status": new_status})
        return True

    def status_for(
        placement: Any, states: Any, problem: tuple[str, str] | None, **more: Any
    ) -> dict[str, Any]:
        # conditions are read when called: after a status write they are the written ones
        return build.build_status(
            placement=placement,
            shard_states=states,
            generation=generation,
            previous_conditions=conditions,
            now=now,
            problem=problem,
            **more,
        )

    try:
        spec = parse_spec(body.get("spec"), current_partitions=len(previous))
    except SpecError as exc:
        log.warning("%s/%s: invalid spec: %s", namespace, name, exc)
        new_status = status_for(previous, previous_states, ("InvalidSpec", str(exc)))
        return Outcome(new_status, [], write_status(new_status))

    pods = kube.list(collection_path("Pod", namespace), build.selector(name, build.SHARD))
    states = shard_states(spec.shards, pods, previous_states)
    live = placement_candidates(states, (a.leader for a in previous.values()))
    problem: tuple[str, str] | None = None
    try:
        placement = place(spec.partitions, live, previous, spec.standbys)
    except PlacementError:
        # no live shard: keep the last leadership (nobody better exists) and say so
        failed = sorted(s for s, st in states.items() if st == FAILED)
        placement = previous
        problem = (
            "NoLiveShard",
            f"no live shard to lead partitions (failed: {failed}); leadership left as it was",
        )
    moved = sorted(p for p, a in placement.items() if p in previous and previous[p].leader != a.leader)
    if moved:
        log.info("%s/%s: partitions %s change leader (live shards %s)", namespace, name, moved, live)

    metrics.export(namespace, name, spec.partitions, placement, states)
    # leadership first, so a shard about to be removed is already deposed when its pod stops
    pre_status = status_for(placement, states, problem)
    written = write_status(pre_status)
    if written:
        status, conditions = pre_status, pre_status["conditions"]

    objects = [
        build.build_shard_statefulset(name, namespace, spec, body, image),
        build.build_gateway_deployment(name, namespace, spec, body, image),
        *build.build_services(name, namespace, spec, body),
    ]
    changed = [f"{o['kind']}/{o['metadata']['name']}" for o in objects if apply(kube, o)]
    final = pre_status
    if changed:
        log.info("%s/%s: updated %s", namespace, name, changed)
        final = status_for(placement, states, problem, rollout_pending=True)
        written = write_status(final) or written
    return Outcome(final, changed, written)
