"""``grpc.health.v1.Health`` on a shard process: what a kubelet's probes need to know.

The kubelet's gRPC probe calls ``grpc.health.v1.Health/Check`` on the pod's gRPC port (worker
0's) with the service name the probe gives. A shard process answers three names:

* ``""`` — **readiness**: SERVING only when the shard process *can lead partitions*, which
  here means, for every one of its worker processes:

  - its gRPC server is up (a control plane and the gateways can reach it),
  - its runtime has started: the state-log writer bootstrapped against the Kafka cluster
    holding the state topic (the supervisor created the topic before spawning the workers),
    so a partition given to it can be loaded and written,
  - it reaches that Kafka cluster *now*: a worker that has not had an answer from it for
    :data:`UPSTREAM_GRACE_S` (the worker's upstream watch, ``worker._watch_upstream``) cannot
    write the partitions it leads, however alive it is: it is a zombie leader on the upstream
    side, and its readiness says so, so that the operator moves its partitions to a shard that
    can write them (as Kafka's controller fences a broker cut off from it); ready again at the
    first answer,
  - its leadership source has answered: with ``--leadership kubernetes:<ns>/<name>`` the
    first read of the GroupCoordinator's status arrived, so a partition the operator places
    here will be taken up (the operator places partitions on Ready pods only); with
    ``--leadership local`` the control plane pushes leadership over ShardControl, which is
    served from the moment the runtime started,
  - it is not draining (SIGTERM received).

  NOT_SERVING while starting and from the moment the process is asked to stop, so the
  operator moves the partitions away before the pod goes (see ``--drain-timeout``).
  Worker 0 answers for the whole process: it asks every other worker for
  :data:`WORKER_SERVICE` once a second and is ready only if all of them are.
* :data:`LIVENESS_SERVICE` — **liveness**: the process is not wedged. Answering at all means
  worker 0's event loop runs (the aio servicer runs on it); worker 0 reports NOT_SERVING once
  another worker has not answered its health check for ``wedged_after_s``. A slow or absent
  Kafka cluster never makes a shard "not alive" (restarting it would not help): that is
  readiness.
* :data:`WORKER_SERVICE` — this worker process alone (what worker 0 asks its peers).

Status changes go through grpcio-health-checking's ``HealthServicer``, so ``Watch`` works too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from groupcoord.common import internal_tls
from groupcoord.common.internal_tls import InternalTls

log = logging.getLogger(__name__)

# Without an answer from the state topic's Kafka cluster for this long, a worker is not ready.
UPSTREAM_GRACE_S = 10.0
READINESS_SERVICE = ""
LIVENESS_SERVICE = "liveness"
WORKER_SERVICE = "groupcoord.worker"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class ShardHealth:
    """The health statuses one worker process serves, and (on worker 0) its peers' view."""

    def __init__(
        self,
        *,
        worker: int,
        workers: int,
        peer_host: str,
        base_port: int,
        needs_leadership_source: bool,
        poll_s: float = 1.0,
        wedged_after_s: float = 30.0,
        tls: InternalTls | None = None,
    ) -> None:
        self.worker = worker
        self.workers = workers
        self.servicer = health.aio.HealthServicer()
        self.started = False  # runtime started: the state log is writable
        self.upstream_reachable = True  # the state topic's Kafka cluster answered lately
        self.leadership_synced = not needs_leadership_source
        self.draining = False
        self._peer_host = peer_host
        self._base_port = base_port
        self._poll_s = poll_s
        self._wedged_after_s = wedged_after_s
        self._peers_ready: dict[int, bool] = {}
        self._peers_seen: dict[int, float] = {}
        self._channels: dict[int, grpc.aio.Channel] = {}
        self._task: asyncio.Task[None] | None = None
        self._tls = tls  # the shard's own certificate, to ask its peers

    def add_to(self, server: grpc.aio.Server) -> None:
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, server)

    async def start(self) -> None:
        """Serve NOT_SERVING for readiness (the aio servicer starts with "" SERVING) and
        SERVING for liveness; call before the gRPC server starts."""
        await self.servicer.set(READINESS_SERVICE, NOT_SERVING)
        await self.servicer.set(WORKER_SERVICE, NOT_SERVING)
        await self.servicer.set(LIVENESS_SERVICE, SERVING)
        now = time.monotonic()
        self._peers_seen = {w: now for w in range(1, self.workers)} if self.worker == 0 else {}
        self._task = asyncio.create_task(self._follow())

    def worker_ready(self) -> bool:
        return self.started and self.upstream_reachable and self.leadership_synced and not self.draining

    async def set_upstream_reachable(self, reachable: bool) -> None:
        """Whether the state topic's Kafka cluster answers this worker (see the module docstring)."""
        if reachable != self.upstream_reachable:
            self.upstream_reachable = reachable
            await self._publish()

    async def mark_started(self) -> None:
        self.started = True
        await self._publish()

    async def mark_leadership_synced(self) -> None:
        if not self.leadership_synced:
            self.leadership_synced = True
            await self._publish()

    async def drain(self) -> None:
        """Stop being ready (for good): the process is going away."""
        self.draining = True
        await self._publish()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for channel in self._channels.values():
            await channel.close()

    async def _publish(self) -> None:
        mine = self.worker_ready()
        ready = mine and all(self._peers_ready.get(w, False) for w in self._peers_seen)
        await self.servicer.set(WORKER_SERVICE, SERVING if mine else NOT_SERVING)
        await self.servicer.set(READINESS_SERVICE, SERVING if ready else NOT_SERVING)
        now = time.monotonic()
        wedged = [w for w, seen in self._peers_seen.items() if now - seen > self._wedged_after_s]
        await self.servicer.set(LIVENESS_SERVICE, NOT_SERVING if wedged else SERVING)

    async def _ask(self, worker: int) -> None:
        channel = self._channels.get(worker)
        if channel is None:
            # a connection of its own (internal_tls.channel): a peer still starting puts only
            # this channel into reconnect backoff, not ShardControl's fan-out channel to it
            channel = self._channels[worker] = internal_tls.channel(
                self._tls, f"{self._peer_host}:{self._base_port + worker}"
            )
        try:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=WORKER_SERVICE), timeout=max(self._poll_s, 1.0)
            )
        except grpc.aio.AioRpcError as exc:
            # A slow answer is a busy worker, not an unready one (liveness watches for wedged
            # ones): readiness flapping under load would make the operator fail partitions over.
            if exc.code() is not grpc.StatusCode.DEADLINE_EXCEEDED:
                self._peers_ready[worker] = False
            return
        self._peers_seen[worker] = time.monotonic()
        self._peers_ready[worker] = reply.status == SERVING

    async def _follow(self) -> None:
        while True:
            try:
                await asyncio.gather(*(self._ask(w) for w in self._peers_seen))
                await self._publish()
            except asyncio.CancelledError:
                raise
            except Exception:  # health must keep answering whatever happens here
                log.exception("health check round failed")
            await asyncio.sleep(self._poll_s)
