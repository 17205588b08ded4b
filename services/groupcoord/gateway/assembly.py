"""How a gateway is put together: its options, their command-line flags, and one builder.

``groupcoord gateway`` (Kubernetes), ``groupcoord up`` (local mode) and the tests all build their
gateway with :func:`build_gateway`, in dependency order, each part given what it needs when it
is made: the :class:`~.upstream.Upstream` first (with the listeners standing in for its
brokers), then the ACL policy that asks it, then the group APIs that ask it and the shards,
then the :class:`~.server.Gateway` serving them. Nothing is patched in afterwards.

Where leadership comes from is the caller's business (the local control plane updates the
table; on Kubernetes a :class:`~.layout.LayoutFollower` does): the builder takes the table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from groupcoord.authorization import acl_file
from groupcoord.authorization.acls import Authorizer
from groupcoord.authorization.upstream_acls import UpstreamAcls, UpstreamAclSource, UpstreamAclsUnavailable
from groupcoord.common import kafka_security
from groupcoord.common.internal_tls import InternalTls
from groupcoord.common.kafka_security import KafkaSecurity
from groupcoord.common.partitioning import DEFAULT_STATE_TOPIC
from groupcoord.gateway.groups.group_apis import GroupApis
from groupcoord.gateway.groups.leadership import LeadershipTable
from groupcoord.gateway.groups.worker_client import WorkerClient
from groupcoord.gateway.proxy.advertised_host import advertised_host
from groupcoord.gateway.proxy.listeners import BrokerListeners
from groupcoord.gateway.proxy.upstream import Upstream
from groupcoord.gateway.security import listener_security
from groupcoord.gateway.security.group_authorization import GroupAuthorization
from groupcoord.gateway.security.listener_security import ListenerSecurity
from groupcoord.gateway.transport.server import Gateway

Address = tuple[str, int]


def parse_address(value: str) -> tuple[str, int]:
    """HOST:PORT; of a comma-separated bootstrap list the first entry (the gateway learns
    the other brokers from Metadata)."""
    host, _, port = value.split(",")[0].strip().rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host, int(port)


def add_arguments(parser: argparse.ArgumentParser, *, host: str) -> None:
    """The flags of every command that runs a gateway (``up`` and ``gateway``): where it
    listens (``--host`` defaults to ``host``), what it tells clients, the state topic, and the
    security of both sides with the ACLs on the group APIs."""
    parser.add_argument("--host", default=host, help=f"address the gateway listens on (default {host})")
    parser.add_argument("--port", type=int, default=9092, help="gateway bootstrap port (default 9092)")
    parser.add_argument(
        "--advertised-host",
        default=None,
        help="host name clients are told to connect to (default: --host, or the machine's "
        "fully qualified host name when --host is 0.0.0.0)",
    )
    parser.add_argument(
        "--state-topic",
        default=DEFAULT_STATE_TOPIC,
        help=f"the shards' state topic (transactions add its partitions; default {DEFAULT_STATE_TOPIC})",
    )
    kafka_security.add_arguments(parser)
    listener_security.add_arguments(parser)
    acl_file.add_arguments(parser)


@dataclass(frozen=True)
class GatewayOptions:
    """What a gateway is built from (the flags of :func:`add_arguments`, and the command's own)."""

    upstream: Address
    host: str = "127.0.0.1"
    port: int = 9092  # 0: any free port
    advertised_host: str | None = None  # None: --host, or the machine's host name for 0.0.0.0
    broker_ports: int = 0  # fixed per-broker ports (port + 1 + node id): see BrokerListeners
    state_topic: str = DEFAULT_STATE_TOPIC
    upstream_security: KafkaSecurity | None = None  # None: this process's environment
    listener_security: ListenerSecurity = field(default_factory=ListenerSecurity)
    # Kafka ACLs on the group APIs: a policy, the upstream's own (connected when built), None: off
    acl_policy: Callable[[], Authorizer] | UpstreamAclSource | None = None
    metrics: bool = False  # record request latencies and leadership for /metrics
    internal_tls: InternalTls | None = None  # the gateway's certificate for the shards (None: plaintext)

    @classmethod
    def from_arguments(
        cls, args: argparse.Namespace, upstream: Address, *, broker_ports: int = 0, metrics: bool = False
    ) -> GatewayOptions:
        """The options :func:`add_arguments`' flags (over the environment) name; bad settings
        end the command with one line."""
        return cls(
            upstream,
            host=args.host,
            port=args.port,
            advertised_host=args.advertised_host,
            broker_ports=broker_ports,
            state_topic=args.state_topic,
            upstream_security=kafka_security.configure(args),
            listener_security=listener_security.from_arguments(args),
            acl_policy=acl_file.from_arguments(args),
            metrics=metrics,
        )


async def build_gateway(options: GatewayOptions, leadership: LeadershipTable | None = None) -> Gateway:
    """A gateway in front of ``options.upstream`` (not yet listening: :meth:`Gateway.start`).

    With ``leadership`` it serves the group APIs with the shards that table names, under the
    ACL policy of ``options`` (the upstream's own ACLs are read once here, so a gateway never
    serves before it knows them, then kept fresh); without, it is a plain proxy.
    """
    tls_context = options.listener_security.ssl_context()
    upstream = Upstream(
        options.upstream,
        BrokerListeners(
            options.host,
            options.port,
            advertised_host(options.host, options.advertised_host),
            options.broker_ports,
            tls_context,
        ),
        options.upstream_security,
    )
    owned = contextlib.AsyncExitStack()
    group_apis = None
    if leadership is not None:
        policy = options.acl_policy
        if isinstance(policy, UpstreamAclSource):
            policy = policy.connect(upstream.request)
            refreshing = await _follow_upstream_acls(policy)
            owned.callback(refreshing.cancel)
        shards = WorkerClient(tls=options.internal_tls)
        owned.push_async_callback(shards.close)
        group_apis = GroupApis(
            leadership,
            shards,
            upstream.request,
            upstream.coordinator_node,
            authorization=GroupAuthorization(policy) if policy is not None else None,
            upstream_at=upstream.request_at,
            state_topic=options.state_topic,
        )
    metrics = None
    if options.metrics:
        from groupcoord.observability.gateway_metrics import GatewayMetrics  # noqa: PLC0415

        metrics = GatewayMetrics()
        if leadership is not None:
            metrics.watch_leadership(leadership)
    gateway = Gateway(
        upstream, group_apis, listener_security=options.listener_security, metrics=metrics, owned=owned
    )
    files = listener_security.ListenerFiles(options.listener_security, tls_context, gateway.credentials)
    if files.watched:  # certificates and credentials reloaded when their files change
        following = asyncio.create_task(files.follow())
        owned.callback(following.cancel)
    return gateway


async def _follow_upstream_acls(policy: UpstreamAcls) -> asyncio.Task[None]:
    """Read the upstream cluster's ACLs now (an upstream that cannot say ends the command),
    then refresh them in the background."""
    try:
        await policy.refresh()
    except UpstreamAclsUnavailable as exc:
        raise SystemExit(f"authorization: upstream ACLs: {exc}") from None
    return asyncio.create_task(policy.run())
