"""Statistics over a recent time window, computed at scrape time (Kafka's sampled stats).

Partition load time (max/avg) and event-loop thread idle ratio (min/avg) are exported over the
last ``window_s`` seconds rather than since start, so a scrape shows the recent past instead of
an all-time value that never recovers after one slow load. Each shard worker's
:class:`WindowedStats` records the raw observations; the registry's one
:class:`WindowedCollector` turns every live :class:`WindowedStats` into gauges when scraped.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector


class Window:
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


class ThreadBusy:
    """Busy time of one event-loop thread; idle ratio = 1 − busy / elapsed over the window."""

    def __init__(self, window_s: float, clock: Callable[[], float]) -> None:
        self.started = clock()
        self.busy = Window(window_s, clock)

    def idle_ratio(self, now: float, window_s: float) -> float:
        elapsed = min(window_s, now - self.started)
        if elapsed <= 0:
            return 1.0
        busy = sum(self.busy.values())
        return max(0.0, min(1.0, 1.0 - busy / elapsed))


class WindowedStats:
    """One shard worker's partition load times and per-thread busy time over the window."""

    def __init__(self, shard_id: str, window_s: float, clock: Callable[[], float]) -> None:
        self.shard_id = shard_id
        self.window_s = window_s
        self.clock = clock
        self.load_times = Window(window_s, clock)
        self._threads: dict[str, ThreadBusy] = {}

    def add_thread(self, thread: str) -> None:
        """Declare an event-loop thread, so an idle one counts as idle (ratio 1) from the start."""
        if thread not in self._threads:
            self._threads[thread] = ThreadBusy(self.window_s, self.clock)

    def add_busy(self, thread: str, seconds: float) -> None:
        self.add_thread(thread)
        self._threads[thread].busy.add(seconds)

    @property
    def thread_count(self) -> int:
        return len(self._threads)

    def idle_ratios(self) -> dict[str, float]:
        now = self.clock()
        return {name: t.idle_ratio(now, self.window_s) for name, t in self._threads.items()}


class WindowedCollector(Collector):
    """Scrape-time max/avg/min over the recent window, for every live :class:`WindowedStats`
    of a registry (held weakly: a discarded shard facade drops out of the scrape)."""

    def __init__(self) -> None:
        self.stats: weakref.WeakSet[WindowedStats] = weakref.WeakSet()

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
        for stats in list(self.stats):
            loads = stats.load_times.values()
            if loads:
                load_max.add_metric([stats.shard_id], max(loads))
                load_avg.add_metric([stats.shard_id], sum(loads) / len(loads))
            ratios = stats.idle_ratios()
            if ratios:
                idle_min.add_metric([stats.shard_id], min(ratios.values()))
                idle_avg.add_metric([stats.shard_id], sum(ratios.values()) / len(ratios))
        yield from (load_max, load_avg, idle_min, idle_avg)
