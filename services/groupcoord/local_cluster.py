"""``groupcoord up``: the whole cluster on one machine (the embedded default).

Starts a real Kafka-compatible broker (tansu, in-memory) unless ``--kafka`` names an existing
cluster, then the coordinator shard processes under the local control plane, then the gateway
in this process (and ``--gateway-processes`` - 1 more on the same ports:
:mod:`groupcoord.gateway.processes`); prints the bootstrap address, and on Ctrl-C/SIGTERM stops everything it
started. The control plane's view is written to a state file that ``groupcoord status`` reads.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import logging
import os
import shutil
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from groupcoord.authorization import acl_file
from groupcoord.authorization.acls import Authorizer
from groupcoord.authorization.upstream_acls import UpstreamAclSource
from groupcoord.common import internal_tls, kafka_security
from groupcoord.common.event_loop import new_event_loop, stop_on_signals
from groupcoord.common.heap import freeze_startup_objects
from groupcoord.common.kafka_wire.secure_connection import SaslAuthenticationFailed
from groupcoord.common.partitioning import DEFAULT_STATE_TOPIC
from groupcoord.common.process_logging import LOG_FORMAT_ENV
from groupcoord.common.run_dirs import state_dir
from groupcoord.controlplane.local import LocalControlPlane
from groupcoord.embedded_broker import EmbeddedBroker, EmbeddedBrokerMissing
from groupcoord.gateway import assembly
from groupcoord.gateway.assembly import GatewayOptions, build_gateway, parse_bootstrap
from groupcoord.gateway.groups.leadership import LeadershipTable, ShardEndpoint
from groupcoord.gateway.processes import GatewayProcesses, ProcessSpec, picklable_arguments, run_process
from groupcoord.gateway.proxy.advertised_host import advertised_host
from groupcoord.gateway.proxy.upstream import UpstreamUnavailable, fetch_upstream_versions
from groupcoord.gateway.security import listener_security
from groupcoord.gateway.transport import connection_limits
from groupcoord.gateway.transport.connection_limits import ConnectionLimits
from groupcoord.gateway.transport.server import Gateway
from groupcoord.observability.consumer_lag import DEFAULT_INTERVAL_S as DEFAULT_LAG_INTERVAL_S
from groupcoord.observability.metric_samples import DEFAULT_INTERVAL_S as DEFAULT_SAMPLES_INTERVAL_S

HELP = "start a local cluster: embedded broker (unless --kafka), coordinator shards and the gateway"
log = logging.getLogger(__name__)


def state_file(port: int) -> Path:
    """Where ``groupcoord up`` on ``port`` writes its state for ``groupcoord status``."""
    return state_dir() / f"up-{port}.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    assembly.add_arguments(parser, host="127.0.0.1")
    parser.add_argument(
        "--kafka",
        type=parse_bootstrap,
        default=None,
        help="use this Kafka cluster (HOST:PORT[,HOST:PORT...], its bootstrap servers) instead of "
        "the embedded broker",
    )
    parser.add_argument("--shards", type=int, default=2, help="coordinator processes ('shard' processes, as the resource's spec.shards; default 2)")
    parser.add_argument("--threads", type=int, default=1, help="worker processes per coordinator process (default 1)")
    parser.add_argument("--partitions", type=int, default=50, help="state-topic partitions (default 50)")
    parser.add_argument("--standbys", type=int, default=0, help="hot standbys per partition (default 0)")
    parser.add_argument("--log-dir", type=Path, default=None, help="write the coordinator processes' logs here")
    parser.add_argument(
        "--gateway-processes",
        type=int,
        default=1,
        help="gateway processes on the same ports (SO_REUSEPORT): one event loop per core (default 1)",
    )
    parser.add_argument(
        "--metrics-port", type=int, default=0, help="gateway /metrics port (default: a free port)"
    )
    parser.add_argument(
        "--metric-samples-interval",
        dest="metric_samples_interval_s",
        type=float,
        default=DEFAULT_SAMPLES_INTERVAL_S,
        help="seconds between the shards' metric samples to __groupcoord_metrics, which "
        "`groupcoord capacity` reads; 0 = off (default %(default)s)",
    )
    parser.add_argument(
        "--lag-interval",
        dest="lag_interval_s",
        type=float,
        default=DEFAULT_LAG_INTERVAL_S,
        help="seconds between consumer-lag updates on the shards' /metrics; 0 = off (default %(default)s)",
    )
    parser.add_argument(
        "--no-internal-tls",
        dest="internal_tls",
        action="store_false",
        help="plaintext between gateway, control plane and shards instead of mutual TLS with a CA "
        "made at start (only to measure what mutual TLS costs)",
    )
    parser.add_argument(
        "--no-coordinator",
        action="store_true",
        help="run no shards: forward the group APIs to the upstream cluster (a plain proxy)",
    )


@dataclass
class ClusterOptions:
    """What ``groupcoord up`` starts (its flags), also used by tests and benchmarks."""

    port: int = 9092
    host: str = "127.0.0.1"
    advertised_host: str | None = None  # None: --host, or the machine's host name for 0.0.0.0
    shards: int = 2
    threads: int = 1
    partitions: int = 50
    standbys: int = 0
    state_topic: str = DEFAULT_STATE_TOPIC
    #: every bootstrap address of the upstream (``--kafka``): the shards and the gateway's own
    #: requests fall back on them when the first broker is down; empty: the upstream alone
    bootstrap_servers: tuple[tuple[str, int], ...] = ()
    log_dir: Path | None = None
    no_coordinator: bool = False
    metrics: bool = True
    metrics_port: int = 0  # gateway /metrics (0: a free port, written to the state file)
    metric_samples_interval_s: float = DEFAULT_SAMPLES_INTERVAL_S
    lag_interval_s: float = DEFAULT_LAG_INTERVAL_S
    listener_security: listener_security.ListenerSecurity | None = None  # TLS/SASL of client listeners
    # Kafka ACLs on the group APIs: a policy, the upstream's own (connected when built), None: off
    acl_policy: Callable[[], Authorizer] | UpstreamAclSource | None = None
    connection_limits: ConnectionLimits = field(default_factory=ConnectionLimits)  # Kafka's socket configs
    allow_shared_upstream_identity: bool = False  # see GatewayOptions
    adopt_upstream_groups: bool = True  # see GatewayOptions
    mirror_offsets_interval_ms: int = 0  # see GatewayOptions (0: no mirror)
    # Mutual TLS between gateway, control plane and shards, with a throwaway CA made at start
    # (False only to measure what it costs)
    internal_tls: bool = True
    gateway_processes: int = 1  # more than 1: needs ``arguments``, the further processes' recipe
    #: the flags these options were made from (:meth:`from_args`): further gateway processes
    #: make their options from them, as policies and TLS contexts are not sent between processes
    arguments: argparse.Namespace | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ClusterOptions:
        names = {f.name for f in fields(cls)} - {
            "listener_security",
            "acl_policy",
            "connection_limits",
            "allow_shared_upstream_identity",
            "adopt_upstream_groups",
            "mirror_offsets_interval_ms",
            "bootstrap_servers",
            "arguments",
        }
        return cls(
            **{k: v for k, v in vars(args).items() if k in names},
            bootstrap_servers=args.kafka or (),
            listener_security=listener_security.from_arguments(args),
            acl_policy=acl_file.from_arguments(args),
            connection_limits=connection_limits.from_arguments(args),
            allow_shared_upstream_identity=assembly.allow_shared_upstream_identity(args),
            adopt_upstream_groups=assembly.adopt_upstream_groups(args),
            mirror_offsets_interval_ms=assembly.mirror_offsets_interval_ms(args),
            arguments=args,
        )

    def gateway_options(
        self, upstream: tuple[str, int], tls: internal_tls.InternalTls | None = None
    ) -> GatewayOptions:
        """The gateway's share of these options (its upstream security: the environment's;
        ``tls``: its certificate for the shards)."""
        return GatewayOptions(
            upstream,
            bootstrap_servers=self.bootstrap_servers,
            host=self.host,
            port=self.port,
            advertised_host=self.advertised_host,
            state_topic=self.state_topic,
            listener_security=self.listener_security or listener_security.ListenerSecurity(),
            acl_policy=self.acl_policy,
            metrics=self.metrics,
            connection_limits=self.connection_limits,
            allow_shared_upstream_identity=self.allow_shared_upstream_identity,
            internal_tls=tls,
            adopt_upstream_groups=self.adopt_upstream_groups,
            mirror_offsets_interval_ms=self.mirror_offsets_interval_ms,
        )


def further_gateway_options(
    arguments: argparse.Namespace, upstream: tuple[str, int], tls_dir: Path | None
) -> GatewayOptions:
    """A further gateway process's options, made in that process from ``groupcoord up``'s flags."""
    tls = internal_tls.InternalTls.from_dir(tls_dir) if tls_dir is not None else None
    options = ClusterOptions.from_args(arguments).gateway_options(upstream, tls)
    return dataclasses.replace(options, reuse_port=True)


class LocalCluster:
    """Control plane + shards + gateway in front of ``upstream``, started and stopped together."""

    def __init__(self, options: ClusterOptions, upstream: tuple[str, int]) -> None:
        self.args = options
        self.upstream = upstream
        self.advertised_host = advertised_host(options.host, options.advertised_host)
        self.gateway: Gateway | None = None  # built by start()
        self.control: LocalControlPlane | None = None
        self.metrics_server: Any = None
        self.gateway_processes: GatewayProcesses | None = None  # the further ones (--gateway-processes)
        self.tls_dir: Path | None = None  # the throwaway CA's certificates, removed at stop

    def _issue_certificates(self) -> dict[str, Path]:
        """A CA made for this run and a certificate for the gateway, the control plane and the
        shards (files 0600 in a 0700 folder of the state directory), so every local cluster
        and every test runs the mutual-TLS path a Kubernetes deployment does."""
        self.tls_dir = Path(tempfile.mkdtemp(prefix="internal-tls-", dir=state_dir()))
        return internal_tls.issue(self.tls_dir)

    async def start(self) -> None:
        args = self.args
        table = None if args.no_coordinator else LeadershipTable(args.partitions)
        folders = self._issue_certificates() if table is not None and args.internal_tls else {}
        tls = {identity: internal_tls.InternalTls.from_dir(folder) for identity, folder in folders.items()}
        options = args.gateway_options(self.upstream, tls.get(internal_tls.GATEWAY))
        if args.gateway_processes > 1:
            self.gateway_processes = self._further_gateways(table, folders.get(internal_tls.GATEWAY))
            options = dataclasses.replace(options, reuse_port=True)
        self.gateway = await build_gateway(options, table)
        if table is not None:

            def publish(placement: dict, processes: dict) -> None:
                leaders = {p: (a.leader, a.epoch) for p, a in placement.items()}
                shards = {  # worker counts as each shard reported them when it became ready
                    s: ShardEndpoint(proc.host, proc.grpc_port, proc.workers)
                    for s, proc in processes.items()
                    if proc.workers > 0
                }
                table.update(leaders, shards)
                if self.gateway_processes is not None:
                    self.gateway_processes.publish(leaders, shards)

            self.control = LocalControlPlane(
                kafka=",".join(f"{h}:{p}" for h, p in dict.fromkeys((self.upstream, *args.bootstrap_servers))),
                shards=args.shards,
                threads=args.threads,
                partitions=args.partitions,
                standbys=args.standbys,
                state_topic=args.state_topic,
                log_dir=args.log_dir,
                metrics=args.metrics,
                metric_samples_interval_s=args.metric_samples_interval_s,
                lag_interval_s=args.lag_interval_s,
                state_file=state_file(args.port) if args.port else None,
                on_placement=publish,
                tls=tls.get(internal_tls.CONTROL_PLANE),
                shard_tls_dir=folders.get(internal_tls.SHARD_NAME),
            )
            if internal_tls.CONTROL_PLANE in folders:  # for `groupcoord status`
                self.control.extra_state["internal_tls_dir"] = str(folders[internal_tls.CONTROL_PLANE])
            await self.control.start()
        if args.metrics:
            from groupcoord.embedded_broker import free_port  # noqa: PLC0415
            from groupcoord.observability.metrics_endpoint import serve_metrics  # noqa: PLC0415

            self.metrics_server, _ = serve_metrics(args.metrics_port or free_port(), addr=args.host)
            if self.control is not None:
                self.control.extra_state["gateway_metrics"] = (
                    f"{self.advertised_host}:{self.metrics_server.server_port}"
                )
                self.control.publish()
        await self.gateway.start()
        if self.gateway_processes is not None:
            await self.gateway_processes.start()

    def _further_gateways(self, table: LeadershipTable | None, tls_dir: Path | None) -> GatewayProcesses:
        """The ``--gateway-processes`` beyond this one (their metrics join this process's)."""
        args = self.args
        if args.arguments is None:
            raise ValueError("gateway_processes > 1 needs the options made by ClusterOptions.from_args")
        spec = ProcessSpec(
            functools.partial(further_gateway_options, picklable_arguments(args.arguments), self.upstream, tls_dir),
            partitions=table.partitions if table is not None else 0,
            metrics=args.metrics,
            log_level=logging.getLevelName(logging.getLogger().getEffectiveLevel()),
            log_format=os.environ.get(LOG_FORMAT_ENV, "text"),
        )
        return GatewayProcesses(args.gateway_processes - 1, functools.partial(run_process, spec), metrics=spec.metrics)

    def metrics_targets(self) -> list[str]:
        """host:port of every /metrics endpoint: the gateway's and each shard process's (which
        serves all its workers' series, labelled ``worker``)."""
        targets = []
        if self.metrics_server is not None:
            targets.append(f"{self.advertised_host}:{self.metrics_server.server_port}")
        if self.control is not None:
            for proc in self.control.processes.values():
                if proc.metrics_port:
                    targets.append(f"{proc.host}:{proc.metrics_port}")
        return targets

    async def stop(self) -> None:
        if self.gateway_processes is not None:
            await self.gateway_processes.stop()
        if self.gateway is not None:
            await self.gateway.stop()
        if self.metrics_server is not None:
            self.metrics_server.shutdown()
        if self.control is not None:
            await self.control.stop()
        if self.tls_dir is not None:
            shutil.rmtree(self.tls_dir, ignore_errors=True)


async def _check_upstream_credentials(upstream: tuple[str, int]) -> None:
    """End ``groupcoord up`` with one line when the upstream refuses our TLS or SASL settings
    (a configuration error; an upstream that is merely not up yet is waited for as before)."""
    try:
        await fetch_upstream_versions(upstream)
    except UpstreamUnavailable as exc:
        cause: BaseException | None = exc
        while cause is not None:
            if isinstance(cause, SaslAuthenticationFailed | ssl.SSLError):
                raise SystemExit(f"upstream {upstream[0]}:{upstream[1]} refused us: {cause}") from None
            cause = cause.__cause__


async def _run(args: argparse.Namespace, upstream: tuple[str, int]) -> None:
    if args.kafka is not None:
        await _check_upstream_credentials(upstream)
    cluster = LocalCluster(ClusterOptions.from_args(args), upstream)
    stop = stop_on_signals()
    try:
        await cluster.start()
        freeze_startup_objects()
        assert cluster.gateway is not None
        host, port = cluster.gateway.bootstrap_address
        shards = (
            "no coordinator processes"
            if args.no_coordinator
            else f"{args.shards} coordinator process(es) x {args.threads} worker(s)"
        )
        if args.gateway_processes > 1:
            shards += f", {args.gateway_processes} gateway processes"
        print(
            f"groupcoord is up: bootstrap {host}:{port} ({shards}, upstream {upstream[0]}:{upstream[1]})",
            flush=True,
        )
        if cluster.args.metrics:
            urls = " ".join(f"http://{t}/metrics" for t in cluster.metrics_targets())
            print(f"metrics: {urls}", flush=True)
        await stop.wait()
    finally:
        await cluster.stop()


def main(args: argparse.Namespace) -> int:
    try:
        import cryptography  # noqa: F401, PLC0415 - the throwaway CA of the processes' mutual TLS
    except ModuleNotFoundError:
        raise SystemExit("groupcoord up needs cryptography: pip install 'groupcoord[local]'") from None
    if args.gateway_processes < 1:
        raise SystemExit("--gateway-processes must be at least 1")
    if args.gateway_processes > 1 and args.port == 0:
        raise SystemExit("--gateway-processes needs a fixed --port: the processes share it")
    from groupcoord.coordinator.server.coordinator_service import check_consumer_assignors  # noqa: PLC0415

    check_consumer_assignors("groupcoord up")  # before anything starts: the shards would not
    security = kafka_security.configure(args)
    if args.kafka is None and security.protocol != "PLAINTEXT":
        raise SystemExit(
            f"upstream security {security.protocol} needs --kafka (the embedded broker is plaintext)"
        )
    broker: EmbeddedBroker | None = None
    try:
        if args.kafka is None:
            try:
                broker = EmbeddedBroker().start()
            except EmbeddedBrokerMissing as exc:
                raise SystemExit(f"groupcoord up: {exc}") from None
            log.info("embedded broker on %s", broker.bootstrap)
            upstream = (broker.host, broker.port)
        else:
            upstream = args.kafka[0]
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            runner.run(_run(args, upstream))
    finally:
        if broker is not None:
            broker.stop()
    print("groupcoord stopped", flush=True)
    return 0
