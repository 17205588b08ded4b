"""A gateway of several processes on the same ports, so that it scales with cores.

One Python process serves one event loop: at saturation the gateway's loop is the busiest on
the heartbeat path (docs/performance.md). ``groupcoord up --gateway-processes N`` runs N
gateway processes behind one address: each binds the client ports with ``SO_REUSEPORT``
(:class:`~groupcoord.gateway.proxy.listeners.BrokerListeners`) and the kernel spreads new
connections over them. In Kubernetes the same is a gateway pod per core (``gateway.replicas``).

The first process supervises the others (:class:`GatewayProcesses`): it starts them, starts
one that dies again, and serves their metrics with its own, labelled ``gateway_process``
(:class:`~groupcoord.observability.worker_metrics.ProcessExpositions`), as a shard process
serves its workers'. Under ``groupcoord up`` (:func:`run_process`) it also sends each the
shards' layout whenever the control plane publishes one (they have no control plane of their
own). ``groupcoord gateway --processes N`` runs N copies of the whole gateway instead
(``groupcoord.gateway.command``), each following the GroupCoordinator resource itself, as N
gateway pods would. A process holds only per-connection state (sessions, share sessions,
SASL), so a client is served whole by the process its connection reached. Each process
applies the connection limits on its own, as each gateway pod does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import multiprocessing
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from prometheus_client import REGISTRY

from groupcoord.gateway.assembly import GatewayOptions, build_gateway
from groupcoord.gateway.groups.leadership import LeadershipTable, ShardEndpoint
from groupcoord.observability.worker_metrics import ProcessExpositions

log = logging.getLogger(__name__)

PROCESS_LABEL = "gateway_process"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0

Layout = tuple[dict[int, tuple[int, int]], dict[int, ShardEndpoint]]


@dataclass(frozen=True)
class ProcessSpec:
    """What a further gateway process is started with (pickled to a spawned process).

    ``options`` builds its :class:`GatewayOptions` in the process (a module-level function or a
    ``functools.partial`` of one: TLS contexts and ACL policies are made there, not pickled)."""

    options: Callable[[], GatewayOptions]
    partitions: int  # the state topic's (0: no coordinator, a plain proxy)
    metrics: bool
    log_level: str = "WARNING"
    log_format: str = "text"  # the command's --log-format: text or json lines


def picklable_arguments(arguments: argparse.Namespace) -> argparse.Namespace:
    """A command's flags for a spawned process: without the command line's own entries
    (``_module``: a module, not picklable)."""
    return argparse.Namespace(**{k: v for k, v in vars(arguments).items() if not k.startswith("_")})


def follow_supervisor(
    pipe: Connection, metrics_port: int, stop: asyncio.Event, on_message: Callable[[Layout], None] | None = None
) -> None:
    """The further process's side of the pipe, once it serves: tell the supervisor so (with
    the port of its metrics, 0: none), then hand each message to ``on_message`` from a thread
    of its own, and set ``stop`` when the pipe ends (the supervisor stopped or died), so a
    further process never outlives the one that started it."""
    loop = asyncio.get_running_loop()
    pipe.send(metrics_port)  # ready

    def follow() -> None:
        with contextlib.suppress(EOFError, OSError):
            while True:
                message = pipe.recv()
                if on_message is not None:
                    on_message(message)
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=follow, name="gateway-supervisor", daemon=True).start()


def run_process(spec: ProcessSpec, conn: Connection) -> None:
    """A further gateway process: serves until its supervisor closes the pipe or a signal."""
    from groupcoord.common.event_loop import new_event_loop  # noqa: PLC0415
    from groupcoord.common.process_logging import configure_logging  # noqa: PLC0415 - the spawned process's

    configure_logging(spec.log_level, spec.log_format)
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(_serve(spec, conn))


async def _serve(spec: ProcessSpec, conn: Connection) -> None:
    from groupcoord.common.event_loop import stop_on_signals  # noqa: PLC0415
    from groupcoord.common.heap import freeze_startup_objects  # noqa: PLC0415

    stop = stop_on_signals()
    table = LeadershipTable(spec.partitions) if spec.partitions else None

    def apply_layout(message: Layout) -> None:
        if table is not None:
            leaders, shards = message
            table.update(leaders, shards)

    options = spec.options()
    gateway = await build_gateway(options, table)
    metrics_port = 0
    server = None
    if spec.metrics:
        from groupcoord.observability.metrics_endpoint import serve_metrics  # noqa: PLC0415

        server, _ = serve_metrics(0, addr="127.0.0.1")
        metrics_port = server.server_port
    try:
        await gateway.start()
        freeze_startup_objects()
        follow_supervisor(conn, metrics_port, stop, apply_layout)
        await stop.wait()
    finally:
        await gateway.stop()
        if server is not None:
            server.shutdown()


class GatewayProcesses:
    """The further processes of a gateway, seen from the first (which serves as well).

    A process that dies is started again (its clients meanwhile reconnect to the port, which
    the living processes still serve), as a kubelet restarts a gateway pod's container."""

    def __init__(self, count: int, run: Callable[[Connection], None], *, metrics: bool) -> None:
        """``count`` further processes, each ``run(pipe)`` in a spawned interpreter (a picklable
        callable: :func:`run_process` with its spec, or the gateway command's). ``run`` sends
        the port of its metrics (0: none) through the pipe once it serves, takes layouts from
        it if it has no source of its own, and stops when the pipe closes. With ``metrics``
        their series join this process's registry from :meth:`start` to :meth:`stop`."""
        self.count = count
        self.run = run
        self.metrics = (
            ProcessExpositions(
                PROCESS_LABEL,
                "groupcoord_gateway_process_up",
                "Whether the further gateway process's metrics were read in this scrape (1) or not (0).",
            )
            if metrics
            else None
        )
        self.restarts = 0
        self._processes: dict[int, tuple[BaseProcess, Connection]] = {}
        self._layout: Layout | None = None
        self._lock = threading.Lock()
        self._watching: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self.metrics is not None:
            REGISTRY.register(self.metrics)
        for index in range(1, self.count + 1):
            self._spawn(index)
        for index in range(1, self.count + 1):
            await self._ready(index)
        self._watching = asyncio.create_task(self._watch(), name="gateway-processes")

    def _spawn(self, index: int) -> None:
        context = multiprocessing.get_context("spawn")  # never fork a process with threads and a loop
        ours, theirs = context.Pipe()
        process = context.Process(target=self.run, args=(theirs,), name=f"gateway-{index}", daemon=True)
        process.start()
        theirs.close()
        with self._lock:
            self._processes[index] = (process, ours)

    async def _ready(self, index: int) -> None:
        """Wait for process ``index`` to serve; then tell it the layout and learn its metrics port."""
        process, conn = self._processes[index]
        if not await asyncio.to_thread(conn.poll, READY_TIMEOUT_S):
            raise RuntimeError(f"gateway process {index} did not start in {READY_TIMEOUT_S:.0f} s")
        try:
            port = conn.recv()
        except EOFError:
            raise RuntimeError(f"gateway process {index} exited at start (code {process.exitcode})") from None
        if self.metrics is not None and port:
            self.metrics.set_port(index, port)
        with self._lock:
            if self._layout is not None:
                self._send(conn, self._layout)

    async def _watch(self, every_s: float = 1.0) -> None:
        while True:
            await asyncio.sleep(every_s)
            for index, (process, conn) in list(self._processes.items()):
                if process.is_alive():
                    continue
                log.warning("gateway process %d exited with %s; starting it again", index, process.exitcode)
                conn.close()
                self.restarts += 1
                try:
                    self._spawn(index)
                    await self._ready(index)
                except (OSError, RuntimeError) as exc:  # tried again at the next look
                    log.error("gateway process %d did not start again: %s", index, exc)

    def publish(self, leaders: dict[int, tuple[int, int]], shards: dict[int, ShardEndpoint]) -> None:
        """A new layout of the shards, for every process (from any thread)."""
        with self._lock:
            self._layout = (dict(leaders), dict(shards))
            for _process, conn in self._processes.values():
                self._send(conn, self._layout)

    @staticmethod
    def _send(conn: Connection, layout: Layout) -> None:
        with contextlib.suppress(OSError):  # a process that died: its clients reconnect to the others
            conn.send(layout)

    async def stop(self) -> None:
        """Close the pipes (each process stops its gateway and exits), then wait for them."""
        if self._watching is not None:
            self._watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watching
        with self._lock:
            processes, self._processes = list(self._processes.values()), {}
        for _process, conn in processes:
            conn.close()
        for process, _conn in processes:
            await asyncio.to_thread(process.join, STOP_TIMEOUT_S)
            if process.is_alive():
                process.kill()
                await asyncio.to_thread(process.join, STOP_TIMEOUT_S)
        if self.metrics is not None:
            with contextlib.suppress(KeyError):  # never registered: start() did not get that far
                REGISTRY.unregister(self.metrics)
