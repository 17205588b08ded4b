"""Metric samples: what a shard did in each interval, published to the metrics topic.

Prometheus keeps recent, aggregated series for alerting; capacity planning needs the history
per state-topic partition and the hottest groups, over days, read by a Spark job
(:mod:`groupcoord_spark.capacity`). So every ``interval_s`` (10 s by default) each shard
worker publishes one JSON record per hosted partition to the metrics topic
(``__groupcoord_metrics`` by default; created if missing, time-retained, not compacted).

Record key: ``"<shard>/<partition>"`` (UTF-8). Record value, JSON object (schema version 1)::

    {
      "version": 1,
      "ts": 1767225600.0,          # end of the interval, Unix epoch seconds (float)
      "interval_s": 10.0,          # measured length of the interval, seconds
      "shard": "1",                # shard id (string)
      "threads": 2,                # event-loop threads of the shard (its capacity in cores)
      "partition": 7,              # state-topic partition
      "state": "active",           # loading | active | failed | standby
      "groups": {                  # groups hosted by the partition, by protocol and state
        "consumer": {"stable": 3, "reconciling": 1},
        "classic": {"empty": 1}
      },
      "requests": {"ConsumerGroupHeartbeat": 120, "OffsetCommit": 30},   # counts in the interval
      "events": 150,               # events run on the partition's loop in the interval
      "busy_s": 0.8,               # loop time spent on this partition's events, seconds
      "busy_ratio": 0.08,          # busy_s / interval_s: this partition's event-loop busy ratio
      "queue_size": 2,             # events waiting at the end of the interval
      "offset_commits": 40,        # offsets committed in the interval
      "commit_rate": 4.0,          # offset_commits / interval_s
      "rebalances": 1,             # rebalances (new group epochs) in the interval
      "top_groups": [{"group": "g1", "requests": 100}]   # at most top_n, by requests, descending
    }

Cardinality stays bounded: one record per partition per interval, and per-group counts only for
the ``top_n`` (default 10) busiest groups of the partition in that interval. A group outside
the top-N in some interval contributes nothing for that interval, so per-group totals derived
from the history are lower bounds; the hottest groups, the ones that matter, are exact.

:class:`MetricSample` is the one definition of this schema: the capacity job's Spark schema
(:data:`groupcoord_spark.sources.SAMPLE_SCHEMA`) is derived from its field types, so a field
added here is read there without a second edit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import TypedDict

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from groupcoord.common.kafka_security import upstream_security
from groupcoord.common.partitioning import DEFAULT_METRICS_TOPIC
from groupcoord.observability.partition_activity import PartitionSnapshot
from groupcoord.observability.shard_metrics import ShardMetrics

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
DEFAULT_TOPIC = DEFAULT_METRICS_TOPIC
DEFAULT_INTERVAL_S = 10.0
DEFAULT_TOP_N = 10
DEFAULT_RETENTION_MS = 30 * 24 * 3600 * 1000  # a month of history for capacity planning


class TopGroup(TypedDict):
    """One of a partition's busiest groups in the interval."""

    group: str
    requests: int


@dataclass(frozen=True, slots=True)
class MetricSample:
    """One partition's interval; see the module docstring for the JSON form."""

    ts: float
    interval_s: float
    shard: str
    threads: int
    partition: int
    state: str
    groups: dict[str, dict[str, int]]
    requests: dict[str, int]
    events: int
    busy_s: float
    busy_ratio: float
    queue_size: int
    offset_commits: int
    commit_rate: float
    rebalances: int
    top_groups: list[TopGroup] = field(default_factory=list)
    version: int = SCHEMA_VERSION

    @property
    def key(self) -> bytes:
        return f"{self.shard}/{self.partition}".encode()

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes | str) -> MetricSample:
        data = json.loads(raw)
        return cls(**data)

    @classmethod
    def from_snapshot(
        cls, snap: PartitionSnapshot, *, ts: float, interval_s: float, shard: str, threads: int, top_n: int
    ) -> MetricSample:
        act = snap.activity
        interval = max(interval_s, 1e-9)
        top = sorted(act.group_requests.items(), key=lambda kv: (-kv[1], kv[0]))[:top_n]
        return cls(
            ts=ts,
            interval_s=interval_s,
            shard=shard,
            threads=threads,
            partition=snap.partition,
            state=snap.state,
            groups={"consumer": dict(snap.consumer_groups), "classic": dict(snap.classic_groups)},
            requests=dict(act.requests),
            events=act.events,
            busy_s=act.busy_s,
            busy_ratio=min(1.0, act.busy_s / interval),
            queue_size=snap.queue_size,
            offset_commits=act.offset_commits,
            commit_rate=act.offset_commits / interval,
            rebalances=act.rebalances,
            top_groups=[TopGroup(group=g, requests=n) for g, n in top],
        )


