"""The Prometheus metric families of the group coordinator, named after Apache Kafka's
group-coordinator-metrics, and the vocabularies their labels may take.

Every family is defined here, in one place, so names, labels and buckets cannot drift between
the shard workers (:mod:`groupcoord.observability.shard_metrics`) and the gateway
(:mod:`groupcoord.observability.gateway_metrics`); those facades are what processes call.

Kafka name → Prometheus name (Kafka's ``-rate``/``-count`` pairs become one counter; Prometheus
computes the rate with ``rate()``):

=====================================  =====================================================
group-count{protocol}                  ``groupcoord_group_count{shard,protocol}``
consumer-group-count{state}            ``groupcoord_consumer_group_count{shard,state}``
classic-group-count{state}             ``groupcoord_classic_group_count{shard,state}``
streams-group-count{state}             ``groupcoord_streams_group_count{shard,state}``
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
(failed state-topic writes)            ``groupcoord_state_write_errors_total{shard,partition}``
(writes past offsets.commit.timeout)   ``groupcoord_state_write_timeouts_total{shard,partition}``
(records per state-topic write)        ``groupcoord_state_write_batch_records{shard,partition}``
(Produce requests of state writes)     ``groupcoord_state_produce_requests_total{shard}``
(partitions' batches in them)          ``groupcoord_state_produce_batches_total{shard}``
(state records skipped on load/tail)   ``groupcoord_state_records_skipped_total{shard,partition,reason}``
(a deposed leader's records, fenced)   ``groupcoord_state_records_fenced_total{shard,partition}``
(leaderships ended by a newer marker)  ``groupcoord_partitions_fenced_total{shard,partition}``
(per-API request latency)              ``groupcoord_request_latency_seconds{component,shard,api}``
=====================================  =====================================================

The windowed families (load time max/avg, thread idle ratio min/avg) are computed at scrape time
by :class:`groupcoord.observability.windows.WindowedCollector`, registered with the others.

Cardinality is bounded on purpose: labels are the shard, the state-topic partition (at most the
configured partition count), a protocol/state from a fixed vocabulary (checked by
:func:`check_label`), and the API name (capped by :class:`ApiLabel`). There is never a
per-group or per-member label; the per-group view needed for capacity planning goes to the
metrics topic as a bounded top-N (see :mod:`groupcoord.observability.metric_samples`).
"""

from __future__ import annotations

import threading
import weakref

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from groupcoord.observability.windows import WindowedCollector

SHARE_PARTITION_SERIES = 100
"""The most share-partitions a shard exports one series each for: the fullest ones. Kafka tags
its share-partition metrics with group, topic and partition; a bound keeps our scrape cheap with
any number of share groups."""

GROUP_PROTOCOLS = ("consumer", "classic", "share", "streams")
CONSUMER_GROUP_STATES = ("empty", "assigning", "reconciling", "stable", "dead")
CLASSIC_GROUP_STATES = ("empty", "preparing_rebalance", "completing_rebalance", "stable", "dead")
SHARE_GROUP_STATES = ("empty", "stable", "dead")
STREAMS_GROUP_STATES = ("empty", "not_ready", "assigning", "reconciling", "stable", "dead")
GROUP_STATES = {
    "consumer": CONSUMER_GROUP_STATES,
    "classic": CLASSIC_GROUP_STATES,
    "share": SHARE_GROUP_STATES,
    "streams": STREAMS_GROUP_STATES,
}
# Kafka's three, plus the standby state our runtime has (hot standbys tailing a partition).
PARTITION_STATES = ("loading", "active", "failed", "standby")
# Why a load or tail skipped a state-topic record (coordinator/runtime/skipped_records.py).
SKIPPED_RECORD_REASONS = ("undecodable", "unreplayable", "impossible_fence")
MAX_APIS = 64
OTHER_API = "other"

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
EVENT_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 1.0)
BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


