"""The gateway's connections to the upstream Kafka cluster (asyncio).

A client connection forwards what the gateway does not serve itself to the upstream broker
behind its listener over an :class:`UpstreamLink` of its own, which keeps Kafka's
per-connection ordering and correlation ids intact. The few requests the gateway itself sends
upstream (ApiVersions, Metadata, DescribeAcls, the upstream's share of group-API requests) each
go on a connection of their own through :class:`Upstream`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from groupcoord.common.kafka_security import KafkaSecurity, upstream_security
from groupcoord.common.kafka_wire.exchange import ExchangeFailed, exchange
from groupcoord.common.kafka_wire.framing import ClientConnection, frame_bytes
from groupcoord.common.kafka_wire.secure_connection import open_kafka_connection
from groupcoord.gateway.proxy import broker_addresses
from groupcoord.gateway.transport.protocol import Request

if TYPE_CHECKING:
    from groupcoord.gateway.proxy.listeners import BrokerListeners

Address = tuple[str, int]
READ_SIZE = 256 * 1024  # bytes per socket read, and the stream limit of client connections
CLIENT_ID = "groupcoord-gateway"
TIMEOUT_S = 10.0


class UpstreamUnavailable(ConnectionError):
    """The upstream broker cannot be reached or did not answer properly."""


async def ask_upstream(
    address: Address, body: Any, timeout_s: float = TIMEOUT_S, security: KafkaSecurity | None = None
) -> Any:
    """The upstream broker's response to the kio request ``body``, on a connection of its own
    (secured as ``security`` says; default: this process's environment)."""
    try:
        return await exchange(address, body, CLIENT_ID, timeout_s, security)
    except ExchangeFailed as exc:
        raise UpstreamUnavailable(f"upstream {exc}") from exc


async def fetch_upstream_versions(
    address: Address, timeout_s: float = 5.0, security: KafkaSecurity | None = None
) -> dict[int, tuple[int, int]]:
    """Which API versions the upstream broker at ``address`` supports."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest  # noqa: PLC0415

    body = await ask_upstream(
        address,
        ApiVersionsRequest(client_software_name=CLIENT_ID, client_software_version="0.1.0"),
        timeout_s,
        security,
    )
    return {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in body.api_keys}


class Upstream:
    """The upstream cluster as the gateway itself asks it: its bootstrap broker, how to connect
    (TLS, SASL with the gateway's credentials), and the gateway listeners standing in for its
    brokers, through which every answer naming brokers is rewritten.

    Built first, and handed to everything that asks the upstream (the ACL refresher, the group
    APIs, the gateway), so none of them needs another to exist before it.
    """

    def __init__(
        self, bootstrap: Address, listeners: BrokerListeners, security: KafkaSecurity | None = None
    ) -> None:
        self.bootstrap = bootstrap
        self.listeners = listeners
        #: default: this process's environment (what ``kafka_security.configure`` exported)
        self.security = upstream_security(security)
        self._versions: dict[int, tuple[int, int]] | None = None

    async def versions(self) -> dict[int, tuple[int, int]]:
        """The API versions the bootstrap broker supports (asked once)."""
        if self._versions is None:
            self._versions = await fetch_upstream_versions(self.bootstrap, security=self.security)
        return self._versions

    async def request(self, body: Any) -> Any:
        """The bootstrap broker's response to ``body``, broker addresses rewritten. For the
        parts of group-API requests that belong to the upstream cluster (transaction
        coordinators, non-group config resources) and the gateway's own questions."""
        response = await ask_upstream(self.bootstrap, body, security=self.security)
        api_key = int(body.__api_key__)
        if api_key in broker_addresses.REWRITTEN_APIS:
            response = await self.listeners.rewrite(api_key, response)
        return response

    async def request_at(self, listener: Address, body: Any) -> Any:
        """The response to ``body`` of the upstream broker the client listener ``listener``
        stands for (e.g. a client's transaction coordinator)."""
        upstream = next(
            (lst.upstream for lst in self.listeners.listeners.values() if lst.address == listener),
            self.bootstrap,
        )
        return await ask_upstream(upstream, body, security=self.security)

    async def coordinator_node(self, listener: Address) -> tuple[int, str, int]:
        """(node id, host, port) to name as group coordinator for a client on ``listener``:
        the gateway itself, under the node id of the upstream broker that listener stands for,
        so clients reuse the connection they already have."""
        node_ids = self.listeners.node_ids
        if not node_ids:
            from kio.schema.metadata.v12.request import MetadataRequest  # noqa: PLC0415

            await self.request(
                MetadataRequest(
                    topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
                )
            )
        node = node_ids.get(listener)
        if node is not None:
            return node, *listener
        address, node = next(iter(node_ids.items()))
        return node, *address


@dataclass
class _Pending:
    seq: int
    api_key: int
    api_version: int
    correlation_id: int
    patch: Callable[[bytes], bytes] | None = None  # a change of this one response (internal topics)


Deliver = Callable[[int, bytes], None]
Rewrite = Callable[[int, int, bytes], Awaitable[bytes]]


class UpstreamLink:
    """One client connection's connection to one upstream broker (FIFO of pending requests).

    Responses go back through ``deliver(seq, payload)``, after ``rewrite(api_key, version,
    payload)`` for the APIs in ``rewritten`` (those naming brokers); any upstream failure ends
    the client connection through ``fail(reason)``. The connection is secured as ``security``
    says (TLS, and SASL with the gateway's credentials unless the client's own SASL exchange is
    relayed on it).
    """

    def __init__(
        self,
        address: Address,
        deliver: Deliver,
        fail: Callable[[str], None],
        rewritten: frozenset[int],
        rewrite: Rewrite,
        security: KafkaSecurity | None = None,
    ) -> None:
        self.address = address
        self.security = security if security is not None else KafkaSecurity()
        self.deliver = deliver
        self.fail = fail
        self.rewritten = rewritten
        self.rewrite = rewrite
        self.pending: deque[_Pending] = deque()
        self.writer: asyncio.StreamWriter | None = None
        self.reader_task: asyncio.Task[None] | None = None
        self._connecting: asyncio.Lock = asyncio.Lock()

    async def send(
        self, request: Request, expects_response: bool, patch: Callable[[bytes], bytes] | None = None
    ) -> None:
        """Forward ``request``; its response, if one is expected, goes through ``patch`` (if
        given) after the broker-address rewrite."""
        if self.writer is None:
            async with self._connecting:
                if self.writer is None:
                    try:
                        reader, writer = await open_kafka_connection(
                            self.address, self.security, CLIENT_ID, READ_SIZE
                        )
                    except OSError as exc:
                        raise UpstreamUnavailable(
                            f"upstream {self.address[0]}:{self.address[1]}: {exc}"
                        ) from exc
                    self.writer = writer
                    self.reader_task = asyncio.create_task(self._read_loop(reader))
        if expects_response:
            self.pending.append(
                _Pending(request.seq, request.api_key, request.api_version, request.correlation_id, patch)
            )
        self.writer.write(frame_bytes(request.frame))
        await self.writer.drain()

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        conn = ClientConnection()
        try:
            while True:
                data = await reader.read(READ_SIZE)
                if not data:
                    raise ConnectionError("upstream closed the connection")
                for correlation_id, payload in conn.receive_data(data):
                    if not self.pending:
                        raise ConnectionError(f"unsolicited upstream response {correlation_id}")
                    p = self.pending.popleft()
                    if p.correlation_id != correlation_id:
                        raise ConnectionError(
                            f"upstream answered {correlation_id}, expected {p.correlation_id}"
                        )
                    if p.api_key in self.rewritten:
                        payload = await self.rewrite(p.api_key, p.api_version, payload)
                    if p.patch is not None:
                        payload = p.patch(payload)
                    self.deliver(p.seq, payload)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - any upstream failure ends this client connection
            self.fail(f"upstream {self.address[0]}:{self.address[1]}: {exc}")

    def close(self) -> None:
        if self.reader_task is not None:
            self.reader_task.cancel()
        if self.writer is not None:
            self.writer.close()
