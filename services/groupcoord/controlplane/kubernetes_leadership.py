"""Leadership for shard and gateway processes, read from their GroupCoordinator's status.

``groupcoord shard`` / ``groupcoord gateway`` get ``--leadership kubernetes:<namespace>/<name>``;
this module turns that into placements. The operator is the only writer of
``status.partitions``; processes never guess: a shard starts leading a partition only when the
status says so (at the epoch it says), and a gateway routes a group to the shard the status
names. Beside :mod:`groupcoord.common.kubernetes_api` (its transport) it is the only Kubernetes code
outside ``operator/`` and needs only read access (get/list/watch on ``groupcoordinators``).

Usage (on the process's event loop; shard workers and gateways both follow this way)::

    source = KubernetesLeadership.from_ref("kubernetes:kafka/orders")
    await source.follow(on_placement)   # partition -> Assignment(leader, epoch, standbys)

The watch yields the current placement first, then every change; it re-lists after a dropped
stream or an API error (with a capped backoff), so a restart of the API server or an expired
resourceVersion costs at most a re-read, never a missed change.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from groupcoord.common.kubernetes_api import KubernetesApi, KubernetesApiError, load_config
from groupcoord.controlplane.placement import Assignment, placement_from_status

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "groupcoord.io", "v1alpha1", "groupcoordinators"
PREFIX = "kubernetes:"


def parse_ref(ref: str) -> tuple[str, str]:
    """``kubernetes:<namespace>/<name>`` → ``(namespace, name)``."""
    if not ref.startswith(PREFIX) or ref.count("/") != 1:
        raise ValueError(f"leadership reference must look like 'kubernetes:<namespace>/<name>', got {ref!r}")
    namespace, name = ref[len(PREFIX) :].split("/")
    if not namespace or not name:
        raise ValueError(f"leadership reference has an empty namespace or name: {ref!r}")
    return namespace, name


def placement_of(obj: Mapping[str, Any] | None) -> dict[int, Assignment]:
    """The placement a GroupCoordinator object publishes (empty before the operator's first pass)."""
    return placement_from_status(((obj or {}).get("status") or {}).get("partitions"))


class KubernetesLeadership:
    """Reads and watches one GroupCoordinator's ``status.partitions``."""

    def __init__(self, namespace: str, name: str, api: KubernetesApi | None = None) -> None:
        self.api = api or KubernetesApi(load_config())
        self.namespace = namespace
        self.name = name
        self._collection = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"

    @classmethod
    def from_ref(cls, ref: str, api: KubernetesApi | None = None) -> KubernetesLeadership:
        namespace, name = parse_ref(ref)
        return cls(namespace, name, api)

    def fetch(self) -> tuple[dict[int, Assignment], str | None]:
        """The current placement and the resourceVersion to watch from."""
        path = f"{self._collection}/{self.name}"
        status, body = self.api.request("GET", path, timeout=30)
        if status != 200:
            raise KubernetesApiError(status, f"GET {path}: {body[:300]!r}")
        obj = json.loads(body)
        return placement_of(obj), (obj.get("metadata") or {}).get("resourceVersion")

    def current(self) -> dict[int, Assignment]:
        return self.fetch()[0]

    def _events(self, resource_version: str | None, timeout_s: int) -> Iterator[dict[str, Any]]:
        query = [("watch", "true"), ("fieldSelector", f"metadata.name={self.name}")]
        query.append(("timeoutSeconds", str(timeout_s)))
        if resource_version:
            query.append(("resourceVersion", resource_version))
        for line in self.api.lines(self._collection, query, timeout=timeout_s + 10):
            yield json.loads(line)

    def watch(
        self, stop: threading.Event | None = None, *, timeout_s: int = 300, max_backoff_s: float = 10.0
    ) -> Iterator[dict[int, Assignment]]:
        """Yield the placement now and after every change, until ``stop`` is set."""
        stop = stop or threading.Event()
        last: dict[int, Assignment] | None = None
        backoff = 0.5
        while not stop.is_set():
            try:
                placement, version = self.fetch()
                if placement != last:
                    last = placement
                    yield placement
                backoff = 0.5
                for event in self._events(version, timeout_s):
                    if stop.is_set():
                        return
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        break  # e.g. 410 Gone: re-list from a fresh resourceVersion
                    if (obj.get("metadata") or {}).get("name") != self.name:
                        continue  # servers that ignore the field selector
                    placement = {} if event.get("type") == "DELETED" else placement_of(obj)
                    if placement != last:
                        last = placement
                        yield placement
            except Exception as exc:  # keep the process's view alive through API hiccups
                log.warning(
                    "leadership watch %s/%s: %s; retrying in %.1fs", self.namespace, self.name, exc, backoff
                )
                stop.wait(backoff)
                backoff = min(backoff * 2, max_backoff_s)

    async def follow(self, on_placement: Callable[[dict[int, Assignment]], None]) -> None:
        """Call ``on_placement`` on the running event loop with every placement :meth:`watch`
        yields, in order, until cancelled.

        The watch runs on a daemon thread of its own, not the loop's executor: it blocks in a
        long poll, and the executor would hold the process's exit until the poll times out
        (minutes)."""
        loop = asyncio.get_running_loop()
        stop = threading.Event()
        finished = loop.create_future()

        def watch() -> None:
            try:
                for placement in self.watch(stop):
                    loop.call_soon_threadsafe(on_placement, placement)
            finally:
                with contextlib.suppress(RuntimeError):  # the loop is gone
                    loop.call_soon_threadsafe(lambda: finished.done() or finished.set_result(None))

        threading.Thread(target=watch, daemon=True, name="leadership-watch").start()
        try:
            await finished
        finally:
            stop.set()
