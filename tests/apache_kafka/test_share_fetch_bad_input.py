"""Wrong ShareFetch and ShareAcknowledge requests side by side: the same raw requests (kio), each
member on a connection of its own as a real share consumer keeps one, to Kafka 4.4's own share
groups and to groupcoord in front of the same Kafka; both must give the same error codes.

Two members of one share group, each assigned one partition of a 2-partition topic. Member a
acquires records; then every kind of wrong request is asked: a fetch of the other member's
partition (served: neither Kafka nor groupcoord checks assignments at fetch time, and a's
records stay a's), a fetch with a wrong session epoch,
a fetch and an acknowledgement with no session, an acknowledgement that tries to open one,
acknowledgements of offsets never acquired and of offsets another member acquired,
overlapping acknowledgement batches, an acknowledgement type that does not exist, and a huge
acknowledgement list. Afterwards a's acquired records are still its own: its acknowledgement
of them is accepted.
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.share_acknowledge.v1 import request as ack
from kio.schema.share_fetch.v1 import request as fetch
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.static.primitive import i8, i32, i32Timedelta, i64

from groupcoord.common.kafka_wire import codec
from groupcoord.common.kafka_wire.framing import SIZE, frame_bytes
from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka
from tests.e2e.test_share_groups import earliest, produce

ACCEPT, RELEASE = 1, 2
RETRIABLE = {"not_coordinator", "coordinator_not_available", "coordinator_load_in_progress"}


class Connection:
    """One client connection, kept open: a share session belongs to the one that opened it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.correlation = reader, writer, 0

    @classmethod
    async def open(cls, bootstrap: str) -> Connection:
        host, port = bootstrap.rsplit(":", 1)
        return cls(*await asyncio.open_connection(host, int(port)))

    async def ask(self, body: Any) -> Any:
        self.correlation += 1
        self.writer.write(frame_bytes(codec.encode_request(self.correlation, "share-bad-input", body)))
        (size,) = SIZE.unpack(await self.reader.readexactly(SIZE.size))
        correlation, response = codec.decode_response(
            int(body.__api_key__), int(body.__version__), await self.reader.readexactly(size)
        )
        assert correlation == self.correlation
        return response

    def close(self) -> None:
        self.writer.close()


Acks = dict[int, list[tuple[int, int, int]]]  # partition -> (first, last, type) batches


def topics(schema: Any, topic_type: Any, partition_type: Any, topic_id: uuid.UUID, acks: Acks) -> tuple[Any, ...]:
    """The ``topics`` of a ShareFetch or ShareAcknowledge (``schema``: its kio request module)."""
    return (
        topic_type(
            topic_id=topic_id,
            partitions=tuple(
                partition_type(
                    partition_index=i32(p),
                    acknowledgement_batches=tuple(
                        schema.AcknowledgementBatch(
                            first_offset=i64(f), last_offset=i64(last), acknowledge_types=(i8(kind),)
                        )
                        for f, last, kind in batches
                    ),
                )
                for p, batches in acks.items()
            ),
        ),
    )


def share_fetch(group: str, member: str, epoch: int, topic_id: uuid.UUID, acks: Acks) -> fetch.ShareFetchRequest:
    return fetch.ShareFetchRequest(
        group_id=group,
        member_id=member,
        share_session_epoch=i32(epoch),
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=500)),
        min_bytes=i32(1),
        max_bytes=i32(1 << 20),
        max_records=i32(5),
        batch_size=i32(5),
        topics=topics(fetch, fetch.FetchTopic, fetch.FetchPartition, topic_id, acks),
        forgotten_topics_data=(),
    )


def share_ack(group: str, member: str, epoch: int, topic_id: uuid.UUID, acks: Acks) -> ack.ShareAcknowledgeRequest:
    return ack.ShareAcknowledgeRequest(
        group_id=group,
        member_id=member,
        share_session_epoch=i32(epoch),
        topics=topics(ack, ack.AcknowledgeTopic, ack.AcknowledgePartition, topic_id, acks),
    )


def codes(response: Any, names: dict[int, str]) -> tuple[str, list[tuple[str, str, str]]]:
    """The request's error and each partition's errors (fetch and acknowledgement). Partitions
    answered without an error are left out: which of them a later fetch names depends on when
    its records were ready (Kafka initializes a share-partition at its first fetch). Partitions
    by whose they are (``names``): which member gets which partition differs between runs."""
    parts = [
        (names[int(p.partition_index)], p.error_code.name, ErrorCode(getattr(p, "acknowledge_error_code", 0)).name)
        for t in response.responses
        for p in t.partitions
    ]
    return response.error_code.name, sorted(p for p in parts if p[1:] != ("none", "none"))


def acquired(response: Any) -> list[tuple[int, int, int]]:
    return [
        (int(p.partition_index), int(r.first_offset), int(r.last_offset))
        for t in response.responses
        for p in t.partitions
        for r in getattr(p, "acquired_records", ())
    ]


