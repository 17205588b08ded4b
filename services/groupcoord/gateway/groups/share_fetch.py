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
"""

from __future__ import annotations

import datetime
import struct
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v13.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.static.primitive import i8, i32, i32Timedelta, i64

from groupcoord.common.durations import non_negative_duration
from groupcoord.gateway.groups.share_sessions import SharePartitionId
from groupcoord.rpc.v1 import share_group_pb2 as pb

PARTITION_MAX_BYTES = 1 << 20
RENEW_VERSION = 2  # ShareFetch's and ShareAcknowledge's first with RENEW and acquire modes
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1  # share.acquire.mode (KIP-1206), as v2 requests carry it
MAX_WAIT_MS = 5_000  # well inside the upstream link's request timeout
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
        found.append(Batch(base, base + delta, producer, bool(attributes & _TRANSACTIONAL), bool(attributes & _CONTROL)))
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
        non_negative_duration(reset_to.removeprefix("by_duration:")) if reset_to.startswith("by_duration:") else None
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
    by_name: dict[str, list[tuple[int, int]]] = {}
    for (tid, partition), reset_to in resets.items():
        if tid in names:
            by_name.setdefault(names[tid], []).append((partition, reset_timestamp(reset_to, now_ms)))
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
    latest_needed: list[SharePartitionId] = []
    for topic in listed.topics:
        for p in topic.partitions:
            key = (tid_of[topic.name], int(p.partition_index))
            if p.error_code != ErrorCode.none:
                continue
            if int(p.offset) >= 0:
                out[key] = int(p.offset)
            else:  # no record at or after that time: start at the end
                latest_needed.append(key)
    if latest_needed:
        out |= await start_offsets(ask, dict.fromkeys(latest_needed, "latest"))
    return out


async def end_offsets(ask: Any, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The upstream's high watermark of each (topic, partition), by ListOffsets latest; a
    partition it cannot answer for is left out (its lag is then unknown, -1)."""
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
                    partitions=tuple(ListOffsetsPartition(partition_index=i32(p), timestamp=i64(LATEST)) for p in ps),
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
    by_topic: dict[bytes, list[tuple[int, int]]] = {}
    for (tid, partition), offset in offsets.items():
        by_topic.setdefault(tid, []).append((partition, offset))
    response = await ask(
        FetchRequest(
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=min(max(0, max_wait_ms), MAX_WAIT_MS))),
            min_bytes=i32(max(0, min_bytes)),
            max_bytes=i32(max_bytes),
            isolation_level=i8(1 if read_committed else 0),
            topics=tuple(
                FetchTopic(
                    topic_id=uuid.UUID(bytes=tid),
                    partitions=tuple(
                        FetchPartition(
                            partition=i32(p),
                            fetch_offset=i64(o),
                            partition_max_bytes=i32(PARTITION_MAX_BYTES),
                        )
                        for p, o in ps
                    ),
                )
                for tid, ps in by_topic.items()
            ),
            forgotten_topics_data=(),
        ),
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
            tid = topic.topic_id.bytes if topic.topic_id is not None else bytes(16)
            out[(tid, int(p.partition_index))] = Fetched(p.error_code, complete, ranges, covered)
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
