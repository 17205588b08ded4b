"""``groupcoord shard``: one shard process — a supervisor and ``--threads`` worker processes.

A shard process hosts the coordinator shards (one per state-topic partition) that the control
plane places on it; ``--threads`` keeps the custom resource's word, but each "thread" is a
worker process (see :mod:`.worker`).

The supervisor creates the state topic if missing, spawns the workers (see
:mod:`.worker` for why they are processes) and watches them. A worker that dies takes the
shard down (exit 1): its partitions' loops are gone, and a restarted pod with a clean slate is
what the control plane expects to fail partitions over from; a half-alive one would keep
answering for partitions it no longer serves.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
from multiprocessing.connection import Connection
from types import FrameType

from prometheus_client import CollectorRegistry

from groupcoord.common import kafka_security
from groupcoord.common.partitioning import DEFAULT_PARTITIONS, DEFAULT_STATE_TOPIC
from groupcoord.coordinator.runtime.statelog import ensure_topic
from groupcoord.coordinator.server.coordinator_service import GROUP_COORDINATOR
from groupcoord.coordinator.server.hosted_shards import HostedShards
from groupcoord.coordinator.server.worker import WorkerConfig, worker_main
from groupcoord.observability.consumer_lag import DEFAULT_INTERVAL_S as DEFAULT_LAG_INTERVAL_S
from groupcoord.observability.consumer_lag import DEFAULT_TOP_N as DEFAULT_LAG_TOP_N
from groupcoord.observability.metric_samples import DEFAULT_INTERVAL_S as DEFAULT_SAMPLES_INTERVAL_S
from groupcoord.observability.metric_samples import DEFAULT_TOPIC as DEFAULT_METRICS_TOPIC
from groupcoord.observability.metrics_endpoint import serve_metrics
from groupcoord.observability.worker_metrics import WorkerExpositions

HELP = "run a shard process: worker processes hosting the coordinator shards of state-topic partitions"

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shard-id", default="0", help="this coordinator process's id in the placement (default 0)"
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="worker processes; partition p runs on worker p %% threads"
    )
    parser.add_argument(
        "--kafka", required=True, help="bootstrap servers of the Kafka cluster holding the state"
    )
    parser.add_argument("--state-topic", default=DEFAULT_STATE_TOPIC, help=f"(default {DEFAULT_STATE_TOPIC})")
    parser.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS, help="state-topic partitions")
    parser.add_argument(
        "--replication-factor",
        type=int,
        default=int(os.environ.get("GROUPCOORD_STATE_TOPIC_REPLICATION_FACTOR", "3")),
        help="state topic replication factor when creating it, clamped to the broker count "
        "(env GROUPCOORD_STATE_TOPIC_REPLICATION_FACTOR; default 3, as Kafka's offsets topic)",
    )
    parser.add_argument(
        "--min-insync-replicas",
        type=int,
        default=int(os.environ.get("GROUPCOORD_STATE_TOPIC_MIN_INSYNC_REPLICAS", "2")),
        help="state topic min.insync.replicas when creating it, kept below a clamped replication "
        "factor by the same margin (env GROUPCOORD_STATE_TOPIC_MIN_INSYNC_REPLICAS; default 2)",
    )
    parser.add_argument("--grpc-port", type=int, default=50051, help="worker i listens on this + i")
    kafka_security.add_arguments(parser)
    parser.add_argument("--grpc-host", default="0.0.0.0", help="address to bind gRPC to")
    parser.add_argument(
        "--internal-tls-dir",
        default=os.environ.get("GROUPCOORD_INTERNAL_TLS_DIR") or None,
        help="folder with ca.crt, tls.crt, tls.key (a mounted TLS Secret): mutual TLS on every gRPC "
        "port, serving only the gateway's and the control plane's certificates (env "
        "GROUPCOORD_INTERNAL_TLS_DIR; default: plaintext, anyone who reaches the port is served)",
    )
    parser.add_argument(
        "--health-port",
        type=int,
        default=0,
        help="grpc.health.v1 alone, plaintext, on this port (the kubelet's gRPC probes cannot do "
        "TLS); 0 = none (default). Health is served on the gRPC port in any case",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=9100,
        help="/metrics of every worker process (label worker=<i>) on this one port; 0 = off",
    )
    parser.add_argument(
        "--metrics-topic",
        default=DEFAULT_METRICS_TOPIC,
        help="topic of the metric samples the capacity job reads (default %(default)s)",
    )
    parser.add_argument(
        "--metric-samples-interval",
        type=float,
        default=DEFAULT_SAMPLES_INTERVAL_S,
        help="seconds between metric samples published to --metrics-topic; 0 = off (default %(default)s)",
    )
    parser.add_argument(
        "--lag-interval",
        type=float,
        default=DEFAULT_LAG_INTERVAL_S,
        help="seconds between consumer-lag updates on /metrics; 0 = off (default %(default)s)",
    )
    parser.add_argument(
        "--lag-top-partitions",
        type=int,
        default=DEFAULT_LAG_TOP_N,
        help="partitions with the most lag exported per worker (default %(default)s)",
    )
    parser.add_argument(
        "--leadership",
        default="local",
        help="local (a control plane calls ShardControl.SetLeadership) or kubernetes:<ns>/<name>",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=0.0,
        help="on SIGTERM: report NOT_SERVING to health checks and keep serving up to this many "
        "seconds until the control plane has moved this shard's partitions away (default 0)",
    )


def peer_host(bind_host: str) -> str:
    """How the processes of one shard reach each other (fan-out, health, metrics): the bound
    address, or loopback when bound to every address."""
    return "127.0.0.1" if bind_host in ("0.0.0.0", "::", "") else bind_host


def configs(args: argparse.Namespace, state_topic_problems: tuple[str, ...] = ()) -> list[WorkerConfig]:
    return [
        WorkerConfig(
            shard_id=str(args.shard_id),
            worker=i,
            workers=args.threads,
            bootstrap=args.kafka,
            topic=args.state_topic,
            partitions=args.partitions,
            grpc_port=args.grpc_port,
            bind_host=args.grpc_host,
            peer_host=peer_host(args.grpc_host),
            metrics=bool(args.metrics_port),
            metrics_topic=args.metrics_topic,
            metric_samples_interval_s=args.metric_samples_interval,
            lag_interval_s=args.lag_interval,
            lag_top_partitions=args.lag_top_partitions,
            leadership=args.leadership,
            log_level=str(getattr(args, "log_level", "INFO")),
            log_format=str(getattr(args, "log_format", "text")),
            drain_timeout_s=args.drain_timeout,
            state_topic_problems=state_topic_problems,
            internal_tls_dir=args.internal_tls_dir,
            health_port=args.health_port,
        )
        for i in range(args.threads)
    ]


def main(args: argparse.Namespace, hosted: HostedShards = GROUP_COORDINATOR) -> int:
    """Run the shard process; its workers host the group coordinator, or what a test binds."""
    if args.threads < 1 or args.partitions < 1:
        raise SystemExit("--threads and --partitions must be at least 1")
    if args.replication_factor < 1 or args.min_insync_replicas < 1:
        raise SystemExit("--replication-factor and --min-insync-replicas must be at least 1")
    if hosted.check is not None:
        hosted.check()
    kafka_security.configure(args)  # the spawned workers read it from the environment
    replication = asyncio.run(
        ensure_topic(
            args.kafka, args.state_topic, args.partitions, args.replication_factor, args.min_insync_replicas
        )
    )
    ctx = multiprocessing.get_context("spawn")
    procs = []
    reports: dict[int, Connection] = {}  # worker -> where it reports its metrics port
    sending_ends: list[Connection] = []
    for c in configs(args, replication.problems):
        report = None
        if c.metrics:
            reports[c.worker], report = ctx.Pipe(duplex=False)
            sending_ends.append(report)
        procs.append(
            ctx.Process(target=worker_main, args=(c, report, hosted), name=f"shard-{c.shard_id}-w{c.worker}")
        )
    metrics_server = None
    if args.metrics_port:
        registry = CollectorRegistry()
        registry.register(WorkerExpositions(str(args.shard_id), reports, host=peer_host(args.grpc_host)))
        metrics_server, _ = serve_metrics(args.metrics_port, registry, addr=args.grpc_host)
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for p in procs:
            if p.is_alive():
                p.terminate()  # SIGTERM: the worker stops its server and resigns its partitions

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for p in procs:
        p.start()
    for conn in sending_ends:
        conn.close()  # each worker holds its own copy now: a dead worker reads as EOF
    log.info(
        "shard process %s: %d worker(s), gRPC ports %d..%d",
        args.shard_id,
        len(procs),
        args.grpc_port,
        args.grpc_port + len(procs) - 1,
    )
    failed = False
    alive = list(procs)
    while alive:
        multiprocessing.connection.wait([p.sentinel for p in alive])
        for p in [p for p in alive if not p.is_alive()]:
            alive.remove(p)
            if not stopping:
                log.error("%s exited with %s; stopping the shard process", p.name, p.exitcode)
                failed = True
                stop(signal.SIGTERM, None)
    for p in procs:
        p.join(timeout=10 + args.drain_timeout)
        if p.is_alive():
            p.kill()
    if metrics_server is not None:
        metrics_server.shutdown()
    return 1 if failed else 0