async def settle(conn: dict[str, Connection], group: str, topic: str) -> dict[str, list[int]]:
    """The members (each on its connection) join ``group`` subscribed to ``topic`` and heartbeat
    until each is assigned one partition (Kafka initializes share-partitions before it assigns
    them: seconds, the first time); the partitions each got."""
    epochs = dict.fromkeys(conn, 0)
    owned: dict[str, list[int]] = {m: [] for m in conn}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(len(v) != 1 for v in owned.values()):
        for m in conn:
            beat = await conn[m].ask(
                ShareGroupHeartbeatRequest(
                    group_id=group,
                    member_id=m,
                    member_epoch=i32(epochs[m]),
                    subscribed_topic_names=(topic,) if epochs[m] == 0 else None,
                )
            )
            if beat.error_code.name in RETRIABLE:  # a new Kafka creates __consumer_offsets first
                await conn[m].ask(FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,)))
                continue
            assert beat.error_code.value == 0, beat
            epochs[m] = int(beat.member_epoch)
            if beat.assignment is not None:
                owned[m] = sorted(p for t in beat.assignment.topic_partitions for p in t.partitions)
        await asyncio.sleep(0.3)
    assert all(len(v) == 1 for v in owned.values()), (group, owned, epochs)
    return owned


async def scenario(bootstrap: str, topic: str) -> dict[str, Any]:
    group = f"sg-bad-{uuid.uuid4().hex[:6]}"
    earliest(bootstrap, group)
    a, b = uuid.uuid4().hex[:22], uuid.uuid4().hex[:22]
    conn = {a: await Connection.open(bootstrap), b: await Connection.open(bootstrap)}
    try:
        metadata = await conn[a].ask(
            MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name=topic),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        topic_id = metadata.topics[0].topic_id
        owned = await settle(conn, group, topic)
        mine, theirs = owned[a][0], owned[b][0]
        out: dict[str, Any] = {"settled": sorted(len(v) for v in owned.values())}

        def codes_of(response: Any) -> tuple[str, list[tuple[str, str, str]]]:
            return codes(response, {mine: "a's", theirs: "b's"})

        # a opens its session on its partition and acquires records
        first = await conn[a].ask(share_fetch(group, a, 0, topic_id, {mine: []}))
        out["a opens its session"] = codes_of(first)
        got, epoch, deadline = acquired(first), 1, time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got = acquired(await conn[a].ask(share_fetch(group, a, epoch, topic_id, {})))
            epoch += 1
        out["a acquired"] = [(f, last) for _, f, last in got][:1]
        first_offset, last_offset = got[0][1], got[0][2]

        out["fetch, wrong epoch"] = codes_of(await conn[a].ask(share_fetch(group, a, epoch + 5, topic_id, {})))
        out["fetch, no session"] = codes_of(await conn[b].ask(share_fetch(group, b, 3, topic_id, {})))
        out["ack, no session"] = codes_of(await conn[b].ask(share_ack(group, b, 3, topic_id, {mine: [(0, 0, 1)]})))
        out["ack opening a session"] = codes_of(await conn[b].ask(share_ack(group, b, 0, topic_id, {})))
        # b opens a session of its own on its partition
        out["b opens its session"] = codes_of(await conn[b].ask(share_fetch(group, b, 0, topic_id, {theirs: []})))
        out["b acks a's records"] = codes_of(
            await conn[b].ask(share_ack(group, b, 1, topic_id, {mine: [(first_offset, last_offset, ACCEPT)]}))
        )
        fetched = await conn[b].ask(share_fetch(group, b, 2, topic_id, {mine: []}))
        out["b fetches a's partition"] = (codes_of(fetched), [r[1:] for r in acquired(fetched) if r[0] == mine])
        out["a acks offsets never acquired"] = codes_of(
            await conn[a].ask(share_ack(group, a, epoch, topic_id, {mine: [(1000, 1004, ACCEPT)]}))
        )
        epoch += 1
        out["a acks overlapping batches"] = codes_of(
            await conn[a].ask(
                share_ack(
                    group,
                    a,
                    epoch,
                    topic_id,
                    {mine: [(first_offset, first_offset + 1, ACCEPT), (first_offset + 1, first_offset + 2, RELEASE)]},
                )
            )
        )
        epoch += 1
        out["a acks with an unknown type"] = codes_of(
            await conn[a].ask(share_ack(group, a, epoch, topic_id, {mine: [(first_offset, first_offset, 9)]}))
        )
        epoch += 1
        huge = [(o, o, ACCEPT) for o in range(100_000, 110_000)]
        out["a acks a huge list"] = codes_of(await conn[a].ask(share_ack(group, a, epoch, topic_id, {mine: huge})))
        epoch += 1
        # nothing of that changed a's records: it accepts them now
        out["a accepts its records"] = codes_of(
            await conn[a].ask(share_ack(group, a, epoch, topic_id, {mine: [(first_offset, last_offset, ACCEPT)]}))
        )
        return out
    finally:
        for c in conn.values():
            c.close()


def side_by_side(
    kafka: ApacheKafka,
    kafka_cluster: BackgroundCluster,
    partitions: int,
    records: int,
    run: Callable[[str, str], Awaitable[dict[str, Any]]],
) -> dict[str, dict[str, Any]]:
    """``run(bootstrap, topic)`` against Kafka 4.4 and against groupcoord in front of it, on a
    new topic of ``partitions`` with ``records`` produced (one batch a partition)."""
    topic = f"share-raw-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    produce(kafka.bootstrap, topic, records, partitions)
    seen = {
        side: asyncio.run(run(bootstrap, topic))
        for side, bootstrap in (("Kafka 4.4", kafka.bootstrap), ("groupcoord", kafka_cluster.bootstrap))
    }
    print(seen)
    return seen


def test_wrong_share_fetches_and_acknowledgements_get_kafkas_errors(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster
) -> None:
    seen = side_by_side(kafka, kafka_cluster, 2, 40, scenario)
    assert seen["groupcoord"] == seen["Kafka 4.4"]
