"""Lease election rules: who may act, and when a dead leader's Lease may be taken over.

``decide`` is pure; :class:`LeaseElector` is exercised against a small in-memory Lease store
that enforces resourceVersion preconditions like the API server does (the kmock emulator does
not), so the "two candidates, one winner" case is really checked.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from groupcoord_operator.election import LeaseElector, decide, format_microtime
from groupcoord_operator.kube import KubeError

NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def lease(holder: str, renewed: dt.datetime, duration: int = 15) -> dict[str, Any]:
    return {
        "metadata": {"name": "l", "namespace": "ns", "resourceVersion": "7"},
        "spec": {
            "holderIdentity": holder,
            "renewTime": format_microtime(renewed),
            "leaseDurationSeconds": duration,
        },
    }


def test_decide():
    assert decide(None, "a", NOW) == "create"
    assert decide(lease("a", NOW), "a", NOW) == "renew"
    assert decide(lease("b", NOW - dt.timedelta(seconds=10)), "a", NOW) == "follow"
    assert decide(lease("b", NOW - dt.timedelta(seconds=16)), "a", NOW) == "takeover"
    assert decide(lease("", NOW), "a", NOW) == "takeover", "a released lease is free at once"


class LeaseStore:
    """API-server semantics for one Lease: create conflicts, patches check resourceVersion."""

    def __init__(self) -> None:
        self.obj: dict[str, Any] | None = None
        self.version = 0

    def get(self, path: str) -> dict[str, Any] | None:
        return None if self.obj is None else {**self.obj, "metadata": {**self.obj["metadata"]}}

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.obj is not None:
            raise KubeError(409, "AlreadyExists")
        return self._store(body)

    def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        assert self.obj is not None
        if body["metadata"].get("resourceVersion") != self.obj["metadata"]["resourceVersion"]:
            raise KubeError(409, "Conflict")
        return self._store({**self.obj, **body, "spec": {**self.obj["spec"], **body["spec"]}})

    def _store(self, body: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        self.obj = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}
        return self.obj


def elector(store: LeaseStore, identity: str) -> LeaseElector:
    return LeaseElector(store, "ns", "l", identity, lease_seconds=15)  # type: ignore[arg-type]


def test_one_leader_then_takeover_after_expiry():
    store = LeaseStore()
    a, b = elector(store, "a"), elector(store, "b")
    assert a.step(NOW) and a.is_leader()
    assert not b.step(NOW + dt.timedelta(seconds=5)) and not b.is_leader()
    assert a.step(NOW + dt.timedelta(seconds=5)), "renewal"
    # a stops renewing; b may take over only after the lease duration
    assert not b.step(NOW + dt.timedelta(seconds=19))
    assert b.step(NOW + dt.timedelta(seconds=21))
    assert store.obj["spec"]["holderIdentity"] == "b" and store.obj["spec"]["leaseTransitions"] == 1
    # a comes back: it reads b's live lease and steps down
    assert not a.step(NOW + dt.timedelta(seconds=22)) and not a.is_leader()


def test_concurrent_takeover_has_one_winner():
    """Both read the expired lease; the second write carries a stale resourceVersion and loses."""
    store = LeaseStore()
    store.create("", {"metadata": {"name": "l", "namespace": "ns"}, "spec": lease("dead", NOW)["spec"]})
    a, b = elector(store, "a"), elector(store, "b")
    later = NOW + dt.timedelta(seconds=30)
    read_by_b = store.get("")
    assert a.step(later)
    # b acts on what it read before a's write
    original_get = store.get
    store.get = lambda path: read_by_b  # type: ignore[method-assign]
    assert not b.step(later)
    store.get = original_get  # type: ignore[method-assign]
    assert store.obj["spec"]["holderIdentity"] == "a"
    assert a.is_leader() and not b.is_leader()


def test_a_leader_that_cannot_renew_stops_acting_before_the_lease_expires():
    store = LeaseStore()
    a = elector(store, "a")
    assert a.step(NOW)
    a._held_since = time.monotonic() - a.renew_deadline - 0.01  # last renewal too long ago
    assert not a.is_leader()
    assert a.renew_deadline < a.lease_seconds


def test_release_frees_the_lease_for_others():
    store = LeaseStore()
    a, b = elector(store, "a"), elector(store, "b")
    assert a.step(NOW)
    a.release()
    assert store.obj["spec"]["holderIdentity"] == ""
    assert b.step(NOW + dt.timedelta(seconds=1)), "no need to wait for expiry"


def test_an_unreachable_api_server_is_a_failed_call_the_elector_survives():
    """A real client against a port nobody listens on (an API server mid-upgrade): the call
    fails as a KubeError, so the elector's thread logs it and tries again, never dies."""
    import socket

    from groupcoord.common.kubernetes_api import KubernetesApi
    from groupcoord_operator.kube import Kube

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kube = Kube(KubernetesApi(f"http://127.0.0.1:{port}"))
    try:
        kube.get("/apis/coordination.k8s.io/v1/namespaces/ns/leases/l")
    except KubeError as exc:
        assert exc.status == 0 and "unreachable" in str(exc)
    else:
        raise AssertionError("a call to nobody succeeded")
    assert LeaseElector(kube, "ns", "l", "a", lease_seconds=15).step() is False
