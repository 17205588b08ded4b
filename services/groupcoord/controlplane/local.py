"""The in-process control plane of ``groupcoord up``: shard processes, placement, failover.

It does on one machine what the Kubernetes operator does in a cluster, with the same pure
placement function (:func:`groupcoord.controlplane.placement.place`):

* starts ``shards`` shard processes (``groupcoord shard``, ``threads`` workers each);
* places the state-topic partitions on the live shards and pushes each shard its role with
  ``ShardControl.SetLeadership`` — resignations first, then new leaders with epoch + 1, so
  two shards never lead one partition at once (fencing covers the rest);
* pings the shards; a shard that died or stopped answering loses its partitions to the live
  shards (failover), is restarted, and gets its share back once it answers again;
* publishes every placement to the gateway (``on_placement``) and to a state file that
  ``groupcoord status`` reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from groupcoord.common import internal_tls
from groupcoord.common.internal_tls import InternalTls
from groupcoord.controlplane.placement import Assignment, place
from groupcoord.embedded_broker import can_bind, free_port, stop_process_group
from groupcoord.observability.consumer_lag import DEFAULT_INTERVAL_S as DEFAULT_LAG_INTERVAL_S
from groupcoord.observability.metric_samples import DEFAULT_INTERVAL_S as DEFAULT_SAMPLES_INTERVAL_S
from groupcoord.rpc.v1 import shard_control_pb2 as sc
from groupcoord.rpc.v1 import shard_control_pb2_grpc as sc_grpc

log = logging.getLogger(__name__)
PlacementListener = Callable[[dict[int, Assignment], dict[int, "ShardProcess"]], None]


def free_port_block(count: int, host: str = "127.0.0.1") -> int:
    """A base port with ``count`` consecutive free ports (workers listen on base + i)."""
    for _ in range(100):
        base = free_port(host)
        if base + count >= 65535:
            continue
        if all(can_bind(host, port) for port in range(base + 1, base + count)):
            return base
    raise RuntimeError(f"no block of {count} free ports")


@dataclass
class ShardProcess:
    shard_id: int
    host: str
    grpc_port: int
    metrics_port: int
    threads: int
    process: subprocess.Popen[bytes] | None = None
    misses: int = 0
    alive: bool = False
    restarts: int = 0
    workers: int = 0  # worker processes the shard itself reports (0: not known yet)
    restarting: bool = False  # being replaced on purpose (set_threads): the watcher keeps off
    channel: grpc.aio.Channel | None = field(default=None, repr=False)
    tls: InternalTls | None = field(default=None, repr=False)  # the control plane's certificate

    def _channel(self) -> grpc.aio.Channel:
        if self.channel is None:
            self.channel = internal_tls.channel(self.tls, f"{self.host}:{self.grpc_port}")
        return self.channel

    def stub(self) -> sc_grpc.ShardControlStub:
        return sc_grpc.ShardControlStub(self._channel())

    def health_stub(self) -> health_pb2_grpc.HealthStub:
        return health_pb2_grpc.HealthStub(self._channel())

    async def reset_channel(self) -> None:
        channel, self.channel = self.channel, None
        if channel is not None:
            await channel.close()


@dataclass
class LocalControlPlane:
    kafka: str
    shards: int = 2
    threads: int = 1
    partitions: int = 50
    standbys: int = 0
    state_topic: str = "__groupcoord_state"
    host: str = "127.0.0.1"
    metrics: bool = True  # each worker's /metrics, and metric samples to the metrics topic
    metric_samples_interval_s: float = DEFAULT_SAMPLES_INTERVAL_S
    lag_interval_s: float = DEFAULT_LAG_INTERVAL_S
    log_dir: Path | None = None
    state_file: Path | None = None
    ping_interval_s: float = 0.5
    misses_before_failover: int = 3
    # How a shard process starts (``groupcoord shard``'s arguments follow): a test may run its
    # own entry point taking the same arguments (tests/coordinator/runtime/register_shard_process.py).
    shard_command: tuple[str, ...] = (sys.executable, "-m", "groupcoord.cli", "shard")
    on_placement: PlacementListener | None = None
    placement: dict[int, Assignment] = field(default_factory=dict)
    processes: dict[int, ShardProcess] = field(default_factory=dict)
    extra_state: dict[str, object] = field(default_factory=dict)  # more for the state file
    # Mutual TLS to the shards: the control plane's own certificate, and the folder of the
    # shards' (``--internal-tls-dir``); None: plaintext
    tls: InternalTls | None = None
    shard_tls_dir: Path | None = None
    _task: asyncio.Task[None] | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self, timeout_s: float = 60.0) -> None:
        for shard_id in range(self.shards):
            grpc_port = free_port_block(self.threads, self.host)
            metrics_port = free_port(self.host) if self.metrics else 0
            proc = ShardProcess(shard_id, self.host, grpc_port, metrics_port, self.threads, tls=self.tls)
            self.processes[shard_id] = proc
            self._spawn(proc)
        await self._wait_alive(list(self.processes.values()), timeout_s)
        await self.reconcile()
        self._task = asyncio.create_task(self._watch())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for proc in self.processes.values():
            self._terminate(proc)
            await proc.reset_channel()
        if self.state_file is not None:
            with contextlib.suppress(FileNotFoundError):
                self.state_file.unlink()

    def _spawn(self, proc: ShardProcess) -> None:
        cmd = [
            *self.shard_command,
            "--shard-id",
            str(proc.shard_id),
            "--threads",
            str(proc.threads),
            "--kafka",
            self.kafka,
            "--state-topic",
            self.state_topic,
            "--partitions",
            str(self.partitions),
            "--grpc-host",
            self.host,
            "--grpc-port",
            str(proc.grpc_port),
            "--metrics-port",
            str(proc.metrics_port),
            "--metric-samples-interval",
            str(self.metric_samples_interval_s if self.metrics else 0),
            "--lag-interval",
            str(self.lag_interval_s),
            "--leadership",
            "local",
        ]
        if self.shard_tls_dir is not None:
            cmd += ["--internal-tls-dir", str(self.shard_tls_dir)]
        out: int | object = subprocess.DEVNULL
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = open(self.log_dir / f"shard-{proc.shard_id}.log", "ab")  # noqa: SIM115
        proc.process = subprocess.Popen(  # noqa: S603 - our own command line
            cmd,
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=os.environ.copy(),
        )
        proc.alive = False
        proc.misses = 0
        log.info(
            "started shard %d (pid %d, gRPC %s:%d)",
            proc.shard_id,
            proc.process.pid,
            self.host,
            proc.grpc_port,
        )

    def _terminate(self, proc: ShardProcess) -> None:
        stop_process_group(proc.process, grace_s=10)

    async def _ping(self, proc: ShardProcess) -> bool:
        """Whether the shard can lead partitions: its ``grpc.health.v1`` readiness (every
        worker started; not draining). Its worker count is read from it each time (the live
        layout the gateway routes on, never a guess)."""
        if proc.process is None or proc.process.poll() is not None:
            return False
        try:
            health = await proc.health_stub().Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0)
            if health.status != health_pb2.HealthCheckResponse.SERVING:
                return False
            proc.workers = int((await proc.stub().Ping(sc.ShardPingRequest(), timeout=1.0)).workers)
            return True
        except grpc.aio.AioRpcError:
            return False

    async def _wait_alive(self, procs: list[ShardProcess], timeout_s: float) -> None:
        deadline = asyncio.get_running_loop().time() + timeout_s
        pending = list(procs)
        while pending:
            results = await asyncio.gather(*(self._ping(p) for p in pending))
            for p, ok in zip(list(pending), results, strict=True):
                if ok:
                    p.alive = True
                    pending.remove(p)
            if pending:
                if asyncio.get_running_loop().time() > deadline:
                    raise TimeoutError(f"shards {[p.shard_id for p in pending]} did not start")
                await asyncio.sleep(0.1)

    # --- placement ----------------------------------------------------------------------

    def live_shards(self) -> list[int]:
        return sorted(s for s, p in self.processes.items() if p.alive)

    async def reconcile(self) -> None:
        """Place on the live shards and push the roles: resignations before new leaders."""
        async with self._lock:
            live = self.live_shards()
            if not live:
                log.error("no live shard: every partition is unavailable until one returns")
                self.placement = {}
                self.publish()
                return
            new = place(self.partitions, live, self.placement or None, self.standbys)
            old = self.placement
            losing = {
                a.leader
                for p, a in old.items()
                if a.leader in self.processes and new.get(p, a).leader != a.leader
            }
            # 1. shards that lose partitions resign them first
            await asyncio.gather(*(self._push(s, new) for s in losing if s in live))
            # 2. then everyone gets the full new role (new leaders start loading)
            await asyncio.gather(*(self._push(s, new) for s in live if s not in losing))
            self.placement = new
            self.publish()

    async def _push(self, shard_id: int, placement: dict[int, Assignment]) -> None:
        proc = self.processes[shard_id]
        req = sc.SetLeadershipRequest(
            leaders=[
                sc.PartitionEpoch(partition=p, epoch=a.epoch)
                for p, a in placement.items()
                if a.leader == shard_id
            ],
            standbys=[p for p, a in placement.items() if shard_id in a.standbys],
        )
        try:
            await proc.stub().SetLeadership(req, timeout=10)
        except grpc.aio.AioRpcError as exc:
            log.warning("shard %d did not take its role: %s", shard_id, exc.code())

    def publish(self) -> None:
        if self.on_placement is not None:
            self.on_placement(dict(self.placement), dict(self.processes))
        if self.state_file is not None:
            self.state_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.state_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.describe(), indent=2))
            tmp.replace(self.state_file)

    def describe(self) -> dict[str, object]:
        return {
            **self.extra_state,
            "kafka": self.kafka,
            "partitions": self.partitions,
            "shards": {
                str(s): {
                    "host": p.host,
                    "grpc_port": p.grpc_port,
                    "metrics_port": p.metrics_port,
                    "threads": p.threads,
                    "workers": p.workers,
                    "alive": p.alive,
                    "pid": p.process.pid if p.process else None,
                    "restarts": p.restarts,
                }
                for s, p in self.processes.items()
            },
            "placement": {
                str(p): {"leader": a.leader, "epoch": a.epoch, "standbys": list(a.standbys)}
                for p, a in sorted(self.placement.items())
            },
        }

    # --- health -------------------------------------------------------------------------

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.ping_interval_s)
            try:
                await self.check_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # the watcher must survive anything to keep failing over
                log.exception("control plane check failed")

    async def check_once(self) -> None:
        procs = [p for p in self.processes.values() if not p.restarting]
        workers_before = [p.workers for p in procs]
        results = await asyncio.gather(*(self._ping(p) for p in procs))
        changed = False
        if [p.workers for p in procs] != workers_before:
            self.publish()  # a shard's layout changed under the same placement: tell the gateway
        for proc, ok in zip(procs, results, strict=True):
            if ok:
                proc.misses = 0
                if not proc.alive:
                    proc.alive = True
                    changed = True
                    log.info("shard %d is back", proc.shard_id)
                continue
            proc.misses += 1
            exited = proc.process is None or proc.process.poll() is not None
            if proc.alive and (exited or proc.misses >= self.misses_before_failover):
                proc.alive = False
                changed = True
                log.warning(
                    "shard %d is down (%s): failing its partitions over",
                    proc.shard_id,
                    "exited" if exited else "no answer",
                )
            if not proc.alive and exited:
                self._terminate(proc)
                await proc.reset_channel()
                proc.restarts += 1
                self._spawn(proc)
        if changed:
            await self.reconcile()

    async def set_threads(self, shard_id: int, threads: int, timeout_s: float = 60.0) -> None:
        """Replace shard ``shard_id`` by one with ``threads`` worker processes, the way the
        operator rolls a pod: its partitions move to the other shards first (it resigns them
        before they are led elsewhere), then it stops, starts with the new worker count, and
        takes back its share once ready. The gateway sees each step as a placement with the
        shard's live worker count; clients see only retriable errors, held by the gateway."""
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        proc = self.processes[shard_id]
        proc.restarting = True
        try:
            proc.alive = False
            await self.reconcile()  # partitions leave before the process does
            self._terminate(proc)
            await proc.reset_channel()
            proc.threads, proc.workers = threads, 0
            proc.grpc_port = free_port_block(threads, self.host)
            self._spawn(proc)
            await self._wait_alive([proc], timeout_s)
        finally:
            proc.restarting = False
        await self.reconcile()

    async def status(self) -> list[sc.StatusResponse]:
        async def one(proc: ShardProcess) -> sc.StatusResponse | None:
            try:
                return await proc.stub().Status(sc.StatusRequest(), timeout=5)
            except grpc.aio.AioRpcError:
                return None

        return [r for r in await asyncio.gather(*(one(p) for p in self.processes.values())) if r is not None]
