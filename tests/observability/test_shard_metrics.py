"""The shard workers' metrics facade: after known calls, the exported families hold exactly the
known values, and drain() hands the interval's activity to the sample publisher."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from groupcoord.observability.families import SHARE_PARTITION_SERIES
from groupcoord.observability.shard_metrics import ShardMetrics

from .exposition import value


class Clock:
    """A settable clock for the windowed statistics (load time max/avg, idle ratio)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_group_counts_are_summed_over_partitions_by_protocol_and_state() -> None:
    r = CollectorRegistry()
    m = ShardMetrics("2", r)
    m.set_group_counts(0, consumer={"stable": 3, "reconciling": 1}, classic={"empty": 2})
    m.set_group_counts(5, consumer={"stable": 1}, classic={"preparing_rebalance": 1, "stable": 4})
    assert value(r, "groupcoord_group_count", shard="2", protocol="consumer") == 5
    assert value(r, "groupcoord_group_count", shard="2", protocol="classic") == 7
    assert value(r, "groupcoord_consumer_group_count", shard="2", state="stable") == 4
    assert value(r, "groupcoord_consumer_group_count", shard="2", state="reconciling") == 1
    assert value(r, "groupcoord_consumer_group_count", shard="2", state="assigning") == 0
    assert value(r, "groupcoord_classic_group_count", shard="2", state="stable") == 4
    assert value(r, "groupcoord_classic_group_count", shard="2", state="preparing_rebalance") == 1
    # Partition 5 moves away: its groups leave the totals.
    m.set_partition_states({0: "active"})
    assert value(r, "groupcoord_group_count", shard="2", protocol="consumer") == 4
    assert value(r, "groupcoord_classic_group_count", shard="2", state="stable") == 0


def test_unknown_states_are_rejected_so_labels_stay_a_fixed_vocabulary() -> None:
    m = ShardMetrics("0", CollectorRegistry())
    with pytest.raises(ValueError):
        m.set_group_counts(0, consumer={"rebalancing": 1}, classic={})
    with pytest.raises(ValueError):
        m.set_partition_states({0: "sleepy"})
    with pytest.raises(ValueError):
        m.record_rebalance("eager")


def test_partition_states_and_queue_sizes() -> None:
    r = CollectorRegistry()
    m = ShardMetrics("1", r)
    m.set_partition_states({0: "active", 1: "active", 2: "loading", 3: "failed"})
    m.set_event_queue_size(0, 7)
    m.set_event_queue_size(2, 1)
    assert value(r, "groupcoord_partition_count", shard="1", state="active") == 2
    assert value(r, "groupcoord_partition_count", shard="1", state="loading") == 1
    assert value(r, "groupcoord_partition_count", shard="1", state="failed") == 1
    assert value(r, "groupcoord_event_queue_size", shard="1", partition="0") == 7
    m.set_partition_states({0: "active", 1: "active"})
    assert value(r, "groupcoord_partition_count", shard="1", state="loading") == 0
    assert value(r, "groupcoord_event_queue_size", shard="1", partition="2") is None  # series removed


def test_events_offsets_rebalances_and_state_writes() -> None:
    r = CollectorRegistry()
    m = ShardMetrics("3", r)
    m.observe_event(0.001, 0.004, partition=2)
    m.observe_event(0.003, 0.006, partition=2)
    m.record_rebalance("consumer")
    m.record_rebalance("consumer")
    m.record_rebalance("classic")
    m.record_offset_commits(5)
    m.record_offset_expirations(2)
    m.record_offset_deletions(1)
    m.observe_state_write(2, 0.02, 12)
    m.observe_state_write(2, 0.04, 3)
    m.record_state_write_error(2)
    m.record_state_write_timeout(2)
    m.track_fencing(4)
    m.record_state_records_fenced(2, 3)
    m.record_partition_fenced(2)
    assert value(r, "groupcoord_state_records_fenced_total", shard="3", partition="4") == 0
    assert value(r, "groupcoord_partitions_fenced_total", shard="3", partition="4") == 0
    assert value(r, "groupcoord_state_records_fenced_total", shard="3", partition="2") == 3
    assert value(r, "groupcoord_partitions_fenced_total", shard="3", partition="2") == 1
    assert value(r, "groupcoord_event_queue_time_seconds_count", shard="3") == 2
    assert value(r, "groupcoord_event_queue_time_seconds_sum", shard="3") == pytest.approx(0.004)
    assert value(r, "groupcoord_event_processing_time_seconds_sum", shard="3") == pytest.approx(0.010)
    assert value(r, "groupcoord_event_loop_busy_seconds_total", shard="3") == pytest.approx(0.010)
    assert value(r, "groupcoord_rebalance_total", shard="3", protocol="consumer") == 2
    assert value(r, "groupcoord_rebalance_total", shard="3", protocol="classic") == 1
    assert value(r, "groupcoord_offset_commit_total", shard="3") == 5
    assert value(r, "groupcoord_offset_expiration_total", shard="3") == 2
    assert value(r, "groupcoord_state_write_errors_total", shard="3", partition="2") == 1
    assert value(r, "groupcoord_state_write_timeouts_total", shard="3", partition="2") == 1
    assert value(r, "groupcoord_offset_deletion_total", shard="3") == 1
    assert value(r, "groupcoord_state_write_latency_seconds_count", shard="3", partition="2") == 2
    assert value(r, "groupcoord_state_write_batch_records_sum", shard="3", partition="2") == 15
    assert value(r, "groupcoord_state_write_batch_records_bucket", shard="3", partition="2", le="5.0") == 1


