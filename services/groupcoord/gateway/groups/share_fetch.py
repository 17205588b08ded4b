"""ShareFetch and ShareAcknowledge at the gateway (KIP-932), in front of a cluster that has no
share groups: the share session here, the records from the upstream, the delivery state at
the group's shard.

A ShareFetch is three steps, each a plain request:

1. the group's shard applies the piggybacked acknowledgements and says where each
   share-partition of the session is to be read from (or, for one never read, what
   ``share.auto.offset.reset`` says: the upstream's ListOffsets turns that into an offset);
2. the upstream answers an ordinary Fetch from those offsets, on the client's own upstream
   connection (so under the client's identity and rights, and long-polled as the client
   asked: ``max_wait``, ``min_bytes``), read_committed when the group says so;
3. the shard acquires, for the member, the offsets of the record batches the fetch returned.

The answer carries the fetched batches as the upstream sent them (never decoded: the client
delivers only the acquired offsets of them) and the acquired ranges with their delivery counts.
Offsets are acquired per whole batch, as Kafka's share-partitions acquire them.

Here are the ShareFetch adapter (:func:`share_fetch`, one function per step), the helpers of
each step, and :class:`ShareDelivery`: the share sessions of this gateway's members, the share
groups' connection state, which ShareAcknowledge (:mod:`.share_apis`) moves on too.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import struct
import time
import uuid
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v13.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.static.primitive import i8, i32, i32Timedelta, i64

from groupcoord.common.durations import non_negative_duration
from groupcoord.gateway.groups.serving import CallContext, GroupServing
from groupcoord.gateway.groups.share_sessions import (
    FINAL_EPOCH,
    EndedSession,
    SharePartitionId,
    ShareSessionError,
    ShareSessions,
)
from groupcoord.gateway.messages.kio_entities import NO_THROTTLE, element_type, has_field
from groupcoord.rpc.v1 import share_group_pb2 as pb
from groupcoord.rpc.v1.coordinator_pb2 import CoordinatorEnvelope as Envelope

log = logging.getLogger(__name__)

PARTITION_MAX_BYTES = 1 << 20
RENEW_VERSION = 2  # ShareFetch's and ShareAcknowledge's first with RENEW and acquire modes
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1  # share.acquire.mode (KIP-1206), as v2 requests carry it
MAX_WAIT_MS = 5_000  # well inside the upstream link's request timeout
LOG_END_WAIT_MS = 10  # the Fetch that reads a log end (:func:`log_ends`)
SHARE_API_VERSION = 1  # of ShareAcknowledge, sent for a share session its connection ended
EARLIEST, LATEST = -2, -1  # ListOffsets timestamps
_BATCH_HEADER = struct.Struct(">qi")  # base offset, batch length (bytes after this field)
# a v2 record batch's header after those: leader epoch, magic, crc, attributes, last offset
# delta, first and max timestamps, producer id (then epoch, sequence, record count)
_REST_OF_HEADER = struct.Struct(">ibIhiqqq")
_HEADER_SIZE = _BATCH_HEADER.size + 49  # 61 bytes up to the first record
_TRANSACTIONAL, _CONTROL = 1 << 4, 1 << 5


@dataclass(frozen=True, slots=True)
class Fetched:
    """One share-partition's part of the upstream's Fetch answer."""

    error_code: ErrorCode
    records: bytes  # its complete batches, as the upstream sent them
    deliverable: list[tuple[int, int]]  # (first, last) of the batches a member may get
    covered_to: int | None  # the last offset of the last complete batch


@dataclass(frozen=True, slots=True)
class Batch:
    """One record batch as its header tells it."""

    base_offset: int
    last_offset: int
    producer_id: int
    transactional: bool
    control: bool


def batches(records: bytes | None) -> tuple[bytes, list[Batch]]:
    """The complete record batches of a fetched partition (a fetch may end inside one), and
    each one's header. Only v2 batches (magic 2: Kafka 0.11 and later) are read."""
    if not records:
        return b"", []
    found: list[Batch] = []
    position = 0
    while position + _HEADER_SIZE <= len(records):
        base, length = _BATCH_HEADER.unpack_from(records, position)
        end = position + _BATCH_HEADER.size + length
        if end > len(records) or end - position < _HEADER_SIZE:
            break
        _epoch, magic, _crc, attributes, delta, _first, _max, producer = _REST_OF_HEADER.unpack_from(
            records, position + _BATCH_HEADER.size
        )
        if magic != 2:
            break
        found.append(
            Batch(
                base, base + delta, producer, bool(attributes & _TRANSACTIONAL), bool(attributes & _CONTROL)
            )
        )
        position = end
    return records[:position], found


