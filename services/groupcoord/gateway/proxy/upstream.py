"""The gateway's connections to the upstream Kafka cluster (asyncio).

A client connection forwards what the gateway does not serve itself to the upstream broker
behind its listener over an :class:`UpstreamLink` of its own, which keeps Kafka's
per-connection ordering and correlation ids intact; the upstream's share of that client's
group-API requests (transaction coordinators, non-group config resources) goes on the same link
(:meth:`UpstreamLink.ask`), so Kafka judges it under the client's identity, never the
coordinator's. The few requests the gateway sends upstream for its own work (ApiVersions,
Metadata, DescribeAcls) each go on a connection of their own through :class:`Upstream`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from groupcoord.common.kafka_security import KafkaSecurity, upstream_security
from groupcoord.common.kafka_wire import codec
from groupcoord.common.kafka_wire.exchange import ExchangeFailed, exchange
from groupcoord.common.kafka_wire.framing import ClientConnection, frame_bytes
from groupcoord.common.kafka_wire.secure_connection import open_kafka_connection
from groupcoord.common.upstream_groups import (
    TRANSACTION_KEY,
    Features,
    UpstreamGroupError,
    api_versions_and_features,
    coordinator_of,
)
from groupcoord.gateway.messages.framed_request import Request
from groupcoord.gateway.proxy import broker_addresses

log = logging.getLogger(__name__)

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
    return (await fetch_upstream_api_versions(address, timeout_s, security))[0]


async def fetch_upstream_api_versions(
    address: Address, timeout_s: float = 5.0, security: KafkaSecurity | None = None
) -> tuple[dict[int, tuple[int, int]], Features]:
    """Which API versions the upstream broker at ``address`` supports, and its features."""
    return await api_versions_and_features(
        lambda _broker, body: ask_upstream(address, body, timeout_s, security), CLIENT_ID
    )


class Upstream:
    """The upstream cluster as the gateway itself asks it: its bootstrap brokers, how to connect
    (TLS, SASL with the gateway's credentials), and the gateway listeners standing in for its
    brokers, through which every answer naming brokers is rewritten.

    Built first, and handed to everything that asks the upstream (the ACL refresher, the group
    APIs, the gateway), so none of them needs another to exist before it.

    Like a Kafka client's ``bootstrap.servers``, the gateway's own requests are not tied to one
    broker: when the one that answered last is down they go to the next bootstrap address, then
    to every broker learnt from Metadata since, so a crashed bootstrap broker strands nothing.
    """

    def __init__(
        self,
        bootstrap: Address,
        listeners: BrokerListeners,
        security: KafkaSecurity | None = None,
        bootstrap_servers: Sequence[Address] = (),
    ) -> None:
        self.bootstrap = bootstrap
        #: every bootstrap address the gateway was given, ``bootstrap`` (its bootstrap listener's) first
        self.bootstrap_servers = tuple(dict.fromkeys((bootstrap, *bootstrap_servers)))
        self.listeners = listeners
        #: default: this process's environment (what ``kafka_security.configure`` exported)
        self.security = upstream_security(security)
        self._versions: tuple[dict[int, tuple[int, int]], Features] | None = None
        self._answering = bootstrap

    def addresses(self) -> list[Address]:
        """Where the gateway's own requests go, in order: the broker that answered last, the
        bootstrap addresses, then the brokers the gateway's listeners stand for."""
        return list(dict.fromkeys((self._answering, *self.bootstrap_servers, *self.listeners.listeners)))

    async def _first_answer(self, ask: Callable[[Address], Awaitable[Any]]) -> Any:
        failure: UpstreamUnavailable | None = None
        for address in self.addresses():
            try:
                answer = await ask(address)
            except UpstreamUnavailable as exc:
                failure = exc
                continue
            self._answering = address
            return answer
        assert failure is not None
        raise failure

    async def versions(self) -> dict[int, tuple[int, int]]:
        """The API versions the upstream brokers support (asked once)."""
        return (await self._api_versions())[0]

    async def features(self) -> Features:
        """The upstream's features and the levels it finalized (asked once, with the versions)."""
        return (await self._api_versions())[1]

    async def _api_versions(self) -> tuple[dict[int, tuple[int, int]], Features]:
        if self._versions is None:
            self._versions = await self._first_answer(
                lambda address: fetch_upstream_api_versions(address, security=self.security)
            )
        return self._versions

    async def request(self, body: Any) -> Any:
        """A live upstream broker's response to ``body``, broker addresses rewritten: the
        gateway's own questions, under the coordinator's identity (a client's requests go on
        its own link: :meth:`UpstreamLink.ask`)."""
        response = await self._first_answer(
            lambda address: ask_upstream(address, body, security=self.security)
        )
        api_key = int(body.__api_key__)
        if api_key in broker_addresses.REWRITTEN_APIS:
            response = await self.listeners.rewrite(api_key, response)
        return response

    async def ask_broker(self, broker: Address | None, body: Any) -> Any:
        """The response to ``body`` of the upstream broker at ``broker`` (None: any live one),
        under the coordinator's identity, as the broker sent it (addresses not rewritten): the
        gateway's reads of the upstream's own coordinator (``common/upstream_groups.py``)."""
        if broker is None:
            return await self._first_answer(
                lambda address: ask_upstream(address, body, security=self.security)
            )
        return await ask_upstream(broker, body, security=self.security)

    async def request_for_transaction(self, transactional_id: str, body: Any) -> Any:
        """The response to ``body`` of the transaction coordinator of ``transactional_id`` (as
        FindCoordinator names it), under the coordinator's identity: for the coordinator's own
        share of a client's transaction (adding its state partition, once Kafka accepted the
        client). A client's TxnOffsetCommit (transaction version 2) comes on the listener of
        whichever broker it asked for the group's coordinator, not of its transaction's."""
        try:
            coordinator = await coordinator_of(self.ask_broker, transactional_id, TRANSACTION_KEY)
        except UpstreamGroupError as exc:
            raise UpstreamUnavailable(
                f"no transaction coordinator for {transactional_id!r}: {ErrorCode(exc.code).name}"
            ) from exc
        return await ask_upstream(coordinator, body, security=self.security)

    async def coordinator_node(self, listener: Address) -> tuple[int, str, int]:
        """(node id, host, port) to name as group coordinator for a client on ``listener``:
        the gateway itself, under the node id of the upstream broker that listener stands for,
        so clients reuse the connection they already have; unless that broker is down (absent
        from the latest Metadata), then under a live broker's id, as Kafka would only name a
        live broker: clients drop brokers their metadata no longer lists, and would wait
        forever for a coordinator named after one."""
        node_ids = self.listeners.node_ids
        if not node_ids:
            from kio.schema.metadata.v12.request import MetadataRequest  # noqa: PLC0415

            await self.request(
                MetadataRequest(
                    topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
                )
            )
        live = self.listeners.live_nodes
        node = node_ids.get(listener)
        if node is not None and (live is None or node in live):
            return node, *listener
        candidates = [(a, n) for a, n in node_ids.items() if live is None or n in live]
        address, node = (candidates or list(node_ids.items()))[0]
        return node, *address


@dataclass
class _Pending:
    api_key: int
    api_version: int
    correlation_id: int
    seq: int = -1  # a forwarded client request: its place in the client's response order
    #: a request of the gateway's own on this link (:meth:`UpstreamLink.ask`): its payload
    answer: asyncio.Future[bytes] | None = None
    patch: Callable[[bytes], bytes] | None = None  # a change of this one response (internal topics)


Deliver = Callable[[int, bytes], None]
Rewrite = Callable[[int, int, bytes], Awaitable[bytes]]


class UpstreamLink:
    """One client connection's connection to one upstream broker (FIFO of pending requests).

    Responses go back through ``deliver(seq, payload)``, after ``rewrite(api_key, version,
    payload)`` for the APIs in ``rewritten`` (those naming brokers; a Produce answer only when
    :func:`~.broker_addresses.names_endpoints` says it may name one); an upstream failure with a
    client request still unanswered ends the client connection through ``fail(reason)``
    (:meth:`_lost`). The connection is secured as ``security`` says (TLS, and SASL with the
    gateway's credentials unless the client's own SASL exchange is relayed on it).

    :meth:`ask` sends a request of the gateway's own on the same connection, answered in the
    same FIFO, so the upstream judges it under the same identity as the client's own requests.
    """

    def __init__(
        self,
        address: Address,
        deliver: Deliver,
        fail: Callable[[str], None],
        rewritten: frozenset[int],
        rewrite: Rewrite,
        security: KafkaSecurity | None = None,
        reconnectable: bool = True,
    ) -> None:
        self.address = address
        self.security = security if security is not None else KafkaSecurity()
        #: False when the client's own SASL exchange authenticated the connection (passthrough):
        #: a new one would carry no identity, so losing it ends the client connection
        self.reconnectable = reconnectable
        self.deliver = deliver
        self.fail = fail
        self.rewritten = rewritten
        self.rewrite = rewrite
        self.pending: deque[_Pending] = deque()
        self.writer: asyncio.StreamWriter | None = None
        self.reader_task: asyncio.Task[None] | None = None
        self._connecting: asyncio.Lock = asyncio.Lock()
        self._next_correlation_id = 0

    async def _connected(self) -> asyncio.StreamWriter:
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
        return self.writer

    async def send(
        self, request: Request, expects_response: bool, patch: Callable[[bytes], bytes] | None = None
    ) -> None:
        """Forward ``request``; its response, if one is expected, goes through ``patch`` (if
        given) after the broker-address rewrite."""
        writer = await self._connected()
        if expects_response:
            self.pending.append(
                _Pending(
                    request.api_key, request.api_version, request.correlation_id, seq=request.seq, patch=patch
                )
            )
        writer.write(frame_bytes(request.frame))
        await writer.drain()

    async def ask(self, body: Any, timeout_s: float = TIMEOUT_S) -> Any:
        """The upstream's response to the kio request ``body`` sent on this link (broker
        addresses rewritten as for the client's own requests). Its correlation id is the
        link's own: responses are matched in order, so it never meets the client's."""
        writer = await self._connected()
        api_key, version = int(body.__api_key__), int(body.__version__)
        self._next_correlation_id = (self._next_correlation_id + 1) & 0x7FFFFFFF
        pending = _Pending(
            api_key, version, self._next_correlation_id, answer=asyncio.get_running_loop().create_future()
        )
        self.pending.append(pending)
        writer.write(frame_bytes(codec.encode_request(pending.correlation_id, CLIENT_ID, body)))
        await writer.drain()
        assert pending.answer is not None
        try:
            async with asyncio.timeout(timeout_s):
                payload = await pending.answer
        except TimeoutError:
            raise UpstreamUnavailable(
                f"upstream {self.address[0]}:{self.address[1]} did not answer in {timeout_s} s"
            ) from None
        return codec.decode_response(api_key, version, payload)[1]

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
                    if p.api_key in self.rewritten and broker_addresses.names_endpoints(
                        p.api_key, p.api_version, payload
                    ):
                        payload = await self.rewrite(p.api_key, p.api_version, payload)
                    if p.patch is not None:
                        payload = p.patch(payload)
                    if p.answer is None:
                        self.deliver(p.seq, payload)
                    elif not p.answer.done():  # not given up on (timed out)
                        p.answer.set_result(payload)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - an upstream failure: see _lost
            self._lost(f"upstream {self.address[0]}:{self.address[1]}: {exc}")

    def _lost(self, reason: str) -> None:
        """The upstream connection broke. With a client request forwarded and unanswered, the
        client connection ends (its answers go in request order, and that one will never
        come), as it would had the client been connected to that broker; so does a link the
        client's own SASL exchange authenticated (a new connection would have no identity).
        Otherwise only the link is dropped and the next forwarded request connects again: a
        broker that dies must not take down the connection a client uses for its group
        coordinator, which is served here (librdkafka sends KIP-714's GetTelemetrySubscriptions
        on every connection, so even a coordinator connection has a link to the broker its
        listener stands for)."""
        ends_client = any(p.answer is None for p in self.pending) or not self.reconnectable
        self._abandon(reason)
        self.reader_task = None
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if ends_client:
            self.fail(reason)
        else:
            log.info("%s (no client request outstanding on it: the client connection stays)", reason)

    def _abandon(self, reason: str) -> None:
        """Requests of the gateway's own still waiting fail: no answer will come."""
        for p in self.pending:
            if p.answer is not None and not p.answer.done():
                p.answer.set_exception(UpstreamUnavailable(reason))
        self.pending.clear()

    def close(self) -> None:
        if self.reader_task is not None:
            self.reader_task.cancel()
        if self.writer is not None:
            self.writer.close()
        self._abandon("the client connection closed")
