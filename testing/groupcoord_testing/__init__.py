"""Test and benchmark harness: a local cluster on an event loop of its own, in a background
thread. Not used by any ``groupcoord`` command.

Tests and benchmarks drive the gateway with synchronous clients (confluent-kafka,
kafka-python, Kafka's Java tools) from the main thread, so the asyncio side runs beside them.
A source root of its own (``testing/``), outside the wheel: nothing a user installs needs it,
and :mod:`.apache_kafka` needs the jars ``scripts/test`` resolves from ``tests/apache_kafka/pom.xml``.
pytest puts ``testing/`` on ``sys.path`` (``pythonpath`` in pyproject.toml) and ``bench/run.py``
does the same, so both run it against the installed ``groupcoord``.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from concurrent.futures import Future
from typing import Any

from groupcoord.common.event_loop import new_event_loop
from groupcoord.common.partitioning import DEFAULT_STATE_TOPIC
from groupcoord.gateway.security.listener_security import ListenerSecurity
from groupcoord.gateway.transport.server import Gateway
from groupcoord.local_cluster import ClusterOptions, LocalCluster


def cluster_options(**changes: Any) -> ClusterOptions:
    """The options of a test's cluster, with ``changes``: any port, 8 partitions, no metrics,
    and unless told otherwise a state topic of its own. Two clusters on one state topic of one
    broker fence each other's leaders for good (each is a foreign writer to the other), as a
    test's cluster beside the session's once did to the rest of a CI run."""
    defaults: dict[str, Any] = {
        "port": 0,
        "partitions": 8,
        "metrics": False,
        "state_topic": f"{DEFAULT_STATE_TOPIC}_{uuid.uuid4().hex[:6]}",
    }
    return ClusterOptions(**{**defaults, **changes})


class BackgroundCluster:
    """A :class:`LocalCluster` (control plane, shard processes, gateway) in front of
    ``upstream``, or with :meth:`proxy` the gateway alone, started and stopped from any thread
    (a context manager)."""

    def __init__(self, upstream: tuple[str, int], options: ClusterOptions | None = None) -> None:
        self.options = options or cluster_options()
        self.upstream = upstream
        self.loop = new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="groupcoord-cluster", daemon=True)
        self.cluster: LocalCluster | None = None

    @classmethod
    def proxy(
        cls, upstream: tuple[str, int], listener_security: ListenerSecurity | None = None
    ) -> BackgroundCluster:
        """The gateway alone, as ``groupcoord up --no-coordinator`` runs it: every API,
        the group APIs included, forwarded to ``upstream``."""
        options = ClusterOptions(
            port=0, no_coordinator=True, metrics=False, listener_security=listener_security
        )
        return cls(upstream, options)

    def run(self, coro: Any, timeout: float = 60.0) -> Any:
        """Run ``coro`` on the cluster's loop and wait for its result."""
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(timeout)

    def start(self) -> BackgroundCluster:
        self.thread.start()

        async def make() -> LocalCluster:
            cluster = LocalCluster(self.options, self.upstream)
            await cluster.start()
            return cluster

        self.cluster = self.run(make(), timeout=120)
        return self

    @property
    def gateway(self) -> Gateway:
        assert self.cluster is not None and self.cluster.gateway is not None
        return self.cluster.gateway

    @property
    def bootstrap(self) -> str:
        host, port = self.gateway.bootstrap_address
        return f"{host}:{port}"

    def stop(self) -> None:
        if self.cluster is not None:
            self.run(self.cluster.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def __enter__(self) -> BackgroundCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