def deliverable(found: list[Batch], aborted: Iterable[tuple[int, int]] | None) -> list[tuple[int, int]]:
    """The (first, last) offsets of the batches a share group may deliver: never a control batch
    (a transaction marker), and with read_committed (``aborted``: the Fetch's aborted
    transactions, producer id and first offset) never a batch of an aborted transaction, as
    Kafka's read_committed consumer skips them. What is left out becomes a gap at the shard."""
    pending = sorted(aborted or (), key=lambda a: a[1])
    aborting: set[int] = set()
    out: list[tuple[int, int]] = []
    for batch in found:
        while pending and pending[0][1] <= batch.last_offset:
            aborting.add(pending.pop(0)[0])
        if batch.control:
            aborting.discard(batch.producer_id)  # the transaction's marker: what follows is not its
            continue
        if batch.transactional and batch.producer_id in aborting:
            continue
        out.append((batch.base_offset, batch.last_offset))
    return out


def reset_timestamp(reset_to: str, now_ms: int) -> int:
    """The ListOffsets timestamp of ``share.auto.offset.reset``: earliest, latest, or the first
    offset at or after now minus ``by_duration:<ISO-8601>`` (the group config, validated by the
    coordinator with the same reading)."""
    if reset_to == "earliest":
        return EARLIEST
    duration = (
        non_negative_duration(reset_to.removeprefix("by_duration:"))
        if reset_to.startswith("by_duration:")
        else None
    )
    if duration is None:
        return LATEST
    return now_ms - int(duration.total_seconds() * 1000)


