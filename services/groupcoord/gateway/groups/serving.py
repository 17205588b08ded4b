"""The serving core of the group APIs: a request's context, its authorization, and the calls
that carry it to the shard workers. It names no group type and no API.

Each group type's adapters (``classic_apis``, ``consumer_apis``, ``share_apis`` with
``share_fetch``, ``offsets_apis``, ``admin_apis``) turn one decoded Kafka request (any supported
version) into calls on the coordinator shards through :class:`GroupServing`, one per state-topic
partition involved (multi-group requests are split by partition and merged back in request
order, :meth:`GroupServing.per_group`), and build the response for the request's version. A
partition between leaders (a shard died, the partition is moving or loading) holds its
requests until the new leader answers (:meth:`GroupServing.call_partition`); a request-level
error that remains is placed where that API carries errors, exactly as a Kafka broker would.
:mod:`.group_apis` puts the adapters of every group type into one table.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import ipaddress
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol, TypeVar

from google.protobuf.message import Message
from kio.schema.errors import ErrorCode

from groupcoord.common.kafka_wire import codec
from groupcoord.common.partitioning import DEFAULT_STATE_TOPIC
from groupcoord.common.upstream_groups import Ask as UpstreamAsk
from groupcoord.gateway.groups.adoption import UpstreamAdoption
from groupcoord.gateway.groups.leadership import LeadershipTable
from groupcoord.gateway.groups.offset_mirror import OffsetMirror
from groupcoord.gateway.groups.topic_catalog import TopicCatalog
from groupcoord.gateway.groups.worker_client import ShardReply, WorkerClient, failed
from groupcoord.gateway.messages.wire_translation import from_proto, to_proto
from groupcoord.gateway.security.group_acls import Caller
from groupcoord.gateway.security.group_authorization import TOPIC_NAME_VERSIONS, GroupAuthorization
from groupcoord.rpc.v1.coordinator_pb2 import CoordinatorEnvelope as Envelope

Address = tuple[str, int]
T = TypeVar("T")

# Request-level errors of a partition between leaders: held and sent again (call_partition).
FAILOVER_ERRORS = frozenset(
    e.value
    for e in (
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
    )
)
FAILOVER_WAIT_S = 10.0  # below every client's request timeout (librdkafka, Java: 30 s and more)
LOADING_POLL_S = 0.05
LEADERSHIP_POLL_S = 0.25  # also re-try a leader whose stream broke without a table change
# The shard that served the group request running in this task (for the gateway's latency
# metric's ``shard`` label); "" for forwarded APIs and requests fanned out to several shards
# (each part runs in a task of its own, so its setting stays there).
served_by: contextvars.ContextVar[str] = contextvars.ContextVar("groupcoord_served_by", default="")
# The client principal of the request being handled: every envelope sent for it names it.
principal_of_request: contextvars.ContextVar[str] = contextvars.ContextVar(
    "groupcoord_principal", default="User:ANONYMOUS"
)


Upstream = Callable[[Any], Awaitable[Any]]
Ask = Callable[[Any], Awaitable[Any]]
UpstreamForTransaction = Callable[[str, Any], Awaitable[Any]]
CoordinatorNode = Callable[[Address], Awaitable[tuple[int, str, int]]]


async def _no_client_link(body: Any) -> Any:
    raise ConnectionError(f"no client connection to send {type(body).__name__} upstream on")


@dataclass(frozen=True, slots=True)
class CallContext:
    header: Any
    version: int
    listener: Address
    client_host: str
    principal: str = "User:ANONYMOUS"
    #: the upstream's answer to a kio request sent on the client's own upstream connection,
    #: under the client's identity (:meth:`~groupcoord.gateway.proxy.upstream.UpstreamLink.ask`):
    #: the upstream's share of this request never borrows the coordinator's rights
    ask: Ask = _no_client_link
    #: the client connection it came on (a share session belongs to the one that opened it)
    connection: Hashable = None

    @property
    def member_host(self) -> str:
        """The client's address as Kafka's coordinator records a member's host: Java's
        ``InetAddress.toString()`` of the connection's peer, "/127.0.0.1" (no reverse lookup),
        which DescribeGroups and ConsumerGroupDescribe return and kafka-consumer-groups.sh
        prints in its HOST column."""
        return java_inet_address(self.client_host) if self.client_host else ""

    @property
    def response_type(self) -> Any:
        """The kio response class of this request's API and version (the handler never names
        its api key: the key is declared once, with the handler registered against it)."""
        return codec.response_type(int(self.header.request_api_key), self.version)


@functools.lru_cache(maxsize=4096)  # per request, of a few client addresses
def java_inet_address(host: str) -> str:
    """``InetAddress.toString()`` of a numeric address without a host name: "/" and Java's
    ``getHostAddress()`` — an IPv4-mapped IPv6 address as IPv4 (Java makes it an Inet4Address),
    IPv6 as eight uncompressed lower-case hex groups ("/0:0:0:0:0:0:0:1"), its scope kept."""
    address, percent, scope = host.partition("%")
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return f"/{ip.ipv4_mapped}"
        text = ":".join(f"{int(group, 16):x}" for group in ip.exploded.split(":"))
        return f"/{text}{percent}{scope}"
    return f"/{ip}"


Adapter = Callable[["GroupServing", CallContext, Any], Awaitable[Any]]
"""One group API's adapter: (the serving core, the request's context, the decoded request) ->
the kio response. Each group type's module registers one per API it serves."""


