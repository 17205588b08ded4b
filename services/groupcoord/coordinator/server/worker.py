"""One worker process of a shard process: an asyncio loop, a runtime, a gRPC server, metrics.

Why processes: the work of a shard process (handlers, replay, protobuf, Kafka record parsing)
is Python code holding the GIL, so threads in one interpreter would take turns on one core.
``--threads N`` (the word the custom resource uses) therefore starts N worker *processes*;
partitions are split between them by ``partition % N``
(:func:`~groupcoord.common.partitioning.worker_for`) and never shared, so the workers need no
coordination at all. Each serves gRPC on ``base port + worker index``: the gateway computes
the owning worker and talks to it directly, with no forwarding hop through a front process.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import multiprocessing
import signal
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import grpc

from groupcoord.common import grpc_keepalive, grpc_limits
from groupcoord.common.event_loop import new_event_loop, stop_on_signals
from groupcoord.common.internal_tls import CallerCheck, InternalTls
from groupcoord.common.process_logging import configure_logging
from groupcoord.coordinator.core.state import GroupCoordinatorState
from groupcoord.coordinator.runtime.statelog import UpstreamProbe
from groupcoord.coordinator.runtime.worker_runtime import WorkerRuntime
from groupcoord.coordinator.server.control import ShardControlServicer
from groupcoord.coordinator.server.health import UPSTREAM_GRACE_S, ShardHealth
from groupcoord.coordinator.server.hosted_shards import HostedShards
from groupcoord.observability.consumer_lag import DEFAULT_INTERVAL_S as DEFAULT_LAG_INTERVAL_S
from groupcoord.observability.consumer_lag import DEFAULT_TOP_N as DEFAULT_LAG_TOP_N
from groupcoord.observability.consumer_lag import (
    ConsumerLagCollector,
    LogEndOffsets,
    committed_offsets,
    positions_of,
)
from groupcoord.observability.metric_samples import DEFAULT_TOPIC as DEFAULT_METRICS_TOPIC
from groupcoord.observability.metric_samples import MetricSamplePublisher
from groupcoord.observability.metrics_endpoint import serve_metrics
from groupcoord.observability.shard_metrics import ShardMetrics
from groupcoord.rpc.v1 import shard_control_pb2_grpc as sc_grpc

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    shard_id: str
    worker: int
    workers: int
    bootstrap: str
    topic: str
    partitions: int
    grpc_port: int
    bind_host: str = "0.0.0.0"
    peer_host: str = "127.0.0.1"
    # /metrics on a loopback port of its own, reported to the supervisor (which serves every
    # worker's series on the pod's one metrics port: observability/worker_metrics.py)
    metrics: bool = False
    metrics_topic: str = DEFAULT_METRICS_TOPIC
    metric_samples_interval_s: float = 0.0  # 0: no samples to the metrics topic
    lag_interval_s: float = DEFAULT_LAG_INTERVAL_S  # consumer lag export (with /metrics); 0: off
    lag_top_partitions: int = DEFAULT_LAG_TOP_N
    leadership: str = "local"
    log_level: str = "INFO"
    log_format: str = "text"  # groupcoord.common.process_logging.LOG_FORMATS
    drain_timeout_s: float = 0.0  # after SIGTERM: NOT_SERVING, then wait this long to lose leadership
    state_topic_problems: tuple[str, ...] = ()  # the supervisor's check of an existing state topic
    # ca.crt, tls.crt, tls.key: mutual TLS on the gRPC port, callers checked (common/internal_tls.py);
    # None: plaintext, anyone who reaches the port is served
    internal_tls_dir: str | None = None
    # worker 0: grpc.health.v1 alone, plaintext, on this port (kubelet gRPC probes cannot do
    # TLS); 0: none (health is served on the gRPC port in any case)
    health_port: int = 0


async def _follow_leadership(spec: str, runtime: WorkerRuntime, health: ShardHealth) -> None:
    """``kubernetes:<ns>/<name>``: leadership read from the GroupCoordinator resource's status
    (:meth:`~groupcoord.controlplane.kubernetes_leadership.KubernetesLeadership.follow`).
    Each placement is applied whole: this shard's leaders at their epochs, and its standbys.
    The first placement read makes the worker ready (it will see what it is given)."""
    module = importlib.import_module("groupcoord.controlplane.kubernetes_leadership")
    source = module.KubernetesLeadership.from_ref(spec)
    loop = asyncio.get_running_loop()
    me = int(runtime.shard_id)
    pending: set[asyncio.Task[None]] = set()

    def apply(placement: dict[int, Any]) -> None:
        leaders = {p: a.epoch for p, a in placement.items() if a.leader == me}
        standbys = {p for p, a in placement.items() if me in a.standbys}
        runtime.apply_leadership(leaders, standbys)
        log.info("leadership: leading %d partition(s), %d standby(s)", len(leaders), len(standbys))
        if not health.leadership_synced:
            pending.add(task := loop.create_task(health.mark_leadership_synced()))
            task.add_done_callback(pending.discard)

    await source.follow(apply)


async def _watch_upstream(
    probe: Callable[[], Awaitable[None]],
    health: ShardHealth,
    *,
    every_s: float = 2.0,
    timeout_s: float = 10.0,
    grace_s: float = UPSTREAM_GRACE_S,
    failures_needed: int = 2,
) -> None:
    """Readiness follows the Kafka cluster holding the state topic: after ``grace_s`` without an
    answer to ``probe``, and at least ``failures_needed`` probes in a row without one, this
    worker is not ready (it could not write a partition it leads: a shard cut off from Kafka
    but not from its clients is a zombie leader the operator must replace), and it is ready
    again as soon as one probe is answered. ``timeout_s`` bounds a whole probe (which may ask
    several brokers in turn, each for the probe's own timeout).

    Why probes in a row and not time alone: the probe shares the worker's event loop, so a loop
    busy for longer than the grace (one 200,000-partition OffsetCommit takes seconds of Python)
    makes the probe in flight time out although Kafka answered it. That is one failed probe,
    and the next one is answered; a cut-off upstream fails every probe. A broker that dies is
    neither: the probe asks the next known broker."""
    loop = asyncio.get_running_loop()
    last_answer = loop.time()
    failures = 0
    while True:
        try:
            await asyncio.wait_for(probe(), timeout_s)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure is "no answer"
            failures += 1
            silent = loop.time() - last_answer
            if silent >= grace_s and failures >= failures_needed and health.upstream_reachable:
                log.warning(
                    "the state topic's Kafka cluster has not answered for %.0f s (%d probes; %r): not ready",
                    silent,
                    failures,
                    exc,
                )
                await health.set_upstream_reachable(False)
        else:
            last_answer = loop.time()
            failures = 0
            if not health.upstream_reachable:
                log.info("the state topic's Kafka cluster answers again: ready")
                await health.set_upstream_reachable(True)
        await asyncio.sleep(every_s)


def _stop_with_parent(stop: asyncio.Event) -> asyncio.Event:
    """An event set (with ``stop``) when the supervisor that spawned this worker is gone, even
    killed with SIGKILL: nothing of a shard process may outlive it (its ports would stay taken
    by a worker nobody watches; a restarted shard process would share them). The spawn start
    method hands the worker the reading end of a pipe only the parent holds the writing end
    of (``multiprocessing.parent_process().sentinel``): it turns readable when the parent
    dies. A pipe, not ``PR_SET_PDEATHSIG``, which fires when the *thread* that forked exits."""
    orphaned = asyncio.Event()
    parent = multiprocessing.parent_process()
    if parent is None:  # run in-process (tests): nobody to outlive
        return orphaned
    loop = asyncio.get_running_loop()

    def parent_died() -> None:
        loop.remove_reader(parent.sentinel)
        log.error("the shard process's supervisor is gone: stopping this worker")
        orphaned.set()
        stop.set()

    loop.add_reader(parent.sentinel, parent_died)
    return orphaned


async def _publish_metrics(runtime: WorkerRuntime, every_s: float = 1.0) -> None:
    while True:
        runtime.publish_metrics()
        await asyncio.sleep(every_s)


async def _track_consumer_lag(
    runtime: WorkerRuntime, collector: ConsumerLagCollector, log_end: LogEndOffsets, interval_s: float
) -> None:
    """Every ``interval_s``: the committed offsets of the partitions this worker leads (their
    acknowledged replicas), against the upstream's log end. Between events, off the request
    path; a failed round is logged and the next one retries."""
    try:
        while True:
            await asyncio.sleep(interval_s)
            try:
                parts = (runtime.partition(p) for p, _epoch in runtime.active_partitions())
                shards = (part.committed_shard for part in parts if part is not None)
                states = (shard.data for shard in shards if shard is not None)
                # Only the group coordinator's state has committed offsets (not a test shard's).
                committed = committed_offsets(d.offsets for d in states if isinstance(d, GroupCoordinatorState))
                collector.update(committed, await log_end.fetch(positions_of(committed)))
            except Exception:
                log.exception("consumer lag round failed")
    finally:
        await log_end.close()


async def _start_samples(metrics: ShardMetrics, config: WorkerConfig) -> MetricSamplePublisher | None:
    """The metric-sample publisher of this worker (the capacity job's input), or None when it
    cannot start: metrics never take a shard down."""
    publisher = MetricSamplePublisher(
        metrics, config.bootstrap, topic=config.metrics_topic, interval_s=config.metric_samples_interval_s
    )
    try:
        await publisher.start()
    except Exception:
        log.exception("metric samples to %s are off: the publisher did not start", config.metrics_topic)
        return None
    return publisher


def _grpc_servers(
    config: WorkerConfig,
    hosted: HostedShards,
    runtime: WorkerRuntime,
    health: ShardHealth,
    tls: InternalTls | None,
) -> tuple[list[grpc.aio.Server], int, list[Coroutine[Any, Any, None]]]:
    """The worker's gRPC server on its port (health, ShardControl and the hosted shards'
    services; mutual TLS when configured) and, on worker 0, the plaintext health-only port the
    kubelet probes: (the servers, not started; the worker's port; the tasks the hosted
    services need for the worker's lifetime, not started)."""
    server = grpc.aio.server(
        options=[*grpc_limits.OPTIONS, *grpc_keepalive.SERVER_OPTIONS],
        interceptors=[CallerCheck()] if tls is not None else None,
    )
    health.add_to(server)
    sc_grpc.add_ShardControlServicer_to_server(
        ShardControlServicer(
            runtime,
            config.peer_host,
            config.grpc_port,
            health,
            config.state_topic_problems,
            tls=tls,
            serves_leadership=config.leadership == "local",
        ),
        server,
    )
    lifetime = list(hosted.add_services(server, runtime) or ())
    port = config.grpc_port + config.worker
    address = f"{config.bind_host}:{port}"
    bound = server.add_secure_port(address, tls.server_credentials()) if tls else server.add_insecure_port(address)
    if bound == 0:
        raise OSError(f"cannot listen on {address}")
    if tls is None:
        log.warning("gRPC on %s is plaintext and unauthenticated (no --internal-tls-dir)", address)
    servers = [server]
    if config.worker == 0 and config.health_port:
        probes = grpc.aio.server()  # health alone: nothing else is reachable without a certificate
        health.add_to(probes)
        if probes.add_insecure_port(f"{config.bind_host}:{config.health_port}") == 0:
            raise OSError(f"cannot listen on {config.bind_host}:{config.health_port}")
        servers.append(probes)
    return servers, port, lifetime


async def serve(
    config: WorkerConfig,
    hosted: HostedShards,
    metrics_report: Connection | None = None,
) -> None:
    """Run one worker hosting ``hosted`` until SIGTERM/SIGINT (or cancellation). With
    ``config.metrics`` the port of its loopback ``/metrics`` endpoint is sent over
    ``metrics_report``."""
    publishes_samples = config.metric_samples_interval_s > 0
    metrics = ShardMetrics(config.shard_id) if config.metrics or publishes_samples else None
    runtime = WorkerRuntime(
        bootstrap=config.bootstrap,
        topic=config.topic,
        partitions=config.partitions,
        shard_factory=hosted.factory,
        shard_id=config.shard_id,
        worker=config.worker,
        workers=config.workers,
        metrics=metrics,
        other_topics=(config.metrics_topic,),
    )
    if config.leadership != "local" and not config.leadership.startswith("kubernetes:"):
        raise ValueError(f"unknown leadership spec {config.leadership!r} (local | kubernetes:<ns>/<name>)")
    tls = InternalTls.from_dir(config.internal_tls_dir) if config.internal_tls_dir else None
    health = ShardHealth(
        worker=config.worker,
        workers=config.workers,
        peer_host=config.peer_host,
        base_port=config.grpc_port,
        needs_leadership_source=config.leadership != "local",
        tls=tls,
    )
    # The server (health included) starts before the runtime, so probes get NOT_SERVING, not
    # a refused connection, while the worker connects to Kafka; ShardControl refuses until then.
    servers, port, lifetime = _grpc_servers(config, hosted, runtime, health, tls)
    await health.start()
    for s in servers:
        await s.start()
    stop = stop_on_signals()
    orphaned = _stop_with_parent(stop)
    await runtime.start()
    await health.mark_started()
    background = [asyncio.create_task(job) for job in lifetime]
    upstream = UpstreamProbe(config.bootstrap)
    background.append(asyncio.create_task(_watch_upstream(upstream, health)))
    if metrics is not None:
        background.append(asyncio.create_task(_publish_metrics(runtime)))
    if metrics is not None and config.metrics:
        metrics_server, _ = serve_metrics(0, addr=config.peer_host)
        if metrics_report is not None:
            metrics_report.send(metrics_server.server_port)
            metrics_report.close()
        if config.lag_interval_s > 0:
            lag = ConsumerLagCollector(config.shard_id, top_n=config.lag_top_partitions)
            metrics.registry.register(lag)
            background.append(
                asyncio.create_task(
                    _track_consumer_lag(runtime, lag, LogEndOffsets(config.bootstrap), config.lag_interval_s)
                )
            )
    samples = None
    if metrics is not None and publishes_samples:
        samples = await _start_samples(metrics, config)
    watcher = None
    if config.leadership.startswith("kubernetes:"):
        watcher = asyncio.create_task(_follow_leadership(config.leadership, runtime, health))
    log.info(
        "shard process %s worker %d/%d serving on port %d",
        config.shard_id,
        config.worker,
        config.workers,
        port,
    )
    try:
        await stop.wait()
        await health.drain()
        if not orphaned.is_set():  # no control plane waits for a dead shard process to drain
            await _drain(runtime, config.drain_timeout_s)
    finally:
        await health.close()
        if watcher is not None:
            watcher.cancel()
        for task in background:
            task.cancel()
        if samples is not None:
            await samples.stop()  # publishes the last partial interval
        for s in servers:
            await s.stop(grace=1)
        await upstream.close()
        await runtime.close()


async def _drain(runtime: WorkerRuntime, timeout_s: float, poll_s: float = 0.1) -> None:
    """Keep serving (NOT_SERVING to probes) until the control plane has moved this worker's
    partitions away, for at most ``timeout_s``: clients see a planned move, not a failover."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while runtime.leads_anything() and loop.time() < deadline:
        await asyncio.sleep(poll_s)
    if runtime.leads_anything():
        log.info("drain timeout: stopping while still leading %s", runtime.led_partitions())


def worker_main(config: WorkerConfig, metrics_report: Connection | None, hosted: HostedShards) -> None:
    """Process entry point (spawned by the ``groupcoord shard`` supervisor)."""
    configure_logging(config.log_level, config.log_format, worker=config.worker)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides; it sends SIGTERM

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(serve(config, hosted, metrics_report=metrics_report))
