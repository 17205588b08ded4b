"""Run a :class:`Gateway` on an event loop in a background thread.

For tests and benchmarks that drive it with synchronous clients (confluent-kafka,
kafka-python) from the main thread.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any

from groupcoord.common.event_loop import new_event_loop
from groupcoord.gateway.server import Gateway


class BackgroundGateway:
    def __init__(self, upstream: tuple[str, int], port: int = 0, **kwargs: Any) -> None:
        self.loop = new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="gateway", daemon=True)
        self._kwargs = {"port": port, **kwargs}
        self._upstream = upstream
        self.gateway: Gateway | None = None

    def run(self, coro: Any, timeout: float = 30.0) -> Any:
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(timeout)

    def start(self) -> BackgroundGateway:
        self.thread.start()

        async def make() -> Gateway:
            gateway = Gateway(self._upstream, **self._kwargs)
            await gateway.start()
            return gateway

        self.gateway = self.run(make())
        return self

    @property
    def bootstrap(self) -> str:
        assert self.gateway is not None
        host, port = self.gateway.bootstrap_address
        return f"{host}:{port}"

    def stop(self) -> None:
        if self.gateway is not None:
            self.run(self.gateway.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def __enter__(self) -> BackgroundGateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
