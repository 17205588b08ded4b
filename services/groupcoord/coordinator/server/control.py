"""ShardControl on a worker: leadership pushed by a control plane, status, and ping.

Worker 0 of a shard process is the one address a control plane knows; it fans leadership and
status requests out to the shard process's other workers (``base port + worker index``).
"""

from __future__ import annotations

import asyncio

import grpc

from groupcoord.common import internal_tls
from groupcoord.common.internal_tls import InternalTls
from groupcoord.coordinator.runtime.partition_state import PartitionState
from groupcoord.coordinator.runtime.worker_runtime import WorkerRuntime
from groupcoord.coordinator.server.health import ShardHealth
from groupcoord.rpc.v1 import shard_control_pb2 as sc
from groupcoord.rpc.v1 import shard_control_pb2_grpc as sc_grpc

_STATES = {
    PartitionState.LOADING: sc.PARTITION_STATE_LOADING,
    PartitionState.ACTIVE: sc.PARTITION_STATE_ACTIVE,
    PartitionState.FAILED: sc.PARTITION_STATE_FAILED,
    PartitionState.STANDBY: sc.PARTITION_STATE_STANDBY,
    PartitionState.STOPPED: sc.PARTITION_STATE_UNSPECIFIED,
}


class ShardControlServicer(sc_grpc.ShardControlServicer):
    """Leadership pushed by a control plane. Worker 0 fans out to the other workers.

    Until the worker's runtime has started (``health.started``) every call is refused with
    UNAVAILABLE: a control plane that pings a starting shard must not push it leadership it
    cannot take up yet (the gRPC server starts early so health probes get an answer).

    ``serves_leadership`` is false when leadership comes from the GroupCoordinator resource's
    status (Kubernetes): then SetLeadership is refused whoever calls it. A control plane's
    push is the only other source of epochs, and an epoch nobody placed (one call with
    2^31-1) would become the partition's highest fence marker and fence every later leader."""

    def __init__(
        self,
        runtime: WorkerRuntime,
        host: str,
        base_port: int,
        health: ShardHealth | None = None,
        state_topic_problems: tuple[str, ...] = (),
        *,
        tls: InternalTls | None = None,
        serves_leadership: bool = True,
    ) -> None:
        self.runtime = runtime
        #: reported by Status (``groupcoord status`` prints them)
        self.state_topic_problems = state_topic_problems
        self.host = host
        self.base_port = base_port
        self.health = health
        self.tls = tls  # the shard's own certificate, to forward to its peers
        self.serves_leadership = serves_leadership
        self._peers: dict[int, sc_grpc.ShardControlStub] = {}

    def _peer(self, worker: int) -> sc_grpc.ShardControlStub:
        stub = self._peers.get(worker)
        if stub is None:
            channel = internal_tls.channel(self.tls, f"{self.host}:{self.base_port + worker}")
            stub = self._peers[worker] = sc_grpc.ShardControlStub(channel)
        return stub

    def _others(self, forwarded: bool) -> list[int]:
        if forwarded or self.runtime.worker != 0:
            return []
        return list(range(1, self.runtime.workers))

    async def _check_started(self, context: grpc.aio.ServicerContext) -> None:
        if self.health is not None and not self.health.started:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "shard worker is starting")

    async def SetLeadership(
        self, request: sc.SetLeadershipRequest, context: grpc.aio.ServicerContext
    ) -> sc.SetLeadershipResponse:
        if not self.serves_leadership:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                "leadership comes from the GroupCoordinator status: SetLeadership is not served",
            )
        await self._check_started(context)
        leaders = {pe.partition: pe.epoch for pe in request.leaders}
        standbys = set(request.standbys) - set(leaders)
        self.runtime.apply_leadership(leaders, standbys)
        fwd = sc.SetLeadershipRequest(leaders=request.leaders, standbys=request.standbys, forwarded=True)
        await asyncio.gather(
            *(self._peer(w).SetLeadership(fwd, timeout=10) for w in self._others(request.forwarded))
        )
        return sc.SetLeadershipResponse()

    async def Status(self, request: sc.StatusRequest, context: grpc.aio.ServicerContext) -> sc.StatusResponse:
        await self._check_started(context)
        out = sc.StatusResponse(
            shard_id=self.runtime.shard_id, state_topic_problems=self.state_topic_problems
        )
        for info in self.runtime.status():
            out.partitions.add(
                partition=info.partition,
                state=_STATES[info.state],
                epoch=info.epoch,
                worker=self.runtime.worker,
                group_counts=info.group_counts,
                load_time_ms=info.load_time_ms or 0,
                queue_size=info.queue_size,
                error=info.error or "",
            )
        others = await asyncio.gather(
            *(
                self._peer(w).Status(sc.StatusRequest(forwarded=True), timeout=10)
                for w in self._others(request.forwarded)
            )
        )
        for o in others:
            out.partitions.extend(o.partitions)
        out.partitions.sort(key=lambda p: p.partition)
        return out

    async def Ping(
        self, request: sc.ShardPingRequest, context: grpc.aio.ServicerContext
    ) -> sc.ShardPingResponse:
        await self._check_started(context)
        return sc.ShardPingResponse(
            shard_id=self.runtime.shard_id, worker=self.runtime.worker, workers=self.runtime.workers
        )