def test_windowed_load_time_and_thread_idle_ratio() -> None:
    r = CollectorRegistry()
    clock = Clock()
    m = ShardMetrics("0", r, window_s=60, clock=clock)
    m.add_thread("0")
    m.add_thread("1")
    m.observe_partition_load(0, 2.0)
    m.observe_partition_load(1, 4.0)
    clock.now += 30
    m.observe_event(0.0, 15.0, thread="0")  # thread 0 busy half of the 30 s so far
    assert value(r, "groupcoord_partition_load_time_seconds_max", shard="0") == 4.0
    assert value(r, "groupcoord_partition_load_time_seconds_avg", shard="0") == 3.0
    assert value(r, "groupcoord_thread_idle_ratio_min", shard="0") == pytest.approx(0.5)
    assert value(r, "groupcoord_thread_idle_ratio_avg", shard="0") == pytest.approx(0.75)
    assert value(r, "groupcoord_partition_loads_total", shard="0") == 2
    clock.now += 61  # both loads and the busy time leave the window
    assert value(r, "groupcoord_partition_load_time_seconds_max", shard="0") is None
    assert value(r, "groupcoord_thread_idle_ratio_min", shard="0") == 1.0


def test_drain_hands_the_interval_to_the_sampler_and_resets_it() -> None:
    m = ShardMetrics("0", CollectorRegistry())
    m.set_partition_states({4: "active"})
    m.set_group_counts(4, consumer={"stable": 2}, classic={})
    m.observe_request("Heartbeat", 0.001, partition=4, group="a")
    m.observe_request("Heartbeat", 0.001, partition=4, group="a")
    m.observe_request("OffsetCommit", 0.001, partition=4, group="b")
    m.observe_event(0.0, 0.25, partition=4)
    m.record_offset_commits(3, partition=4)
    (snap,) = m.drain()
    assert snap.partition == 4 and snap.state == "active"
    assert snap.consumer_groups == {"stable": 2}
    assert dict(snap.activity.requests) == {"Heartbeat": 2, "OffsetCommit": 1}
    assert dict(snap.activity.group_requests) == {"a": 2, "b": 1}
    assert snap.activity.busy_s == 0.25 and snap.activity.offset_commits == 3
    (again,) = m.drain()
    assert again.activity.events == 0 and not again.activity.requests
    assert again.consumer_groups == {"stable": 2}  # state persists, activity does not


def test_pending_transactional_offsets_per_partition_and_outcomes_applied() -> None:
    r = CollectorRegistry()
    m = ShardMetrics("1", r)
    assert value(r, "groupcoord_transaction_outcomes_applied_total", shard="1", outcome="commit") == 0
    m.set_partition_states({0: "active", 3: "active"})
    m.set_pending_transactional_offsets(0, 2)
    m.set_pending_transactional_offsets(3, 5)
    m.record_transaction_outcomes(commits=2, aborts=1)
    m.record_transaction_outcomes(commits=1, aborts=0)
    assert value(r, "groupcoord_pending_transactional_offsets", shard="1", partition="3") == 5
    assert value(r, "groupcoord_transaction_outcomes_applied_total", shard="1", outcome="commit") == 3
    assert value(r, "groupcoord_transaction_outcomes_applied_total", shard="1", outcome="abort") == 1
    m.set_partition_states({0: "active"})  # partition 3 moved away: its series goes
    assert value(r, "groupcoord_pending_transactional_offsets", shard="1", partition="3") is None


def test_share_records_in_flight_are_summed_over_the_partitions_served() -> None:
    r = CollectorRegistry()
    m = ShardMetrics("4", r)
    assert value(r, "groupcoord_share_records_in_flight", shard="4") == 0
    m.set_share_records_in_flight(0, {("g", "orders", 0): 3})
    m.set_share_records_in_flight(1, {("g", "orders", 1): 4})
    assert value(r, "groupcoord_share_records_in_flight", shard="4") == 7
    assert value(r, "groupcoord_share_partition_records_in_flight", shard="4", group="g", topic="orders", partition="1") == 4
    m.set_partition_states({0: "active"})  # partition 1 moved away
    assert value(r, "groupcoord_share_records_in_flight", shard="4") == 3
    assert value(r, "groupcoord_share_partition_records_in_flight", shard="4", group="g", topic="orders", partition="1") is None


def test_only_the_fullest_share_partitions_get_a_series_of_their_own() -> None:
    """Kafka's InFlightMessageCount per share-partition, bounded: however many share groups a
    shard serves, it exports at most SHARE_PARTITION_SERIES of them, the fullest; the per-shard
    sum counts them all."""
    r = CollectorRegistry()
    m = ShardMetrics("4", r)
    many = {(f"g{i}", "orders", 0): i + 1 for i in range(SHARE_PARTITION_SERIES + 20)}
    m.set_share_records_in_flight(0, many)
    series = [s for f in r.collect() if f.name == "groupcoord_share_partition_records_in_flight" for s in f.samples]
    assert len(series) == SHARE_PARTITION_SERIES
    assert min(s.value for s in series) == 21, "the 20 emptiest are left out"
    assert value(r, "groupcoord_share_records_in_flight", shard="4") == sum(many.values())
    m.set_share_records_in_flight(0, {("g0", "orders", 0): 5})  # the others are done
    series = [s for f in r.collect() if f.name == "groupcoord_share_partition_records_in_flight" for s in f.samples]
    assert [(s.labels["group"], s.value) for s in series] == [("g0", 5)]
