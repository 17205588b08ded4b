"""Simulated KIP-848 members speaking raw ConsumerGroupHeartbeat v1 to a gateway.

Shared by the e2e benchmarks: a member heartbeats with its epoch and reports as owned exactly
the partitions of its last assignment, as a real client does once it has processed the
assignment (revocations first, then additions).
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Member:
    group_id: str
    member_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    epoch: int = 0
    owned: dict[Any, frozenset[int]] = field(default_factory=dict)  # topic id -> partitions
    revoked_ever: bool = False


class Connection:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.cid = 0

    async def open(self) -> Connection:
        from groupcoord.common.kafka_wire.framing import ClientConnection  # noqa: PLC0415

        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.conn = ClientConnection()
        return self

    def _request(self, member: Member, topic: str | None, joining: bool) -> bytes:
        from kio.schema.consumer_group_heartbeat.v1.request import (  # noqa: PLC0415
            ConsumerGroupHeartbeatRequest,
            TopicPartitions,
        )
        from kio.static.primitive import i32, i32Timedelta  # noqa: PLC0415

        from groupcoord.common.kafka_wire import codec  # noqa: PLC0415
        from groupcoord.common.kafka_wire.framing import frame_bytes  # noqa: PLC0415

        req = ConsumerGroupHeartbeatRequest(
            group_id=member.group_id,
            member_id=member.member_id,
            member_epoch=i32(member.epoch),
            rebalance_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=30000 if joining else -1)),
            subscribed_topic_names=(topic,) if joining else None,
            topic_partitions=()
            if joining
            else tuple(
                TopicPartitions(topic_id=t, partitions=tuple(i32(p) for p in sorted(ps)))
                for t, ps in member.owned.items()
            ),
        )
        self.cid += 1
        return frame_bytes(codec.encode_request(self.cid, "bench", req))

    async def _responses(self, count: int) -> list[bytes]:
        got: list[bytes] = []
        while len(got) < count:
            data = await self.reader.read(1 << 16)
            if not data:
                raise ConnectionError(f"{self.host}:{self.port} closed the connection")
            got.extend(frame for _, frame in self.conn.receive_data(data))
        return got

    async def heartbeat(self, member: Member, topic: str | None = None, joining: bool = False) -> Any:
        """One heartbeat, answered before it returns; whether it changed the member."""
        self.writer.write(self._request(member, topic, joining))
        (frame,) = await self._responses(1)
        return _apply(member, frame)

    async def heartbeats(self, members: list[Member]) -> bool:
        """A heartbeat of each member, all in flight at once on this connection (as members
        of a real group heartbeat on their own clocks, not one after another); whether any
        changed its member. Responses come back in request order, as Kafka answers."""
        self.writer.write(b"".join(self._request(m, None, False) for m in members))
        frames = await self._responses(len(members))
        return any([_apply(m, frame) for m, frame in zip(members, frames, strict=True)])

    async def in_turn(self, members: list[Member]) -> bool:
        """A heartbeat of each member, one after another; whether any changed its member."""
        changed = False
        for m in members:
            changed |= bool(await self.heartbeat(m))
        return changed

    def close(self) -> None:
        self.writer.close()


def _apply(member: Member, frame: bytes) -> bool:
    """Take a heartbeat response into ``member`` (epoch, assignment); whether it changed."""
    from groupcoord.common.kafka_wire import codec  # noqa: PLC0415

    _, resp = codec.decode_response(68, 1, frame)
    if int(resp.error_code.value) != 0:
        raise RuntimeError(f"heartbeat of {member.member_id}: {resp.error_code} {resp.error_message}")
    changed = int(resp.member_epoch) != member.epoch
    member.epoch = int(resp.member_epoch)
    if resp.assignment is not None:
        new = {tp.topic_id: frozenset(int(p) for p in tp.partitions) for tp in resp.assignment.topic_partitions}
        for t, ps in member.owned.items():
            if ps - new.get(t, frozenset()):
                member.revoked_ever = True
        changed = changed or new != member.owned
        member.owned = new
    return changed


async def converge(conn: Connection, members: list[Member], max_rounds: int = 100) -> int:
    """Heartbeat every member round after round until a round changes nothing; returns rounds."""
    for rounds in range(1, max_rounds + 1):
        if not await conn.in_turn(members):
            return rounds
    raise RuntimeError("the group did not become stable")
