"""Which topics and partitions exist upstream: the gateway's answer to Kafka's metadata cache.

Kafka's request handler checks OffsetCommit and OffsetDelete against the broker's metadata
cache before the group coordinator sees them: a partition of a topic that does not exist (or
a partition index the topic does not have) is answered UNKNOWN_TOPIC_OR_PARTITION, and only the
rest reaches the coordinator. librdkafka's commit callback and the admin clients rely on that
answer. The gateway has no metadata cache of its own, so it keeps this small one: partition
counts by topic name, learnt from the upstream with Metadata requests that name just the topics
a request needs and never create them.

Freshness: a topic known to exist is trusted for ``ttl_s`` (a commit names topics the client
already consumed, so a deleted topic is noticed within that time, as a broker's cache lags its
controller); an absent topic is re-asked after ``absent_ttl_s`` only (short, so a topic created a
moment ago is committable at once); a partition index beyond the known count is re-asked at once
(partitions may have been added). Concurrent requests for the same topics share one upstream
request. When the upstream cannot be asked, nothing is refused: the commit goes on to the
coordinator, which is what happened before this check existed (failing open is the choice that
loses no commit).

Size: at most ``max_topics`` names are remembered, the least recently used forgotten first, so
topic names any client sends (existing or not) cannot grow the gateway's memory without end;
a forgotten topic is only asked again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

log = logging.getLogger(__name__)
Upstream = Callable[[Any], Awaitable[Any]]

ABSENT = 0  # partition count of a topic that does not exist
DEFAULT_MAX_TOPICS = 100_000
# How long the list of every topic is trusted: regex members heartbeat every few seconds, and a
# topic created meanwhile reaches their regex with the shards' next topics image anyway.
ALL_NAMES_TTL_S = 5.0


@dataclass(frozen=True, slots=True)
class _Known:
    partitions: int  # ABSENT: the topic does not exist
    learnt_at: float


class TopicCatalog:
    def __init__(
        self,
        upstream: Upstream,
        ttl_s: float = 30.0,
        absent_ttl_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        max_topics: int = DEFAULT_MAX_TOPICS,
    ) -> None:
        self.upstream = upstream
        self.ttl_s = ttl_s
        self.absent_ttl_s = absent_ttl_s
        self.clock = clock
        self.max_topics = max_topics
        self._known: OrderedDict[str, _Known] = OrderedDict()  # least recently used first
        self._asking: dict[str, asyncio.Future[int | None]] = {}
        self._all: tuple[frozenset[str], float] | None = None  # every topic, and when learnt

    def _fresh(self, name: str, needed_index: int) -> int | None:
        known = self._known.get(name)
        if known is None:
            return None
        self._known.move_to_end(name)
        age = self.clock() - known.learnt_at
        if known.partitions == ABSENT:
            return ABSENT if age < self.absent_ttl_s else None
        if age >= self.ttl_s or needed_index >= known.partitions:
            return None
        return known.partitions

    async def partition_counts(self, wanted: dict[str, int]) -> dict[str, int]:
        """Partition count of each topic of ``wanted`` (name -> highest partition index the
        caller needs), ABSENT for topics that do not exist; topics the upstream could not be
        asked about are left out."""
        counts: dict[str, int] = {}
        waits: dict[str, asyncio.Future[int | None]] = {}
        ask: list[str] = []
        for name, index in wanted.items():
            fresh = self._fresh(name, index)
            if fresh is not None:
                counts[name] = fresh
            elif name in self._asking:
                waits[name] = self._asking[name]
            else:
                ask.append(name)
        if ask:
            loop = asyncio.get_running_loop()
            mine = {name: loop.create_future() for name in ask}
            self._asking.update(mine)
            waits.update(mine)
            learnt: dict[str, int] = {}
            try:
                learnt = await self._ask(ask)
            finally:  # also when cancelled: whoever shares these lookups gets no verdict
                for name, fut in mine.items():
                    self._asking.pop(name, None)
                    if not fut.done():
                        fut.set_result(learnt.get(name))
        for name, fut in waits.items():
            count = await asyncio.shield(fut)
            if count is not None:
                counts[name] = count
        return counts

    async def all_names(self) -> frozenset[str]:
        """Every topic upstream, asked at most every :data:`ALL_NAMES_TTL_S`: what a regex subscription may match, for the topic ACLs of its
        member (KAFKA-18813). When the upstream cannot say, the last list learnt (or none)."""
        now = self.clock()
        if self._all is not None and now - self._all[1] < ALL_NAMES_TTL_S:
            return self._all[0]
        request = MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        try:
            response = await self.upstream(request)
        except Exception as exc:  # noqa: BLE001 - the shard still has its previous resolution
            log.warning("cannot list the upstream's topics: %s", exc)
            return self._all[0] if self._all is not None else frozenset()
        names = frozenset(t.name for t in response.topics if t.name and t.error_code == ErrorCode.none)
        self._all = (names, now)
        return names

    async def _ask(self, names: list[str]) -> dict[str, int]:
        request = MetadataRequest(
            topics=tuple(MetadataRequestTopic(topic_id=None, name=n) for n in names),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        try:
            response = await self.upstream(request)
        except Exception as exc:  # noqa: BLE001 - any failure: do not refuse commits on it
            log.warning("cannot check topics %s upstream: %s", names, exc)
            return {}
        now = self.clock()
        learnt: dict[str, int] = {}
        for topic in response.topics:
            if topic.name not in names:
                continue
            if topic.error_code == ErrorCode.unknown_topic_or_partition:
                learnt[topic.name] = ABSENT
            elif topic.error_code == ErrorCode.none:
                learnt[topic.name] = len(topic.partitions)
            else:  # e.g. not authorized, or the leader is moving: no verdict
                continue
            self._known[topic.name] = _Known(learnt[topic.name], now)
            self._known.move_to_end(topic.name)
        while len(self._known) > self.max_topics:
            self._known.popitem(last=False)
        return learnt

    async def unknown_partitions(self, partitions: Iterable[tuple[str, int]]) -> set[tuple[str, int]]:
        """The (topic, partition) pairs of ``partitions`` that do not exist upstream."""
        wanted: dict[str, int] = {}
        pairs = list(partitions)
        for name, index in pairs:
            wanted[name] = max(wanted.get(name, -1), index)
        if not wanted:
            return set()
        counts = await self.partition_counts(wanted)
        return {(name, index) for name, index in pairs if name in counts and not 0 <= index < counts[name]}

    async def unknown_topics(self, names: Iterable[str]) -> set[str]:
        """The topics of ``names`` that do not exist upstream."""
        counts = await self.partition_counts(dict.fromkeys(names, 0))
        return {name for name, count in counts.items() if count == ABSENT}
