"""The metrics facade a shard worker calls: Prometheus families plus the per-partition activity
that feeds the metrics topic.

One :class:`ShardMetrics` per worker process (``ShardMetrics(shard_id)``), exported on the
worker's own metrics port; every series carries the ``shard`` label, so Prometheus sums a
shard's workers. The runtime calls it from its asyncio loop; the scrape thread only reads
(prometheus-client's own locks cover the families).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry

from groupcoord.observability.families import (
    GROUP_PROTOCOLS,
    GROUP_STATES,
    PARTITION_STATES,
    SHARE_PARTITION_SERIES,
    SKIPPED_RECORD_REASONS,
    ApiLabel,
    check_label,
    families_of,
)
from groupcoord.observability.partition_activity import PartitionActivity, PartitionSnapshot
from groupcoord.observability.windows import WindowedStats
from groupcoord.rpc.v1.share_group_pb2 import ShareDeliveryCounts


class ShardMetrics:
    """What a shard worker observes, turned into Prometheus series and interval counters.

    ``partition`` arguments are state-topic partitions; ``thread`` names the event loop that did
    the work (the worker index: each worker process runs one loop). ``group`` ids never become
    labels: they are counted per sampling interval only, and only the top-N reach the metrics
    topic.
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
        self._f = families_of(self.registry)
        self._apis = ApiLabel()
        self._windows = WindowedStats(self.shard_id, window_s, clock)
        self._f.windowed.stats.add(self._windows)
        self._partitions = PartitionActivity()
        # Pre-create the fixed-vocabulary series so dashboards show zeros, not gaps.
        for p in GROUP_PROTOCOLS:
            self._f.group_count.labels(self.shard_id, p).set(0)
            self._f.rebalances.labels(self.shard_id, p)
        self._publish_group_counts()
        for s in PARTITION_STATES:
            self._f.partition_count.labels(self.shard_id, s).set(0)
        for fam in (self._f.offset_commits, self._f.offset_expirations, self._f.offset_deletions):
            fam.labels(self.shard_id)
        for outcome in ("commit", "abort"):
            self._f.transaction_outcomes.labels(self.shard_id, outcome)
        for delivery in ("first", "redelivery"):
            self._f.share_records_acquired.labels(self.shard_id, delivery)
        for ack in ("accept", "release", "reject"):
            self._f.share_record_acknowledgements.labels(self.shard_id, ack)
        self._f.share_lock_timeouts.labels(self.shard_id)
        self._f.share_records_archived.labels(self.shard_id)
        self._pending_txn_partitions: set[int] = set()
        self._share_in_flight: dict[int, dict[tuple[str, str, int], int]] = {}
        self._share_series: set[tuple[str, str, int]] = set()
        self._f.share_records_in_flight.labels(self.shard_id).set(0)

    # -- requests and events -------------------------------------------------------------------

    def observe_request(
        self, api: str, seconds: float, *, partition: int | None = None, group: str | None = None
    ) -> None:
        """A request answered by this shard (``seconds`` from arrival to answer, write included)."""
        api = self._apis(api)
        self._f.request_latency.labels("shard", self.shard_id, api).observe(seconds)
        if partition is not None:
            act = self._partitions.interval(partition)
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
            act = self._partitions.interval(partition)
            act.busy_s += processing_s
            act.events += 1

    def record_thread_busy(self, thread: str, seconds: float) -> None:
        """Busy time of an event loop outside :meth:`observe_event` (e.g. replay while
        loading); feeds the thread idle ratio and the busy-seconds counter."""
        self._windows.add_busy(str(thread), seconds)
        self._f.event_loop_busy.labels(self.shard_id).inc(seconds)

    def add_thread(self, thread: str) -> None:
        """Declare an event loop, so an idle one counts as idle (ratio 1) from the start."""
        self._windows.add_thread(str(thread))

    # -- partition and group state --------------------------------------------------------------

    def set_partition_states(self, states: Mapping[int, str]) -> None:
        """The state of every partition this worker hosts (``loading|active|failed|standby``);
        partitions missing from ``states`` are forgotten (their series removed)."""
        for state in states.values():
            check_label(state, PARTITION_STATES, "partition state")
        counts = Counter(states.values())
        for s in PARTITION_STATES:
            self._f.partition_count.labels(self.shard_id, s).set(counts.get(s, 0))
        gone = (self._partitions.known_partitions() | set(self._share_in_flight)) - set(states)
        for partition in gone:
            self._forget_partition(partition)
        if gone:
            self._publish_group_counts()
        self._partitions.states = dict(states)

    def _forget_partition(self, partition: int) -> None:
        if self._share_in_flight.pop(partition, None) is not None:
            self._publish_share_in_flight()
        if partition in self._pending_txn_partitions:
            self._pending_txn_partitions.discard(partition)
            self._f.pending_transactional_offsets.remove(self.shard_id, str(partition))
        if partition in self._partitions.queue_sizes:
            self._f.event_queue_size.remove(self.shard_id, str(partition))
        for fam in (self._f.state_write_latency, self._f.state_write_batch):
            with contextlib.suppress(KeyError):
                fam.remove(self.shard_id, str(partition))
        self._partitions.forget(partition)

    def set_event_queue_size(self, partition: int, size: int) -> None:
        self._partitions.queue_sizes[partition] = size
        self._f.event_queue_size.labels(self.shard_id, str(partition)).set(size)

    def set_group_counts(
        self,
        partition: int,
        counts: Mapping[str, Mapping[str, int]] | None = None,
        *,
        consumer: Mapping[str, int] | None = None,
        classic: Mapping[str, int] | None = None,
        share: Mapping[str, int] | None = None,
    ) -> None:
        """Groups of one partition by protocol, then by state (``counts``, or one keyword per
        protocol); the exported gauges are the sums over partitions."""
        merged = dict(counts or {})
        for protocol, states in (("consumer", consumer), ("classic", classic), ("share", share)):
            if states is not None:
                merged[protocol] = states
        for protocol, states in merged.items():
            check_label(protocol, GROUP_PROTOCOLS, "protocol")
            for s in states:
                check_label(s, GROUP_STATES[protocol], f"{protocol} group state")
        self._partitions.set_group_counts(partition, merged)
        self._publish_group_counts()

    def _publish_group_counts(self) -> None:
        totals = self._partitions.group_totals()
        by_state = {
            "consumer": self._f.consumer_group_count,
            "classic": self._f.classic_group_count,
            "share": self._f.share_group_count,
            "streams": self._f.streams_group_count,
        }
        for protocol in GROUP_PROTOCOLS:
            counts = totals.get(protocol, {})
            for s in GROUP_STATES[protocol]:
                by_state[protocol].labels(self.shard_id, s).set(counts.get(s, 0))
            self._f.group_count.labels(self.shard_id, protocol).set(sum(counts.values()))

    def set_pending_transactional_offsets(self, partition: int, pending: int) -> None:
        """Transactional offsets of a partition waiting for their transaction's outcome."""
        self._pending_txn_partitions.add(partition)
        self._f.pending_transactional_offsets.labels(self.shard_id, str(partition)).set(pending)

    def record_transaction_outcomes(self, commits: int, aborts: int) -> None:
        """Markers that decided pending transactional offsets, as the leader replays them."""
        if commits:
            self._f.transaction_outcomes.labels(self.shard_id, "commit").inc(commits)
        if aborts:
            self._f.transaction_outcomes.labels(self.shard_id, "abort").inc(aborts)

    def observe_partition_load(self, partition: int, seconds: float) -> None:
        """A partition finished loading (replaying the state topic) in ``seconds``."""
        self._windows.load_times.add(seconds)
        self._f.partition_loads.labels(self.shard_id).inc()

    # -- group and offset activity --------------------------------------------------------------

    def record_rebalance(self, protocol: str, *, partition: int | None = None) -> None:
        self._f.rebalances.labels(self.shard_id, check_label(protocol, GROUP_PROTOCOLS, "protocol")).inc()
        if partition is not None:
            self._partitions.interval(partition).rebalances += 1

    def record_offset_commits(self, n: int = 1, *, partition: int | None = None) -> None:
        self._f.offset_commits.labels(self.shard_id).inc(n)
        if partition is not None:
            self._partitions.interval(partition).offset_commits += n

    def record_offset_expirations(self, n: int = 1) -> None:
        self._f.offset_expirations.labels(self.shard_id).inc(n)

    def record_offset_deletions(self, n: int = 1) -> None:
        self._f.offset_deletions.labels(self.shard_id).inc(n)

    def set_share_records_in_flight(self, partition: int, records: dict[tuple[str, str, int], int]) -> None:
        """Share records not done yet in each of ``partition``'s share-partitions (group, topic,
        partition): exported summed, and one series for each of the fullest share-partitions."""
        self._share_in_flight[partition] = records
        self._publish_share_in_flight()

    def _publish_share_in_flight(self) -> None:
        every = [item for records in self._share_in_flight.values() for item in records.items()]
        self._f.share_records_in_flight.labels(self.shard_id).set(sum(n for _, n in every))
        fullest = dict(sorted(every, key=lambda item: (-item[1], item[0]))[:SHARE_PARTITION_SERIES])
        family = self._f.share_partition_records_in_flight
        for gone in self._share_series - fullest.keys():
            family.remove(self.shard_id, gone[0], gone[1], str(gone[2]))
        for (group, topic, share_partition), n in fullest.items():
            family.labels(self.shard_id, group, topic, str(share_partition)).set(n)
        self._share_series = set(fullest)

    def record_publication(self, metric: str, outcome: Any) -> None:
        """A shard's write to another topic ended (a ``PublishOutcome``), counted under the
        publication's ``metric``: ``share_dlq``, a share group's dead letters (KIP-1191)."""
        if metric != "share_dlq":
            return
        f = self._f
        f.share_dlq_produce_requests.labels(self.shard_id).inc(outcome.requests)
        if outcome.failed_requests:
            f.share_dlq_failed_produce_requests.labels(self.shard_id).inc(outcome.failed_requests)
        if outcome.error is None and outcome.written:
            f.share_dlq_records.labels(self.shard_id).inc(outcome.written)

    def record_share_delivery(self, counts: ShareDeliveryCounts) -> None:
        """What one ShareFetch or ShareAcknowledge step did to records (the shard's answer says)."""
        f = self._f
        for family, label, n in (
            (f.share_records_acquired, "first", counts.acquired - counts.redelivered),
            (f.share_records_acquired, "redelivery", counts.redelivered),
            (f.share_record_acknowledgements, "accept", counts.accepted),
            (f.share_record_acknowledgements, "release", counts.released),
            (f.share_record_acknowledgements, "reject", counts.rejected),
        ):
            if n:
                family.labels(self.shard_id, label).inc(n)
        if counts.lock_timeouts:
            f.share_lock_timeouts.labels(self.shard_id).inc(counts.lock_timeouts)
        if counts.archived:
            f.share_records_archived.labels(self.shard_id).inc(counts.archived)

    def observe_state_write(self, partition: int, seconds: float, records: int) -> None:
        """One acknowledged write of ``records`` records to a state-topic partition."""
        self._f.state_write_latency.labels(self.shard_id, str(partition)).observe(seconds)
        self._f.state_write_batch.labels(self.shard_id, str(partition)).observe(records)

    def record_state_produce_request(self, batches: int) -> None:
        """One Produce request of state writes, carrying ``batches`` partitions' batches (the
        writes of every partition a worker leads share one request per broker in flight)."""
        self._f.state_produce_requests.labels(self.shard_id).inc()
        self._f.state_produce_batches.labels(self.shard_id).inc(batches)

    def record_state_records_skipped(self, partition: int, reason: str) -> None:
        """A load or standby tail skipped a record of ``partition`` it could not use."""
        self._f.state_records_skipped.labels(
            self.shard_id, str(partition), check_label(reason, SKIPPED_RECORD_REASONS, "skip reason")
        ).inc()

    def record_state_write_error(self, partition: int) -> None:
        """A write to a state-topic partition that failed (not acknowledged)."""
        self._f.state_write_errors.labels(self.shard_id, str(partition)).inc()

    def record_state_write_timeout(self, partition: int) -> None:
        """A write to a state-topic partition whose callers stopped waiting for it (the write
        timeout passed before the upstream acknowledged it)."""
        self._f.state_write_timeouts.labels(self.shard_id, str(partition)).inc()

    def track_fencing(self, partition: int) -> None:
        """Show the fencing counters of a partition this shard leads (at zero until it fences)."""
        self._f.state_records_fenced.labels(self.shard_id, str(partition))
        self._f.partitions_fenced.labels(self.shard_id, str(partition))

    def record_state_records_fenced(self, partition: int, records: int = 1) -> None:
        """The leader of ``partition`` read back ``records`` records a deposed leader wrote after
        its marker (fenced: no replayer applies them)."""
        self._f.state_records_fenced.labels(self.shard_id, str(partition)).inc(records)

    def record_partition_fenced(self, partition: int) -> None:
        """This shard stopped leading ``partition``: a newer leader's marker preceded its write."""
        self._f.partitions_fenced.labels(self.shard_id, str(partition)).inc()

    # -- sampling for the metrics topic ---------------------------------------------------------

    @property
    def threads(self) -> int:
        """Event loops this facade has seen (at least 1): the capacity, in cores, its samples
        are measured against."""
        return max(1, self._windows.thread_count)

    def drain(self) -> list[PartitionSnapshot]:
        """Every known partition with its activity since the previous drain (which is reset).
        Called by the sample publisher once per interval."""
        return self._partitions.drain()
