"""What each state-topic partition of a shard worker is and did since the last sample.

Prometheus keeps per-shard aggregates; capacity planning needs the history per partition and
its hottest groups (:mod:`groupcoord.observability.metric_samples`). :class:`PartitionActivity`
is that per-partition view: the current state, queue size and group counts (kept until the
partition leaves), and the counters of the current interval (requests per API and per group,
busy time, events, commits, rebalances), handed over and reset by :meth:`PartitionActivity.drain`.
Group ids live only here, counted per interval, and never become Prometheus labels.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(slots=True)
class PartitionInterval:
    """What one state-topic partition did since the last drain."""

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


class PartitionActivity:
    """Per-partition state and interval counters of one shard worker. Touched only from the
    worker's asyncio loop; :meth:`drain` swaps the interval counters out whole."""

    def __init__(self) -> None:
        self.states: dict[int, str] = {}
        self.queue_sizes: dict[int, int] = {}
        self.group_counts: dict[int, dict[str, dict[str, int]]] = {}  # protocol -> state -> groups
        self._interval: dict[int, PartitionInterval] = {}

    def interval(self, partition: int) -> PartitionInterval:
        """The counters of ``partition`` for the current interval (created on first use)."""
        act = self._interval.get(partition)
        if act is None:
            act = self._interval[partition] = PartitionInterval()
        return act

    def known_partitions(self) -> set[int]:
        return set(self.states) | set(self.group_counts) | set(self.queue_sizes)

    def forget(self, partition: int) -> None:
        self.states.pop(partition, None)
        self.group_counts.pop(partition, None)
        self.queue_sizes.pop(partition, None)

    def set_group_counts(self, partition: int, counts: Mapping[str, Mapping[str, int]]) -> None:
        self.group_counts[partition] = {protocol: dict(states) for protocol, states in counts.items()}

    def group_totals(self) -> dict[str, Counter[str]]:
        """Groups by protocol, then by state, summed over partitions."""
        totals: dict[str, Counter[str]] = {}
        for counts in self.group_counts.values():
            for protocol, states in counts.items():
                totals.setdefault(protocol, Counter()).update(states)
        return totals

    def drain(self) -> list[PartitionSnapshot]:
        """Snapshots of every known partition with the activity since the previous drain (which
        is reset)."""
        interval, self._interval = self._interval, {}
        out = []
        for p in sorted(set(self.states) | set(interval) | set(self.group_counts)):
            counts = self.group_counts.get(p, {})
            out.append(
                PartitionSnapshot(
                    partition=p,
                    state=self.states.get(p, "active"),
                    queue_size=self.queue_sizes.get(p, 0),
                    consumer_groups=dict(counts.get("consumer", {})),
                    classic_groups=dict(counts.get("classic", {})),
                    activity=interval.get(p, PartitionInterval()),
                )
            )
        return out
