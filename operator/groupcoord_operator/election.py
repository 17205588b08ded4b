"""Leader election on a ``coordination.k8s.io/v1`` Lease, so only one operator replica acts.

kopf's own peering is not enough: peers of equal priority freeze *each other*, so two
replicas with the same settings both stop. Here the classic client-go scheme is used instead:
the holder renews ``renewTime`` every ``renew_seconds``; anyone may take the Lease over once
``renewTime + leaseDurationSeconds`` has passed; every write carries the ``resourceVersion``
it read, so two candidates cannot both win (the loser gets 409). A leader that cannot renew
stops acting after ``renew_deadline`` (< lease duration), i.e. before anyone else may take
over — there is never a moment with two acting leaders, as long as clocks tick at similar rates.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from groupcoord_operator.kube import Kube, KubeError, collection_path, object_path

log = logging.getLogger(__name__)

MICROTIME = "%Y-%m-%dT%H:%M:%S.%fZ"


def format_microtime(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime(MICROTIME)


def parse_microtime(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    text = text.replace("Z", "+00:00")
    return dt.datetime.fromisoformat(text).astimezone(dt.UTC)


def decide(lease: Mapping[str, Any] | None, identity: str, now: dt.datetime) -> str:
    """What a candidate should do with the Lease it just read.

    ``create`` (no Lease yet), ``renew`` (it is ours), ``takeover`` (expired or released) or
    ``follow`` (someone else holds a live Lease). Pure, so the rules are unit-testable.
    """
    if lease is None:
        return "create"
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    if holder == identity:
        return "renew"
    if not holder:
        return "takeover"
    renewed = parse_microtime(spec.get("renewTime")) or parse_microtime(spec.get("acquireTime"))
    duration = int(spec.get("leaseDurationSeconds") or 0)
    if renewed is None or renewed + dt.timedelta(seconds=duration) < now:
        return "takeover"
    return "follow"


class LeaseElector:
    """Keeps trying to hold the Lease in a background thread; ask :meth:`is_leader` before acting."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_seconds: int = 15,
        renew_seconds: float = 5.0,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.renew_seconds = renew_seconds
        # stop acting well before the lease can be taken over by someone else
        self.renew_deadline = lease_seconds * 2 / 3
        self._held_since: float | None = None  # monotonic time of the last successful write
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def is_leader(self) -> bool:
        held = self._held_since
        return held is not None and time.monotonic() - held < self.renew_deadline

    def _lease_body(self, now: dt.datetime, previous: Mapping[str, Any] | None, takeover: bool) -> dict:
        spec = dict((previous or {}).get("spec") or {})
        if takeover or previous is None:
            spec["acquireTime"] = format_microtime(now)
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if previous else 0)
        spec.update(
            {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self.lease_seconds,
                "renewTime": format_microtime(now),
            }
        )
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if previous is not None:
            meta["resourceVersion"] = previous["metadata"].get("resourceVersion")
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}

    def step(self, now: dt.datetime | None = None) -> bool:
        """One read-decide-write round; returns whether this replica holds the Lease now."""
        now = now or dt.datetime.now(dt.UTC)
        started = time.monotonic()
        path = object_path("Lease", self.namespace, self.name)
        try:
            lease = self.kube.get(path)
            action = decide(lease, self.identity, now)
            if action == "create":
                self.kube.create(collection_path("Lease", self.namespace), self._lease_body(now, None, True))
            elif action in ("renew", "takeover"):
                # a merge patch carrying the resourceVersion read is conditional: 409 if changed
                self.kube.merge_patch(path, self._lease_body(now, lease, action == "takeover"))
                if action == "takeover":
                    holder = (lease or {}).get("spec", {}).get("holderIdentity")
                    log.info("took over lease %s/%s from %r", self.namespace, self.name, holder)
            else:
                if self._held_since is not None:
                    log.warning("lost lease %s/%s", self.namespace, self.name)
                self._held_since = None
                return False
        except KubeError as exc:
            if exc.status == 409:  # someone else wrote first
                self._held_since = None
                return False
            log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            return self.is_leader()
        if self._held_since is None:
            log.info("leading as %s (lease %s/%s)", self.identity, self.namespace, self.name)
        self._held_since = started
        return True

    def release(self) -> None:
        """Hand the Lease back on shutdown so another replica need not wait for it to expire."""
        if self._held_since is None:
            return
        self._held_since = None
        path = object_path("Lease", self.namespace, self.name)
        try:
            lease = self.kube.get(path)
            if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                rv = lease["metadata"].get("resourceVersion")
                self.kube.merge_patch(
                    path, {"metadata": {"resourceVersion": rv}, "spec": {"holderIdentity": ""}}
                )
        except KubeError as exc:
            log.warning("could not release lease: %s", exc)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.step()
            self._stop.wait(self.renew_seconds)
        self.release()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="lease-elector", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
