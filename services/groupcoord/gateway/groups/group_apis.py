"""The group APIs at the gateway: wire requests -> coordinator calls -> wire responses.

Each adapter turns one decoded Kafka request (any supported version) into calls on the
coordinator shards, one per state-topic partition involved (multi-group requests are split by
partition and merged back in request order), and builds the response for the request's
version. A partition between leaders (a shard died, the partition is moving or loading) holds
its requests until the new leader answers (:meth:`GroupApis.call_partition`); a request-level
error that remains is placed where that API carries errors, exactly as a Kafka broker would.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import datetime
import functools
import ipaddress
import logging
import uuid
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from google.protobuf.message import Message
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32, i32Timedelta

from groupcoord.common.group_api_declarations import GROUP_KEY, GROUP_RESOURCE, registered
from groupcoord.common.kafka_wire import codec
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.common.partitioning import DEFAULT_STATE_TOPIC
from groupcoord.gateway.groups import share_fetch
from groupcoord.gateway.groups.leadership import LeadershipTable
from groupcoord.gateway.groups.share_sessions import (
    FINAL_EPOCH,
    EndedSession,
    ShareSessionError,
    ShareSessions,
)
from groupcoord.gateway.groups.topic_catalog import TopicCatalog
from groupcoord.gateway.groups.wire_translation import from_proto, to_proto
from groupcoord.gateway.groups.worker_client import ShardReply, WorkerClient, failed
from groupcoord.gateway.security.group_authorization import Caller, GroupAuthorization, authorizable_versions
from groupcoord.gateway.transport.api_versions import ServedApi
from groupcoord.rpc.v1 import classic_group_pb2 as cg
from groupcoord.rpc.v1 import consumer_group_pb2 as cgh
from groupcoord.rpc.v1 import group_admin_pb2 as ga
from groupcoord.rpc.v1 import offsets_pb2 as op
from groupcoord.rpc.v1 import share_group_pb2 as sh
from groupcoord.rpc.v1.coordinator_pb2 import CoordinatorEnvelope as Envelope

log = logging.getLogger(__name__)

Address = tuple[str, int]
SHARE_API_VERSION = 1  # of ShareAcknowledge, sent for a share session its connection ended
NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
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
UpstreamAt = Callable[[Address, Any], Awaitable[Any]]
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


def _entry(entity_type: type[Any], field_name: str) -> type[Any]:
    """The element type of a tuple field of a kio entity."""
    return entity_type.__dataclass_fields__[field_name].type.__args__[0]


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


class GroupApis:
    """Implements the gateway's ``GroupApiHandler`` on top of the coordinator shards.

    Each handler builds the typed coordinator request for its API and sends it in an
    :class:`Envelope` whose oneof field is the shard operation declared for that API
    (:class:`~groupcoord.common.group_api_declarations.GroupApi`), the one place the API is named
    on its way to the shard (whose ``OPERATIONS`` are registered against the same declarations).
    """

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
        upstream_at: UpstreamAt | None = None,
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
        # The upstream broker a client listener stands for (its transaction coordinator), asked
        # under the coordinator's identity: only to add the coordinator's own state partition
        # to a transaction Kafka accepted the client for; the bootstrap broker if not wired.
        self.upstream_at: UpstreamAt = upstream_at or (lambda _listener, body: upstream(body))
        self.state_topic = state_topic
        self.apis = GROUP_APIS if authorization is None else authorizable_versions(GROUP_APIS)
        # KIP-932 share sessions of the members fetching through this gateway
        self.share_sessions = ShareSessions()
        self._ending: set[asyncio.Task[None]] = set()  # sessions of closed connections ending

    def connection_closed(self, connection: Hashable) -> None:
        """A client connection closed: the share sessions it opened end, and what their members
        hold is given back now (Kafka 4.4 ends a share session with its connection)."""
        for ended in self.share_sessions.disconnected(connection):
            task = asyncio.get_running_loop().create_task(self._end_share_session(ended))
            self._ending.add(task)
            task.add_done_callback(self._ending.discard)

    async def close(self, grace_s: float = 5.0) -> None:
        """The gateway stops: share sessions its closed connections ended still give their
        records back (for up to ``grace_s``; their locks run out otherwise)."""
        if self._ending:
            _, late = await asyncio.wait(list(self._ending), timeout=grace_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)

    async def _end_share_session(self, ended: EndedSession) -> None:
        request = share_fetch.delivery_request(
            ended.group_id, ended.member_id, (), {}, SHARE_API_VERSION, ended.partitions
        )
        reply = await self.call(ended.group_id, Envelope(share_acknowledge=request))
        code = reply.error_code if reply.response is None else reply.response.error_code
        if code:  # its locks still run out: the records come back then
            log.info(
                "share session of %s in %s ended with its connection; giving back its records failed: %s",
                ended.member_id,
                ended.group_id,
                ErrorCode(code).name,
            )

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
        return await self.call_partition(self.leadership.partition_of(group_id), request)

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
        by_partition: dict[int, list[str]] = {}
        for gid in group_ids:
            by_partition.setdefault(self.leadership.partition_of(gid), []).append(gid)
        replies = await asyncio.gather(
            *(self.call_partition(p, request(ids)) for p, ids in by_partition.items())
        )
        found: dict[str, T] = {}
        for ids, reply in zip(by_partition.values(), replies, strict=True):
            if reply.response is not None:
                found.update(answers(reply.response))
            else:
                found.update((gid, on_error(gid, reply)) for gid in ids)
        return [found[gid] for gid in group_ids]

    def response(self, ctx: CallContext, message: Message) -> Any:
        return from_proto(message, ctx.response_type)

    # --- classic protocol -------------------------------------------------------------

    async def join_group(self, ctx: CallContext, req: Any) -> Any:
        msg = to_proto(req, cg.JoinGroupRequest(api_version=ctx.version))
        msg.client_id = ctx.header.client_id or ""
        msg.client_host = ctx.member_host
        if ctx.version == 0:  # v0 has no rebalance timeout: Kafka uses the session timeout
            msg.rebalance_timeout_ms = msg.session_timeout_ms
        reply = await self.call(req.group_id, Envelope(join_group=msg))
        resp = reply.response or cg.JoinGroupResponse(
            error_code=reply.error_code, generation_id=-1, member_id=req.member_id
        )
        return self.response(ctx, resp)

    async def sync_group(self, ctx: CallContext, req: Any) -> Any:
        msg = to_proto(req, cg.SyncGroupRequest(api_version=ctx.version))
        reply = await self.call(req.group_id, Envelope(sync_group=msg))
        return self.response(ctx, reply.response or cg.SyncGroupResponse(error_code=reply.error_code))

    async def heartbeat(self, ctx: CallContext, req: Any) -> Any:
        msg = to_proto(req, cg.HeartbeatRequest(api_version=ctx.version))
        reply = await self.call(req.group_id, Envelope(heartbeat=msg))
        return self.response(ctx, reply.response or cg.HeartbeatResponse(error_code=reply.error_code))

    async def leave_group(self, ctx: CallContext, req: Any) -> Any:
        msg = to_proto(req, cg.LeaveGroupRequest(api_version=ctx.version))
        if ctx.version <= 2:
            msg.members.add(member_id=req.member_id)
        reply = await self.call(req.group_id, Envelope(leave_group=msg))
        return self.response(ctx, reply.response or cg.LeaveGroupResponse(error_code=reply.error_code))

    # --- offsets ----------------------------------------------------------------------

    async def offset_commit(self, ctx: CallContext, req: Any) -> Any:
        """Partitions that do not exist upstream are answered UNKNOWN_TOPIC_OR_PARTITION here,
        as Kafka's request handler does; the rest go to the group's shard (none: no call)."""
        unknown = await self.topics.unknown_partitions(
            (t.name, p.partition_index) for t in req.topics if getattr(t, "name", None) for p in t.partitions
        )
        known = _without(req.topics, unknown) if unknown else req.topics
        resp = op.OffsetCommitResponse()
        if known:
            msg = to_proto(
                dataclasses.replace(req, topics=known), op.OffsetCommitRequest(api_version=ctx.version)
            )
            reply = await self.call(req.group_id, Envelope(offset_commit=msg))
            resp = reply.response or _commit_errors(known, reply.error_code)
        if unknown:
            resp = _in_request_order(req.topics, resp, unknown)
        return self.response(ctx, resp)

    # --- transactional offsets (exactly-once) -------------------------------------------

    async def add_offsets_to_txn(self, ctx: CallContext, req: Any) -> Any:
        """Kafka's transaction coordinator answers AddOffsetsToTxn by adding the group's
        ``__consumer_offsets`` partition to the transaction. Ours is the state-topic partition
        that owns the group, added with AddPartitionsToTxn (the client's transactional id,
        producer id and epoch) at the upstream broker behind the client's listener (its
        transaction coordinator), whose answer is the client's. The upstream then writes the
        transaction's COMMIT/ABORT marker into that partition, after the offsets
        TxnOffsetCommit writes there.

        It is first sent on the client's own connection, so Kafka checks the client's WRITE on
        its transactional id (and its producer) and refuses as it would refuse the client's own
        AddOffsetsToTxn. Kafka also checks WRITE on every topic AddPartitionsToTxn names, and a
        client has none on the coordinator's internal state topic (no client may write
        ``__consumer_offsets`` either): that refusal, and only that one, means the client passed
        every other check, and the coordinator adds its own partition under its own identity,
        as Kafka's transaction coordinator adds ``__consumer_offsets`` without a topic ACL."""
        from kio.schema.add_partitions_to_txn.v3 import request as add  # noqa: PLC0415

        body = add.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=req.transactional_id,
            v3_and_below_producer_id=req.producer_id,
            v3_and_below_producer_epoch=req.producer_epoch,
            v3_and_below_topics=(
                add.AddPartitionsToTxnTopic(
                    name=self.state_topic, partitions=(i32(self.leadership.partition_of(req.group_id)),)
                ),
            ),
        )
        try:
            code = _added(await ctx.ask(body))
            if code == ErrorCode.topic_authorization_failed:
                code = _added(await self.upstream_at(ctx.listener, body))
        except ConnectionError:
            code = ErrorCode.coordinator_not_available  # retriable: the client asks again
        return ctx.response_type(throttle_time=NO_THROTTLE, error_code=code)

    async def txn_offset_commit(self, ctx: CallContext, req: Any) -> Any:
        """Offsets of a transaction go to the group's shard, which writes them pending into
        the producer's transaction (see coordinator/core/txn_offsets.py). Partitions that do
        not exist upstream are answered UNKNOWN_TOPIC_OR_PARTITION here, as Kafka's request
        handler does; every requested partition is echoed in request order."""
        unknown = await self.topics.unknown_partitions(
            (t.name, p.partition_index) for t in req.topics for p in t.partitions
        )
        known = _without(req.topics, unknown) if unknown else req.topics
        errors: dict[tuple[str, int], int] = {}
        if known:
            msg = to_proto(
                dataclasses.replace(req, topics=known), op.TxnOffsetCommitRequest(api_version=ctx.version)
            )
            if ctx.version < 3:  # no member information before KIP-447: Kafka's defaults
                msg.generation_id = -1
            if ctx.version < 2:
                for t in msg.topics:
                    for p in t.partitions:
                        p.committed_leader_epoch = -1
            reply = await self.call(req.group_id, Envelope(txn_offset_commit=msg))
            if reply.response is not None:
                errors = {
                    (t.name, p.partition_index): p.error_code
                    for t in reply.response.topics
                    for p in t.partitions
                }
            else:
                errors = {(t.name, p.partition_index): reply.error_code for t in known for p in t.partitions}
        resp = op.TxnOffsetCommitResponse()
        for t in req.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                key = (t.name, p.partition_index)
                code = (
                    ErrorCode.unknown_topic_or_partition.value
                    if key in unknown
                    else errors.get(key, ErrorCode.unknown_server_error.value)
                )
                rt.partitions.add(partition_index=p.partition_index, error_code=code)
        return self.response(ctx, resp)

    async def offset_fetch(self, ctx: CallContext, req: Any) -> Any:
        msg = op.OffsetFetchRequest(
            api_version=ctx.version, require_stable=bool(getattr(req, "require_stable", False))
        )
        if ctx.version <= 7:
            group = msg.groups.add(group_id=req.group_id, all_topics=req.topics is None)
            for t in req.topics or ():
                to_proto(t, group.topics.add())
        else:
            for g in req.groups:
                group = to_proto(g, msg.groups.add())
                group.all_topics = g.topics is None

        def sub(ids: list[str]) -> Envelope:
            chosen = set(ids)
            groups = [g for g in msg.groups if g.group_id in chosen]
            return Envelope(
                offset_fetch=op.OffsetFetchRequest(
                    api_version=msg.api_version, require_stable=msg.require_stable, groups=groups
                )
            )

        ordered = await self.per_group(
            [g.group_id for g in msg.groups],
            sub,
            lambda resp: ((g.group_id, g) for g in resp.groups),
            lambda gid, reply: op.OffsetFetchResponseGroup(group_id=gid, error_code=reply.error_code),
        )
        if ctx.version <= 7:
            only = ordered[0]
            body_type = ctx.response_type
            topic_type = _entry(body_type, "topics")
            partition_type = _entry(topic_type, "partitions")
            topics = tuple(
                topic_type(name=t.name, partitions=tuple(from_proto(p, partition_type) for p in t.partitions))
                for t in only.topics
            )
            kwargs: dict[str, Any] = {"topics": topics}
            if "error_code" in body_type.__dataclass_fields__:
                kwargs["error_code"] = ErrorCode(only.error_code)
            if "throttle_time" in body_type.__dataclass_fields__:
                kwargs["throttle_time"] = NO_THROTTLE
            return body_type(**kwargs)
        return self.response(ctx, op.OffsetFetchResponse(groups=ordered))

    async def offset_delete(self, ctx: CallContext, req: Any) -> Any:
        """Partitions that do not exist upstream (a topic that does not exist, or a partition
        index beyond its count) are answered UNKNOWN_TOPIC_OR_PARTITION, as Kafka's request
        handler answers them from its metadata cache; the shard answers the rest (and the
        group-level error), and every requested partition is echoed with its own error in
        request order."""
        absent = await self.topics.unknown_partitions(
            (t.name, p.partition_index) for t in req.topics for p in t.partitions
        )
        known = tuple(
            dataclasses.replace(
                t, partitions=tuple(p for p in t.partitions if (t.name, p.partition_index) not in absent)
            )
            for t in req.topics
        )
        msg = to_proto(
            dataclasses.replace(req, topics=tuple(t for t in known if t.partitions)),
            op.OffsetDeleteRequest(api_version=ctx.version),
        )
        reply = await self.call(req.group_id, Envelope(offset_delete=msg))
        resp = reply.response or op.OffsetDeleteResponse(error_code=reply.error_code)
        if absent and resp.error_code == ErrorCode.none.value:
            answered = {(t.name, p.partition_index): p for t in resp.topics for p in t.partitions}
            unknown = ErrorCode.unknown_topic_or_partition.value
            topics = [
                op.OffsetDeleteResponseTopic(
                    name=t.name,
                    partitions=[
                        answered[t.name, p.partition_index]
                        if (t.name, p.partition_index) in answered
                        else op.OffsetDeleteResponsePartition(
                            partition_index=p.partition_index, error_code=unknown
                        )
                        for p in t.partitions
                    ],
                )
                for t in req.topics
            ]
            del resp.topics[:]
            resp.topics.extend(topics)
        return self.response(ctx, resp)

    # --- KIP-848 consumer groups ------------------------------------------------------------

    async def consumer_group_heartbeat(self, ctx: CallContext, req: Any) -> Any:
        msg = to_proto(req, cgh.ConsumerGroupHeartbeatRequest(api_version=ctx.version))
        msg.client_id = ctx.header.client_id or ""
        msg.client_host = ctx.member_host
        regex = getattr(req, "subscribed_topic_regex", None)
        if regex and self.authorization is not None:  # resolved with this member's rights
            caller = Caller(ctx.principal, ctx.client_host)
            msg.undescribable_topics.extend(
                self.authorization.undescribable(caller, regex, await self.topics.all_names())
            )
        reply = await self.call(req.group_id, Envelope(consumer_group_heartbeat=msg))
        resp = reply.response or cgh.ConsumerGroupHeartbeatResponse(
            error_code=reply.error_code, error_message=reply.error_message or None, member_epoch=-1
        )
        return self.response(ctx, resp)

    async def consumer_group_describe(self, ctx: CallContext, req: Any) -> Any:
        return await self._describe_modern_groups(
            ctx,
            req,
            "consumer_group_describe",
            cgh.ConsumerGroupDescribeResponse,
            cgh.ConsumerGroupDescribeGroup,
        )

    async def _describe_modern_groups(
        self, ctx: CallContext, req: Any, operation: str, response_type: Any, group_type: Any
    ) -> Any:
        """ConsumerGroupDescribe and ShareGroupDescribe: the group ids split by partition, each
        part one ``operation`` envelope of the same request type, merged in request order."""
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

    # --- KIP-932 share groups --------------------------------------------------------------

    async def share_group_heartbeat(self, ctx: CallContext, req: Any) -> Any:
        msg = to_proto(req, sh.ShareGroupHeartbeatRequest(api_version=ctx.version))
        msg.client_id = ctx.header.client_id or ""
        msg.client_host = ctx.member_host
        reply = await self.call(req.group_id, Envelope(share_group_heartbeat=msg))
        resp = reply.response or sh.ShareGroupHeartbeatResponse(  # Kafka's: epoch 0
            error_code=reply.error_code, error_message=reply.error_message or None
        )
        return self.response(ctx, resp)

    async def share_group_describe(self, ctx: CallContext, req: Any) -> Any:
        return await self._describe_modern_groups(
            ctx, req, "share_group_describe", sh.ShareGroupDescribeResponse, sh.ShareGroupDescribeGroup
        )

    async def share_fetch(self, ctx: CallContext, req: Any) -> Any:
        """See :mod:`groupcoord.gateway.groups.share_fetch`."""
        rt = ctx.response_type
        group_id, member_id = req.group_id or "", req.member_id or ""
        acknowledgements = {
            (_topic_id(t.topic_id), int(p.partition_index)): p.acknowledgement_batches
            for t in req.topics
            for p in t.partitions
            if p.acknowledgement_batches
        }
        asked = [(_topic_id(t.topic_id), int(p.partition_index)) for t in req.topics for p in t.partitions]
        renew = ctx.version >= share_fetch.RENEW_VERSION and bool(req.is_renew_ack)
        if renew and (req.max_wait or req.min_bytes or req.max_bytes or req.max_records):
            return _share_error(rt, ErrorCode.invalid_request)  # a renewal fetches nothing
        try:
            fetching = self.share_sessions.fetch(
                group_id,
                member_id,
                int(req.share_session_epoch),
                asked,
                [(_topic_id(t.topic_id), int(p)) for t in req.forgotten_topics_data for p in t.partitions],
                ctx.connection,
            )
        except ShareSessionError as e:
            return _share_error(rt, e.code)
        mode = int(getattr(req, "share_acquire_mode", share_fetch.BATCH_OPTIMIZED))
        if mode not in (share_fetch.BATCH_OPTIMIZED, share_fetch.RECORD_LIMIT):
            return _share_error(rt, ErrorCode.unknown_server_error)  # Kafka 4.4's, the session moved on
        if renew:
            fetching = []  # acknowledgements only: nothing is fetched or acquired
        ended = self._final(group_id, member_id, int(req.share_session_epoch))
        step1 = await self.call(
            group_id,
            Envelope(
                share_fetch=share_fetch.delivery_request(
                    group_id, member_id, fetching, acknowledgements, ctx.version, ended, renew
                )
            ),
        )
        if step1.response is None or step1.response.error_code:
            code = step1.error_code if step1.response is None else step1.response.error_code
            return _share_error(rt, ErrorCode(code))
        told = {(p.topic_id, p.partition): p for p in step1.response.partitions}
        fetched: dict[tuple[bytes, int], share_fetch.Fetched] = {}
        starts: dict[tuple[bytes, int], int] = {}
        acquired: dict[tuple[bytes, int], Any] = {}
        if fetching:
            resets = {k: told[k].reset_to for k in fetching if told[k].HasField("reset_to")}
            starts = await share_fetch.start_offsets(ctx.ask, resets)
            offsets = {
                k: starts[k] if k in resets else told[k].fetch_offset
                for k in fetching
                if k not in resets or k in starts
            }
            if offsets:
                fetched = await share_fetch.fetch_upstream(
                    ctx.ask,
                    offsets,
                    int(req.max_wait.total_seconds() * 1000),
                    int(req.min_bytes),
                    int(req.max_bytes),
                    step1.response.isolation_level == "read_committed",
                )
            step2 = sh.ShareDeliveryRequest(
                api_version=ctx.version,
                group_id=group_id,
                member_id=member_id,
                acquire=True,
            )
            # batch_optimized (Kafka's default share.acquire.mode): whole batches, until the
            # member's max_records is reached (the batch that reaches it is taken whole); each
            # fetch then covers up to the first batch left out (fetched again later), else all it
            # returned. record_limit: every batch offered, the shard acquires max_records exactly.
            wanted, taken = max(int(req.max_records), 1), 0
            for key, got in fetched.items():
                if got.error_code != ErrorCode.none or got.covered_to is None or key not in offsets:
                    continue
                part = step2.partitions.add(topic_id=key[0], partition=key[1], fetch_offset=offsets[key])
                if key in starts:
                    part.start_offset = starts[key]
                part.covered_to = got.covered_to
                for first, last in got.deliverable:
                    if taken >= wanted and mode == share_fetch.BATCH_OPTIMIZED:
                        part.covered_to = first - 1
                        break
                    part.offsets.extend(range(first, last + 1))
                    taken += last - first + 1
            # batch_optimized: so the shard never splits a batch
            step2.max_records = wanted if mode == share_fetch.RECORD_LIMIT else max(taken, 1)
            if step2.partitions:
                reply = await self.call(group_id, Envelope(share_fetch=step2))
                if reply.response is not None:
                    acquired = {(p.topic_id, p.partition): p.acquired for p in reply.response.partitions}
        topic_type = _entry(rt, "responses")
        partition_type = _entry(topic_type, "partitions")
        leader_type = partition_type.__dataclass_fields__["current_leader"].type
        range_type = _entry(partition_type, "acquired_records")
        by_topic: dict[bytes, list[Any]] = {}
        incremental, named = int(req.share_session_epoch) > 0, {*asked, *acknowledgements}
        for key in dict.fromkeys([*fetching, *acknowledgements]):
            got = fetched.get(key)
            code, records = (got.error_code, got.records) if got is not None else (ErrorCode.none, b"")
            ranges = acquired.get(key, ())
            if incremental and not ranges and code == ErrorCode.none and key not in named:
                continue  # as Kafka's share session answers a later fetch: what it named or changed
            by_topic.setdefault(key[0], []).append(
                partition_type(
                    partition_index=i32(key[1]),
                    error_code=code,
                    acknowledge_error_code=ErrorCode(told[key].acknowledge_error_code)
                    if key in told
                    else ErrorCode.none,
                    current_leader=leader_type(leader_id=i32(-1), leader_epoch=i32(-1)),
                    records=records if ranges else b"",
                    acquired_records=tuple(
                        range_type(
                            first_offset=r.first_offset,
                            last_offset=r.last_offset,
                            delivery_count=r.delivery_count,
                        )
                        for r in ranges
                    ),
                )
            )
        return rt(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            acquisition_lock_timeout=i32Timedelta.parse(
                datetime.timedelta(milliseconds=step1.response.acquisition_lock_timeout_ms)
            ),
            responses=tuple(
                topic_type(topic_id=uuid.UUID(bytes=tid), partitions=tuple(parts))
                for tid, parts in by_topic.items()
            ),
            node_endpoints=(),
        )

    async def share_acknowledge(self, ctx: CallContext, req: Any) -> Any:
        rt = ctx.response_type
        group_id, member_id = req.group_id or "", req.member_id or ""
        try:
            self.share_sessions.acknowledge(group_id, member_id, int(req.share_session_epoch))
        except ShareSessionError as e:
            return _share_error(rt, e.code)
        acknowledgements = {
            (_topic_id(t.topic_id), int(p.partition_index)): p.acknowledgement_batches
            for t in req.topics
            for p in t.partitions
        }
        ended = self._final(group_id, member_id, int(req.share_session_epoch))
        renew = ctx.version >= share_fetch.RENEW_VERSION and bool(req.is_renew_ack)
        reply = await self.call(
            group_id,
            Envelope(
                share_acknowledge=share_fetch.delivery_request(
                    group_id, member_id, (), acknowledgements, ctx.version, ended, renew
                )
            ),
        )
        if reply.response is None or reply.response.error_code:
            code = reply.error_code if reply.response is None else reply.response.error_code
            return _share_error(rt, ErrorCode(code))
        topic_type = _entry(rt, "responses")
        partition_type = _entry(topic_type, "partitions")
        leader_type = partition_type.__dataclass_fields__["current_leader"].type
        by_topic: dict[bytes, list[Any]] = {}
        for p in reply.response.partitions:
            if (p.topic_id, p.partition) not in acknowledgements:
                continue  # a share-partition of the ended session, named only to give back
            by_topic.setdefault(p.topic_id, []).append(
                partition_type(
                    partition_index=i32(p.partition),
                    error_code=ErrorCode(p.acknowledge_error_code),
                    current_leader=leader_type(leader_id=i32(-1), leader_epoch=i32(-1)),
                )
            )
        lock = {  # v2 tells the member how long what it renewed is now locked for
            "acquisition_lock_timeout": i32Timedelta.parse(
                datetime.timedelta(milliseconds=reply.response.acquisition_lock_timeout_ms)
            )
        }
        return rt(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            responses=tuple(
                topic_type(topic_id=uuid.UUID(bytes=tid), partitions=tuple(parts))
                for tid, parts in by_topic.items()
            ),
            node_endpoints=(),
            **(lock if ctx.version >= share_fetch.RENEW_VERSION else {}),
        )

    def _final(self, group_id: str, member_id: str, epoch: int) -> list[tuple[bytes, int]] | None:
        """A checked request with the final epoch ends the member's session here: its
        share-partitions, where what it still holds is given back (None for any other epoch)."""
        if epoch != FINAL_EPOCH:
            return None
        return self.share_sessions.final(group_id, member_id).partitions

    async def describe_share_group_offsets(self, ctx: CallContext, req: Any) -> Any:
        """The shard's start offsets, and (v1) the lag: the upstream's high watermark (ListOffsets
        on the client's own connection) less the start offset and the records done past it."""
        asked = {g.group_id: g for g in req.groups}

        def envelope(ids: list[str]) -> Envelope:
            msg = sh.DescribeShareGroupOffsetsRequest(api_version=ctx.version)
            for gid in ids:
                group = msg.groups.add(group_id=gid, all_topics=asked[gid].topics is None)
                for t in asked[gid].topics or ():
                    group.topics.add(topic_name=t.topic_name, partitions=[int(p) for p in t.partitions])
            return Envelope(describe_share_group_offsets=msg)

        groups = await self.per_group(
            [g.group_id for g in req.groups],
            envelope,
            lambda resp: ((g.group_id, g) for g in resp.groups),
            lambda gid, reply: sh.DescribeShareGroupOffsetsResponseGroup(
                group_id=gid, error_code=reply.error_code, error_message=reply.error_message or None
            ),
        )
        if ctx.version >= 1:  # v1 carries the lag
            partitions = [(t.topic_name, p) for g in groups for t in g.topics for p in t.partitions]
            ends = await share_fetch.end_offsets(
                ctx.ask, {(name, p.partition_index) for name, p in partitions if p.start_offset >= 0}
            )
            for name, p in partitions:
                end = ends.get((name, p.partition_index))
                if end is not None and p.start_offset >= 0:
                    p.lag = max(0, end - p.start_offset - p.done)
        return self.response(ctx, sh.DescribeShareGroupOffsetsResponse(groups=groups))

    async def alter_share_group_offsets(self, ctx: CallContext, req: Any) -> Any:
        msg = sh.AlterShareGroupOffsetsRequest(api_version=ctx.version, group_id=req.group_id)
        for t in req.topics:
            msg.topics.add(
                topic_name=t.topic_name,
                partitions=[int(p.partition_index) for p in t.partitions],
                start_offsets=[int(p.start_offset) for p in t.partitions],
            )
        return await self._change_share_group_offsets(ctx, req.group_id, Envelope(alter_share_group_offsets=msg))

    async def delete_share_group_offsets(self, ctx: CallContext, req: Any) -> Any:
        msg = sh.AlterShareGroupOffsetsRequest(api_version=ctx.version, group_id=req.group_id, delete=True)
        for t in req.topics:
            msg.topics.add(topic_name=t.topic_name)
        return await self._change_share_group_offsets(ctx, req.group_id, Envelope(delete_share_group_offsets=msg))

    async def _change_share_group_offsets(self, ctx: CallContext, group_id: str, envelope: Envelope) -> Any:
        """AlterShareGroupOffsets and DeleteShareGroupOffsets: the shard's answer, or its
        request-level error in the response's."""
        reply = await self.call(group_id, envelope)
        return self.response(
            ctx,
            reply.response
            or sh.AlterShareGroupOffsetsResponse(error_code=reply.error_code, error_message=reply.error_message or None),
        )

    # --- admin --------------------------------------------------------------------------

    async def list_groups(self, ctx: CallContext, req: Any) -> Any:
        msg = to_proto(req, ga.ListGroupsRequest(api_version=ctx.version))
        replies = await asyncio.gather(
            *(self.call_partition(p, Envelope(list_groups=msg)) for p in range(self.leadership.partitions))
        )
        out = ga.ListGroupsResponse()
        for reply in replies:
            if reply.response is None:
                # like a broker with a loading partition: report it, keep what we have
                out.error_code = out.error_code or reply.error_code
                continue
            out.error_code = out.error_code or reply.response.error_code
            out.groups.extend(reply.response.groups)
        return self.response(ctx, out)

    async def describe_groups(self, ctx: CallContext, req: Any) -> Any:
        msg = to_proto(req, ga.DescribeGroupsRequest(api_version=ctx.version))
        groups = await self.per_group(
            list(msg.groups),
            lambda ids: Envelope(
                describe_groups=ga.DescribeGroupsRequest(
                    api_version=msg.api_version,
                    groups=ids,
                    include_authorized_operations=msg.include_authorized_operations,
                )
            ),
            lambda resp: ((g.group_id, g) for g in resp.groups),
            lambda gid, reply: ga.DescribedGroup(
                group_id=gid, error_code=reply.error_code, error_message=reply.error_message
            ),
        )
        return self.response(ctx, ga.DescribeGroupsResponse(groups=groups))

    async def delete_groups(self, ctx: CallContext, req: Any) -> Any:
        results = await self.per_group(
            list(req.groups_names),
            lambda ids: Envelope(
                delete_groups=ga.DeleteGroupsRequest(api_version=ctx.version, groups_names=ids)
            ),
            lambda resp: ((r.group_id, r) for r in resp.results),
            lambda gid, reply: ga.DeletableGroupResult(group_id=gid, error_code=reply.error_code),
        )
        return self.response(ctx, ga.DeleteGroupsResponse(results=results))

    async def find_coordinator(self, ctx: CallContext, req: Any) -> Any:
        body_type = ctx.response_type
        key_type = int(getattr(req, "key_type", GROUP_KEY))
        keys = list(req.coordinator_keys) if ctx.version >= 4 else [req.key]
        if key_type != GROUP_KEY:  # transaction coordinators: the upstream's, as it answers the client
            return await ctx.ask(req)
        node_id, host, port = await self.coordinator_node(ctx.listener)
        if ctx.version >= 4:
            entry = _entry(body_type, "coordinators")
            return body_type(
                throttle_time=NO_THROTTLE,
                coordinators=tuple(
                    entry(
                        key=k,
                        node_id=i32(node_id),
                        host=host,
                        port=i32(port),
                        error_code=ErrorCode.none,
                        error_message=None,
                    )
                    for k in keys
                ),
            )
        kwargs: dict[str, Any] = {
            "error_code": ErrorCode.none,
            "node_id": i32(node_id),
            "host": host,
            "port": i32(port),
        }
        fields = body_type.__dataclass_fields__
        if "throttle_time" in fields:
            kwargs["throttle_time"] = NO_THROTTLE
        if "error_message" in fields:
            kwargs["error_message"] = None
        return body_type(**kwargs)

    # --- group configs (DescribeConfigs / IncrementalAlterConfigs for GROUP resources) ---

    async def _per_resource(
        self, ctx: CallContext, req: Any, one: Callable[[Any], Awaitable[Any]], upstream_results: str
    ) -> tuple[Any, ...]:
        """Results for ``req.resources`` in request order: GROUP resources through ``one``
        (in parallel), the others from one request carrying just those, sent on the client's
        own upstream connection (Kafka checks the client's DESCRIBE_CONFIGS / ALTER_CONFIGS)."""
        groups = [r for r in req.resources if int(r.resource_type) == GROUP_RESOURCE]
        others = tuple(r for r in req.resources if int(r.resource_type) != GROUP_RESOURCE)
        upstream = await ctx.ask(dataclasses.replace(req, resources=others)) if others else None
        mine = dict(
            zip((id(r) for r in groups), await asyncio.gather(*(one(r) for r in groups)), strict=True)
        )
        theirs = iter(getattr(upstream, upstream_results) if upstream is not None else ())
        return tuple(mine[id(r)] if id(r) in mine else next(theirs) for r in req.resources)

    async def describe_configs(self, ctx: CallContext, req: Any) -> Any:
        body_type = ctx.response_type
        result_type = _entry(body_type, "results")
        config_type = _entry(result_type, "configs")

        async def one(resource: Any) -> Any:
            msg = ga.DescribeGroupConfigsRequest(
                api_version=ctx.version,
                group_id=resource.resource_name,
                configuration_keys=list(resource.configuration_keys or ()),
                include_synonyms=bool(getattr(req, "include_synonyms", False)),
                include_documentation=bool(getattr(req, "include_documentation", False)),
            )
            reply = await self.call(resource.resource_name, Envelope(describe_group_configs=msg))
            resp = reply.response or ga.DescribeGroupConfigsResponse(
                error_code=reply.error_code, error_message=reply.error_message
            )
            return result_type(
                error_code=ErrorCode(resp.error_code),
                error_message=resp.error_message if resp.HasField("error_message") else None,
                resource_type=i8(GROUP_RESOURCE),
                resource_name=resource.resource_name,
                configs=tuple(
                    from_proto(
                        c,
                        config_type,
                        **({"synonyms": ()} if "synonyms" in config_type.__dataclass_fields__ else {}),
                    )
                    for c in resp.configs
                ),
            )

        results = await self._per_resource(ctx, req, one, "results")
        return body_type(throttle_time=NO_THROTTLE, results=results)

    async def incremental_alter_configs(self, ctx: CallContext, req: Any) -> Any:
        body_type = ctx.response_type
        entry = _entry(body_type, "responses")

        async def one(resource: Any) -> Any:
            msg = ga.AlterGroupConfigsRequest(
                api_version=ctx.version,
                group_id=resource.resource_name,
                validate_only=bool(req.validate_only),
            )
            for c in resource.configs:
                to_proto(c, msg.configs.add())
            reply = await self.call(resource.resource_name, Envelope(alter_group_configs=msg))
            resp = reply.response or ga.AlterGroupConfigsResponse(
                error_code=reply.error_code, error_message=reply.error_message
            )
            return entry(
                error_code=ErrorCode(resp.error_code),
                error_message=resp.error_message if resp.HasField("error_message") else None,
                resource_type=i8(GROUP_RESOURCE),
                resource_name=resource.resource_name,
            )

        responses = await self._per_resource(ctx, req, one, "responses")
        return body_type(throttle_time=NO_THROTTLE, responses=responses)


