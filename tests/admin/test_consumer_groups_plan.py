"""The decisions of ``groupcoord groups``, as Kafka's ConsumerGroupCommand makes them: which
rows describe shows, where reset-offsets moves each partition, when a reset is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from aiokafka.structs import TopicPartition as Tp

from groupcoord.admin.consumer_groups import (
    AdminError,
    GroupDescription,
    Member,
    OffsetBounds,
    ResetSpec,
    assignment_string,
    check_inactive,
    check_partitions_exist,
    describe_rows,
    export_csv,
    parse_datetime,
    parse_duration,
    parse_reset_file,
    parse_topic_partitions,
    reset_plan,
)

T0, T1, U0 = Tp("t", 0), Tp("t", 1), Tp("u", 0)
BOUNDS = OffsetBounds({T0: 5, T1: 0}, {T0: 50, T1: 20}, {T0: 30, T1: None})


def test_describe_lists_assigned_and_committed_partitions_with_lag_where_both_are_known() -> None:
    group = GroupDescription("g", "Stable", "consumer", (Member("m-1", "app", "10.0.0.1", (T0, T1)),))
    rows = describe_rows(group, {T0: 40, U0: 3}, {T0: 50, T1: 20, U0: 3})
    assert [
        (r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag, r.consumer_id) for r in rows
    ] == [
        ("t", 0, 40, 50, 10, "m-1"),
        ("t", 1, None, 20, None, "m-1"),  # assigned, never committed: no lag, as Kafka prints "-"
        ("u", 0, 3, 3, 0, None),  # committed, not assigned (an empty group's partitions)
    ]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (ResetSpec(to_earliest=True), {T0: 5, T1: 0}),
        (ResetSpec(to_latest=True), {T0: 50, T1: 20}),
        (ResetSpec(to_datetime=datetime(2026, 1, 1, tzinfo=UTC)), {T0: 30, T1: 20}),  # none after: log end
        (ResetSpec(shift_by=-100), {T0: 5, T1: 0}),  # clamped to the log start
        (ResetSpec(shift_by=100), {T0: 50, T1: 20}),  # clamped to the log end
        (ResetSpec(shift_by=-2), {T0: 8, T1: 10}),
    ],
)
def test_reset_targets_are_clamped_to_the_log(spec: ResetSpec, expected: dict) -> None:
    assert reset_plan(spec, [T1, T0], {T0: 10, T1: 12}, BOUNDS) == expected


def test_shift_of_a_partition_never_committed_and_ambiguous_targets_are_refused() -> None:
    with pytest.raises(AdminError, match="no current committed offset"):
        reset_plan(ResetSpec(shift_by=1), [T0], {}, BOUNDS)
    with pytest.raises(AdminError, match="exactly one of"):
        ResetSpec(to_earliest=True, to_latest=True)


@pytest.mark.parametrize(
    ("state", "refused"),
    [
        ("Stable", True),
        ("PreparingRebalance", True),
        ("Reconciling", True),
        ("Empty", False),
        ("Dead", False),
    ],
)
def test_reset_only_while_the_group_is_inactive(state: str, refused: bool) -> None:
    group = GroupDescription("g", state, "consumer")
    if refused:
        with pytest.raises(AdminError, match=f"inactive, but the current state is {state}"):
            check_inactive(group)
    else:
        check_inactive(group)


def test_topic_partitions_and_datetimes_parse_as_kafkas_tool_takes_them() -> None:
    assert parse_topic_partitions("t", {"t": 2}) == [T0, T1]
    assert parse_topic_partitions("t:1", {"t": 2}) == [T1]
    for bad in ("x", "t:2", "t:a"):
        with pytest.raises(AdminError):
            parse_topic_partitions(bad, {"t": 2})
    assert parse_datetime("2026-11-24T08:00:00") == datetime(2026, 11, 24, 8, tzinfo=UTC)
    assert parse_datetime("2026-11-24T09:00:00+01:00") == datetime(2026, 11, 24, 8, tzinfo=UTC)
    assert parse_datetime("2026-11-24T08:00:00Z") == datetime(2026, 11, 24, 8, tzinfo=UTC)


def test_describe_rows_follow_kafkas_order_biggest_member_first() -> None:
    group = GroupDescription(
        "g",
        "Stable",
        "consumer",
        (
            Member("small", "a", "h1", (Tp("u", 1),)),
            Member("big", "b", "h2", (T1, T0)),
            Member("idle", "c", "h3"),
        ),
    )
    rows = describe_rows(group, {U0: 1}, {})
    assert [(r.topic, r.partition, r.consumer_id) for r in rows] == [
        ("t", 0, "big"),
        ("t", 1, "big"),
        ("u", 1, "small"),
        ("u", 0, None),  # committed, owned by nobody: last
    ]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (ResetSpec(to_offset=40), {T0: 40, T1: 20}),  # clamped to t-1's log end
        (ResetSpec(to_offset=0), {T0: 5, T1: 0}),  # clamped to t-0's log start
        (ResetSpec(to_current=True), {T0: 10, T1: 20}),  # t-1 never committed: the log end
        (ResetSpec(from_file={T0: 7, T1: 99}), {T0: 7, T1: 20}),
    ],
)
def test_to_offset_to_current_and_from_file(spec: ResetSpec, expected: dict) -> None:
    assert reset_plan(spec, [T0, T1], {T0: 10}, BOUNDS) == expected


def test_durations_parse_as_javas_duration_parse() -> None:
    assert parse_duration("PT2H") == timedelta(hours=2)
    assert parse_duration("P1DT30M") == timedelta(days=1, minutes=30)
    assert parse_duration("PT0.5S") == timedelta(milliseconds=500)
    assert parse_duration("pt15m") == timedelta(minutes=15)
    for bad in ("2h", "P1Y", "PT", "P", "PT2X", ""):
        with pytest.raises(AdminError, match="ISO 8601 duration"):
            parse_duration(bad)


def test_reset_file_in_both_of_kafkas_csv_shapes_and_export_round_trips() -> None:
    assert parse_reset_file("t,0,2\nt,1,6\n\nu,0,9\n", ["g"]) == {"g": {T0: 2, T1: 6, U0: 9}}
    assert parse_reset_file("g,t,0,2\nh,u,0,9\n", ["g", "h"]) == {"g": {T0: 2}, "h": {U0: 9}}
    for bad in ("t,0\n", "t,x,1\n", "g,t,0,2,9\n"):
        with pytest.raises(AdminError, match="--from-file"):
            parse_reset_file(bad, ["g"])
    plans = {"g": {T0: 2, T1: 6}, "h": {U0: 9}}
    assert export_csv({"g": plans["g"]}, with_group=False) == "t,0,2\nt,1,6\n"
    exported = export_csv(plans, with_group=True)
    assert exported == "g,t,0,2\ng,t,1,6\nh,u,0,9\n"
    assert parse_reset_file(exported, ["g", "h"]) == plans


def test_partitions_to_reset_must_exist_and_assignments_print_as_kafka_does() -> None:
    check_partitions_exist([T0, T1], {"t": 2})
    with pytest.raises(AdminError, match='The partitions "t-2,x-0" do not exist'):
        check_partitions_exist([T0, Tp("t", 2), Tp("x", 0)], {"t": 2})
    assert assignment_string([Tp("u", 0), T1, T0]) == "t:0,1;u:0"
    assert assignment_string([]) == "-"


def test_leader_epochs_show_only_beside_a_committed_offset() -> None:
    group = GroupDescription("g", "Stable", "consumer", (Member("m-1", "app", "h", (T0, T1)),))
    rows = describe_rows(group, {T0: 4}, {T0: 9, T1: 9}, {T0: 3, T1: 5})
    assert [(r.partition, r.current_offset, r.leader_epoch) for r in rows] == [(0, 4, 3), (1, None, None)]
