"""Consumer lag as the coordinator exports it: committed offsets against the log end, per
group and topic, seconds behind from the commit progress, and a bounded top-N of partitions."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from groupcoord.observability.consumer_lag import ConsumerLagCollector, lag_report, positions_of

END = {("orders", 0): 100, ("orders", 1): 50, ("audit", 0): 10}


def test_lag_per_group_and_topic_never_negative() -> None:
    committed = {
        "billing": {"orders": {0: 90, 1: 50}, "audit": {0: 12}},  # audit: committed past the end
        "search": {"orders": {0: 0}},
        "stale": {"gone": {0: 5}},  # a topic whose end is unknown: no lag is invented
    }
    report = lag_report(committed, END, now=10.0)
    assert report.groups["billing"].by_topic == {"orders": 10, "audit": 0}
    assert report.groups["billing"].total == 10
    assert report.groups["search"].total == 100
    assert "stale" not in report.groups
    assert report.top_partitions[0] == (100, "search", "orders", 0)


def test_top_partitions_are_bounded() -> None:
    committed = {f"g{i}": {"orders": {0: i}} for i in range(50)}
    report = lag_report(committed, END, now=0.0, top_n=5)
    assert [lag for lag, *_ in report.top_partitions] == [100, 99, 98, 97, 96]
    assert len(report.groups) == 50  # per-group figures for every group, per-partition only top N


def test_seconds_behind_from_commit_progress_and_stalls() -> None:
    stalled: dict[str, float] = {}
    first = lag_report({"g": {"orders": {0: 40}}}, END, now=100.0, stalled_since=stalled)
    assert first.groups["g"].seconds is None  # no rate yet
    # 20 offsets committed in 10 s: 2/s, 40 behind → 20 s
    second = lag_report({"g": {"orders": {0: 60}}}, END, now=110.0, previous=first, stalled_since=stalled)
    assert second.groups["g"].seconds == 20.0
    # commits stand still while it lags: the time since they last moved
    third = lag_report({"g": {"orders": {0: 60}}}, END, now=125.0, previous=second, stalled_since=stalled)
    assert third.groups["g"].seconds == 15.0
    fourth = lag_report({"g": {"orders": {0: 60}}}, END, now=140.0, previous=third, stalled_since=stalled)
    assert fourth.groups["g"].seconds == 30.0
    caught_up = lag_report({"g": {"orders": {0: 100}}}, END, now=150.0, previous=fourth, stalled_since=stalled)
    assert caught_up.groups["g"].seconds == 0.0 and stalled == {}


def test_the_collector_exports_only_current_groups() -> None:
    registry = CollectorRegistry()
    clock = iter([1.0, 2.0])
    collector = ConsumerLagCollector("3", clock=lambda: next(clock))
    registry.register(collector)
    collector.update({"billing": {"orders": {0: 90}}}, END)
    text = generate_latest(registry).decode()
    assert 'groupcoord_consumer_group_lag{group="billing",shard="3",topic="orders"} 10.0' in text
    assert 'groupcoord_consumer_group_partition_lag{group="billing",partition="0",shard="3",topic="orders"} 10.0' in text
    collector.update({}, END)  # the group went away: its series go too
    assert "billing" not in generate_latest(registry).decode()


def test_positions_read_from_the_lowest_committed_offset() -> None:
    assert positions_of({"a": {"t": {0: 5}}, "b": {"t": {0: 3, 1: 9}}}) == {("t", 0): 3, ("t", 1): 9}