def _added(resp: Any) -> ErrorCode:
    """The error of an AddPartitionsToTxn v3 answer naming one partition (v3 carries errors
    per partition only)."""
    codes = [
        p.partition_error_code for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition
    ]
    return (
        next((c for c in codes if c != ErrorCode.none), ErrorCode.none)
        if codes
        else ErrorCode.unknown_server_error
    )


def _without(topics: tuple[Any, ...], unknown: set[tuple[str, int]]) -> tuple[Any, ...]:
    """The OffsetCommit request topics minus the ``unknown`` (topic, partition) pairs."""
    kept = (
        dataclasses.replace(
            t, partitions=tuple(p for p in t.partitions if (t.name, p.partition_index) not in unknown)
        )
        for t in topics
    )
    return tuple(t for t in kept if t.partitions)


def _topic_key(name: str, topic_id: Any) -> tuple[str, bytes]:
    return name or "", topic_id.bytes if hasattr(topic_id, "bytes") else (topic_id or b"")


def _commit_errors(topics: Iterable[Any], code: int) -> op.OffsetCommitResponse:
    """An OffsetCommit answer giving every partition of ``topics`` the same error."""
    return op.OffsetCommitResponse(
        topics=[
            op.OffsetCommitResponseTopic(
                name=getattr(t, "name", "") or "",
                topic_id=_topic_key("", getattr(t, "topic_id", None))[1],
                partitions=[
                    op.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
                    for p in t.partitions
                ],
            )
            for t in topics
        ]
    )


