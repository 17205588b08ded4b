"""Shard health from pod status: which shards may lead partitions.

A shard is in one of three states:

* ``Starting`` — its pod has not been Ready yet (fresh install, scale-out). It keeps the
  partitions it already leads (on a fresh install every shard starts that way; taking them
  away would only churn), but a shard that leads nothing gets partitions only once it is Ready
  — on a scale-out the current, healthy leaders keep serving until the new shard can take over.
* ``Ready`` — its pod's Ready condition is True.
* ``Failed`` — it *was* Ready (or Failed) and now its pod is NotReady, terminating or gone, or
  its container is crash-looping, or the pod phase is Failed. Its partitions fail over to live
  shards with epoch + 1. The memory of "was Ready" lives in the resource status, so any
  operator replica reaches the same verdict.

When a Failed shard turns Ready again it takes back only what balance requires.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

STARTING, READY, FAILED = "Starting", "Ready", "Failed"
_ORDINAL = re.compile(r"-(\d+)$")
_CRASHING = {"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError"}


def pod_shard_id(pod: Mapping[str, Any]) -> int | None:
    """The shard id of a StatefulSet pod: the pod-index label, else the name's ordinal suffix."""
    meta = pod.get("metadata") or {}
    index = (meta.get("labels") or {}).get("apps.kubernetes.io/pod-index")
    if index is not None and str(index).isdigit():
        return int(index)
    m = _ORDINAL.search(meta.get("name") or "")
    return int(m.group(1)) if m else None


def pod_is_ready(pod: Mapping[str, Any]) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def pod_is_broken(pod: Mapping[str, Any]) -> bool:
    """Broken regardless of history: phase Failed or a container stuck in a crash/pull loop."""
    status = pod.get("status") or {}
    if status.get("phase") == "Failed":
        return True
    for cs in status.get("containerStatuses") or ():
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in _CRASHING:
            return True
    return False


def shard_states(
    shards: int,
    pods: Iterable[Mapping[str, Any]],
    previous: Mapping[int, str] | None = None,
    replacing: Iterable[int] = (),
) -> dict[int, str]:
    """State of shards ``0 .. shards-1`` given their pods and the states recorded last time.

    ``replacing``: shards the operator is replacing on purpose (a rolling update, after their
    partitions moved away); their pod being NotReady or gone is the replacement, not a failure,
    so they are Starting until the new pod is Ready.
    """
    previous = previous or {}
    replacing = set(replacing)
    by_id: dict[int, Mapping[str, Any]] = {}
    for pod in pods:
        sid = pod_shard_id(pod)
        if sid is not None and 0 <= sid < shards:
            by_id[sid] = pod
    states: dict[int, str] = {}
    for sid in range(shards):
        pod = by_id.get(sid)
        was_up = previous.get(sid) in (READY, FAILED)
        if pod is not None and pod_is_ready(pod):
            states[sid] = READY
        elif pod is not None and pod_is_broken(pod):
            states[sid] = FAILED
        elif sid in replacing:
            states[sid] = STARTING
        elif was_up:
            states[sid] = FAILED
        else:
            states[sid] = STARTING
    return states


def placement_candidates(states: Mapping[int, str], leaders: Iterable[int]) -> list[int]:
    """Shards that may lead: Ready ones, plus Starting ones that already lead or when none is Ready."""
    leading = set(leaders)
    any_ready = any(st == READY for st in states.values())
    return sorted(
        s for s, st in states.items() if st == READY or (st == STARTING and (s in leading or not any_ready))
    )


def states_from_status(status: Mapping[str, Any] | None) -> dict[int, str]:
    return {int(s["shard"]): str(s["state"]) for s in (status or {}).get("shards") or ()}
