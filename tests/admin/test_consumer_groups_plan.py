"""The decisions of ``groupcoord groups``, as Kafka's ConsumerGroupCommand makes them: which
rows describe shows, where reset-offsets moves each partition, when a reset is refused."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from aiokafka.structs import TopicPartition as Tp

from groupcoord.admin.consumer_groups import (
    AdminError,
    GroupDescription,
    Member,
    OffsetBounds,
    ResetSpec,
    check_inactive,
    describe_rows,
    parse_datetime,
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
