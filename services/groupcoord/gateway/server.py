"""The gateway: a Kafka-protocol server in front of an upstream cluster (asyncio).

All protocol decisions live in sans-IO modules (:mod:`.protocol`, :mod:`.api_versions`,
:mod:`.broker_addresses`, :mod:`groupcoord.common.kafka_wire`); the asyncio side is split by
what it moves: :mod:`.listeners` (one listener per upstream broker, addresses rewritten to
them), :mod:`.client_session` (one client connection) and :mod:`.upstream` (connections to
the upstream cluster). This module ties them together and knows which APIs the gateway answers
itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from groupcoord.common.kafka_security import KafkaSecurity
from groupcoord.gateway import broker_addresses
from groupcoord.gateway.api_versions import ServedApi, advertised_versions
from groupcoord.gateway.client_session import ClientSession
from groupcoord.gateway.listener_security import ListenerSecurity
from groupcoord.gateway.listeners import BrokerListeners, Listener
from groupcoord.gateway.sasl_server import CredentialStore
from groupcoord.gateway.upstream import UpstreamUnavailable, ask_upstream, fetch_upstream_versions

Address = tuple[str, int]


class GroupApiHandler(Protocol):
    """Serves the group APIs instead of the upstream cluster (:class:`~.group_apis.GroupApis`)."""

    #: The APIs it serves: api key -> versions and handler.
    apis: Mapping[int, ServedApi]

    async def handle(
        self, header: Any, request: Any, listener: Address, client_host: str, principal: str
    ) -> Any:
        """The response body for ``request``; ``listener`` is the gateway address it came in on,
        ``principal`` who sent it (Kafka's ``User:...``)."""
        ...


@dataclass
class Gateway:
    upstream_bootstrap: Address
    listen_host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    group_handler: GroupApiHandler | None = None
    metrics: Any = None  # groupcoord.observability.gateway_metrics.GatewayMetrics, when exported
    broker_ports: int = 0  # fixed per-broker ports (port + 1 + node id): see BrokerListeners
    #: how the gateway connects upstream (TLS, SASL); default: this process's environment
    upstream_security: KafkaSecurity = field(default_factory=KafkaSecurity.from_environment)
    #: TLS and SASL of the client listeners (default: plaintext, no authentication)
    listener_security: ListenerSecurity = field(default_factory=ListenerSecurity)
    sessions: set[ClientSession] = field(default_factory=set)
    brokers: BrokerListeners = field(init=False)
    credentials: CredentialStore | None = field(init=False, default=None)
    _upstream_versions: dict[int, tuple[int, int]] | None = None

    def __post_init__(self) -> None:
        self.brokers = BrokerListeners(
            self.listen_host,
            self.port,
            self.advertised_host,
            self._serve_client,
            self.broker_ports,
            self.listener_security.ssl_context(),
        )
        self.credentials = self.listener_security.credential_store()

    @property
    def served_apis(self) -> Mapping[int, ServedApi]:
        """The APIs answered here rather than upstream (none in a plain proxy)."""
        return self.group_handler.apis if self.group_handler is not None else {}

    @property
    def bootstrap_address(self) -> Address:
        return self.brokers.listeners[self.upstream_bootstrap].address

    async def start(self) -> None:
        await self.brokers.open_bootstrap(self.upstream_bootstrap)
        with contextlib.suppress(UpstreamUnavailable):
            await self.advertised()

    async def stop(self) -> None:
        self.brokers.close()
        for session in list(self.sessions):
            session.close()
        await self.brokers.wait_closed(2.0)

    async def _serve_client(
        self, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        session = ClientSession(self, listener, reader, writer)
        self.sessions.add(session)
        try:
            await session.run()
        finally:
            self.sessions.discard(session)

    async def advertised(self) -> dict[int, tuple[int, int]]:
        """What ApiVersions advertises: the upstream's versions, and ours for the served APIs."""
        if self._upstream_versions is None:
            self._upstream_versions = await fetch_upstream_versions(
                self.upstream_bootstrap, security=self.upstream_security
            )
        served = {key: api.versions for key, api in self.served_apis.items()}
        # the SASL APIs the listeners answer themselves, whatever the upstream supports
        return advertised_versions(self._upstream_versions, served) | self.listener_security.served_versions()

    async def upstream_request(self, body: Any) -> Any:
        """The upstream bootstrap broker's response to ``body``, broker addresses rewritten.
        For the parts of group-API requests that belong to the upstream cluster (transaction
        coordinators, non-group config resources)."""
        response = await ask_upstream(self.upstream_bootstrap, body, security=self.upstream_security)
        api_key = int(body.__api_key__)
        if api_key in broker_addresses.REWRITTEN_APIS:
            response = await self.brokers.rewrite(api_key, response)
        return response

    async def upstream_request_at(self, listener: Address, body: Any) -> Any:
        """The response to ``body`` of the upstream broker the client listener ``listener``
        stands for (e.g. a client's transaction coordinator)."""
        upstream = next(
            (lst.upstream for lst in self.brokers.listeners.values() if lst.address == listener),
            self.upstream_bootstrap,
        )
        return await ask_upstream(upstream, body)

    async def coordinator_node(self, listener: Address) -> tuple[int, str, int]:
        """(node id, host, port) to name as group coordinator for a client on ``listener``:
        the gateway itself, under the node id of the upstream broker that listener stands for,
        so clients reuse the connection they already have."""
        node_ids = self.brokers.node_ids
        if not node_ids:
            from kio.schema.metadata.v12.request import MetadataRequest  # noqa: PLC0415

            await self.upstream_request(
                MetadataRequest(
                    topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
                )
            )
        node = node_ids.get(listener)
        if node is not None:
            return node, *listener
        address, node = next(iter(node_ids.items()))
        return node, *address
