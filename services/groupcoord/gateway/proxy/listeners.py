"""One gateway listener per upstream broker, and broker addresses rewritten to name them.

Clients that follow Metadata must stay on the gateway: every broker a response names
(Metadata, FindCoordinator, DescribeCluster) gets a gateway listener standing in for it, opened
the first time it is named (the bootstrap listener stands in for the bootstrap broker), and the
response names that listener instead. Each listener remembers the node id of the broker it
stands for, so the gateway can name itself group coordinator under that id and clients reuse
the connection they already have. What to rewrite is decided by the pure functions of
:mod:`.broker_addresses`; this module owns the sockets and the mapping.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from groupcoord.common.kafka_wire import codec
from groupcoord.gateway.proxy import broker_addresses
from groupcoord.gateway.proxy.advertised_host import advertised_host
from groupcoord.gateway.proxy.upstream import READ_SIZE

log = logging.getLogger(__name__)

Address = tuple[str, int]


@dataclass
class Listener:
    """A gateway listener standing in for one upstream broker."""

    upstream: Address
    address: Address
    server: asyncio.Server | None = None


OnConnect = Callable[[Listener, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class BrokerListeners:
    """The gateway's listeners, keyed by the upstream broker each stands for.

    The bootstrap listener binds ``port`` (0: any free port); the listener of the n-th broker
    named later binds ``port + n`` when that is free, else any free port. Connections are handed
    to the ``on_connect`` the listeners are opened with (:meth:`open_bootstrap`): the set exists
    before the gateway that serves them, because the gateway's own upstream requests rewrite
    broker addresses through it (:class:`~.upstream.Upstream`).

    With ``broker_ports`` N (a fleet of gateways behind one Service or load balancer), the
    listener of the broker with node id ``i`` binds ``port + 1 + i`` for ``0 <= i < N``, so every
    gateway pod means the same broker by the same port whatever order brokers were named in
    (Kroxylicious' port-per-broker scheme); a node id outside that range gets any free port
    (reachable only at the pod's own address) and a warning.

    With ``reuse_port`` several processes of one gateway listen together (``SO_REUSEPORT``; the
    kernel spreads connections over them): the bootstrap port and the ``broker_ports`` ones are
    shared, as each means the same broker in every process; the listeners of brokers named in
    order get a free port of their own instead (the order differs between processes), so a
    client stays on the process that answered its Metadata for them.
    """

    def __init__(
        self,
        listen_host: str,
        port: int,
        advertised_host: str | None,
        broker_ports: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        reuse_port: bool = False,
    ) -> None:
        self.ssl_context = ssl_context  # TLS on every listener when set
        self.reuse_port = reuse_port
        self.listen_host = listen_host
        self.port = port
        self.broker_ports = broker_ports if port else 0
        self.advertised_host = advertised_host
        self.on_connect: OnConnect | None = None  # set when the listeners open
        self.listeners: dict[Address, Listener] = {}
        # gateway listener address -> the upstream node id it stands for (learned from responses)
        self.node_ids: dict[Address, int] = {}
        # The brokers the latest Metadata or DescribeCluster response listed: those alive and
        # registered. Kafka lists no crashed broker, so naming one coordinator would send
        # clients to a node their own metadata no longer has (None: no such response yet).
        self.live_nodes: frozenset[int] | None = None
        self._lock = asyncio.Lock()
        self._next_port = port + 1 if port and not reuse_port else 0

    async def open_bootstrap(self, upstream: Address, on_connect: OnConnect) -> Listener:
        """Open the bootstrap listener; this and every later listener hand their connections
        to ``on_connect``."""
        self.on_connect = on_connect
        return await self._open(upstream, self.port)

    def port_for_node(self, node_id: int) -> int | None:
        """The fixed port of broker ``node_id`` (``broker_ports`` mode), else None."""
        if self.broker_ports and 0 <= node_id < self.broker_ports:
            return self.port + 1 + node_id
        return None

    async def listener_for(self, upstream: Address, node_id: int | None = None) -> Listener:
        listener = self.listeners.get(upstream)
        if listener is not None:
            return listener
        async with self._lock:
            listener = self.listeners.get(upstream)
            if listener is None:
                if self.broker_ports:
                    port = self.port_for_node(node_id) if node_id is not None else None
                    if port is None:
                        log.warning(
                            "upstream broker %s (node id %s) is outside the %d per-broker ports; "
                            "its listener gets a free port, reachable at this pod's address only",
                            upstream,
                            node_id,
                            self.broker_ports,
                        )
                        port = 0
                else:
                    port = self._next_port
                    if port:
                        self._next_port += 1
                listener = await self._open(upstream, port)
            return listener

    async def _open(self, upstream: Address, port: int) -> Listener:
        if self.on_connect is None:
            raise RuntimeError("the gateway listeners are not open yet (open_bootstrap)")
        serve = self.on_connect
        listener = Listener(upstream=upstream, address=(self.listen_host, port))

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await serve(listener, reader, writer)

        try:
            server = await asyncio.start_server(
                on_connect,
                self.listen_host,
                port,
                limit=READ_SIZE,
                ssl=self.ssl_context,
                reuse_port=bool(self.reuse_port and port),
            )
        except OSError:
            if port == self.port:
                raise
            server = await asyncio.start_server(
                on_connect, self.listen_host, 0, limit=READ_SIZE, ssl=self.ssl_context
            )
        bound = server.sockets[0].getsockname()[1]
        listener.server = server
        listener.address = (advertised_host(self.listen_host, self.advertised_host), bound)
        self.listeners[upstream] = listener
        log.info("gateway listener %s:%s -> upstream %s:%s", *listener.address, *upstream)
        return listener

    async def rewrite(self, api_key: int, body: Any) -> Any:
        """The response ``body`` of ``api_key`` naming gateway listeners instead of brokers."""
        mapping: dict[int, Address] = {}
        for node_id, host, port in broker_addresses.upstream_brokers(api_key, body):
            mapping[node_id] = (await self.listener_for((host, port), node_id)).address
            self.node_ids[mapping[node_id]] = node_id
        if api_key in broker_addresses.CLUSTER_APIS:
            self.live_nodes = frozenset(mapping)
        return broker_addresses.rewrite(api_key, body, lambda node, _h, _p: mapping[node])

    async def rewrite_payload(self, api_key: int, api_version: int, payload: bytes) -> bytes:
        """:meth:`rewrite` on an encoded response payload (header + body)."""
        correlation_id, body = codec.decode_response(api_key, api_version, payload)
        return codec.encode_response(correlation_id, await self.rewrite(api_key, body))

    def close(self) -> None:
        """Stop accepting connections (see :meth:`wait_closed`)."""
        for listener in self.listeners.values():
            if listener.server is not None:
                listener.server.close()

    async def wait_closed(self, timeout_s: float) -> None:
        for listener in self.listeners.values():
            if listener.server is not None:
                with contextlib.suppress(Exception):  # shutting down: a slow listener is no error
                    await asyncio.wait_for(listener.server.wait_closed(), timeout_s)
