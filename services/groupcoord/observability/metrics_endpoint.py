"""The ``/metrics`` HTTP endpoint Prometheus scrapes (one per shard worker and per gateway)."""

from __future__ import annotations

import threading
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, start_http_server


def serve_metrics(
    port: int, registry: CollectorRegistry | None = None, addr: str = "0.0.0.0"
) -> tuple[Any, threading.Thread]:
    """Serve ``/metrics`` on ``addr:port`` from a daemon thread, so a scrape never waits on the
    process's asyncio loop (port 0 picks a free port; read it from ``server.server_port``).
    Returns ``(server, thread)``; ``server.shutdown()`` stops it."""
    server, thread = start_http_server(port, addr=addr, registry=REGISTRY if registry is None else registry)
    return server, thread
