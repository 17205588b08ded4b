"""Adopting the upstream coordinator's groups: the first touch of a group this gateway has not
seen yet decides, once, whether its positions come from the brokers' ``__consumer_offsets``.

A platform team puts groupcoord in front of a cluster in use: its applications committed there.
Before a group's first request is served, its shard is asked (``adopt_group``, check only); a
group with state here is ours. A group never held here is read from the upstream's own
coordinator under the coordinator's upstream identity (only where that identity was granted:
refused, the group is served without its upstream offsets and the refusal logged), and its
committed offsets are imported into the state topic before the request goes on. What a client
sees of them is decided by its own rights: the gateway authorized the request before it
reaches here (a client that may not describe the group never causes its import, and
OffsetFetch still filters topics by the client's rights).

Two cases hold a group back, because serving it here would split it: while the upstream's
coordinator still has live members of it (an application half moved: the moved instances
would form a second group with the same id and consume the same partitions again), and while
an upstream transaction has offsets of it pending (UNSTABLE_OFFSET_COMMIT: they are not guessed
at, the upstream's transaction coordinator decides them first). Then requests that join,
heartbeat or commit get COORDINATOR_NOT_AVAILABLE, which every client retries; reads are
answered from our state, which has nothing of the group yet. The same holds while the upstream
cannot be read at all (nothing is imported by guess, and nothing committed here first would
shadow what the upstream has). The upstream is asked again at most every ``recheck_s``; once
its members are gone (the last instance moved), the next touch imports the offsets they last
committed.

The steady path pays one set lookup: a group decided here stays in :attr:`ours` (bounded; a
group pushed out is asked about again, which costs one read of its shard).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from kio.schema.errors import ErrorCode

from groupcoord.common.group_api_declarations import SHARD_APIS
from groupcoord.common.upstream_groups import (
    Ask,
    UpstreamGroup,
    UpstreamGroupError,
    read_group,
    serves_kip848,
    unreadable,
)
from groupcoord.gateway.groups.worker_client import ShardReply, failed
from groupcoord.rpc.v1 import offsets_pb2 as pb
from groupcoord.rpc.v1.coordinator_pb2 import CoordinatorEnvelope as Envelope

log = logging.getLogger(__name__)

RECHECK_S = 2.0  # a group held back is read from the upstream again at most this often
WAIT_S = 8.0  # a first touch waits this long for an upstream coordinator that is loading
RETRY_S = 0.25
OURS_BOUND = 200_000  # groups remembered as decided (a pushed-out one is asked about again)
_READS = frozenset(
    api.operation.name for api in SHARD_APIS if api.operation is not None and api.operation.read_only
)
Adoption = pb.AdoptGroupResponse


class Outcome(Enum):
    """What a first touch found, as the metrics and the log name it."""

    OURS = "ours"  # the shard had it (state here, or decided before)
    IMPORTED = "imported"  # offsets read from the upstream and written here
    NOTHING_UPSTREAM = "nothing_upstream"  # never held anywhere: a new group
    UPSTREAM_LIVE = "upstream_live"  # held back: the upstream serves members of it
    UPSTREAM_PENDING = "upstream_pending"  # held back: offsets pending in an upstream transaction
    NOT_GRANTED = "not_granted"  # the coordinator may not read it upstream: served without import
    FAILED = "failed"  # held back: the upstream could not be read
    UNDECIDED = "undecided"  # the shard did not answer: the request meets that error itself


HELD_BACK = frozenset({Outcome.UPSTREAM_LIVE, Outcome.UPSTREAM_PENDING, Outcome.FAILED})
_WHY = {
    Outcome.UPSTREAM_LIVE: "still has live members on the upstream cluster's coordinator",
    Outcome.UPSTREAM_PENDING: "has offsets pending in an open transaction on the upstream",
    Outcome.FAILED: "cannot be adopted yet: the upstream's coordinator could not be read",
}


@dataclass
class UpstreamAdoption:
    """One gateway's adoption of upstream groups (see the module docstring).

    ``call(group_id, envelope)`` sends to the group's shard (held through a failover, as every
    group request); ``ask`` reaches the upstream's brokers under the coordinator's identity,
    unrewritten; ``versions()`` are the upstream's ApiVersions. An upstream that cannot be
    read (too old a version of the requests sent) adopts nothing, and says so once.
    """

    call: Callable[[str, Envelope], Awaitable[ShardReply]]
    ask: Ask
    versions: Callable[[], Awaitable[Mapping[int, tuple[int, int]]]]
    recheck_s: float = RECHECK_S
    wait_s: float = WAIT_S
    clock: Callable[[], float] = time.monotonic
    #: called with each first touch's outcome (the gateway's metrics)
    observe: Callable[[Outcome], None] = lambda _outcome: None
    ours: OrderedDict[str, None] = field(default_factory=OrderedDict)
    _held_back: dict[str, tuple[float, Outcome]] = field(default_factory=dict)
    _deciding: dict[str, asyncio.Future[Outcome]] = field(default_factory=dict)
    _kip848: bool | None = None  # None: the upstream's versions not read yet
    _readable: bool = True

    async def admit(self, group_id: str, operation: str) -> ShardReply | None:
        """None when a request of ``operation`` (the envelope's oneof field) may go on to the
        group's shard, else the reply it gets instead."""
        outcome = await self.decide(group_id)
        if outcome not in HELD_BACK or operation in _READS:
            return None
        return failed(ErrorCode.coordinator_not_available, f"group {group_id!r} {_WHY[outcome]}")

    async def decide(self, group_id: str) -> Outcome:
        """The group's adoption decided (or found held back), one decision at a time per group."""
        if group_id in self.ours:
            return Outcome.OURS
        held = self._held_back.get(group_id)
        if held is not None and self.clock() < held[0]:
            return held[1]
        pending = self._deciding.get(group_id)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._deciding[group_id] = future
        try:
            outcome = await self._decide(group_id)
            future.set_result(outcome)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a waiter may be gone
            raise
        finally:
            del self._deciding[group_id]
        self.observe(outcome)
        if outcome in HELD_BACK:
            if group_id not in self._held_back:
                log.info(
                    "group %r held back: %s (asked again every %.0f s)",
                    group_id,
                    outcome.value,
                    self.recheck_s,
                )
            self._held_back[group_id] = (self.clock() + self.recheck_s, outcome)
        elif outcome is not Outcome.UNDECIDED:
            self._held_back.pop(group_id, None)
            self._remember(group_id)
        return outcome

    def _remember(self, group_id: str) -> None:
        self.ours[group_id] = None
        if len(self.ours) > OURS_BOUND:
            self.ours.popitem(last=False)

    async def _adopt(self, group_id: str, **fields: object) -> ShardReply:
        return await self.call(
            group_id, Envelope(adopt_group=pb.AdoptGroupRequest(group_id=group_id, **fields))
        )  # type: ignore[arg-type]

    async def _decide(self, group_id: str) -> Outcome:
        checked = await self._adopt(group_id, check_only=True)
        if checked.response is None:
            return Outcome.UNDECIDED
        if checked.response.adoption != Adoption.NEEDS_IMPORT:
            return Outcome.OURS
        if self._kip848 is None:
            versions = await self.versions()
            why = unreadable(versions)
            if why is not None:
                log.warning("groups are not adopted from the upstream's coordinator: %s", why)
                self._readable = False
            self._kip848 = serves_kip848(versions)
        if not self._readable:
            return Outcome.NOTHING_UPSTREAM
        try:
            upstream = await self._read(group_id)
        except UpstreamGroupError as exc:
            if exc.retriable:
                log.info("group %r: the upstream's coordinator cannot tell yet (%s)", group_id, exc)
                return Outcome.FAILED
            log.warning(
                "group %r served without its upstream offsets: the coordinator's upstream identity "
                "may not read them (%s); grant it DESCRIBE on the group to adopt them",
                group_id,
                exc,
            )
            return Outcome.NOT_GRANTED
        except Exception as exc:  # unreachable, or an answer that does not decode: not guessed at
            if group_id not in self._held_back:
                log.warning("group %r: the upstream's coordinator could not be read (%r)", group_id, exc)
            return Outcome.FAILED
        if upstream.live:
            return Outcome.UPSTREAM_LIVE
        if upstream.unstable:
            return Outcome.UPSTREAM_PENDING
        if not upstream.offsets:
            return Outcome.NOTHING_UPSTREAM  # nothing to decide: no record for a group never seen
        return await self._import(upstream)

    async def _read(self, group_id: str) -> UpstreamGroup:
        """The group as the upstream's coordinator holds it, asked again while that coordinator
        is loading or moving (a fresh cluster creates ``__consumer_offsets`` on the first
        FindCoordinator) for up to ``wait_s``: the request waits, as it would on Kafka's own."""
        deadline = self.clock() + self.wait_s
        while True:
            try:
                return await read_group(self.ask, group_id, kip848=bool(self._kip848))
            except UpstreamGroupError as exc:
                if not exc.retriable or self.clock() >= deadline:
                    raise
            await asyncio.sleep(RETRY_S)

    async def _import(self, upstream: UpstreamGroup) -> Outcome:
        group_id = upstream.group_id
        imported = await self._adopt(
            group_id,
            upstream_state=upstream.state,
            offsets=[
                pb.ImportedOffset(
                    topic=o.topic,
                    partition=o.partition,
                    offset=o.offset,
                    leader_epoch=o.leader_epoch,
                    metadata=o.metadata,
                )
                for o in upstream.offsets
            ],
        )
        if imported.response is None:
            return Outcome.UNDECIDED
        answer = imported.response
        if answer.adoption != Adoption.IMPORTED:
            return Outcome.OURS  # another gateway's import, or a commit here, came first
        log.info(
            "group %r adopted from the upstream's coordinator: %d committed offsets imported (upstream state %s)",
            group_id,
            answer.imported_offsets,
            upstream.state,
        )
        return Outcome.IMPORTED