async def start_offsets(ask: Any, resets: dict[SharePartitionId, str]) -> dict[SharePartitionId, int]:
    """Where each new share-partition starts, asked of the upstream (its names by id, then
    ListOffsets); a partition the upstream cannot place is left out (fetched again later)."""
    if not resets:
        return {}
    ids = sorted({tid for tid, _ in resets})
    metadata = await ask(
        MetadataRequest(
            topics=tuple(MetadataRequestTopic(topic_id=uuid.UUID(bytes=t), name=None) for t in ids),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    )
    names = {t.topic_id.bytes: t.name for t in metadata.topics if t.name and t.topic_id is not None}
    now_ms = int(time.time() * 1000)
    timestamps = {key: reset_timestamp(reset_to, now_ms) for key, reset_to in resets.items()}
    by_name: dict[str, list[tuple[int, int]]] = {}
    for (tid, partition), ts in timestamps.items():
        if tid in names:
            by_name.setdefault(names[tid], []).append((partition, ts))
    if not by_name:
        return {}
    listed = await ask(
        ListOffsetsRequest(
            replica_id=i32(-1),
            isolation_level=i8(0),
            topics=tuple(
                ListOffsetsTopic(
                    name=name,
                    partitions=tuple(
                        ListOffsetsPartition(partition_index=i32(p), timestamp=i64(ts)) for p, ts in ps
                    ),
                )
                for name, ps in by_name.items()
            ),
        )
    )
    tid_of = {name: tid for tid, name in names.items()}
    out: dict[SharePartitionId, int] = {}
    ends: dict[SharePartitionId, int] = {}
    latest_needed: list[SharePartitionId] = []
    for topic in listed.topics:
        for p in topic.partitions:
            key = (tid_of[topic.name], int(p.partition_index))
            if p.error_code != ErrorCode.none:
                continue
            if int(p.offset) < 0:  # no record at or after that time: start at the end
                latest_needed.append(key)
            elif timestamps[key] == LATEST:
                ends[key] = int(p.offset)
            else:
                out[key] = int(p.offset)
    if ends:
        out |= await log_ends(ask, ends)
    if latest_needed:
        out |= await start_offsets(ask, dict.fromkeys(latest_needed, "latest"))
    return out


async def log_ends(ask: Any, listed: dict[SharePartitionId, int]) -> dict[SharePartitionId, int]:
    """The log end of each share-partition: the high watermark of a Fetch at the offset
    ListOffsets "latest" answered (``listed``), which is the log end on Kafka, where the fetch
    returns no record. tansu answers that ListOffsets with its last batch's base offset + 1,
    inside the batch: a share group starting there was delivered the records produced before
    it joined (998 of 1,000), where Kafka delivers none. A Fetch's high watermark is right on
    both (the state-topic reader takes the log end from it too); here it costs at most the one
    last batch, once per share-partition's start. A partition the Fetch fails keeps ``listed``.

    ``max_wait`` is not 0: tansu 0.6 answers a Fetch with no wait with no partitions at all
    (Kafka, asked for no bytes, answers at once whatever the wait)."""
    if not listed:
        return {}
    request = fetch_request(listed, max_wait_ms=LOG_END_WAIT_MS, min_bytes=0, max_bytes=1, partition_max_bytes=1)
    response = await ask(request)
    out = dict(listed)
    found = set()
    for topic in response.responses:
        for p in topic.partitions:
            key = (topic_id_bytes(topic.topic_id), int(p.partition_index))
            if key in out and p.error_code == ErrorCode.none and int(p.high_watermark) >= 0:
                out[key] = int(p.high_watermark)
                found.add(key)
    if len(found) < len(out):
        log.warning(
            "the upstream's Fetch gave no log end for %d new share-partition(s): they start at "
            "ListOffsets' latest offset",
            len(out) - len(found),
        )
    return out


async def end_offsets(ask: Any, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The upstream's ListOffsets latest of each (topic, partition): its high watermark on Kafka,
    inside the last batch on tansu (:func:`log_ends` makes it the log end on both); a partition
    it cannot answer for is left out (its lag is then unknown, -1)."""
    by_name: dict[str, list[int]] = {}
    for name, partition in partitions:
        by_name.setdefault(name, []).append(partition)
    if not by_name:
        return {}
    listed = await ask(
        ListOffsetsRequest(
            replica_id=i32(-1),
            isolation_level=i8(0),
            topics=tuple(
                ListOffsetsTopic(
                    name=name,
                    partitions=tuple(
                        ListOffsetsPartition(partition_index=i32(p), timestamp=i64(LATEST)) for p in ps
                    ),
                )
                for name, ps in by_name.items()
            ),
        )
    )
    return {
        (t.name, int(p.partition_index)): int(p.offset)
        for t in listed.topics
        for p in t.partitions
        if p.error_code == ErrorCode.none and int(p.offset) >= 0
    }


def fetch_request(
    offsets: dict[SharePartitionId, int],
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partition_max_bytes: int,
    read_committed: bool = False,
) -> FetchRequest:
    """An upstream Fetch (sessionless, by topic id) of each share-partition from its offset."""
    by_topic: dict[bytes, list[tuple[int, int]]] = {}
    for (tid, partition), offset in offsets.items():
        by_topic.setdefault(tid, []).append((partition, offset))
    return FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=max_wait_ms)),
        min_bytes=i32(min_bytes),
        max_bytes=i32(max_bytes),
        isolation_level=i8(1 if read_committed else 0),
        topics=tuple(
            FetchTopic(
                topic_id=uuid.UUID(bytes=tid),
                partitions=tuple(
                    FetchPartition(partition=i32(p), fetch_offset=i64(o), partition_max_bytes=i32(partition_max_bytes))
                    for p, o in ps
                ),
            )
            for tid, ps in by_topic.items()
        ),
        forgotten_topics_data=(),
    )


async def fetch_upstream(
    ask: Any,
    offsets: dict[SharePartitionId, int],
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    read_committed: bool,
) -> dict[SharePartitionId, Fetched]:
    """One upstream Fetch of every share-partition from its offset: per partition its error,
    its complete batches, and the offset ranges of those it may deliver (:func:`deliverable`)."""
    response = await ask(
        fetch_request(
            offsets,
            max_wait_ms=min(max(0, max_wait_ms), MAX_WAIT_MS),
            min_bytes=max(0, min_bytes),
            max_bytes=max_bytes,
            partition_max_bytes=PARTITION_MAX_BYTES,
            read_committed=read_committed,
        )
    )
    out: dict[SharePartitionId, Fetched] = {}
    for topic in response.responses:
        for p in topic.partitions:
            complete, found = batches(p.records)
            aborted = (
                [(int(a.producer_id), int(a.first_offset)) for a in p.aborted_transactions or ()]
                if read_committed
                else None
            )
            ranges = deliverable(found, aborted)
            covered = found[-1].last_offset if found else None
            out[(topic_id_bytes(topic.topic_id), int(p.partition_index))] = Fetched(
                p.error_code, complete, ranges, covered
            )
    return out


def delivery_request(
    group_id: str,
    member_id: str,
    fetching: Iterable[SharePartitionId],
    acknowledgements: dict[SharePartitionId, Any],
    api_version: int,
    ended: Iterable[SharePartitionId] | None = None,
    renew: bool = False,
) -> pb.ShareDeliveryRequest:
    """Step 1: acknowledgements, and where to fetch ``fetching`` from; when the member's share
    session ended, its share-partitions ``ended``, where what it holds is given back; ``renew``:
    the request says it carries RENEW acknowledgements (v2's ``is_renew_ack``)."""
    request = pb.ShareDeliveryRequest(
        api_version=api_version,
        group_id=group_id,
        member_id=member_id,
        end_session=ended is not None,
        is_renew_ack=renew,
    )
    parts: dict[SharePartitionId, pb.SharePartitionRequest] = {}
    for key in fetching:
        parts[key] = request.partitions.add(topic_id=key[0], partition=key[1], fetch=True)
    for key in ended or ():
        if key not in parts:
            parts[key] = request.partitions.add(topic_id=key[0], partition=key[1])
    for key, batches_ in acknowledgements.items():
        part = parts.get(key) or request.partitions.add(topic_id=key[0], partition=key[1])
        for b in batches_:
            part.acknowledgements.add(
                first_offset=int(b.first_offset),
                last_offset=int(b.last_offset),
                acknowledge_types=[int(t) for t in b.acknowledge_types],
            )
    return request


def topic_id_bytes(topic_id: uuid.UUID | None) -> bytes:
    """A topic id as 16 bytes; a null one as Kafka's zero id (the upstream: UNKNOWN_TOPIC_ID)."""
    return topic_id.bytes if topic_id is not None else bytes(16)


def share_error(response_type: Any, code: ErrorCode) -> Any:
    """A ShareFetch or ShareAcknowledge answered with one top-level error (a session error, the
    shard's, a refusal): nothing per partition."""
    fields: dict[str, Any] = {
        "throttle_time": NO_THROTTLE,
        "error_code": code,
        "responses": (),
        "node_endpoints": (),
    }
    if has_field(response_type, "acquisition_lock_timeout"):  # ShareFetch only
        fields["acquisition_lock_timeout"] = NO_THROTTLE
    return response_type(**fields)


class ShareDelivery:
    """The KIP-932 share sessions of the members fetching through this gateway, and the ends
    of those whose connection closed: the share groups' connection state
    (:meth:`~.serving.GroupServing.connection_state`)."""

    def __init__(self, apis: GroupServing) -> None:
        self.apis = apis
        self.sessions = ShareSessions()
        self._ending: set[asyncio.Task[None]] = set()  # sessions of closed connections ending

    def connection_closed(self, connection: Hashable) -> None:
        """A client connection closed: the share sessions it opened end, and what their members
        hold is given back now (Kafka 4.4 ends a share session with its connection)."""
        for ended in self.sessions.disconnected(connection):
            task = asyncio.get_running_loop().create_task(self._end_session(ended))
            self._ending.add(task)
            task.add_done_callback(self._ending.discard)

    async def close(self, grace_s: float) -> None:
        """The gateway stops: share sessions its closed connections ended still give their
        records back (for up to ``grace_s``; their locks run out otherwise)."""
        if self._ending:
            _, late = await asyncio.wait(list(self._ending), timeout=grace_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)

    async def _end_session(self, ended: EndedSession) -> None:
        request = delivery_request(
            ended.group_id, ended.member_id, (), {}, SHARE_API_VERSION, ended.partitions
        )
        reply = await self.apis.call(ended.group_id, Envelope(share_acknowledge=request))
        code = reply.error_code if reply.response is None else reply.response.error_code
        if code:  # its locks still run out: the records come back then
            log.info(
                "share session of %s in %s ended with its connection; giving back its records failed: %s",
                ended.member_id,
                ended.group_id,
                ErrorCode(code).name,
            )

    def final(self, group_id: str, member_id: str, epoch: int) -> list[SharePartitionId] | None:
        """A checked request with the final epoch ends the member's session here: its
        share-partitions, where what it still holds is given back (None for any other epoch)."""
        if epoch != FINAL_EPOCH:
            return None
        return self.sessions.final(group_id, member_id).partitions


async def share_fetch(apis: GroupServing, ctx: CallContext, req: Any) -> Any:
    """The ShareFetch adapter: the session moved on here, then the three steps of the module's
    docstring (the shard's step 1, the upstream's Fetch, the shard's acquisition)."""
    rt = ctx.response_type
    group_id, member_id = req.group_id or "", req.member_id or ""
    acknowledgements = {
        (topic_id_bytes(t.topic_id), int(p.partition_index)): p.acknowledgement_batches
        for t in req.topics
        for p in t.partitions
        if p.acknowledgement_batches
    }
    asked = [(topic_id_bytes(t.topic_id), int(p.partition_index)) for t in req.topics for p in t.partitions]
    renew = ctx.version >= RENEW_VERSION and bool(req.is_renew_ack)
    if renew and (req.max_wait or req.min_bytes or req.max_bytes or req.max_records):
        return share_error(rt, ErrorCode.invalid_request)  # a renewal fetches nothing
    delivery = apis.connection_state(ShareDelivery)
    try:
        fetching = delivery.sessions.fetch(
            group_id,
            member_id,
            int(req.share_session_epoch),
            asked,
            [(topic_id_bytes(t.topic_id), int(p)) for t in req.forgotten_topics_data for p in t.partitions],
            ctx.connection,
        )
    except ShareSessionError as e:
        return share_error(rt, e.code)
    mode = int(getattr(req, "share_acquire_mode", BATCH_OPTIMIZED))
    if mode not in (BATCH_OPTIMIZED, RECORD_LIMIT):
        return share_error(rt, ErrorCode.unknown_server_error)  # Kafka 4.4's, the session moved on
    if renew:
        fetching = []  # acknowledgements only: nothing is fetched or acquired
    ended = delivery.final(group_id, member_id, int(req.share_session_epoch))
    step1 = await apis.call(
        group_id,
        Envelope(
            share_fetch=delivery_request(
                group_id, member_id, fetching, acknowledgements, ctx.version, ended, renew
            )
        ),
    )
    if step1.response is None or step1.response.error_code:
        code = step1.error_code if step1.response is None else step1.response.error_code
        return share_error(rt, ErrorCode(code))
    told = {(p.topic_id, p.partition): p for p in step1.response.partitions}
    fetched: dict[SharePartitionId, Fetched] = {}
    acquired: dict[SharePartitionId, Any] = {}
    if fetching:
        offsets, starts = await _fetch_offsets(ctx, fetching, told)
        if offsets:
            fetched = await fetch_upstream(
                ctx.ask,
                offsets,
                int(req.max_wait.total_seconds() * 1000),
                int(req.min_bytes),
                int(req.max_bytes),
                step1.response.isolation_level == "read_committed",
            )
        acquired = await _acquire(apis, ctx, req, mode, offsets, starts, fetched)
    return _share_fetch_response(
        rt,
        req,
        [*fetching, *acknowledgements],
        {*asked, *acknowledgements},
        told,
        fetched,
        acquired,
        step1.response.acquisition_lock_timeout_ms,
    )


async def _fetch_offsets(
    ctx: CallContext, fetching: list[SharePartitionId], told: dict[SharePartitionId, Any]
) -> tuple[dict[SharePartitionId, int], dict[SharePartitionId, int]]:
    """(where to fetch each share-partition from, the start offsets ``share.auto.offset.reset``
    gave the ones never read): the shard's fetch offset, or the upstream's ListOffsets of its
    reset (a partition whose reset the upstream did not answer is not fetched)."""
    resets = {k: told[k].reset_to for k in fetching if told[k].HasField("reset_to")}
    starts = await start_offsets(ctx.ask, resets)
    offsets = {
        k: starts[k] if k in resets else told[k].fetch_offset
        for k in fetching
        if k not in resets or k in starts
    }
    return offsets, starts


async def _acquire(
    apis: GroupServing,
    ctx: CallContext,
    req: Any,
    mode: int,
    offsets: dict[SharePartitionId, int],
    starts: dict[SharePartitionId, int],
    fetched: dict[SharePartitionId, Fetched],
) -> dict[SharePartitionId, Any]:
    """Step 3: the shard acquires, for the member, offsets of the fetched batches; the ranges
    it acquired, per share-partition (none when the shard did not answer)."""
    step2 = pb.ShareDeliveryRequest(
        api_version=ctx.version,
        group_id=req.group_id or "",
        member_id=req.member_id or "",
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
            if taken >= wanted and mode == BATCH_OPTIMIZED:
                part.covered_to = first - 1
                break
            part.offsets.extend(range(first, last + 1))
            taken += last - first + 1
    # batch_optimized: so the shard never splits a batch
    step2.max_records = wanted if mode == RECORD_LIMIT else max(taken, 1)
    if not step2.partitions:
        return {}
    reply = await apis.call(step2.group_id, Envelope(share_fetch=step2))
    if reply.response is None:
        return {}
    return {(p.topic_id, p.partition): p.acquired for p in reply.response.partitions}


def _share_fetch_response(
    rt: Any,
    req: Any,
    answered: list[SharePartitionId],
    named: set[SharePartitionId],
    told: dict[SharePartitionId, Any],
    fetched: dict[SharePartitionId, Fetched],
    acquired: dict[SharePartitionId, Any],
    lock_timeout_ms: int,
) -> Any:
    """The ShareFetch answer: per share-partition fetched or acknowledged (``answered``, in
    that order, once each) its records if it acquired any, the acquired ranges and the
    acknowledgement's error; a later fetch of the session leaves out what it neither
    ``named`` nor changed."""
    topic_type = element_type(rt, "responses")
    partition_type = element_type(topic_type, "partitions")
    leader_type = partition_type.__dataclass_fields__["current_leader"].type
    range_type = element_type(partition_type, "acquired_records")
    by_topic: dict[bytes, list[Any]] = {}
    incremental = int(req.share_session_epoch) > 0
    for key in dict.fromkeys(answered):
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
        acquisition_lock_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=lock_timeout_ms)),
        responses=tuple(
            topic_type(topic_id=uuid.UUID(bytes=tid), partitions=tuple(parts))
            for tid, parts in by_topic.items()
        ),
        node_endpoints=(),
    )
