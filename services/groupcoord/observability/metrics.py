"""Prometheus metrics of the group coordinator, named after Apache Kafka's group-coordinator-metrics.

Every metric family the coordinator exports is defined here, in one place, so names, labels and
buckets cannot drift between the shard runtime and the gateway. Processes do not touch the
families directly; they call a small typed facade:

* :class:`ShardMetrics` — one per shard worker process (``ShardMetrics(shard_id)``);
* :class:`GatewayMetrics` — one per gateway process;
* :func:`serve_metrics` — exposes ``/metrics`` on a port.

Kafka name → Prometheus name (Kafka's ``-rate``/``-count`` pairs become one counter; Prometheus
computes the rate with ``rate()``):

=====================================  =====================================================
group-count{protocol}                  ``groupcoord_group_count{shard,protocol}``
consumer-group-count{state}            ``groupcoord_consumer_group_count{shard,state}``
classic-group-count{state}             ``groupcoord_classic_group_count{shard,state}``
num-partitions{state}                  ``groupcoord_partition_count{shard,state}``
event-queue-size                       ``groupcoord_event_queue_size{shard,partition}``
event-queue-time-ms                    ``groupcoord_event_queue_time_seconds{shard}`` (histogram)
event-processing-time-ms               ``groupcoord_event_processing_time_seconds{shard}`` (histogram)
partition-load-time-max/avg            ``groupcoord_partition_load_time_seconds_max/_avg{shard}``
thread-idle-ratio-min/avg              ``groupcoord_thread_idle_ratio_min/_avg{shard}``
consumer/classic-group-rebalance-*     ``groupcoord_rebalance_total{shard,protocol}``
offset-commit-rate/count               ``groupcoord_offset_commit_total{shard}``
offset-expiration-rate/count           ``groupcoord_offset_expiration_total{shard}``
offset-deletion-rate/count             ``groupcoord_offset_deletion_total{shard}``
batch-flush-time-ms                    ``groupcoord_state_write_latency_seconds{shard,partition}``
(records per state-topic write)        ``groupcoord_state_write_batch_records{shard,partition}``
(per-API request latency)              ``groupcoord_request_latency_seconds{component,shard,api}``
=====================================  =====================================================

Cardinality is bounded on purpose: labels are the shard, the state-topic partition (at most the
configured partition count), a protocol/state from a fixed vocabulary, and the API name (capped
at :data:`MAX_APIS` distinct values, later ones are folded into ``other``). There is never a
per-group or per-member label; the per-group view needed for capacity planning goes to the
metrics topic as a bounded top-N (see :mod:`groupcoord.observability.metric_samples`).

The windowed statistics (load time max/avg, thread idle ratio min/avg) are computed at scrape
time over the last ``window_s`` seconds, like Kafka's sampled stats, so a scrape shows the
recent past rather than an all-time value that never recovers after one slow load.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Gauge, Histogram, start_http_server
from prometheus_client import Counter as PromCounter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

GROUP_PROTOCOLS = ("consumer", "classic")
CONSUMER_GROUP_STATES = ("empty", "assigning", "reconciling", "stable", "dead")
CLASSIC_GROUP_STATES = ("empty", "preparing_rebalance", "completing_rebalance", "stable", "dead")
# Kafka's three, plus the standby state our runtime has (hot standbys tailing a partition).
PARTITION_STATES = ("loading", "active", "failed", "standby")
COMPONENTS = ("gateway", "shard")
MAX_APIS = 64
OTHER_API = "other"

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
EVENT_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 1.0)
BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


class _Families:
    """The metric families of one registry (created once per registry, shared by every facade
    object registered there, so a shard and a gateway in one test process can coexist)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.group_count = Gauge(
            "groupcoord_group_count", "Groups by protocol.", ["shard", "protocol"], registry=r
        )
        self.consumer_group_count = Gauge(
            "groupcoord_consumer_group_count",
            "Consumer-protocol (KIP-848) groups by state.",
            ["shard", "state"],
            registry=r,
        )
        self.classic_group_count = Gauge(
            "groupcoord_classic_group_count",
            "Classic-protocol groups by state.",
            ["shard", "state"],
            registry=r,
        )
        self.partition_count = Gauge(
            "groupcoord_partition_count", "State-topic partitions by state.", ["shard", "state"], registry=r
        )
        self.event_queue_size = Gauge(
            "groupcoord_event_queue_size",
            "Events waiting on a partition's event loop.",
            ["shard", "partition"],
            registry=r,
        )
        self.event_queue_time = Histogram(
            "groupcoord_event_queue_time_seconds",
            "Time an event waited in its partition's queue before it ran.",
            ["shard"],
            buckets=EVENT_BUCKETS,
            registry=r,
        )
        self.event_processing_time = Histogram(
            "groupcoord_event_processing_time_seconds",
            "Time an event ran on its partition's loop (handler, replay).",
            ["shard"],
            buckets=EVENT_BUCKETS,
            registry=r,
        )
        self.event_loop_busy = PromCounter(
            "groupcoord_event_loop_busy_seconds",
            "Event-loop time spent running events; rate() of it is the busy ratio in cores.",
            ["shard"],
            registry=r,
        )
        self.partition_loads = PromCounter(
            "groupcoord_partition_loads", "Completed state-topic partition loads.", ["shard"], registry=r
        )
        self.rebalances = PromCounter(
            "groupcoord_rebalance",
            "Group rebalances (new group epochs) by protocol.",
            ["shard", "protocol"],
            registry=r,
        )
        self.offset_commits = PromCounter(
            "groupcoord_offset_commit",
            "Committed offsets (one per partition committed).",
            ["shard"],
            registry=r,
        )
        self.offset_expirations = PromCounter(
            "groupcoord_offset_expiration", "Offsets removed by retention expiry.", ["shard"], registry=r
        )
        self.offset_deletions = PromCounter(
            "groupcoord_offset_deletion",
            "Offsets removed by OffsetDelete/DeleteGroups.",
            ["shard"],
            registry=r,
        )
        self.state_write_latency = Histogram(
            "groupcoord_state_write_latency_seconds",
            "Time from sending a batch to the state topic to its acknowledgement (acks=all).",
            ["shard", "partition"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.state_write_batch = Histogram(
            "groupcoord_state_write_batch_records",
            "Records per state-topic write (concurrent requests batch into one write).",
            ["shard", "partition"],
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.request_latency = Histogram(
            "groupcoord_request_latency_seconds",
            "Request latency per API: at the gateway (shard = the shard that served it) and at the shard.",
            ["component", "shard", "api"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.windowed = _WindowedCollector()
        r.register(self.windowed)


_FAMILIES: weakref.WeakKeyDictionary[CollectorRegistry, _Families] = weakref.WeakKeyDictionary()
_FAMILIES_LOCK = threading.Lock()


def _families(registry: CollectorRegistry) -> _Families:
    with _FAMILIES_LOCK:
        fam = _FAMILIES.get(registry)
        if fam is None:
            fam = _FAMILIES[registry] = _Families(registry)
        return fam


class _ApiNames:
    """Caps the distinct values of the ``api`` label (bounded cardinality even if a caller passes
    something unexpected, such as a handler name built from input)."""

    def __init__(self, limit: int = MAX_APIS) -> None:
        self.limit = limit
        self.seen: set[str] = set()

    def __call__(self, api: str) -> str:
        if api in self.seen:
            return api
        if len(self.seen) >= self.limit:
            return OTHER_API
        self.seen.add(api)
        return api


class _Window:
    """Values observed in the last ``window_s`` seconds (for max/avg over a window)."""

    def __init__(self, window_s: float, clock: Callable[[], float]) -> None:
        self.window_s = window_s
        self.clock = clock
        self.items: deque[tuple[float, float]] = deque()

    def add(self, value: float) -> None:
        self.items.append((self.clock(), value))

    def values(self) -> list[float]:
        cutoff = self.clock() - self.window_s
        while self.items and self.items[0][0] < cutoff:
            self.items.popleft()
        return [v for _, v in self.items]


class _ThreadBusy:
    """Busy time of one event-loop thread; idle ratio = 1 − busy / elapsed over the window."""

    def __init__(self, window_s: float, clock: Callable[[], float]) -> None:
        self.started = clock()
        self.busy = _Window(window_s, clock)

    def idle_ratio(self, now: float, window_s: float) -> float:
        elapsed = min(window_s, now - self.started)
        if elapsed <= 0:
            return 1.0
        busy = sum(self.busy.values())
        return max(0.0, min(1.0, 1.0 - busy / elapsed))


class _WindowedCollector(Collector):
    """Scrape-time max/avg/min over the recent window, for every ShardMetrics of a registry."""

    def __init__(self) -> None:
        self.shards: weakref.WeakSet[ShardMetrics] = weakref.WeakSet()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        load_max = GaugeMetricFamily(
            "groupcoord_partition_load_time_seconds_max",
            "Longest state-topic partition load in the window.",
            labels=["shard"],
        )
        load_avg = GaugeMetricFamily(
            "groupcoord_partition_load_time_seconds_avg",
            "Average state-topic partition load time in the window.",
            labels=["shard"],
        )
        idle_min = GaugeMetricFamily(
            "groupcoord_thread_idle_ratio_min",
            "Lowest idle ratio of the event-loop threads.",
            labels=["shard"],
        )
        idle_avg = GaugeMetricFamily(
            "groupcoord_thread_idle_ratio_avg",
            "Average idle ratio of the event-loop threads.",
            labels=["shard"],
        )
        for shard in list(self.shards):
            loads = shard._load_times.values()
            if loads:
                load_max.add_metric([shard.shard_id], max(loads))
                load_avg.add_metric([shard.shard_id], sum(loads) / len(loads))
            ratios = shard.thread_idle_ratios()
            if ratios:
                idle_min.add_metric([shard.shard_id], min(ratios.values()))
                idle_avg.add_metric([shard.shard_id], sum(ratios.values()) / len(ratios))
        yield from (load_max, load_avg, idle_min, idle_avg)


def _check(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}; known: {', '.join(allowed)}")
    return value


@dataclass(slots=True)
class PartitionInterval:
    """What one state-topic partition did since the last sample (drained by :meth:`ShardMetrics.drain`)."""

    requests: Counter[str] = field(default_factory=Counter)
    group_requests: Counter[str] = field(default_factory=Counter)
    busy_s: float = 0.0
    events: int = 0
    offset_commits: int = 0
    rebalances: int = 0


@dataclass(frozen=True, slots=True)
class PartitionSnapshot:
    """One partition's interval activity and current state, as handed to the sample publisher."""

    partition: int
    state: str
    queue_size: int
    consumer_groups: dict[str, int]
    classic_groups: dict[str, int]
    activity: PartitionInterval


class ShardMetrics:
    """The facade a shard worker calls. All methods are cheap and thread-safe enough for one
    asyncio loop plus the scrape thread (prometheus-client's own locks; the interval counters
    are only touched from the loop and swapped out whole by :meth:`drain`).

    ``partition`` arguments are state-topic partitions; ``thread`` names an event-loop thread
    of this shard (a worker index). ``group`` ids never become labels: they are counted per
    sampling interval only, and only the top-N reach the metrics topic.
    """

    def __init__(
        self,
        shard_id: str,
        registry: CollectorRegistry | None = None,
        *,
        window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.shard_id = str(shard_id)
        self.registry = REGISTRY if registry is None else registry
        self.window_s = window_s
        self.clock = clock
        self._f = _families(self.registry)
        self._f.windowed.shards.add(self)
        self._apis = _ApiNames()
        self._load_times = _Window(window_s, clock)
        self._threads: dict[str, _ThreadBusy] = {}
        self._states: dict[int, str] = {}
        self._queue: dict[int, int] = {}
        self._groups: dict[int, tuple[dict[str, int], dict[str, int]]] = {}
        self._interval: dict[int, PartitionInterval] = {}
        # Pre-create the fixed-vocabulary series so dashboards show zeros, not gaps.
        for p in GROUP_PROTOCOLS:
            self._f.group_count.labels(self.shard_id, p).set(0)
            self._f.rebalances.labels(self.shard_id, p)
        for s in CONSUMER_GROUP_STATES:
            self._f.consumer_group_count.labels(self.shard_id, s).set(0)
        for s in CLASSIC_GROUP_STATES:
            self._f.classic_group_count.labels(self.shard_id, s).set(0)
        for s in PARTITION_STATES:
            self._f.partition_count.labels(self.shard_id, s).set(0)
        for fam in (self._f.offset_commits, self._f.offset_expirations, self._f.offset_deletions):
            fam.labels(self.shard_id)

    # -- requests and events -------------------------------------------------------------------

    def _activity(self, partition: int) -> PartitionInterval:
        act = self._interval.get(partition)
        if act is None:
            act = self._interval[partition] = PartitionInterval()
        return act

    def observe_request(
        self, api: str, seconds: float, *, partition: int | None = None, group: str | None = None
    ) -> None:
        """A request answered by this shard (``seconds`` from arrival to answer, write included)."""
        api = self._apis(api)
        self._f.request_latency.labels("shard", self.shard_id, api).observe(seconds)
        if partition is not None:
            act = self._activity(partition)
            act.requests[api] += 1
            if group is not None:
                act.group_requests[group] += 1

    def observe_event(
        self, queue_s: float, processing_s: float, *, partition: int | None = None, thread: str = "0"
    ) -> None:
        """An event ran on a partition's loop after waiting ``queue_s`` in its queue."""
        self._f.event_queue_time.labels(self.shard_id).observe(queue_s)
        self._f.event_processing_time.labels(self.shard_id).observe(processing_s)
        self.record_thread_busy(thread, processing_s)
        if partition is not None:
            act = self._activity(partition)
            act.busy_s += processing_s
            act.events += 1

    def record_thread_busy(self, thread: str, seconds: float) -> None:
        """Busy time of an event-loop thread outside :meth:`observe_event` (e.g. replay while
        loading); feeds the thread idle ratio and the busy-seconds counter."""
        self.add_thread(thread)
        self._threads[str(thread)].busy.add(seconds)
        self._f.event_loop_busy.labels(self.shard_id).inc(seconds)

    def add_thread(self, thread: str) -> None:
        """Declare an event-loop thread, so an idle one counts as idle (ratio 1) from the start."""
        if str(thread) not in self._threads:
            self._threads[str(thread)] = _ThreadBusy(self.window_s, self.clock)

    def thread_idle_ratios(self) -> dict[str, float]:
        now = self.clock()
        return {name: t.idle_ratio(now, self.window_s) for name, t in self._threads.items()}

    # -- partition and group state --------------------------------------------------------------

    def set_partition_states(self, states: Mapping[int, str]) -> None:
        """The state of every partition this shard hosts (``loading|active|failed|standby``);
        partitions missing from ``states`` are forgotten (their series removed)."""
        for state in states.values():
            _check(state, PARTITION_STATES, "partition state")
        counts = Counter(states.values())
        for s in PARTITION_STATES:
            self._f.partition_count.labels(self.shard_id, s).set(counts.get(s, 0))
        for gone in (set(self._states) | set(self._groups) | set(self._queue)) - set(states):
            self.forget_partition(gone)
        self._states = dict(states)

    def forget_partition(self, partition: int) -> None:
        self._states.pop(partition, None)
        self._groups.pop(partition, None)
        if self._queue.pop(partition, None) is not None:
            self._f.event_queue_size.remove(self.shard_id, str(partition))
        for fam in (self._f.state_write_latency, self._f.state_write_batch):
            with contextlib.suppress(KeyError):
                fam.remove(self.shard_id, str(partition))
        self._publish_group_counts()

    def set_event_queue_size(self, partition: int, size: int) -> None:
        self._queue[partition] = size
        self._f.event_queue_size.labels(self.shard_id, str(partition)).set(size)

    def set_group_counts(
        self, partition: int, consumer: Mapping[str, int], classic: Mapping[str, int]
    ) -> None:
        """Groups of one partition by state; the exported gauges are the sums over partitions."""
        for s in consumer:
            _check(s, CONSUMER_GROUP_STATES, "consumer group state")
        for s in classic:
            _check(s, CLASSIC_GROUP_STATES, "classic group state")
        self._groups[partition] = (dict(consumer), dict(classic))
        self._publish_group_counts()

    def _publish_group_counts(self) -> None:
        consumer: Counter[str] = Counter()
        classic: Counter[str] = Counter()
        for c, k in self._groups.values():
            consumer.update(c)
            classic.update(k)
        for s in CONSUMER_GROUP_STATES:
            self._f.consumer_group_count.labels(self.shard_id, s).set(consumer.get(s, 0))
        for s in CLASSIC_GROUP_STATES:
            self._f.classic_group_count.labels(self.shard_id, s).set(classic.get(s, 0))
        self._f.group_count.labels(self.shard_id, "consumer").set(sum(consumer.values()))
        self._f.group_count.labels(self.shard_id, "classic").set(sum(classic.values()))

    def observe_partition_load(self, partition: int, seconds: float) -> None:
        """A partition finished loading (replaying the state topic) in ``seconds``."""
        self._load_times.add(seconds)
        self._f.partition_loads.labels(self.shard_id).inc()

    # -- group and offset activity --------------------------------------------------------------

    def record_rebalance(self, protocol: str, *, partition: int | None = None) -> None:
        self._f.rebalances.labels(self.shard_id, _check(protocol, GROUP_PROTOCOLS, "protocol")).inc()
        if partition is not None:
            self._activity(partition).rebalances += 1

    def record_offset_commits(self, n: int = 1, *, partition: int | None = None) -> None:
        self._f.offset_commits.labels(self.shard_id).inc(n)
        if partition is not None:
            self._activity(partition).offset_commits += n

    def record_offset_expirations(self, n: int = 1) -> None:
        self._f.offset_expirations.labels(self.shard_id).inc(n)

    def record_offset_deletions(self, n: int = 1) -> None:
        self._f.offset_deletions.labels(self.shard_id).inc(n)

    def observe_state_write(self, partition: int, seconds: float, records: int) -> None:
        """One acknowledged write of ``records`` records to a state-topic partition."""
        self._f.state_write_latency.labels(self.shard_id, str(partition)).observe(seconds)
        self._f.state_write_batch.labels(self.shard_id, str(partition)).observe(records)

    # -- sampling for the metrics topic ---------------------------------------------------------

    @property
    def threads(self) -> int:
        return max(1, len(self._threads))

    def drain(self) -> list[PartitionSnapshot]:
        """Snapshots of every known partition with the activity since the previous drain (which
        is reset). Called by the sample publisher once per interval."""
        interval, self._interval = self._interval, {}
        parts = set(self._states) | set(interval) | set(self._groups)
        out = []
        for p in sorted(parts):
            consumer, classic = self._groups.get(p, ({}, {}))
            out.append(
                PartitionSnapshot(
                    partition=p,
                    state=self._states.get(p, "active"),
                    queue_size=self._queue.get(p, 0),
                    consumer_groups=dict(consumer),
                    classic_groups=dict(classic),
                    activity=interval.get(p, PartitionInterval()),
                )
            )
        return out


class GatewayMetrics:
    """The facade the gateway calls: request latency per API, labelled with the shard that
    served the request (``""`` for APIs forwarded to the upstream Kafka cluster)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = REGISTRY if registry is None else registry
        self._f = _families(self.registry)
        self._apis = _ApiNames()

    def observe_request(self, api: str, seconds: float, *, shard: str = "") -> None:
        self._f.request_latency.labels("gateway", str(shard), self._apis(api)).observe(seconds)


def serve_metrics(
    port: int, registry: CollectorRegistry | None = None, addr: str = "0.0.0.0"
) -> tuple[Any, threading.Thread]:
    """Serve ``/metrics`` on ``addr:port`` from a daemon thread (port 0 picks a free port; read
    it from ``server.server_port``). Returns ``(server, thread)``; ``server.shutdown()`` stops it."""
    server, thread = start_http_server(port, addr=addr, registry=REGISTRY if registry is None else registry)
    return server, thread
