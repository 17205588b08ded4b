"""ShareFetch and ShareAcknowledge v2 side by side (KIP-1206 acquire modes, KIP-1222 RENEW): the
same raw requests (kio) on one kept connection to Kafka 4.4's own share groups and to groupcoord
in front of the same Kafka; both must answer alike.

One member of a share group reads a one-partition topic whose 20 records came in one batch:

- in ``record_limit`` mode a fetch acquires exactly ``max_records`` records, splitting the batch
  (``batch_optimized``, v1's only mode, takes the batch whole);
- a renewal is a fetch that fetches nothing (``is_renew_ack``, every fetch limit 0; anything else
  is INVALID_REQUEST) or a ShareAcknowledge flagged ``is_renew_ack``; RENEW keeps the records
  acquired by the member, with a new lock of ``share.record.lock.duration.ms``: a record renewed
  half-way through its 15 s lock is still the member's to accept at 17 s, while a record not
  renewed is not (INVALID_RECORD_STATE);
- the wrong uses: RENEW in a request not flagged, an unknown acquire mode, RENEW in a v1 request,
  and RENEW in a group with ``share.renew.acknowledge.enable=false``.
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from typing import Any

from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.share_acknowledge import v1 as ack_v1
from kio.schema.share_acknowledge.v2 import request as ack
from kio.schema.share_fetch.v2 import request as fetch
from kio.static.primitive import i8, i32, i32Timedelta

from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka
from tests.apache_kafka.test_share_fetch_bad_input import (
    Acks,
    Connection,
    acquired,
    codes,
    settle,
    side_by_side,
    topics,
)
from tests.e2e.test_share_groups import earliest

ACCEPT, RENEW = 1, 4
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1
LOCK_MS = 15_000


def share_fetch(
    group: str,
    member: str,
    epoch: int,
    topic_id: uuid.UUID,
    acks: Acks,
    *,
    max_records: int = 5,
    mode: int = BATCH_OPTIMIZED,
    renew: bool = False,
    waits: bool = True,
) -> fetch.ShareFetchRequest:
    """A v2 ShareFetch; ``waits=False`` sets every fetch limit to 0, as a renewal must."""
    return fetch.ShareFetchRequest(
        group_id=group,
        member_id=member,
        share_session_epoch=i32(epoch),
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=500 if waits else 0)),
        min_bytes=i32(1 if waits else 0),
        max_bytes=i32(1 << 20 if waits else 0),
        max_records=i32(max_records if waits else 0),
        batch_size=i32(max_records),
        share_acquire_mode=i8(mode),
        is_renew_ack=renew,
        topics=topics(fetch, fetch.FetchTopic, fetch.FetchPartition, topic_id, acks),
        forgotten_topics_data=(),
    )


def share_ack(
    group: str, member: str, epoch: int, topic_id: uuid.UUID, acks: Acks, *, renew: bool
) -> ack.ShareAcknowledgeRequest:
    return ack.ShareAcknowledgeRequest(
        group_id=group,
        member_id=member,
        share_session_epoch=i32(epoch),
        is_renew_ack=renew,
        topics=topics(ack, ack.AcknowledgeTopic, ack.AcknowledgePartition, topic_id, acks),
    )


def share_ack_v1(group: str, member: str, epoch: int, topic_id: uuid.UUID, acks: Acks, **_: Any) -> Any:
    request = ack_v1.request
    return request.ShareAcknowledgeRequest(
        group_id=group,
        member_id=member,
        share_session_epoch=i32(epoch),
        topics=topics(request, request.AcknowledgeTopic, request.AcknowledgePartition, topic_id, acks),
    )


def answer(response: Any) -> tuple[str, list[tuple[str, str, str]], list[tuple[int, int]], bool]:
    """A fetch's or acknowledgement's errors, the ranges it acquired and whether it carried records."""
    records = any(getattr(p, "records", None) for t in response.responses for p in t.partitions)
    return (*codes(response, {0: "p0"}), [(f, last) for _, f, last in acquired(response)], records)


class Session:
    """One member's share session on its connection: the epoch moves on with each request
    answered without a request-level error (the broker did not take the others)."""

    def __init__(self, conn: Connection, group: str, member: str, topic_id: uuid.UUID) -> None:
        self.conn, self.group, self.member, self.topic_id, self.epoch = conn, group, member, topic_id, 0

    async def ask(self, build: Any, acks: Acks, **options: Any) -> Any:
        response = await self.conn.ask(build(self.group, self.member, self.epoch, self.topic_id, acks, **options))
        if response.error_code.name in ("none", "unknown_server_error"):
            self.epoch += 1
        return response

    async def acquire(self, acks: Acks, **options: Any) -> list[tuple[int, int]]:
        """Fetch until records come (the first fetches find the share-partition initializing)."""
        deadline = time.monotonic() + 30
        while True:
            got = acquired(await self.ask(share_fetch, acks if self.epoch == 0 else {}, **options))
            if got or time.monotonic() > deadline:
                return [(f, last) for _, f, last in got]


async def open_session(bootstrap: str, topic: str, group: str) -> Session:
    conn = await Connection.open(bootstrap)
    metadata = await conn.ask(
        MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=topic),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    )
    member = uuid.uuid4().hex[:22]
    await settle({member: conn}, group, topic)
    return Session(conn, group, member, metadata.topics[0].topic_id)


async def scenario(bootstrap: str, topic: str) -> dict[str, Any]:
    group = f"sg-v2-{uuid.uuid4().hex[:6]}"
    earliest(bootstrap, group, **{"share.record.lock.duration.ms": str(LOCK_MS)})
    session = await open_session(bootstrap, topic, group)
    try:
        out: dict[str, Any] = {}
        # record_limit: exactly max_records of the one 20-record batch
        out["record_limit acquires"] = await session.acquire({0: []}, max_records=3, mode=RECORD_LIMIT)
        acquired_at = time.monotonic()
        out["record_limit again"] = answer(await session.ask(share_fetch, {}, max_records=2, mode=RECORD_LIMIT))
        # the member holds 0-4 now
        out["batch_optimized takes the rest of the batch"] = answer(await session.ask(share_fetch, {}, max_records=1))
        out["unknown acquire mode"] = answer(await session.ask(share_fetch, {}, mode=7))
        renew_0_1 = {0: [(0, 1, RENEW)]}
        out["renew, fetch limits not 0"] = answer(await session.ask(share_fetch, renew_0_1, renew=True))
        out["RENEW not flagged"] = answer(await session.ask(share_fetch, renew_0_1, waits=False))
        out["RENEW in a v1 acknowledgement"] = answer(await session.ask(share_ack_v1, renew_0_1))
        await asyncio.sleep(max(0.0, acquired_at + 8 - time.monotonic()))
        out["fetch renews 0-1"] = answer(await session.ask(share_fetch, renew_0_1, renew=True, waits=False))
        renewed = await session.ask(share_ack, {0: [(2, 2, RENEW)]}, renew=True)
        out["acknowledgement renews 2"] = (answer(renewed), int(renewed.acquisition_lock_timeout.total_seconds() * 1000))
        out["flagged, no RENEW"] = answer(await session.ask(share_ack, {0: [(19, 19, ACCEPT)]}, renew=True))
        await asyncio.sleep(max(0.0, acquired_at + LOCK_MS / 1000 + 2 - time.monotonic()))
        out["accept renewed 0-2 after the first lock"] = answer(
            await session.ask(share_ack, {0: [(0, 2, ACCEPT)]}, renew=False)
        )
        out["accept 3-4, not renewed"] = answer(await session.ask(share_ack, {0: [(3, 4, ACCEPT)]}, renew=False))
        return out
    finally:
        session.conn.close()


async def renew_disabled(bootstrap: str, topic: str) -> dict[str, Any]:
    group = f"sg-v2-off-{uuid.uuid4().hex[:6]}"
    earliest(bootstrap, group, **{"share.renew.acknowledge.enable": "false"})
    session = await open_session(bootstrap, topic, group)
    try:
        return {
            "acquired": await session.acquire({0: []}),
            "renew when disabled": answer(await session.ask(share_ack, {0: [(0, 0, RENEW)]}, renew=True)),
            "accept after": answer(await session.ask(share_ack, {0: [(0, 0, ACCEPT)]}, renew=False)),
        }
    finally:
        session.conn.close()


async def both(bootstrap: str, topic: str) -> dict[str, Any]:
    return {**await scenario(bootstrap, topic), "disabled": await renew_disabled(bootstrap, topic)}


def test_share_fetch_v2_acquire_modes_and_renewals_answer_as_kafka(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster
) -> None:
    seen = side_by_side(kafka, kafka_cluster, 1, 20, both)
    assert seen["Kafka 4.4"]["record_limit acquires"] == [(0, 2)]
    assert seen["groupcoord"] == seen["Kafka 4.4"]