@dataclass(frozen=True, slots=True)
class AdaptedApi:
    """A group API the gateway answers itself: the versions it serves and its adapter (the
    transport reads the versions: :class:`~groupcoord.gateway.transport.api_versions.ServedApi`)."""

    versions: tuple[int, int]
    handler: Adapter


def authorizable_versions(apis: Mapping[int, AdaptedApi]) -> dict[int, AdaptedApi]:
    """``apis`` with the versions an authorizing gateway can check: ApiVersions then advertises
    no version whose topics it could not authorize, and clients pick one it can."""
    out = dict(apis)
    for key, top in TOPIC_NAME_VERSIONS.items():
        if key in out and out[key].versions[1] > top:
            out[key] = replace(out[key], versions=(out[key].versions[0], top))
    return out


class ConnectionState(Protocol):
    """What a group type keeps of the client connections at this gateway (KIP-932's share
    sessions): what a connection holds ends when it closes, and what is still ending is given
    its ``grace_s`` when the gateway stops."""

    def connection_closed(self, connection: Hashable) -> None: ...

    async def close(self, grace_s: float) -> None: ...


S = TypeVar("S", bound=ConnectionState)


class GroupServing:
    """Implements the gateway's ``GroupApiHandler`` on top of the coordinator shards.

    Each adapter builds the typed coordinator request for its API and sends it in an
    :class:`Envelope` whose oneof field is the shard operation declared for that API
    (:class:`~groupcoord.common.group_api_declarations.GroupApi`), the one place the API is named
    on its way to the shard (whose ``OPERATIONS`` are registered against the same declarations).
    A subclass names the adapters it serves (:data:`adapters`:
    :class:`~groupcoord.gateway.groups.group_apis.GroupApis`).
    """

    #: api key -> the versions served and their adapter, one per declared group API
    adapters: ClassVar[Mapping[int, AdaptedApi]] = {}

    def __init__(
        self,
        leadership: LeadershipTable,
        shards: WorkerClient,
        upstream: Upstream,
        coordinator_node: CoordinatorNode,
        topics: TopicCatalog | None = None,
        failover_wait_s: float = FAILOVER_WAIT_S,
        authorization: GroupAuthorization | None = None,
        *,
        upstream_for_transaction: UpstreamForTransaction | None = None,
        state_topic: str = DEFAULT_STATE_TOPIC,
    ) -> None:
        #: Kafka's ACLs on every group API (None: no authorizer, everything allowed, as Kafka
        #: without ``authorizer.class.name``)
        self.authorization = authorization
        self.leadership = leadership
        self.shards = shards
        self.upstream = upstream
        self.coordinator_node = coordinator_node
        self.topics = topics if topics is not None else TopicCatalog(upstream)
        self.failover_wait_s = failover_wait_s
        # A transactional id's transaction coordinator, asked under the coordinator's identity:
        # only to add the coordinator's own state partition to a transaction Kafka accepted the
        # client for; the bootstrap broker if not wired.
        self.upstream_for_transaction: UpstreamForTransaction = upstream_for_transaction or (
            lambda _transactional_id, body: upstream(body)
        )
        self.state_topic = state_topic
        self.apis = self.adapters if authorization is None else authorizable_versions(self.adapters)
        #: the upstream coordinator's groups adopted on their first touch (None: not adopted)
        self.adoption: UpstreamAdoption | None = None
        #: the offsets committed here, mirrored to the upstream's coordinator (None: not mirrored)
        self.offset_mirror: OffsetMirror | None = None
        # what the group types keep of client connections, by the kind that made it
        self._connection_states: dict[Callable[[GroupServing], ConnectionState], ConnectionState] = {}

    def connection_state(self, kind: Callable[[GroupServing], S]) -> S:
        """This gateway's one ``kind`` (made on first use): a group type keeps what belongs to
        client connections here (share sessions), so the core names no group type."""
        state = self._connection_states.get(kind)
        if state is None:
            state = self._connection_states[kind] = kind(self)
        return state  # type: ignore[return-value]

    def connection_closed(self, connection: Hashable) -> None:
        """A client connection closed: what the group types keep of it ends (Kafka 4.4 ends a
        share session with its connection)."""
        for state in self._connection_states.values():
            state.connection_closed(connection)

    async def close(self, grace_s: float = 5.0) -> None:
        """The gateway stops: what closed connections left ending (share sessions giving their
        records back) still ends, for up to ``grace_s``."""
        await asyncio.gather(*(state.close(grace_s) for state in self._connection_states.values()))
        if self.offset_mirror is not None:
            await self.offset_mirror.close(grace_s)

    def serving_shard(self) -> str:
        """The shard that served the group request running in this task ("" if none)."""
        return served_by.get()

    async def handle(
        self,
        header: Any,
        request: Any,
        listener: Address,
        client_host: str = "",
        principal: str = "User:ANONYMOUS",
        ask: Ask = _no_client_link,
        connection: Hashable = None,
    ) -> Any:
        """The response to one group-API request of a client; ``ask`` sends the upstream's
        share of it on that client's own upstream connection."""
        ctx = CallContext(
            header, int(header.request_api_version), listener, client_host, principal, ask, connection
        )
        principal_of_request.set(principal)
        handler = self.apis[int(header.request_api_key)].handler
        if self.authorization is None:
            return await handler(self, ctx, request)
        verdict = self.authorization.check(
            int(header.request_api_key),
            Caller(principal, client_host),
            ctx.version,
            ctx.response_type,
            request,
        )
        if verdict.request is None:
            denied = verdict.denied
            return self.response(ctx, denied) if isinstance(denied, Message) else denied(ctx.response_type)
        response = await handler(self, ctx, verdict.request)
        return verdict.finish(response) if verdict.finish is not None else response

    # --- plumbing ---------------------------------------------------------------------

    async def call(self, group_id: str, request: Envelope) -> ShardReply:
        adoption = self.adoption
        if adoption is not None and group_id not in adoption.ours:
            refused = await adoption.admit(group_id, request.WhichOneof("request") or "")
            if refused is not None:
                return refused
        return await self.call_partition(self.leadership.partition_of(group_id), request)

    def adopt_upstream_groups(
        self, ask: UpstreamAsk, versions: Callable[[], Awaitable[Mapping[int, tuple[int, int]]]]
    ) -> UpstreamAdoption:
        """Adopt the groups of the upstream's coordinator on their first touch
        (:mod:`.adoption`): ``ask`` reaches its brokers under the coordinator's identity."""
        self.adoption = UpstreamAdoption(
            lambda group_id, envelope: self.call_partition(self.leadership.partition_of(group_id), envelope),
            ask,
            versions,
        )
        return self.adoption

    async def call_partition(self, partition: int, request: Envelope) -> ShardReply:
        """The reply of the shard worker leading ``partition``, held through a failover.

        While the partition has no reachable leader (its shard died, the control plane is moving
        it, the new leader is still loading) the request waits for the leadership table to
        change and is sent again, for at most ``failover_wait_s``: clients see a failover as
        latency, not as an error (librdkafka surfaces NOT_COORDINATOR and
        COORDINATOR_NOT_AVAILABLE from OffsetFetch to the application). Sending again is what
        the client itself would do on those errors. If the wait runs out, the answer is
        COORDINATOR_LOAD_IN_PROGRESS, which every client we test retries silently.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.failover_wait_s
        while True:
            version = self.leadership.version
            address = self.leadership.address_of(partition)
            if address is None:
                reply = failed(
                    ErrorCode.coordinator_not_available, f"no leader for state partition {partition}"
                )
            else:
                request.partition = partition
                request.principal = principal_of_request.get()
                leader = self.leadership.leaders.get(partition)
                served_by.set("" if leader is None else str(leader[0]))
                reply = await self.shards.call(address, request)
                if reply.response is not None or reply.error_code not in FAILOVER_ERRORS:
                    return reply
                if reply.error_code == ErrorCode.not_coordinator.value:
                    self.leadership.report_stale(partition)  # moved, or the shard's layout changed
            remaining = deadline - loop.time()
            if remaining <= 0:
                return failed(ErrorCode.coordinator_load_in_progress, reply.error_message)
            if reply.error_code == ErrorCode.coordinator_load_in_progress.value:
                await asyncio.sleep(min(LOADING_POLL_S, remaining))  # the leader is right
            else:  # the table is stale or being changed: wait for the control plane
                await self.leadership.wait_for_change(version, min(LEADERSHIP_POLL_S, remaining))

    async def per_group(
        self,
        group_ids: Sequence[str],
        request: Callable[[list[str]], Envelope],
        answers: Callable[[Any], Iterable[tuple[str, T]]],
        on_error: Callable[[str, ShardReply], T],
    ) -> list[T]:
        """One answer per entry of ``group_ids``, in request order, for a request naming several
        groups: split by state partition, one call per partition (in parallel), merged back.

        ``request(ids)`` is the request for the groups of one partition (in request order);
        ``answers(response)`` yields (group id, answer) from a partition's response;
        ``on_error(group_id, reply)`` answers for a group whose partition returned a
        request-level error (not leading, loading, no leader known).
        """
        found: dict[str, T] = {}
        adoption = self.adoption
        if adoption is not None and any(gid not in adoption.ours for gid in group_ids):
            operation = request([]).WhichOneof("request") or ""
            distinct = list(dict.fromkeys(group_ids))
            refusals = await asyncio.gather(*(adoption.admit(gid, operation) for gid in distinct))
            found.update((gid, on_error(gid, r)) for gid, r in zip(distinct, refusals, strict=True) if r)
        by_partition: dict[int, list[str]] = {}
        for gid in group_ids:
            if gid not in found:
                by_partition.setdefault(self.leadership.partition_of(gid), []).append(gid)
        replies = await asyncio.gather(
            *(self.call_partition(p, request(ids)) for p, ids in by_partition.items())
        )
        for ids, reply in zip(by_partition.values(), replies, strict=True):
            if reply.response is not None:
                found.update(answers(reply.response))
            else:
                found.update((gid, on_error(gid, reply)) for gid in ids)
        return [found[gid] for gid in group_ids]

    async def describe_by_group_ids(
        self, ctx: CallContext, req: Any, operation: str, response_type: Any, group_type: Any
    ) -> Any:
        """The describe APIs of the KIP-848 family (ConsumerGroupDescribe, ShareGroupDescribe):
        the group ids split by partition, each part one ``operation`` envelope of the same
        request type, merged in request order."""
        request_type = type(getattr(Envelope(), operation))
        msg = to_proto(req, request_type(api_version=ctx.version))
        groups = await self.per_group(
            list(msg.group_ids),
            lambda ids: Envelope(
                **{
                    operation: request_type(
                        api_version=msg.api_version,
                        group_ids=ids,
                        include_authorized_operations=msg.include_authorized_operations,
                    )
                }
            ),
            lambda resp: ((g.group_id, g) for g in resp.groups),
            lambda gid, reply: group_type(
                group_id=gid, error_code=reply.error_code, error_message=reply.error_message or None
            ),
        )
        return self.response(ctx, response_type(groups=groups))

    def response(self, ctx: CallContext, message: Message) -> Any:
        return from_proto(message, ctx.response_type)
