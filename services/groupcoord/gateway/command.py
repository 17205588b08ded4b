"""``groupcoord gateway``: the Kafka-protocol gateway in front of an upstream cluster.

With ``--leadership kubernetes:<ns>/<name>`` the group APIs are served by the coordinator
shards named in that GroupCoordinator's status (watched, never guessed), at the addresses
``--shard-address-template`` gives; without it the gateway is a plain proxy and the group
APIs go to the upstream cluster.

``--processes N`` runs N copies of this gateway on the same ports (``SO_REUSEPORT``), so one
host or container uses N cores: each copy is what a gateway pod is (it follows the resource
itself, holds its own connections and connection limits); the first starts the others, starts
one that dies again and serves their metrics on its ``--metrics-port``, labelled
``gateway_process`` (:mod:`groupcoord.gateway.processes`).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import os
from collections.abc import Callable
from multiprocessing.connection import Connection

from groupcoord.common.event_loop import new_event_loop, stop_on_signals
from groupcoord.common.heap import freeze_startup_objects
from groupcoord.common.internal_tls import InternalTls
from groupcoord.gateway import assembly
from groupcoord.gateway.assembly import GatewayOptions, build_gateway, parse_address, parse_bootstrap
from groupcoord.gateway.extra_listeners import ENV_EXTRA_LISTENERS, ExtraListenersError, parse_extra_listeners
from groupcoord.gateway.groups.layout import LayoutFollower, ask_workers
from groupcoord.gateway.groups.worker_client import WorkerClient
from groupcoord.gateway.processes import GatewayProcesses, follow_supervisor, picklable_arguments
from groupcoord.gateway.transport.connection_limits import ConnectionCounter
from groupcoord.gateway.transport.server import Gateway

HELP = "run the Kafka-protocol gateway in front of an upstream Kafka cluster"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kafka", type=parse_bootstrap, required=True, help="upstream bootstrap HOST:PORT[,HOST:PORT...]"
    )
    assembly.add_arguments(parser, host="0.0.0.0")
    parser.add_argument(
        "--metrics-port", type=int, default=0, help="serve Prometheus /metrics here (0 = off)"
    )
    parser.add_argument(
        "--broker-ports",
        type=int,
        default=0,
        help="N: the broker with node id i gets listener port --port + 1 + i (i < N), the same on "
        "every gateway behind one Service; 0 (default): port + n for the n-th broker named",
    )
    parser.add_argument(
        "--leadership",
        default=None,
        help="kubernetes:<namespace>/<name>: serve groups with the shards it names",
    )
    parser.add_argument(
        "--shard-address-template",
        default=None,
        help="address of shard {shard}'s gRPC base port, e.g. 'gc-shard-{shard}.gc-shard.kafka.svc:50051'",
    )
    parser.add_argument(
        "--extra-listeners",
        default=os.environ.get(ENV_EXTRA_LISTENERS) or None,
        help="JSON list of further client listeners, each with its own name, port, brokerPorts, "
        "advertisedHost(Env) and security (the --listener-* names): see groupcoord.gateway.extra_listeners "
        f"(env {ENV_EXTRA_LISTENERS})",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="gateway processes on the same ports (SO_REUSEPORT; needs a --port other than 0): "
        "one per core the gateway may use; each serves whole connections, as a gateway pod does",
    )
    parser.add_argument(
        "--internal-tls-dir",
        default=os.environ.get("GROUPCOORD_INTERNAL_TLS_DIR") or None,
        help="folder with ca.crt, tls.crt, tls.key (a mounted TLS Secret): the gateway's "
        "certificate for mutual TLS to the shards (env GROUPCOORD_INTERNAL_TLS_DIR; default: plaintext)",
    )


def _shard_addresses(template: str | None) -> Callable[[int], tuple[str, int]]:
    """Where shard ``n`` listens, from ``--shard-address-template`` (checked at startup)."""
    if not template:
        raise SystemExit("--leadership needs --shard-address-template")
    try:
        parse_address(template.format(shard=0))
    except KeyError as exc:
        raise SystemExit(
            f"--shard-address-template {template!r}: unknown placeholder {{{exc.args[0]}}}; "
            "the only one is {shard}"
        ) from None
    except (argparse.ArgumentTypeError, IndexError, ValueError) as exc:
        raise SystemExit(f"--shard-address-template {template!r}: {exc}") from None
    return lambda shard: parse_address(template.format(shard=shard))


async def serve(args: argparse.Namespace, further: Connection | None = None) -> None:
    """Serve until a signal; ``further``: this is a further process of ``--processes``, which
    reports its metrics port through the pipe once it serves and stops when the pipe closes."""
    tls = InternalTls.from_dir(args.internal_tls_dir) if args.internal_tls_dir else None
    options = dataclasses.replace(
        GatewayOptions.from_arguments(
            args, args.kafka, broker_ports=args.broker_ports, metrics=bool(args.metrics_port)
        ),
        internal_tls=tls,
        reuse_port=args.processes > 1,
    )
    try:
        extra = parse_extra_listeners(args.extra_listeners, options)
    except ExtraListenersError as exc:
        raise SystemExit(f"--extra-listeners: {exc}") from None
    if args.processes > 1 and any(listener.port == 0 for listener in extra):
        raise SystemExit("--processes above 1: every listener of --extra-listeners needs a port other than 0")
    follower: LayoutFollower | None = None
    following: asyncio.Task[None] | None = None
    if args.leadership:
        from groupcoord.controlplane.kubernetes_leadership import KubernetesLeadership  # noqa: PLC0415

        follower = LayoutFollower(
            _shard_addresses(args.shard_address_template), ask=functools.partial(ask_workers, tls=tls)
        )
        try:
            source = KubernetesLeadership.from_ref(args.leadership)
        except ValueError as exc:
            raise SystemExit(f"--leadership: {exc}") from None
        following = asyncio.create_task(source.follow(follower.placement_published))
    table = follower.table if follower is not None else None
    # one set of shard connections for every listener's gateway
    shards = WorkerClient(tls=tls) if table is not None and extra else None
    connections = ConnectionCounter(options.connection_limits)  # the process's, as a broker's
    gateways: list[Gateway] = []
    processes: GatewayProcesses | None = None
    stop = stop_on_signals()
    try:
        gateways.append(await build_gateway(options, table, shards=shards, connections=connections))
        for listener in extra:
            gateways.append(
                await build_gateway(listener.options(options), table, shards=shards, connections=connections)
            )
        metrics_port = 0
        if args.metrics_port:
            from groupcoord.observability.metrics_endpoint import serve_metrics  # noqa: PLC0415

            # a further process's series are read and served by the first
            server, _ = (
                serve_metrics(0, addr="127.0.0.1") if further is not None else serve_metrics(args.metrics_port)
            )
            metrics_port = server.server_port
        for gateway in gateways:
            await gateway.start()
        freeze_startup_objects()
        if further is not None:
            follow_supervisor(further, metrics_port, stop)  # it follows the resource itself
        elif args.processes > 1:
            processes = GatewayProcesses(
                args.processes - 1,
                functools.partial(run_further, picklable_arguments(args)),
                metrics=bool(args.metrics_port),
            )
            await processes.start()
        if further is None:  # the first speaks for all
            host, port = gateways[0].bootstrap_address
            print(f"gateway ready: bootstrap {host}:{port}", flush=True)
            for listener, gateway in zip(extra, gateways[1:], strict=True):
                host, port = gateway.bootstrap_address
                print(f"gateway ready: listener {listener.name} bootstrap {host}:{port}", flush=True)
        await stop.wait()
    finally:
        if processes is not None:
            await processes.stop()
        if following is not None:
            following.cancel()
        if follower is not None:
            await follower.close()
        for gateway in gateways:
            await gateway.stop()
        if shards is not None:
            await shards.close()


def run_further(args: argparse.Namespace, pipe: Connection) -> None:
    """A further process of ``--processes`` (spawned by the first)."""
    from groupcoord.common.process_logging import configure_logging  # noqa: PLC0415 - the spawned process's

    configure_logging(str(args.log_level), str(args.log_format))
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(serve(args, further=pipe))


def main(args: argparse.Namespace) -> int:
    if args.processes < 1:
        raise SystemExit(f"--processes {args.processes}: at least 1")
    if args.processes > 1 and args.port == 0:
        raise SystemExit("--processes above 1 needs a --port other than 0: the processes share one port")
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(serve(args))
    return 0
