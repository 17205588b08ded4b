"""How a gateway is put together: its options, their command-line flags, and one builder.

``groupcoord gateway`` (Kubernetes), ``groupcoord up`` (local mode) and the tests all build their
gateway with :func:`build_gateway`, in dependency order, each part given what it needs when it
is made: the :class:`~.upstream.Upstream` first (with the listeners standing in for its
brokers), then the ACL policy that asks it, then the group APIs that ask it and the shards,
then the :class:`~.server.Gateway` serving them. Nothing is patched in afterwards.

Where leadership comes from is the caller's business (the local control plane updates the
table; on Kubernetes a :class:`~.layout.LayoutFollower` does): the builder takes the table.

No confused deputy: a client's requests reach the upstream on that client's own connection. A
listener that relays the client's SASL (``passthrough``) makes that the client's identity; any
other listener would lend the coordinator's own upstream credentials to every client, so in
front of an upstream that enforces ACLs the builder refuses to start unless the user accepted
that with ``--allow-shared-upstream-identity``. Passthrough without an ACL policy takes the
upstream's ACLs for the group APIs, the policy Kafka applies to the client's other requests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from groupcoord.authorization import acl_file
from groupcoord.authorization.acls import Authorizer
from groupcoord.authorization.upstream_acls import (
    UpstreamAcls,
    UpstreamAclSource,
    UpstreamAclsUnavailable,
    UpstreamHasNoAuthorizer,
    bindings_from,
    describe_all_acls_request,
)
from groupcoord.common import kafka_security
from groupcoord.common.internal_tls import InternalTls
from groupcoord.common.kafka_security import KafkaSecurity
from groupcoord.common.partitioning import DEFAULT_METRICS_TOPIC, DEFAULT_STATE_TOPIC
from groupcoord.gateway.groups.group_apis import GroupApis
from groupcoord.gateway.groups.leadership import LeadershipTable
from groupcoord.gateway.groups.offset_mirror import OffsetMirror
from groupcoord.gateway.groups.worker_client import WorkerClient
from groupcoord.gateway.proxy.advertised_host import advertised_host
from groupcoord.gateway.proxy.internal_topics import InternalTopics
from groupcoord.gateway.proxy.listeners import BrokerListeners
from groupcoord.gateway.proxy.upstream import Upstream
from groupcoord.gateway.security import listener_security
from groupcoord.gateway.security.group_authorization import GroupAuthorization
from groupcoord.gateway.security.listener_security import ListenerSecurity
from groupcoord.gateway.transport import connection_limits
from groupcoord.gateway.transport.connection_limits import ConnectionCounter, ConnectionLimits
from groupcoord.gateway.transport.server import Gateway

Address = tuple[str, int]
log = logging.getLogger(__name__)

ENV_ALLOW_SHARED_UPSTREAM_IDENTITY = "GROUPCOORD_ALLOW_SHARED_UPSTREAM_IDENTITY"
ENV_ADOPT_UPSTREAM_GROUPS = "GROUPCOORD_ADOPT_UPSTREAM_GROUPS"
ENV_MIRROR_OFFSETS = "GROUPCOORD_MIRROR_OFFSETS_TO_UPSTREAM"


def parse_address(value: str) -> tuple[str, int]:
    """HOST:PORT; of a comma-separated bootstrap list the first entry (the gateway learns
    the other brokers from Metadata)."""
    host, _, port = value.split(",")[0].strip().rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host, int(port)


def parse_bootstrap(value: str) -> tuple[Address, ...]:
    """HOST:PORT[,HOST:PORT...]: every address of a bootstrap list, as Kafka's
    ``bootstrap.servers`` (a dead first broker leaves the others)."""
    return tuple(parse_address(entry) for entry in value.split(",") if entry.strip())


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
    parser.add_argument(
        "--allow-shared-upstream-identity",
        action="store_true",
        default=None,
        help="let clients of listeners that do not relay their SASL (--listener-sasl credentials or none) "
        "reach an upstream that enforces ACLs under the coordinator's own upstream credentials, with "
        "its rights; without it such a gateway refuses to start (env "
        f"{ENV_ALLOW_SHARED_UPSTREAM_IDENTITY})",
    )
    parser.add_argument(
        "--no-adopt-upstream-groups",
        dest="adopt_upstream_groups",
        action="store_false",
        default=None,
        help="do not read a group the gateway never held from the upstream's own coordinator on its "
        "first touch (default: its committed offsets are imported, see docs/adoption.md; env "
        f"{ENV_ADOPT_UPSTREAM_GROUPS}=false)",
    )
    parser.add_argument(
        "--mirror-offsets-to-upstream",
        action="store_true",
        default=None,
        help="also write the offsets committed here to the upstream's own coordinator, within "
        "--mirror-offsets-interval-ms, so the brokers' lag tools see them and a team can leave at any "
        f"moment (env {ENV_MIRROR_OFFSETS}=true; docs/adoption.md)",
    )
    parser.add_argument(
        "--mirror-offsets-interval-ms",
        type=int,
        default=1000,
        help="how often the mirrored offsets are written upstream (default 1000)",
    )
    acl_file.add_arguments(parser)
    connection_limits.add_arguments(parser)


@dataclass(frozen=True)
class GatewayOptions:
    """What a gateway is built from (the flags of :func:`add_arguments`, and the command's own)."""

    upstream: Address
    #: the upstream's other bootstrap addresses, tried when ``upstream`` does not answer
    bootstrap_servers: tuple[Address, ...] = ()
    host: str = "127.0.0.1"
    port: int = 9092  # 0: any free port
    advertised_host: str | None = None  # None: --host, or the machine's host name for 0.0.0.0
    broker_ports: int = 0  # fixed per-broker ports (port + 1 + node id): see BrokerListeners
    state_topic: str = DEFAULT_STATE_TOPIC
    metrics_topic: str = DEFAULT_METRICS_TOPIC  # internal like the state topic
    upstream_security: KafkaSecurity | None = None  # None: this process's environment
    listener_security: ListenerSecurity = field(default_factory=ListenerSecurity)
    # Kafka ACLs on the group APIs: a policy, the upstream's own (connected when built), None: off
    acl_policy: Callable[[], Authorizer] | UpstreamAclSource | None = None
    metrics: bool = False  # record request latencies and leadership for /metrics
    connection_limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    #: clients of a listener that does not relay their SASL may use the coordinator's upstream
    #: credentials in front of an upstream that enforces ACLs (else: refused at start)
    allow_shared_upstream_identity: bool = False
    internal_tls: InternalTls | None = None  # the gateway's certificate for the shards (None: plaintext)
    reuse_port: bool = False  # one of several processes on the same ports (see BrokerListeners)
    #: import a never-held group's committed offsets from the upstream's coordinator on its first touch
    adopt_upstream_groups: bool = True
    #: write the offsets committed here to the upstream's coordinator every so many ms (0: never)
    mirror_offsets_interval_ms: int = 0

    @classmethod
    def from_arguments(
        cls,
        args: argparse.Namespace,
        bootstrap: Sequence[Address],
        *,
        broker_ports: int = 0,
        metrics: bool = False,
    ) -> GatewayOptions:
        """The options :func:`add_arguments`' flags (over the environment) name, in front of the
        upstream at ``bootstrap`` (its first address: the bootstrap listener's); bad settings
        end the command with one line."""
        return cls(
            bootstrap[0],
            bootstrap_servers=tuple(bootstrap),
            host=args.host,
            port=args.port,
            advertised_host=args.advertised_host,
            broker_ports=broker_ports,
            state_topic=args.state_topic,
            upstream_security=kafka_security.configure(args),
            listener_security=listener_security.from_arguments(args),
            acl_policy=acl_file.from_arguments(args),
            metrics=metrics,
            connection_limits=connection_limits.from_arguments(args),
            allow_shared_upstream_identity=allow_shared_upstream_identity(args),
            adopt_upstream_groups=adopt_upstream_groups(args),
            mirror_offsets_interval_ms=mirror_offsets_interval_ms(args),
        )


def mirror_offsets_interval_ms(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> int:
    """``--mirror-offsets-to-upstream`` (or its environment variable): its interval, else 0."""
    environ = os.environ if environ is None else environ
    on = getattr(args, "mirror_offsets_to_upstream", None) or _is_true(environ.get(ENV_MIRROR_OFFSETS, ""))
    return max(1, int(getattr(args, "mirror_offsets_interval_ms", 1000))) if on else 0


def adopt_upstream_groups(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> bool:
    """``--no-adopt-upstream-groups``, else its environment variable (default: adopt)."""
    if getattr(args, "adopt_upstream_groups", None) is False:
        return False
    environ = os.environ if environ is None else environ
    return environ.get(ENV_ADOPT_UPSTREAM_GROUPS, "true").strip().lower() not in ("0", "false", "no", "off")


def _is_true(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def allow_shared_upstream_identity(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> bool:
    """``--allow-shared-upstream-identity``, else its environment variable (the operator's)."""
    if getattr(args, "allow_shared_upstream_identity", None):
        return True
    environ = os.environ if environ is None else environ
    return _is_true(environ.get(ENV_ALLOW_SHARED_UPSTREAM_IDENTITY, ""))


async def build_gateway(
    options: GatewayOptions,
    leadership: LeadershipTable | None = None,
    *,
    shards: WorkerClient | None = None,
    connections: ConnectionCounter | None = None,
) -> Gateway:
    """A gateway in front of ``options.upstream`` (not yet listening: :meth:`Gateway.start`).

    With ``leadership`` it serves the group APIs with the shards that table names, under the
    ACL policy of ``options`` (the upstream's own ACLs are read once here, so a gateway never
    serves before it knows them, then kept fresh); without, it is a plain proxy. ``shards``:
    the connections to the shards, when several gateways of one process (one per listener:
    :mod:`.extra_listeners`) share them; the caller closes them. Else the gateway makes its own.
    ``connections``: the count those gateways share, so the connection limits bound the
    process as Kafka's bound the broker.
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
            options.reuse_port,
        ),
        options.upstream_security,
        options.bootstrap_servers,
    )
    await _refuse_shared_identity(options, upstream)
    owned = contextlib.AsyncExitStack()
    group_apis = None
    if leadership is not None:
        policy = options.acl_policy
        implicit = policy is None and options.listener_security.sasl == "passthrough"
        if implicit:
            policy = UpstreamAclSource()
        if isinstance(policy, UpstreamAclSource):
            policy = policy.connect(upstream.request)
            refreshing = await _follow_upstream_acls(policy, implicit)
            if refreshing is None:
                policy = None
            else:
                owned.callback(refreshing.cancel)
        if shards is None:
            shards = WorkerClient(tls=options.internal_tls)
            owned.push_async_callback(shards.close)
        group_apis = GroupApis(
            leadership,
            shards,
            upstream.request,
            upstream.coordinator_node,
            authorization=GroupAuthorization(policy) if policy is not None else None,
            upstream_for_transaction=upstream.request_for_transaction,
            state_topic=options.state_topic,
        )
        owned.push_async_callback(group_apis.close)  # before the streams to the shards close
        if options.adopt_upstream_groups:
            group_apis.adopt_upstream_groups(upstream.ask_broker, upstream.versions)
        if options.mirror_offsets_interval_ms:
            group_apis.offset_mirror = OffsetMirror(upstream.ask_broker, options.mirror_offsets_interval_ms / 1000)
    metrics = None
    if options.metrics:
        from groupcoord.observability.gateway_metrics import GatewayMetrics  # noqa: PLC0415

        metrics = GatewayMetrics()
        if leadership is not None:
            metrics.watch_leadership(leadership)
        if group_apis is not None and group_apis.adoption is not None:
            observe = metrics.observe_adoption
            group_apis.adoption.observe = lambda outcome: observe(outcome.value)
        if group_apis is not None and group_apis.offset_mirror is not None:
            group_apis.offset_mirror.observe = metrics.observe_offset_mirror
    gateway = Gateway(
        upstream,
        group_apis,
        listener_security=options.listener_security,
        metrics=metrics,
        owned=owned,
        limits=options.connection_limits,
        internal_topics=InternalTopics((options.state_topic, options.metrics_topic)),
        connections=connections,
    )
    files = listener_security.ListenerFiles(options.listener_security, tls_context, gateway.credentials)
    if files.watched:  # certificates and credentials reloaded when their files change
        following = asyncio.create_task(files.follow())
        owned.callback(following.cancel)
    return gateway


async def _follow_upstream_acls(policy: UpstreamAcls, implicit: bool) -> asyncio.Task[None] | None:
    """Read the upstream cluster's ACLs now (an upstream that cannot say ends the command),
    then refresh them in the background. ``implicit``: the policy of a passthrough gateway
    given none, which an upstream without an authorizer leaves without one (None)."""
    try:
        await policy.refresh()
    except UpstreamHasNoAuthorizer:
        if not implicit:
            raise SystemExit(
                "authorization: upstream ACLs: the upstream has no authorizer (SECURITY_DISABLED)"
            ) from None
        log.info(
            "authorization: the upstream has no authorizer, so neither have the group APIs (passthrough)"
        )
        return None
    except UpstreamAclsUnavailable as exc:
        raise SystemExit(f"authorization: upstream ACLs: {exc}") from None
    if implicit:
        log.info(
            "authorization: passthrough without an ACL policy: the group APIs follow the upstream "
            "cluster's ACLs (--acl-source upstream; Kafka's super.users go in --super-users)"
        )
    return asyncio.create_task(policy.run())


async def _refuse_shared_identity(options: GatewayOptions, upstream: Upstream) -> None:
    """End the command (one line) if clients would reach an upstream that enforces ACLs under
    the coordinator's own credentials: a listener that does not relay the client's SASL, an
    upstream the gateway authenticates to itself (SASL, or a client certificate), and no
    ``--allow-shared-upstream-identity``. The upstream enforces ACLs unless DescribeAcls says
    SECURITY_DISABLED (a refusal to describe them is an authorizer too)."""
    security = upstream.security
    if options.listener_security.sasl == "passthrough" or not (security.uses_sasl or security.ssl_certfile):
        return
    identity = f"User:{security.sasl_username}" if security.uses_sasl else "its client certificate's subject"
    if options.allow_shared_upstream_identity:
        log.warning(
            "clients of the gateway's listeners reach the upstream as the coordinator's own principal (%s), "
            "with its rights (--allow-shared-upstream-identity)",
            identity,
        )
        return
    try:
        bindings_from(await upstream.request(describe_all_acls_request()))
    except UpstreamHasNoAuthorizer:
        return  # no ACLs to lend
    except UpstreamAclsUnavailable:
        pass  # refused or failed: an authorizer answered
    except ConnectionError as exc:
        raise SystemExit(f"gateway: cannot tell whether the upstream enforces ACLs: {exc}") from None
    raise SystemExit(
        f"gateway: refusing to start: clients of listeners with SASL {options.listener_security.sasl!r} would "
        f"reach the upstream, which enforces ACLs, as the coordinator's own principal ({identity}) with its "
        "rights; relay their SASL (--listener-sasl passthrough) or accept it with "
        f"--allow-shared-upstream-identity ({ENV_ALLOW_SHARED_UPSTREAM_IDENTITY}=true)"
    )