def collect_samples(
    metrics: ShardMetrics, *, ts: float, interval_s: float, top_n: int = DEFAULT_TOP_N
) -> list[MetricSample]:
    """Drain ``metrics`` into one sample per partition (resets the interval counters)."""
    return [
        MetricSample.from_snapshot(
            snap, ts=ts, interval_s=interval_s, shard=metrics.shard_id, threads=metrics.threads, top_n=top_n
        )
        for snap in metrics.drain()
    ]


async def ensure_metrics_topic(
    bootstrap: str,
    topic: str = DEFAULT_TOPIC,
    *,
    partitions: int = 1,
    replication_factor: int = 1,
    retention_ms: int = DEFAULT_RETENTION_MS,
) -> None:
    """Create the metrics topic if missing (time-retained history, not compacted: every sample counts)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **upstream_security().aiokafka_options())
    await admin.start()
    try:
        if topic in await admin.list_topics():
            return
        new = NewTopic(
            topic,
            partitions,
            replication_factor,
            topic_configs={"cleanup.policy": "delete", "retention.ms": str(retention_ms)},
        )
        with contextlib.suppress(TopicAlreadyExistsError):
            await admin.create_topics([new])
    finally:
        await admin.close()


class MetricSamplePublisher:
    """An asyncio task publishing a shard's samples every ``interval_s`` seconds.

    Use as ``async with MetricSamplePublisher(metrics, bootstrap): ...`` or ``start()``/``stop()``.
    Stopping publishes the last partial interval, so a graceful shutdown loses no activity.
    Publishing failures are logged and the interval's samples dropped (metrics must never
    take a shard down); the next interval carries on.
    """

    def __init__(
        self,
        metrics: ShardMetrics,
        bootstrap: str,
        *,
        topic: str = DEFAULT_TOPIC,
        interval_s: float = DEFAULT_INTERVAL_S,
        top_n: int = DEFAULT_TOP_N,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.metrics = metrics
        self.bootstrap = bootstrap
        self.topic = topic
        self.interval_s = interval_s
        self.top_n = top_n
        self.wall_clock = wall_clock
        self.published = 0
        self._producer: AIOKafkaProducer | None = None
        self._task: asyncio.Task[None] | None = None
        self._last = time.monotonic()
        self._stopping = asyncio.Event()

    async def start(self) -> None:
        await ensure_metrics_topic(self.bootstrap, self.topic)
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap, acks=1, linger_ms=50, **upstream_security().aiokafka_options()
        )
        await self._producer.start()
        self._stopping.clear()
        self.metrics.drain()  # activity before the first interval has no well-defined length
        self._last = time.monotonic()
        self._task = asyncio.create_task(self._run(), name=f"metric-samples-{self.metrics.shard_id}")

    def next_tick(self) -> float:
        """The next multiple of ``interval_s`` on the wall clock. Every worker of a shard
        publishes at the same ticks, so their samples share ``ts`` and the capacity job's
        per-(shard, ts) sums see the whole shard in one row."""
        now = self.wall_clock()
        return (now // self.interval_s + 1) * self.interval_s

    async def _run(self) -> None:
        while not self._stopping.is_set():
            tick = self.next_tick()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), max(0.0, tick - self.wall_clock()))
            if self._stopping.is_set():
                return  # stop() publishes the final interval itself
            try:
                await self.publish_once(ts=tick)
            except Exception:
                log.exception("publishing metric samples failed; dropping this interval")

    async def publish_once(self, ts: float | None = None) -> list[MetricSample]:
        """Drain the interval now and publish its samples stamped ``ts`` (default: now);
        returns what was sent."""
        assert self._producer is not None, "start() first"
        now = time.monotonic()
        interval, self._last = now - self._last, now
        stamp = self.wall_clock() if ts is None else ts
        samples = collect_samples(self.metrics, ts=stamp, interval_s=interval, top_n=self.top_n)
        futures = [
            await self._producer.send(self.topic, s.to_json(), key=s.key, timestamp_ms=int(s.ts * 1000))
            for s in samples
        ]
        for f in futures:
            await f
        self.published += len(samples)
        return samples

    async def stop(self) -> None:
        # Not cancel(): a publish in flight completes, so every drained interval is sent once.
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None
        if self._producer is not None:
            try:
                await self.publish_once()
            except Exception:
                log.exception("publishing the final metric samples failed")
            await self._producer.stop()
            self._producer = None

    async def __aenter__(self) -> MetricSamplePublisher:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