def _in_request_order(
    topics: tuple[Any, ...], answered: op.OffsetCommitResponse, unknown: set[tuple[str, int]]
) -> op.OffsetCommitResponse:
    """Every requested partition in request order: its error from ``answered`` (the shard's
    answer for the known partitions), UNKNOWN_TOPIC_OR_PARTITION for the ``unknown`` ones."""
    errors = {
        (_topic_key(t.name, t.topic_id), p.partition_index): p.error_code
        for t in answered.topics
        for p in t.partitions
    }
    out = op.OffsetCommitResponse(throttle_time_ms=answered.throttle_time_ms)
    for t in topics:
        name, topic_id = _topic_key(getattr(t, "name", ""), getattr(t, "topic_id", None))
        rt = out.topics.add(name=name, topic_id=topic_id)
        for p in t.partitions:
            code = (
                ErrorCode.unknown_topic_or_partition.value
                if (name, p.partition_index) in unknown
                else errors.get(((name, topic_id), p.partition_index), ErrorCode.unknown_server_error.value)
            )
            rt.partitions.add(partition_index=p.partition_index, error_code=code)
    return out


GROUP_APIS: dict[int, ServedApi] = {
    int(api.key): ServedApi(api.versions, adapter)
    for api, adapter in registered(
        "gateway adapter",
        {
            ApiKey.OFFSET_COMMIT: GroupApis.offset_commit,
            ApiKey.OFFSET_FETCH: GroupApis.offset_fetch,
            ApiKey.FIND_COORDINATOR: GroupApis.find_coordinator,
            ApiKey.JOIN_GROUP: GroupApis.join_group,
            ApiKey.HEARTBEAT: GroupApis.heartbeat,
            ApiKey.LEAVE_GROUP: GroupApis.leave_group,
            ApiKey.SYNC_GROUP: GroupApis.sync_group,
            ApiKey.DESCRIBE_GROUPS: GroupApis.describe_groups,
            ApiKey.LIST_GROUPS: GroupApis.list_groups,
            ApiKey.ADD_OFFSETS_TO_TXN: GroupApis.add_offsets_to_txn,
            ApiKey.TXN_OFFSET_COMMIT: GroupApis.txn_offset_commit,
            ApiKey.DESCRIBE_CONFIGS: GroupApis.describe_configs,
            ApiKey.DELETE_GROUPS: GroupApis.delete_groups,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: GroupApis.incremental_alter_configs,
            ApiKey.OFFSET_DELETE: GroupApis.offset_delete,
            ApiKey.CONSUMER_GROUP_HEARTBEAT: GroupApis.consumer_group_heartbeat,
            ApiKey.CONSUMER_GROUP_DESCRIBE: GroupApis.consumer_group_describe,
            ApiKey.SHARE_GROUP_HEARTBEAT: GroupApis.share_group_heartbeat,
            ApiKey.SHARE_GROUP_DESCRIBE: GroupApis.share_group_describe,
            ApiKey.SHARE_FETCH: GroupApis.share_fetch,
            ApiKey.SHARE_ACKNOWLEDGE: GroupApis.share_acknowledge,
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: GroupApis.describe_share_group_offsets,
            ApiKey.ALTER_SHARE_GROUP_OFFSETS: GroupApis.alter_share_group_offsets,
            ApiKey.DELETE_SHARE_GROUP_OFFSETS: GroupApis.delete_share_group_offsets,
        },
    )
}
"""The group APIs the gateway serves: api key -> the declared versions (advertised intersected
with kio's) and the :class:`GroupApis` method adapting them (one per declaration of
:mod:`groupcoord.common.group_api_declarations`). Keyed by plain ints, as request headers carry
them: an int finds an int key by identity, an enum key costs a comparison per lookup."""


def _share_error(response_type: Any, code: ErrorCode) -> Any:
    """A ShareFetch or ShareAcknowledge answered with one top-level error (a session error, the
    shard's, a refusal): nothing per partition."""
    fields: dict[str, Any] = {"throttle_time": NO_THROTTLE, "error_code": code, "responses": (), "node_endpoints": ()}
    if "acquisition_lock_timeout" in response_type.__dataclass_fields__:  # ShareFetch only
        fields["acquisition_lock_timeout"] = NO_THROTTLE
    return response_type(**fields)


def _topic_id(topic_id: uuid.UUID | None) -> bytes:
    """A topic id as 16 bytes; a null one as Kafka's zero id (the upstream: UNKNOWN_TOPIC_ID)."""
    return topic_id.bytes if topic_id is not None else bytes(16)
