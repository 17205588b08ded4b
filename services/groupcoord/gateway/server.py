"""The gateway's asyncio transport: listeners, client connections and upstream connections.

All protocol decisions live in the sans-IO modules (:mod:`.protocol`, :mod:`.codec`,
:mod:`.api_versions`, :mod:`.broker_addresses`); this module only moves bytes. Each upstream
broker gets a gateway listener (the bootstrap listener doubles as the listener of the broker
with the bootstrap address), so clients that follow Metadata stay on the gateway. A client
connection forwards to the upstream broker behind its listener over a connection of its own,
which keeps Kafka's per-connection ordering and correlation ids intact.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from groupcoord.gateway import broker_addresses, codec
from groupcoord.gateway.api_versions import advertised_versions, api_versions_response
from groupcoord.gateway.protocol import (
    ClientConnection,
    ProtocolViolation,
    Request,
    ServerConnection,
    frame_bytes,
    produce_expects_response,
)

log = logging.getLogger(__name__)

PRODUCE = 0
READ_SIZE = 256 * 1024
Address = tuple[str, int]


class GroupApiHandler(Protocol):
    """Serves the group APIs instead of the upstream cluster (filled in by the coordinator)."""

    #: API key -> (min, max) versions this handler serves.
    versions: dict[int, tuple[int, int]]

    async def handle(self, header: Any, request: Any, listener: Address, client_host: str) -> Any:
        """The response body for ``request``; ``listener`` is the gateway address it came in on."""
        ...


class UpstreamUnavailable(ConnectionError):
    pass


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
    if size < 4 or size > 100 * 1024 * 1024:
        raise ConnectionError(f"upstream sent impossible frame size {size}")
    return await reader.readexactly(size)


async def fetch_upstream_versions(address: Address, timeout: float = 5.0) -> dict[int, tuple[int, int]]:
    """Ask an upstream broker which API versions it supports."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest  # noqa: PLC0415

    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(*address), timeout)
    except (OSError, TimeoutError) as exc:
        raise UpstreamUnavailable(f"upstream {address[0]}:{address[1]} unreachable: {exc}") from exc
    try:
        req = ApiVersionsRequest(client_software_name="groupcoord-gateway", client_software_version="0.1.0")
        writer.write(frame_bytes(codec.encode_request(1, "groupcoord-gateway", req)))
        payload = await asyncio.wait_for(_read_frame(reader), timeout)
        _, body = codec.decode_response(codec.API_VERSIONS_KEY, 3, payload)
        return {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in body.api_keys}
    except (OSError, TimeoutError, asyncio.IncompleteReadError, codec.DecodeError) as exc:
        raise UpstreamUnavailable(f"upstream {address[0]}:{address[1]} failed ApiVersions: {exc}") from exc
    finally:
        writer.close()


@dataclass
class _Pending:
    seq: int
    api_key: int
    api_version: int
    correlation_id: int


