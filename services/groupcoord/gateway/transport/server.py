"""The gateway: a Kafka-protocol server in front of an upstream cluster (asyncio).

All protocol decisions live in sans-IO modules (:mod:`.protocol`, :mod:`.api_versions`,
:mod:`.broker_addresses`, :mod:`groupcoord.common.kafka_wire`); the asyncio side is split by
what it moves: :mod:`.listeners` (one listener per upstream broker, addresses rewritten to
them), :mod:`.client_session` (one client connection) and :mod:`.upstream` (connections to
the upstream cluster). This module ties them together and knows which APIs the gateway answers
itself; :mod:`.assembly` builds one from its options.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from groupcoord.common.kafka_security import KafkaSecurity
from groupcoord.common.partitioning import DEFAULT_METRICS_TOPIC, DEFAULT_STATE_TOPIC
from groupcoord.common.upstream_groups import Features
from groupcoord.gateway.proxy.internal_topics import InternalTopics
from groupcoord.gateway.proxy.listeners import BrokerListeners, Listener
from groupcoord.gateway.proxy.upstream import Upstream, UpstreamUnavailable
from groupcoord.gateway.security.listener_security import ListenerSecurity
from groupcoord.gateway.security.sasl_server import CredentialStore
from groupcoord.gateway.transport.api_versions import ServedApi, advertised_features, advertised_versions
from groupcoord.gateway.transport.client_session import ClientSession
from groupcoord.gateway.transport.connection_limits import ConnectionCounter, ConnectionLimits

if TYPE_CHECKING:
    from groupcoord.observability.gateway_metrics import GatewayMetrics

Address = tuple[str, int]

log = logging.getLogger(__name__)


class GroupApiHandler(Protocol):
    """Serves the group APIs instead of the upstream cluster
    (:class:`~groupcoord.gateway.groups.group_apis.GroupApis`)."""

    #: The APIs it serves: api key -> versions and handler.
    apis: Mapping[int, ServedApi]

    async def handle(
        self,
        header: Any,
        request: Any,
        listener: Address,
        client_host: str,
        principal: str,
        ask: Callable[[Any], Awaitable[Any]],
        connection: Hashable,
    ) -> Any:
        """The response body for ``request``; ``listener`` is the gateway address it came in on,
        ``principal`` who sent it (Kafka's ``User:...``), ``ask`` the upstream's answer to a
        request sent on that client's own upstream connection (under its identity),
        ``connection`` that client connection."""
        ...

    def connection_closed(self, connection: Hashable) -> None:
        """``connection`` closed: what belongs to it ends (its share sessions)."""
        ...

    def serving_shard(self) -> str:
        """The shard that served the group request running in this task, for the latency
        metric's ``shard`` label ("" for a forwarded API, or a request fanned out to several
        shards). Asked of the handler, which sets it: the transport never imports group
        serving."""
        ...


class Gateway:
    """The client listeners and their sessions, in front of ``upstream``; the group APIs go to
    ``group_handler`` (none: a plain proxy, the upstream's coordinator serves them).

    Everything it needs exists before it (see :func:`~.assembly.build_gateway`); what was
    built for it alone (the shard client, the ACL refresher) is handed over in ``owned`` and
    closed by :meth:`stop`.
    """

    def __init__(
        self,
        upstream: Upstream,
        group_handler: GroupApiHandler | None = None,
        *,
        listener_security: ListenerSecurity | None = None,
        metrics: GatewayMetrics | None = None,
        owned: contextlib.AsyncExitStack | None = None,
        limits: ConnectionLimits | None = None,
        internal_topics: InternalTopics | None = None,
        connections: ConnectionCounter | None = None,
    ) -> None:
        self.upstream = upstream
        self.group_handler = group_handler
        #: TLS and SASL of the client listeners (default: plaintext, no authentication)
        self.listener_security = listener_security or ListenerSecurity()
        self.metrics = metrics  # request latencies, when exported
        #: the coordinator's own topics: internal in Metadata, refused to clients' writes
        self.internal_topics = internal_topics or InternalTopics((DEFAULT_STATE_TOPIC, DEFAULT_METRICS_TOPIC))
        self.credentials: CredentialStore | None = self.listener_security.credential_store()
        self.sessions: set[ClientSession] = set()
        #: what one client connection may cost (Kafka's socket and connection configs)
        self.limits = limits or ConnectionLimits()
        #: the connections counted against ``limits``: shared by every listener of a process
        #: (Kafka's max.connections and max.connections.per.ip are the broker's, not a listener's)
        self.connections = connections or ConnectionCounter(self.limits)
        self._owned = owned or contextlib.AsyncExitStack()

    @property
    def brokers(self) -> BrokerListeners:
        """The listeners, one per upstream broker (they belong to the upstream's view)."""
        return self.upstream.listeners

    @property
    def upstream_security(self) -> KafkaSecurity:
        """How client connections are forwarded upstream (TLS, SASL)."""
        return self.upstream.security

    @property
    def served_apis(self) -> Mapping[int, ServedApi]:
        """The APIs answered here rather than upstream (none in a plain proxy)."""
        return self.group_handler.apis if self.group_handler is not None else {}

    @property
    def bootstrap_address(self) -> Address:
        return self.brokers.listeners[self.upstream.bootstrap].address

    async def start(self) -> None:
        await self.brokers.open_bootstrap(self.upstream.bootstrap, self._serve_client)
        with contextlib.suppress(UpstreamUnavailable):
            await self.advertised()

    async def stop(self) -> None:
        self.brokers.close()
        for session in list(self.sessions):
            session.close()
        await self.brokers.wait_closed(2.0)
        await self._owned.aclose()

    async def _serve_client(
        self, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        ip = writer.get_extra_info("peername")[0]
        refused = self.connections.admit(ip)
        if refused is not None:
            log.warning("closing new connection from %s: %s", ip, refused)
            writer.close()
            return
        try:
            session = ClientSession(self, listener, reader, writer)
            self.sessions.add(session)
            try:
                await session.run()
            finally:
                self.sessions.discard(session)
        finally:
            self.connections.release(ip)

    async def advertised(self) -> dict[int, tuple[int, int]]:
        """What ApiVersions advertises: the upstream's versions, and ours for the served APIs."""
        served = {key: api.versions for key, api in self.served_apis.items()}
        # the SASL APIs the listeners answer themselves, whatever the upstream supports
        upstream = await self.upstream.versions()
        return advertised_versions(upstream, served) | self.listener_security.served_versions()

    async def advertised_features(self) -> Features:
        """What ApiVersions names of features (:func:`.api_versions.advertised_features`)."""
        return advertised_features(await self.upstream.features())
