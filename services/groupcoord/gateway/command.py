"""``groupcoord gateway``: the Kafka-protocol gateway in front of an upstream cluster.

With ``--leadership kubernetes:<ns>/<name>`` the group APIs are served by the coordinator
shards named in that GroupCoordinator's status (watched, never guessed), at the addresses
``--shard-address-template`` gives; without it the gateway is a plain proxy and the group
APIs go to the upstream cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import threading

from groupcoord.authorization import acl_file
from groupcoord.authorization.upstream_acls import UpstreamAcls, UpstreamAclsUnavailable
from groupcoord.common import kafka_security
from groupcoord.common.event_loop import new_event_loop, stop_on_signals
from groupcoord.common.partitioning import DEFAULT_STATE_TOPIC
from groupcoord.gateway import listener_security
from groupcoord.gateway.advertised_host import advertised_host
from groupcoord.gateway.group_apis import GroupApis
from groupcoord.gateway.group_authorization import GroupAuthorization
from groupcoord.gateway.layout import LayoutFollower
from groupcoord.gateway.leadership import LeadershipTable
from groupcoord.gateway.server import Gateway
from groupcoord.gateway.shard_client import ShardClient

HELP = "run the Kafka-protocol gateway in front of an upstream Kafka cluster"
log = logging.getLogger(__name__)


def parse_address(value: str) -> tuple[str, int]:
    """HOST:PORT; of a comma-separated bootstrap list the first entry (the gateway learns
    the other brokers from Metadata)."""
    host, _, port = value.split(",")[0].strip().rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host, int(port)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kafka", type=parse_address, required=True, help="upstream bootstrap HOST:PORT")
    parser.add_argument(
        "--state-topic",
        default=DEFAULT_STATE_TOPIC,
        help=f"the shards' state topic (transactions add its partitions; default {DEFAULT_STATE_TOPIC})",
    )
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    parser.add_argument("--port", type=int, default=9092, help="bootstrap listener port (default 9092)")
    parser.add_argument(
        "--advertised-host",
        default=None,
        help="host name clients are told to connect to (default: --host, or the machine's "
        "fully qualified host name when --host is 0.0.0.0)",
    )
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
    kafka_security.add_arguments(parser)
    listener_security.add_arguments(parser)
    acl_file.add_arguments(parser)


def _follow_kubernetes(
    ref: str, follower: LayoutFollower, loop: asyncio.AbstractEventLoop, stop: threading.Event
) -> None:
    """Thread: hand every placement the resource status publishes to the layout follower,
    which asks the leading shards for their worker counts before the table takes it."""
    from groupcoord.controlplane.kubernetes_leadership import KubernetesLeadership  # noqa: PLC0415

    for placement in KubernetesLeadership.from_ref(ref).watch(stop):
        asyncio.run_coroutine_threadsafe(follower.placement_changed(placement), loop)
        log.info(
            "leadership: %d partitions on shards %s",
            len(placement),
            sorted({a.leader for a in placement.values()}),
        )


async def serve(gateway: Gateway, args: argparse.Namespace) -> None:
    stop_watch = threading.Event()
    shard_client: ShardClient | None = None
    table: LeadershipTable | None = None
    follower: LayoutFollower | None = None
    if args.leadership:
        if not args.shard_address_template:
            raise SystemExit("--leadership needs --shard-address-template")
        table = LeadershipTable(partitions=0)
        template = args.shard_address_template
        try:
            parse_address(template.format(shard=0))
        except KeyError as exc:
            raise SystemExit(
                f"--shard-address-template {template!r}: unknown placeholder {{{exc.args[0]}}}; "
                "the only one is {shard}"
            ) from None
        except (argparse.ArgumentTypeError, IndexError, ValueError) as exc:
            raise SystemExit(f"--shard-address-template {template!r}: {exc}") from None
        follower = LayoutFollower(table, lambda shard: parse_address(template.format(shard=shard)))
        table.on_stale = follower.suspect
        shard_client = ShardClient()
        policy = acl_file.from_arguments(args)
        if isinstance(policy, UpstreamAcls):  # the upstream cluster's own ACLs
            policy.ask = gateway.upstream_request
            try:
                await policy.refresh()
            except UpstreamAclsUnavailable as exc:
                raise SystemExit(f"authorization: upstream ACLs: {exc}") from None
            refreshing = asyncio.create_task(policy.run())
            refreshing.add_done_callback(lambda _t: None)
        gateway.group_handler = GroupApis(
            table,
            shard_client,
            gateway.upstream_request,
            gateway.coordinator_node,
            authorization=GroupAuthorization(policy) if policy is not None else None,
            upstream_at=gateway.upstream_request_at,
            state_topic=args.state_topic,
        )
        threading.Thread(
            target=_follow_kubernetes,
            args=(args.leadership, follower, asyncio.get_running_loop(), stop_watch),
            daemon=True,
            name="leadership-watch",
        ).start()
    if args.metrics_port:
        from groupcoord.observability.gateway_metrics import GatewayMetrics  # noqa: PLC0415
        from groupcoord.observability.metrics_endpoint import serve_metrics  # noqa: PLC0415

        gateway.metrics = GatewayMetrics()
        if table is not None:
            gateway.metrics.watch_leadership(table)
        serve_metrics(args.metrics_port)
    await gateway.start()
    host, port = gateway.bootstrap_address
    print(f"gateway ready: bootstrap {host}:{port}", flush=True)
    stop = stop_on_signals()
    try:
        await stop.wait()
    finally:
        stop_watch.set()
        if follower is not None:
            await follower.close()
        await gateway.stop()
        if shard_client is not None:
            await shard_client.close()


def main(args: argparse.Namespace) -> int:
    gateway = Gateway(
        args.kafka,
        listen_host=args.host,
        port=args.port,
        advertised_host=advertised_host(args.host, args.advertised_host),
        broker_ports=args.broker_ports,
        upstream_security=kafka_security.configure(args),
        listener_security=listener_security.from_arguments(args),
    )
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(serve(gateway, args))
    return 0
