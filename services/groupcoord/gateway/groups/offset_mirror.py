"""The offsets committed here, mirrored to the upstream cluster's own coordinator
(``--mirror-offsets-to-upstream``): so a team can leave groupcoord at any moment without an
export, and the lag tools that read the brokers (Burrow, kafka-lag-exporter, kminion, Kafka UI,
Redpanda Console, ``kafka-consumer-groups.sh`` against the brokers) see every group served here.

Every OffsetCommit this gateway process accepted is remembered per group (the latest offset per
partition wins) and written upstream every ``interval_s`` as one admin commit per group (no
member, generation -1: Kafka accepts it for a group without members there, which a group served
here is), under the coordinator's upstream identity. The client's commit never waits on it and
never fails by it: an upstream that refuses (ACLs, quota, a group with members there) or cannot
be reached is counted and logged once per group and error, and the partition's offset is sent
again with the next commit of it. Offsets of transactions (TxnOffsetCommit) are not mirrored:
this gateway does not see their outcome; their group's next plain commit is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64

from groupcoord.common.upstream_groups import Address, Ask, UpstreamGroupError, coordinator_of

log = logging.getLogger(__name__)

INTERVAL_S = 1.0
Offset = tuple[int, int, str]  # offset, leader epoch (-1 unknown), metadata


@dataclass
class OffsetMirror:
    """One gateway process's mirror of the offsets it accepted (see the module docstring)."""

    ask: Ask
    interval_s: float = INTERVAL_S
    #: called with (result, partitions) after each upstream commit: "mirrored", "refused", "failed"
    observe: Callable[[str, int], None] = lambda _result, _count: None
    _pending: dict[str, dict[tuple[str, int], Offset]] = field(default_factory=dict)
    _coordinators: dict[str, Address] = field(default_factory=dict)
    _complained: set[tuple[str, str]] = field(default_factory=set)
    _task: asyncio.Task[None] | None = None

    def committed(self, group_id: str, offsets: dict[tuple[str, int], Offset]) -> None:
        """``offsets`` were committed here for ``group_id`` (acknowledged to the client)."""
        if not offsets:
            return
        self._pending.setdefault(group_id, {}).update(offsets)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._follow())

    async def _follow(self) -> None:
        while self._pending:
            await asyncio.sleep(self.interval_s)
            await self.flush()

    async def flush(self) -> None:
        """Write everything remembered so far upstream, one commit per group."""
        pending, self._pending = self._pending, {}
        await asyncio.gather(*(self._send(group_id, offsets) for group_id, offsets in pending.items()))

    async def close(self, grace_s: float = 5.0) -> None:
        """The gateway stops: what it accepted last is still written, for up to ``grace_s``."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.flush(), grace_s)

    async def _send(self, group_id: str, offsets: dict[tuple[str, int], Offset]) -> None:
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic, partition), (offset, epoch, metadata) in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                OffsetCommitRequestPartition(
                    partition_index=i32(partition),
                    committed_offset=i64(offset),
                    committed_leader_epoch=i32(epoch),
                    committed_metadata=metadata,
                )
            )
        request = OffsetCommitRequest(
            group_id=GroupId(group_id),
            generation_id_or_member_epoch=i32(-1),
            member_id="",
            group_instance_id=None,
            topics=tuple(
                OffsetCommitRequestTopic(name=TopicName(t), partitions=tuple(ps)) for t, ps in by_topic.items()
            ),
        )
        try:
            coordinator = self._coordinators.get(group_id) or await coordinator_of(self.ask, group_id)
            self._coordinators[group_id] = coordinator
            response = await self.ask(coordinator, request)
        except (UpstreamGroupError, ConnectionError, OSError, TimeoutError) as exc:
            self._coordinators.pop(group_id, None)
            self._complain(group_id, "failed", repr(exc))
            self.observe("failed", len(offsets))
            return
        refused: dict[str, int] = {}
        for topic in response.topics:
            for p in topic.partitions:
                if p.error_code != ErrorCode.none:
                    name = ErrorCode(p.error_code).name.upper()
                    refused[name] = refused.get(name, 0) + 1
                    if p.error_code == ErrorCode.not_coordinator:
                        self._coordinators.pop(group_id, None)
        if refused:
            self._complain(group_id, "refused", ", ".join(f"{n} x{c}" for n, c in refused.items()))
            self.observe("refused", sum(refused.values()))
        self.observe("mirrored", len(offsets) - sum(refused.values()))

    def _complain(self, group_id: str, result: str, why: str) -> None:
        if len(self._complained) > 10_000:  # bounded: a long refusal is logged again, now and then
            self._complained.clear()
        if (group_id, why) not in self._complained:
            self._complained.add((group_id, why))
            log.warning("offsets of group %r not mirrored to the upstream's coordinator (%s): %s", group_id, result, why)
