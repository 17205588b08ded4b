"""One client connection to a gateway listener (asyncio).

Reads bytes into the sans-IO :class:`~.protocol.ServerConnection`, and for each request it
yields either answers it here (ApiVersions, and the APIs the group handler serves) or forwards
it to the upstream broker behind the listener (:class:`~.upstream.UpstreamLink`). Responses
go back in request order, as Kafka clients require.

The connection's bounds are Kafka's (:mod:`.connection_limits`): frames are at most
``sasl.server.max.receive.size`` until SASL completes, then ``socket.request.max.bytes``; reading
pauses while ``queued.max.requests`` requests are unanswered; a connection with no traffic and
nothing in flight for ``connections.max.idle.ms`` is closed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter

from groupcoord.common.kafka_wire import codec
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.gateway.messages.framed_request import Request
from groupcoord.gateway.proxy import broker_addresses
from groupcoord.gateway.proxy.internal_topics import merge_payload
from groupcoord.gateway.proxy.upstream import READ_SIZE, UpstreamLink, UpstreamUnavailable
from groupcoord.gateway.security.listener_security import ANONYMOUS, certificate_principal
from groupcoord.gateway.security.relayed_sasl import RelayedSasl
from groupcoord.gateway.transport.api_versions import api_versions_response
from groupcoord.gateway.transport.protocol import (
    ProtocolViolation,
    ServerConnection,
    produce_expects_response,
)

if TYPE_CHECKING:
    from groupcoord.gateway.proxy.listeners import Listener
    from groupcoord.gateway.transport.server import Gateway

log = logging.getLogger(__name__)

SASL_AUTHENTICATIONS = Counter(
    "groupcoord_sasl_authentications",
    "SASL exchanges the gateway's listeners completed, by mechanism and result (credentials mode)",
    ["mechanism", "result"],
)

SASL_APIS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class ClientSession:
    """One client connection on one gateway listener."""

    def __init__(
        self, gateway: Gateway, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.gateway = gateway
        self.listener = listener
        self.reader = reader
        self.writer = writer
        self.peer = "{}:{}".format(*writer.get_extra_info("peername")[:2])
        security = gateway.listener_security
        limits = gateway.limits
        # Who this connection is (Kafka's default principal): the client certificate's subject
        # until SASL, if the listener has it, names the user.
        tls = writer.get_extra_info("ssl_object")
        self.principal = (certificate_principal(tls.getpeercert()) if tls is not None else None) or ANONYMOUS
        self.sasl_required = security.sasl_enabled
        self.conn = ServerConnection(
            limits.sasl_server_max_receive_size if self.sasl_required else limits.socket_request_max_bytes,
            limits.queued_max_requests,
        )
        self.room = asyncio.Event()  # set when an answer un-pauses a paused connection
        loop = asyncio.get_running_loop()
        self.idle_s = limits.connections_max_idle_ms / 1000
        self.last_active = loop.time()
        self.idle_timer = loop.call_later(self.idle_s, self.check_idle)
        self.sasl = security.new_sasl_server(gateway.credentials)  # credentials mode
        self.relayed = RelayedSasl() if security.sasl == "passthrough" else None
        upstream_security = gateway.upstream_security
        rewritten = broker_addresses.REWRITTEN_APIS
        if self.relayed is not None:
            # the client's own SASL exchange authenticates this connection upstream
            upstream_security = upstream_security.without_sasl()
            rewritten = rewritten | SASL_APIS
        self.upstream = UpstreamLink(
            listener.upstream,
            self.deliver,
            self.fail,
            rewritten,
            self.rewrite_upstream_response,
            upstream_security,
            reconnectable=self.relayed is None,
        )
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
                if self.conn.paused:
                    # Kafka mutes a busy connection; we stop reading it until answers make room
                    self.room.clear()
                    await self.room.wait()
                    if self.done.is_set():
                        break
                    events = self.conn.receive_data()  # frames that arrived while paused
                else:
                    # answers the client has not read yet bound what we read next too (Kafka
                    # sends a response before it reads the next request of that connection)
                    await self.writer.drain()
                    data = await self.reader.read(READ_SIZE)
                    if not data:
                        break
                    self.last_active = asyncio.get_running_loop().time()
                    events = self.conn.receive_data(data)
                for event in events:
                    if isinstance(event, ProtocolViolation):
                        log.warning("closing connection from %s: %s", self.peer, event.reason)
                        return
                    await self.dispatch(event)
        except UpstreamUnavailable as exc:  # before its base class ConnectionError
            log.warning("closing connection from %s: %s", self.peer, exc)
        except (ConnectionError, OSError):
            pass  # the client went away
        finally:
            self.close()

    @property
    def authenticated(self) -> bool:
        if not self.sasl_required:
            return True
        if self.sasl is not None:
            return self.sasl.authenticated
        return self.relayed is not None and self.relayed.authenticated

    async def dispatch(self, request: Request) -> None:
        key = request.api_key
        if self.sasl is not None and self.sasl.expired() and key not in SASL_APIS:
            self.fail("SASL session expired: the client did not re-authenticate in time (KIP-368)")
            return
        if self.sasl_required and (key in SASL_APIS or not self.authenticated):
            await self.dispatch_unauthenticated(request)
            return
        if self.gateway.metrics is not None:
            self.started[request.seq] = (key, time.perf_counter())
        expects_response = True
        if key == ApiKey.PRODUCE:
            _, offset = codec.decode_request_header(request.frame)
            expects_response = produce_expects_response(request.frame, request.api_version, offset)
        patch: Callable[[Any], Any] | None = None
        refusal = None
        if self.gateway.internal_topics.guards(request):
            try:
                refusal = self.gateway.internal_topics.check(request, expects_response)
            except codec.DecodeError as exc:
                self.fail(f"undecodable {codec.API_NAMES.get(key, key)} request: {exc}")
                return
        if refusal is not None:  # it names the coordinator's own topics: never forwarded
            if refusal.forward is None:
                if refusal.answer is not None:
                    self.deliver(request.seq, codec.encode_response(request.correlation_id, refusal.answer))
                if refusal.close:
                    self.fail(f"{codec.API_NAMES[key]} with acks=0 to an internal topic")
                return
            request, patch = refusal.forward, refusal.merge
        if key == ApiKey.API_VERSIONS:
            self.spawn(self.answer_api_versions(request))
        elif key in self.gateway.served_apis:
            self.spawn(self.answer_locally(request, patch))
        else:
            await self.upstream.send(
                request,
                expects_response,
                None if patch is None else merge_payload(key, request.api_version, patch),
            )
            if not expects_response:  # acks=0: answered by nothing, so later answers may go
                self.deliver(request.seq, None)
            if refusal is not None and refusal.close:
                self.fail(f"{codec.API_NAMES[key]} with acks=0 to an internal topic")

    async def dispatch_unauthenticated(self, request: Request) -> None:
        """Before SASL completes only ApiVersions and the SASL APIs are answered; anything else
        closes the connection and reaches neither a shard nor the upstream (as Kafka does)."""
        key = request.api_key
        if key == ApiKey.API_VERSIONS:
            self.spawn(self.answer_api_versions(request))
            return
        if key not in SASL_APIS:
            self.fail(f"{codec.API_NAMES.get(key, key)} request before SASL authentication completed")
            return
        try:
            _, body = codec.decode_request(request.frame)
        except codec.DecodeError as exc:
            self.fail(f"undecodable SASL request: {exc}")
            return
        if self.relayed is not None:
            if not self.relayed.note_request(key, body):
                self.fail("SASL request out of order")
                return
            await self.upstream.send(request, True)
            return
        assert self.sasl is not None
        if key == ApiKey.SASL_HANDSHAKE:
            reply = self.sasl.handshake(request.api_version, body)
        else:
            reply = self.sasl.authenticate(request.api_version, body)
        self.deliver(request.seq, codec.encode_response(request.correlation_id, reply.response))
        if reply.close:
            if key == ApiKey.SASL_AUTHENTICATE:
                SASL_AUTHENTICATIONS.labels(self.sasl.mechanism or "", "failed").inc()
            self.fail(f"SASL: {getattr(reply.response, 'error_message', None) or reply.response.error_code}")
        elif self.sasl.authenticated and key == ApiKey.SASL_AUTHENTICATE and not self.sasl.exchanging:
            SASL_AUTHENTICATIONS.labels(self.sasl.mechanism or "", "succeeded").inc()
            self.principal = self.sasl.principal or self.principal
            self.conn.set_max_frame(self.gateway.limits.socket_request_max_bytes)
            log.debug("%s authenticated as %s", self.peer, self.principal)

    async def rewrite_upstream_response(self, api_key: int, api_version: int, payload: bytes) -> bytes:
        """Upstream responses naming brokers are rewritten; relayed SASL responses tell whether
        the upstream accepted the client (the principal is then the user it authenticated)."""
        if api_key in SASL_APIS and self.relayed is not None:
            _, body = codec.decode_response(api_key, api_version, payload)
            if not self.relayed.note_response(api_key, body):
                asyncio.get_running_loop().call_soon(self.fail, "SASL authentication failed upstream")
            elif self.relayed.authenticated:
                self.principal = self.relayed.principal or self.principal
                self.conn.set_max_frame(self.gateway.limits.socket_request_max_bytes)
            return payload
        if api_key == ApiKey.METADATA:  # our topics are internal, as Kafka's are
            correlation_id, body = codec.decode_response(api_key, api_version, payload)
            body = self.gateway.internal_topics.mark(await self.gateway.brokers.rewrite(api_key, body))
            return codec.encode_response(correlation_id, body)
        return await self.gateway.brokers.rewrite_payload(api_key, api_version, payload)

    def spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def answer_api_versions(self, request: Request) -> None:
        advertised = await self.gateway.advertised()
        _, body = api_versions_response(request.api_version, advertised, await self.gateway.advertised_features())
        self.deliver(request.seq, codec.encode_response(request.correlation_id, body))

    async def answer_locally(self, request: Request, patch: Callable[[Any], Any] | None = None) -> None:
        """A served API's answer (``patch``: what the internal-topic rule adds to it)."""
        name = codec.API_NAMES[request.api_key]
        try:
            header, body = codec.decode_request(request.frame)
        except codec.DecodeError as exc:
            self.fail(f"undecodable {name} request: {exc}")
            return
        lo, hi = self.gateway.served_apis[request.api_key].versions
        if not lo <= request.api_version <= hi:
            self.fail(f"unsupported version {request.api_version} of {name}")
            return
        assert self.gateway.group_handler is not None
        try:
            response = await self.gateway.group_handler.handle(
                header,
                body,
                self.listener.address,
                self.peer.rpartition(":")[0],
                self.principal,
                self.upstream.ask,  # the upstream's share goes under this client's identity
                self,
            )
        except Exception:  # a handler bug must not take the gateway down, but must be seen
            log.exception("group handler failed on %s from %s", name, self.peer)
            self.fail("internal error in group handler")
            return
        if patch is not None:
            response = patch(response)
        self.deliver(request.seq, codec.encode_response(request.correlation_id, response))

    def deliver(self, seq: int, payload: bytes | None) -> None:
        if self.done.is_set():
            return
        started = self.started.pop(seq, None)
        if started is not None and self.gateway.metrics is not None:
            handler = self.gateway.group_handler
            self.gateway.metrics.observe_request(
                codec.API_NAMES[started[0]],
                time.perf_counter() - started[1],
                shard="" if handler is None else handler.serving_shard(),
            )
        paused = self.conn.paused
        out = self.conn.respond(seq, payload)
        self.last_active = asyncio.get_running_loop().time()
        if paused and not self.conn.paused:
            self.room.set()
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

    def check_idle(self) -> None:
        """Close the connection if it has been idle ``connections.max.idle.ms`` (Kafka's
        Selector does the same); a request still in flight (a JoinGroup waiting for its
        rebalance) keeps it open. One timer per connection, re-armed, not one per read."""
        if self.done.is_set():
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self.conn.pending or now < self.last_active + self.idle_s:
            self.idle_timer = loop.call_at(max(self.last_active, now) + self.idle_s, self.check_idle)
            return
        log.info("closing connection from %s: idle for connections.max.idle.ms", self.peer)
        self.close()

    def fail(self, reason: str) -> None:
        if not self.done.is_set():
            log.warning("closing connection from %s: %s", self.peer, reason)
        self.close()

    def close(self) -> None:
        if self.done.is_set():
            return
        self.flush()  # responses already delivered still go out before the connection closes
        self.done.set()
        self.idle_timer.cancel()
        self.room.set()  # a run loop waiting for room ends
        self.upstream.close()
        for task in list(self.tasks):
            task.cancel()
        self.writer.close()
        if self.gateway.group_handler is not None:
            self.gateway.group_handler.connection_closed(self)
