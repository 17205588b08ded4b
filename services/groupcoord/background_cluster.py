"""Run a :class:`LocalCluster` on an event loop in a background thread.

For tests and benchmarks that drive the whole cluster (shards, control plane, gateway) with
synchronous clients from the main thread.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any

from groupcoord.common.event_loop import new_event_loop
from groupcoord.local_cluster import ClusterOptions, LocalCluster


class BackgroundCluster:
    def __init__(self, upstream: tuple[str, int], options: ClusterOptions | None = None) -> None:
        self.options = options or ClusterOptions(port=0, partitions=8, metrics=False)
        self.upstream = upstream
        self.loop = new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="groupcoord-cluster", daemon=True)
        self.cluster: LocalCluster | None = None

    def run(self, coro: Any, timeout: float = 60.0) -> Any:
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
    def bootstrap(self) -> str:
        assert self.cluster is not None
        host, port = self.cluster.gateway.bootstrap_address
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