class MetricFamilies:
    """The metric families of one registry. Created once per registry by :func:`families_of`
    and shared by every facade registered there, so a shard and a gateway in one process (a
    test, the local cluster) export into the same families instead of clashing on names."""

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
        self.share_group_count = Gauge(
            "groupcoord_share_group_count", "Share groups (KIP-932) by state.", ["shard", "state"], registry=r
        )
        self.streams_group_count = Gauge(
            "groupcoord_streams_group_count", "Streams groups (KIP-1071) by state.", ["shard", "state"], registry=r
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
        self.event_loop_busy = Counter(
            "groupcoord_event_loop_busy_seconds",
            "Event-loop time spent running events; rate() of it is the busy ratio in cores.",
            ["shard"],
            registry=r,
        )
        self.partition_loads = Counter(
            "groupcoord_partition_loads", "Completed state-topic partition loads.", ["shard"], registry=r
        )
        self.rebalances = Counter(
            "groupcoord_rebalance",
            "Group rebalances (new group epochs) by protocol.",
            ["shard", "protocol"],
            registry=r,
        )
        self.offset_commits = Counter(
            "groupcoord_offset_commit",
            "Committed offsets (one per partition committed).",
            ["shard"],
            registry=r,
        )
        self.offset_expirations = Counter(
            "groupcoord_offset_expiration", "Offsets removed by retention expiry.", ["shard"], registry=r
        )
        self.offset_deletions = Counter(
            "groupcoord_offset_deletion",
            "Offsets removed by OffsetDelete/DeleteGroups.",
            ["shard"],
            registry=r,
        )
        self.pending_transactional_offsets = Gauge(
            "groupcoord_pending_transactional_offsets",
            "Transactional offsets (TxnOffsetCommit) waiting for their transaction's marker.",
            ["shard", "partition"],
            registry=r,
        )
        self.transaction_outcomes = Counter(
            "groupcoord_transaction_outcomes_applied",
            "Transaction markers (commit|abort) that decided pending transactional offsets.",
            ["shard", "outcome"],
            registry=r,
        )
        # share groups (KIP-932), named after Kafka's share-group and share-partition metrics
        self.share_records_acquired = Counter(
            "groupcoord_share_records_acquired",
            "Records acquired by share-group members: a first delivery or a redelivery (a record "
            "released, or whose lock ran out, acquired again).",
            ["shard", "delivery"],
            registry=r,
        )
        self.share_record_acknowledgements = Counter(
            "groupcoord_share_record_acknowledgements",
            "Records acknowledged by share-group members, by acknowledge type (accept|release|reject).",
            ["shard", "type"],
            registry=r,
        )
        self.share_lock_timeouts = Counter(
            "groupcoord_share_acquisition_lock_timeouts",
            "Acquired records whose acquisition lock ran out before their member acknowledged them.",
            ["shard"],
            registry=r,
        )
        self.share_records_in_flight = Gauge(
            "groupcoord_share_records_in_flight",
            "Records of share-partitions not done yet (acquired, or available again), summed over "
            "the share-partitions this shard serves (Kafka's InFlightMessageCount, per shard).",
            ["shard"],
            registry=r,
        )
        self.share_partition_records_in_flight = Gauge(
            "groupcoord_share_partition_records_in_flight",
            "Records of one share-partition not done yet (Kafka's InFlightMessageCount), for the "
            "share-partitions of this shard with the most such records (at most "
            f"{SHARE_PARTITION_SERIES} series a shard; the others are in the per-shard sum only).",
            ["shard", "group", "topic", "partition"],
            registry=r,
        )
        self.share_records_archived = Counter(
            "groupcoord_share_records_archived",
            "Records archived, never to be delivered again: rejected, or released or timed out "
            "after share.delivery.count.limit deliveries.",
            ["shard"],
            registry=r,
        )
        # KIP-1191's DeadLetterQueueTotalProduceRequestsPerSec, ...FailedProduceRequestsPerSec
        # and DeadLetterQueueRecordCount, as counters (Prometheus takes the rate)
        self.share_dlq_produce_requests = Counter(
            "groupcoord_share_dlq_produce_requests",
            "Produce requests writing share groups' dead letters to their DLQ topics.",
            ["shard"],
            registry=r,
        )
        self.share_dlq_failed_produce_requests = Counter(
            "groupcoord_share_dlq_failed_produce_requests",
            "Produce requests of dead letters that failed (refused by the topic's rule, or by the "
            "cluster); a record whose every attempt failed is archived without its copy.",
            ["shard"],
            registry=r,
        )
        self.share_dlq_records = Counter(
            "groupcoord_share_dlq_records",
            "Dead letters written to share groups' DLQ topics (or found written by a predecessor).",
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
        self.state_produce_requests = Counter(
            "groupcoord_state_produce_requests",
            "Produce requests the state writes took: one per upstream broker in flight, shared by "
            "the writes of every state partition the worker leads (what a commit costs the brokers).",
            ["shard"],
            registry=r,
        )
        self.state_produce_batches = Counter(
            "groupcoord_state_produce_batches",
            "State-partition record batches those Produce requests carried (over the requests: "
            "partitions per request).",
            ["shard"],
            registry=r,
        )
        self.state_write_errors = Counter(
            "groupcoord_state_write_errors",
            "State-topic writes that failed (the live replica reverts; callers get a retriable error).",
            ["shard", "partition"],
            registry=r,
        )
        self.state_write_timeouts = Counter(
            "groupcoord_state_write_timeouts",
            "State-topic writes not acknowledged within offsets.commit.timeout.ms (5 s): their callers "
            "were answered COORDINATOR_NOT_AVAILABLE and retry; the write itself went on.",
            ["shard", "partition"],
            registry=r,
        )
        self.state_write_batch = Histogram(
            "groupcoord_state_write_batch_records",
            "Records per state-topic write (concurrent requests batch into one write).",
            ["shard", "partition"],
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.state_records_skipped = Counter(
            "groupcoord_state_records_skipped",
            "State-topic records a load or standby tail skipped: undecodable, unreplayable, or "
            "with a fence no leader wrote (someone wrote the topic around the gateway).",
            ["shard", "partition", "reason"],
            registry=r,
        )
        self.state_records_fenced = Counter(
            "groupcoord_state_records_fenced",
            "Records a deposed leader (a zombie) wrote after a newer leader's marker, found by the "
            "newer leader's write confirmation: no replayer applies them, and each key they touch "
            "is rewritten.",
            ["shard", "partition"],
            registry=r,
        )
        self.partitions_fenced = Counter(
            "groupcoord_partitions_fenced",
            "Leaderships of a state partition this shard gave up because a newer leader's marker "
            "preceded its own write or marker (it was a zombie leader; its callers got NOT_COORDINATOR).",
            ["shard", "partition"],
            registry=r,
        )
        self.request_latency = Histogram(
            "groupcoord_request_latency_seconds",
            "Request latency per API: at the gateway (shard = the shard that served it) and at the shard.",
            ["component", "shard", "api"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.group_adoptions = Counter(
            "groupcoord_gateway_group_adoptions",
            "First touches of a group at a gateway process, by what the adoption from the upstream's "
            "own coordinator found: ours, imported, nothing_upstream, upstream_live and "
            "upstream_pending (held back), not_granted, failed, undecided (docs/adoption.md).",
            ["outcome"],
            registry=r,
        )
        self.offset_mirror = Counter(
            "groupcoord_gateway_offset_mirror_partitions",
            "Partitions' committed offsets the gateway wrote to the upstream's own coordinator "
            "(--mirror-offsets-to-upstream), by result: mirrored, refused (the upstream's error, e.g. "
            "GROUP_AUTHORIZATION_FAILED), failed (not reached).",
            ["result"],
            registry=r,
        )
        self.windowed = WindowedCollector()
        r.register(self.windowed)


_FAMILIES: weakref.WeakKeyDictionary[CollectorRegistry, MetricFamilies] = weakref.WeakKeyDictionary()
_FAMILIES_LOCK = threading.Lock()


def families_of(registry: CollectorRegistry) -> MetricFamilies:
    """The families of ``registry``, created on first use (registering a family twice raises)."""
    with _FAMILIES_LOCK:
        families = _FAMILIES.get(registry)
        if families is None:
            families = _FAMILIES[registry] = MetricFamilies(registry)
        return families


class ApiLabel:
    """Caps the distinct values of the ``api`` label at ``limit`` (later ones become
    :data:`OTHER_API`), so cardinality stays bounded even if a caller passes something
    unexpected, such as a name built from input."""

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


def check_label(value: str, allowed: tuple[str, ...], what: str) -> str:
    """``value`` if it is one of the fixed vocabulary ``allowed``; a typo must fail loudly
    rather than become a new series nobody's dashboard shows."""
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}; known: {', '.join(allowed)}")
    return value