class UpstreamLink:
    """One client connection's connection to one upstream broker (FIFO of pending requests)."""

    def __init__(self, session: ClientSession, address: Address) -> None:
        self.session = session
        self.address = address
        self.pending: deque[_Pending] = deque()
        self.writer: asyncio.StreamWriter | None = None
        self.reader_task: asyncio.Task[None] | None = None
        self._connecting: asyncio.Lock = asyncio.Lock()

    async def send(self, request: Request, expects_response: bool) -> None:
        if self.writer is None:
            async with self._connecting:
                if self.writer is None:
                    try:
                        reader, writer = await asyncio.open_connection(*self.address)
                    except OSError as exc:
                        raise UpstreamUnavailable(
                            f"upstream {self.address[0]}:{self.address[1]}: {exc}"
                        ) from exc
                    self.writer = writer
                    self.reader_task = asyncio.create_task(self._read_loop(reader))
        if expects_response:
            self.pending.append(
                _Pending(request.seq, request.api_key, request.api_version, request.correlation_id)
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
                    if p.api_key in broker_addresses.REWRITTEN_APIS:
                        payload = await self.session.gateway.rewrite_addresses(
                            p.api_key, p.api_version, payload
                        )
                    self.session.deliver(p.seq, payload)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - any upstream failure ends this client connection
            self.session.fail(f"upstream {self.address[0]}:{self.address[1]}: {exc}")

    def close(self) -> None:
        if self.reader_task is not None:
            self.reader_task.cancel()
        if self.writer is not None:
            self.writer.close()


class ClientSession:
    """One client connection on one gateway listener."""

    def __init__(
        self, gateway: Gateway, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.gateway = gateway
        self.listener = listener
        self.reader = reader
        self.writer = writer
        self.conn = ServerConnection()
        self.peer = "{}:{}".format(*writer.get_extra_info("peername")[:2])
        self.upstream = UpstreamLink(self, listener.upstream)
        self.tasks: set[asyncio.Task[None]] = set()
        self.done = asyncio.Event()
        self.started: dict[int, tuple[int, float]] = {}  # seq -> (api key, arrival), for latency
        # The first response ready in an event-loop turn is written at once (no added
        # latency); the others of that turn go out together in one write at its end (a
        # socket write per response was a fifth of the gateway's CPU under pipelined load).
        self.outgoing: list[bytes] = []
        self.flush_scheduled = False

    async def run(self) -> None:
        try:
            while not self.done.is_set():
                data = await self.reader.read(READ_SIZE)
                if not data:
                    break
                for event in self.conn.receive_data(data):
                    if isinstance(event, ProtocolViolation):
                        log.warning("closing connection from %s: %s", self.peer, event.reason)
                        return
                    await self.dispatch(event)
        except (ConnectionError, OSError):
            pass
        except UpstreamUnavailable as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
        finally:
            self.close()

    async def dispatch(self, request: Request) -> None:
        key = request.api_key
        if self.gateway.metrics is not None:
            self.started[request.seq] = (key, time.perf_counter())
        if key == codec.API_VERSIONS_KEY:
            self.spawn(self.answer_api_versions(request))
        elif key in self.gateway.handled_versions:
            self.spawn(self.answer_locally(request))
        elif key == PRODUCE:
            _, offset = codec.decode_request_header(request.frame)
            await self.upstream.send(
                request, produce_expects_response(request.frame, request.api_version, offset)
            )
        else:
            await self.upstream.send(request, True)

    def spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def answer_api_versions(self, request: Request) -> None:
        advertised = await self.gateway.advertised()
        version, body = api_versions_response(request.api_version, advertised)
        self.deliver(request.seq, codec.encode_response(request.correlation_id, body))

    async def answer_locally(self, request: Request) -> None:
        try:
            header, body = codec.decode_request(request.frame)
        except codec.DecodeError as exc:
            self.fail(f"undecodable {codec.API_NAMES[request.api_key]} request: {exc}")
            return
        lo, hi = self.gateway.handled_versions[request.api_key]
        if not lo <= request.api_version <= hi:
            self.fail(f"unsupported version {request.api_version} of {codec.API_NAMES[request.api_key]}")
            return
        assert self.gateway.group_handler is not None
        try:
            response = await self.gateway.group_handler.handle(
                header, body, self.listener.address, self.peer.rpartition(":")[0]
            )
        except Exception:  # a handler bug must not take the gateway down, but must be seen
            log.exception("group handler failed on %s from %s", codec.API_NAMES[request.api_key], self.peer)
            self.fail("internal error in group handler")
            return
        self.deliver(request.seq, codec.encode_response(request.correlation_id, response))

    def deliver(self, seq: int, payload: bytes | None) -> None:
        if self.done.is_set():
            return
        started = self.started.pop(seq, None)
        if started is not None and self.gateway.metrics is not None:
            self.gateway.metrics.observe_request(
                codec.API_NAMES[started[0]], time.perf_counter() - started[1]
            )
        out = self.conn.respond(seq, payload)
        if not out or self.writer.is_closing():
            return  # the client went away: nobody to answer
        if self.flush_scheduled:
            self.outgoing.append(out)
            return
        self.writer.write(out)
        self.flush_scheduled = True
        asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self.flush_scheduled = False
        out, self.outgoing = self.outgoing, []
        if out and not self.done.is_set() and not self.writer.is_closing():
            self.writer.write(b"".join(out))

    def fail(self, reason: str) -> None:
        if not self.done.is_set():
            log.warning("closing connection from %s: %s", self.peer, reason)
        self.close()

    def close(self) -> None:
        if self.done.is_set():
            return
        self.flush()  # responses already delivered still go out before the connection closes
        self.done.set()
        self.upstream.close()
        for task in list(self.tasks):
            task.cancel()
        self.writer.close()


@dataclass
class Listener:
    """A gateway listener standing in for one upstream broker."""

    upstream: Address
    address: Address
    server: asyncio.Server | None = None


@dataclass
class Gateway:
    upstream_bootstrap: Address
    listen_host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    group_handler: GroupApiHandler | None = None
    metrics: Any = None  # groupcoord.observability.gateway_metrics.GatewayMetrics, when exported
    listeners: dict[Address, Listener] = field(default_factory=dict)
    sessions: set[ClientSession] = field(default_factory=set)
    _upstream_versions: dict[int, tuple[int, int]] | None = None
    _listener_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # gateway listener address -> the upstream node id it stands for (learned from Metadata)
    node_ids: dict[Address, int] = field(default_factory=dict)
    _next_port: int = 0

    @property
    def handled_versions(self) -> dict[int, tuple[int, int]]:
        return self.group_handler.versions if self.group_handler is not None else {}

    @property
    def bootstrap_address(self) -> Address:
        return self.listeners[self.upstream_bootstrap].address

    async def start(self) -> None:
        self._next_port = self.port + 1 if self.port else 0
        await self._open_listener(self.upstream_bootstrap, self.port)
        with contextlib.suppress(UpstreamUnavailable):
            await self.advertised()

    async def stop(self) -> None:
        for listener in self.listeners.values():
            if listener.server is not None:
                listener.server.close()
        for session in list(self.sessions):
            session.close()
        for listener in self.listeners.values():
            if listener.server is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(listener.server.wait_closed(), 2)

    async def _open_listener(self, upstream: Address, port: int) -> Listener:
        listener = Listener(upstream=upstream, address=(self.listen_host, port))

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            session = ClientSession(self, listener, reader, writer)
            self.sessions.add(session)
            try:
                await session.run()
            finally:
                self.sessions.discard(session)

        try:
            server = await asyncio.start_server(on_connect, self.listen_host, port, limit=READ_SIZE)
        except OSError:
            if port == self.port:
                raise
            server = await asyncio.start_server(on_connect, self.listen_host, 0, limit=READ_SIZE)
        bound = server.sockets[0].getsockname()[1]
        listener.server = server
        listener.address = (self.advertised_host or self.listen_host, bound)
        self.listeners[upstream] = listener
        log.info("gateway listener %s:%s -> upstream %s:%s", *listener.address, *upstream)
        return listener

    async def listener_for(self, upstream: Address) -> Listener:
        listener = self.listeners.get(upstream)
        if listener is not None:
            return listener
        async with self._listener_lock:
            listener = self.listeners.get(upstream)
            if listener is None:
                port = self._next_port
                if port:
                    self._next_port += 1
                listener = await self._open_listener(upstream, port)
            return listener

    async def advertised(self) -> dict[int, tuple[int, int]]:
        if self._upstream_versions is None:
            self._upstream_versions = await fetch_upstream_versions(self.upstream_bootstrap)
        return advertised_versions(self._upstream_versions, self.handled_versions)

    async def rewrite_addresses(self, api_key: int, api_version: int, payload: bytes) -> bytes:
        correlation_id, body = codec.decode_response(api_key, api_version, payload)
        mapping: dict[int, Address] = {}
        for node_id, host, port in broker_addresses.upstream_brokers(api_key, body):
            mapping[node_id] = (await self.listener_for((host, port))).address
            self.node_ids[mapping[node_id]] = node_id
        rewritten = broker_addresses.rewrite(api_key, body, lambda node, _h, _p: mapping[node])
        return codec.encode_response(correlation_id, rewritten)

    async def upstream_request(self, body: Any) -> Any:
        """Send one request to the upstream bootstrap broker on a connection of its own and
        return the decoded response, broker addresses rewritten. For the parts of group-API
        requests that belong to the upstream cluster (transaction coordinators, non-group
        config resources)."""
        try:
            reader, writer = await asyncio.open_connection(*self.upstream_bootstrap)
        except OSError as exc:
            raise UpstreamUnavailable(f"upstream {self.upstream_bootstrap}: {exc}") from exc
        try:
            writer.write(frame_bytes(codec.encode_request(1, "groupcoord-gateway", body)))
            payload = await _read_frame(reader)
        finally:
            writer.close()
        api_key, version = int(body.__api_key__), int(body.__version__)
        if api_key in broker_addresses.REWRITTEN_APIS:
            payload = await self.rewrite_addresses(api_key, version, payload)
        return codec.decode_response(api_key, version, payload)[1]

    async def coordinator_node(self, listener: Address) -> tuple[int, str, int]:
        """(node id, host, port) to name as group coordinator for a client on ``listener``:
        the gateway itself, under the node id of the upstream broker that listener stands for,
        so clients reuse the connection they already have."""
        if not self.node_ids:
            from kio.schema.metadata.v12.request import MetadataRequest  # noqa: PLC0415

            await self.upstream_request(
                MetadataRequest(
                    topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
                )
            )
        node = self.node_ids.get(listener)
        if node is not None:
            return node, *listener
        address, node = next(iter(self.node_ids.items()))
        return node, *address
