"""Consumer lag, from the coordinator itself: committed offsets against the upstream's log end.

Once groups live here, the tools platform teams use for lag (Burrow, kafka-lag-exporter,
kminion, Kafka Exporter) read the brokers' ``__consumer_offsets`` and no longer see them. Every
shard worker already holds the acknowledged committed offsets of the groups it leads, so it
exports their lag itself, every ``interval_s`` (15 s by default), off the request path:

* ``groupcoord_consumer_group_lag{group,topic}``: sum over the topic's partitions of
  ``max(0, log end offset - committed offset)``;
* ``groupcoord_consumer_group_lag_seconds{group}``: the group's lag divided by its commit
  progress rate (offsets per second over the last interval); a group whose commits stand still
  while it lags reports the time since they last moved (a lower bound);
* ``groupcoord_consumer_group_partition_lag{group,topic,partition}``: only the ``top_n``
  partitions with the most lag, so cardinality stays bounded whatever the groups do.

The log end offset is the high watermark of a Fetch response (what consumers can read), one
request per upstream broker for every partition a group committed, because ListOffsets
"latest" is wrong on the embedded broker (see ``coordinator/runtime/statelog.py``).
:func:`lag_report` is pure; :class:`ConsumerLagCollector` keeps the last report for scrapes.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from groupcoord.common.kafka_security import upstream_security

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 15.0
DEFAULT_TOP_N = 20

TopicPartition = tuple[str, int]
Committed = Mapping[str, Mapping[str, Mapping[int, int]]]  # group -> topic -> partition -> offset


@dataclass(frozen=True, slots=True)
class GroupLag:
    group: str
    by_topic: dict[str, int]
    total: int
    committed_sum: int  # sum of the group's committed offsets (its progress)
    seconds: float | None = None


@dataclass(frozen=True, slots=True)
class LagReport:
    groups: dict[str, GroupLag] = field(default_factory=dict)
    top_partitions: list[tuple[int, str, str, int]] = field(default_factory=list)  # lag, group, topic, p
    at: float = 0.0


def lag_report(
    committed: Committed,
    end_offsets: Mapping[TopicPartition, int],
    *,
    now: float,
    previous: LagReport | None = None,
    stalled_since: dict[str, float] | None = None,
    top_n: int = DEFAULT_TOP_N,
) -> LagReport:
    """The lag of every group in ``committed`` whose partitions' end offsets are known.

    ``previous`` (the last report) gives the commit progress rate for ``seconds``;
    ``stalled_since`` (updated here) remembers since when a lagging group's commits stood still.
    """
    stalled = stalled_since if stalled_since is not None else {}
    groups: dict[str, GroupLag] = {}
    top: list[tuple[int, str, str, int]] = []
    for group, topics in committed.items():
        by_topic: dict[str, int] = {}
        committed_sum = 0
        for topic, partitions in topics.items():
            for partition, offset in partitions.items():
                end = end_offsets.get((topic, partition))
                if end is None:
                    continue
                lag = max(0, end - offset)
                by_topic[topic] = by_topic.get(topic, 0) + lag
                committed_sum += offset
                entry = (lag, group, topic, partition)
                if len(top) < top_n:
                    heapq.heappush(top, entry)
                elif lag > top[0][0]:
                    heapq.heapreplace(top, entry)
        if not by_topic:
            continue
        total = sum(by_topic.values())
        seconds = _lag_seconds(group, total, committed_sum, now, previous, stalled)
        groups[group] = GroupLag(group, by_topic, total, committed_sum, seconds)
    for gone in set(stalled) - set(groups):
        del stalled[gone]
    return LagReport(groups, sorted(top, reverse=True), now)


def _lag_seconds(
    group: str,
    total: int,
    committed_sum: int,
    now: float,
    previous: LagReport | None,
    stalled: dict[str, float],
) -> float | None:
    if total == 0:
        stalled.pop(group, None)
        return 0.0
    before = previous.groups.get(group) if previous is not None else None
    if before is None:
        return None  # no rate yet
    progress = committed_sum - before.committed_sum
    if progress > 0:
        stalled.pop(group, None)
        return total / (progress / max(now - previous.at, 1e-9))  # type: ignore[union-attr]
    since = stalled.setdefault(group, previous.at)  # type: ignore[union-attr]
    return now - since


class ConsumerLagCollector(Collector):
    """Exports the last :class:`LagReport` (a custom collector: groups that went away leave no
    stale series behind)."""

    def __init__(
        self, shard_id: str, top_n: int = DEFAULT_TOP_N, clock: Callable[[], float] = time.time
    ) -> None:
        self.shard_id = shard_id
        self.top_n = top_n
        self.clock = clock
        self.report = LagReport()
        self._stalled: dict[str, float] = {}

    def update(self, committed: Committed, end_offsets: Mapping[TopicPartition, int]) -> LagReport:
        self.report = lag_report(
            committed,
            end_offsets,
            now=self.clock(),
            previous=self.report,
            stalled_since=self._stalled,
            top_n=self.top_n,
        )
        return self.report

    def collect(self) -> Iterator[GaugeMetricFamily]:
        report = self.report
        lag = GaugeMetricFamily(
            "groupcoord_consumer_group_lag",
            "Committed offsets behind the upstream's log end, per group and topic",
            labels=["shard", "group", "topic"],
        )
        seconds = GaugeMetricFamily(
            "groupcoord_consumer_group_lag_seconds",
            "A group's lag divided by its commit progress rate (or the time its commits stood still)",
            labels=["shard", "group"],
        )
        partition = GaugeMetricFamily(
            "groupcoord_consumer_group_partition_lag",
            "Lag of the partitions with the most lag (top N per shard worker)",
            labels=["shard", "group", "topic", "partition"],
        )
        for g in report.groups.values():
            for topic, value in g.by_topic.items():
                lag.add_metric([self.shard_id, g.group, topic], value)
            if g.seconds is not None:
                seconds.add_metric([self.shard_id, g.group], g.seconds)
        for value, group, topic, p in report.top_partitions:
            partition.add_metric([self.shard_id, group, topic, str(p)], value)
        yield from (lag, seconds, partition)


def positions_of(committed: Committed) -> dict[TopicPartition, int]:
    """Every partition some group committed, with the lowest committed offset (where a Fetch
    for its high watermark can read)."""
    out: dict[TopicPartition, int] = {}
    for topics in committed.values():
        for topic, parts in topics.items():
            for partition, offset in parts.items():
                key = (topic, partition)
                out[key] = min(offset, out.get(key, offset))
    return out


def committed_offsets(offsets_by_shard: Iterable[Mapping[str, Mapping[str, Mapping[int, Any]]]]) -> Committed:
    """A snapshot of the committed offsets of coordinator shards (their acknowledged replicas'
    ``data.offsets``: group -> topic -> partition -> committed offset), as plain ints: the lag
    loop awaits the upstream afterwards, while the shards move on."""
    out: dict[str, dict[str, dict[int, int]]] = {}
    for offsets in offsets_by_shard:
        for group, topics in offsets.items():
            mine = out.setdefault(group, {})
            for topic, parts in topics.items():
                mine[topic] = {p: c.offset for p, c in parts.items()}
    return out


class LogEndOffsets:
    """High watermarks of upstream partitions, from Fetch responses (aiokafka's client): one
    request per leader broker, each partition read from a committed offset (inside the log)
    for at most 1 KiB. The embedded broker answers a Fetch with ``min_bytes`` 0 or no wait
    with no partitions at all, so the request waits up to 100 ms for one byte."""

    def __init__(self, bootstrap: str, client_options: Mapping[str, Any] | None = None) -> None:
        """``client_options``: aiokafka's security keywords (default: the upstream's, from the
        environment); ``groupcoord groups`` passes its ``--command-config``'s for the gateway."""
        self.bootstrap = bootstrap
        self.client_options = client_options
        self._client: object | None = None
        self._cluster: Any = None

    async def fetch(self, positions: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The high watermark of each partition of ``positions`` (partition -> an offset to read
        from); partitions whose leader or answer is unknown are left out."""
        from aiokafka.client import AIOKafkaClient  # noqa: PLC0415
        from aiokafka.protocol.fetch import FetchRequest  # noqa: PLC0415
        from aiokafka.structs import TopicPartition as Tp  # noqa: PLC0415

        if self._client is None:
            client = AIOKafkaClient(
                bootstrap_servers=self.bootstrap,
                client_id="groupcoord-lag",
                **(
                    self.client_options
                    if self.client_options is not None
                    else upstream_security().aiokafka_options()
                ),
            )
            await client.bootstrap()
            self._client = client
        client = self._client
        wanted = sorted(positions)
        # Leaders from a metadata request for all topics: asking for the topics by name (what
        # aiokafka's add_topic does) would create a missing one on brokers that auto-create.
        if self._cluster is None or {t for t, _ in wanted} - self._cluster.topics():
            self._cluster = await client.fetch_all_metadata()  # type: ignore[attr-defined]
        by_leader: dict[int, dict[str, list[int]]] = {}
        for topic, partition in wanted:
            leader = self._cluster.leader_for_partition(Tp(topic, partition))
            if leader is None or leader < 0:
                continue
            by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)
        found: dict[TopicPartition, int] = {}
        for leader, topic_parts in by_leader.items():
            request = FetchRequest(
                100,
                1,
                1 << 20,
                0,
                [
                    (t, [(p, max(0, positions[(t, p)]), 1024) for p in parts])
                    for t, parts in topic_parts.items()
                ],
            )
            try:
                response = await client.send(leader, request)
            except Exception as exc:  # noqa: BLE001 - lag is best effort; the next round retries
                log.info("log end offsets from broker %s: %s", leader, exc)
                self._cluster = None  # leaders may have moved
                continue
            for topic, parts in response.topics:
                for partition, error_code, highwater, *_rest in parts:
                    if error_code == 0 and highwater >= 0:
                        found[(topic, partition)] = highwater
        return found

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()  # type: ignore[attr-defined]
            self._client = None
