"""The asyncio event loop of every groupcoord process, and how such a process learns to stop."""

from __future__ import annotations

import asyncio
import contextlib
import signal


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop where installed: it roughly halves the per-hop cost of the proxy path and gives
    shard workers ~1.5x heartbeat throughput (bench/e2e_heartbeat.py)."""
    try:
        import uvloop  # noqa: PLC0415
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM (Ctrl-C, a pod's termination): each process then stops
    what it started and exits cleanly. Call on the running loop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):  # no signal handlers on this platform
            loop.add_signal_handler(sig, stop.set)
    return stop
