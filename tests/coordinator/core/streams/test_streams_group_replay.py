"""A streams group lives only in its records: whatever state the handlers build, the records
they write replay to the same group on a new leader (hypothesis draws the groups), a group's
tombstones leave nothing, and a streams record for a group of another type is a corrupted log."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.common.records import STATE_TOPIC_RECORD_TYPES, RecordTypeRegistry
from groupcoord.coordinator.core.contract import CoordinatorRecord
from groupcoord.coordinator.core.streams.reconciliation import MemberState, MemberTasksState, TasksTuple
from groupcoord.coordinator.core.streams.streams_group import (
    StreamsGroup,
    StreamsGroupMember,
    current_assignment_record,
    member_metadata_record,
    metadata_record,
    replay,
    target_assignment_member_record,
    target_assignment_metadata_record,
    topology_record,
)
from groupcoord.coordinator.core.streams.topology import (
    CopartitionGroup,
    InternalTopic,
    SubtopologySpec,
    Topology,
)

names = st.text("abcxyz-", min_size=1, max_size=6)
task_sets = st.dictionaries(st.sampled_from(["0", "1", "2"]), st.frozensets(st.integers(0, 7), min_size=1), max_size=3)
tasks_tuples = st.builds(TasksTuple, task_sets, task_sets, task_sets)
internal_topics = st.builds(
    InternalTopic, names, st.integers(0, 8), st.integers(0, 3), st.dictionaries(names, names, max_size=2)
)
subtopologies = st.builds(
    SubtopologySpec,
    names,
    st.tuples(names),
    st.tuples() | st.tuples(names),
    st.tuples() | st.tuples(internal_topics),
    st.tuples() | st.tuples(internal_topics, internal_topics),
    st.tuples() | st.tuples(st.builds(CopartitionGroup, st.tuples(st.just(0)), st.tuples())),
    st.tuples() | st.tuples(names),
)


@st.composite
def live_groups(draw: st.DrawFn) -> StreamsGroup:
    group = StreamsGroup(
        "app",
        group_epoch=draw(st.integers(0, 50)),
        metadata_hash=draw(st.integers(-(2**63), 2**63 - 1)),
        validated_topology_epoch=draw(st.integers(-1, 5)),
        assignment_configs=draw(st.dictionaries(names, names, max_size=2)),
        topology=draw(st.none() | st.builds(Topology, st.integers(0, 5), st.tuples(subtopologies))),
        assignment_epoch=draw(st.integers(0, 50)),
    )
    for i in range(draw(st.integers(0, 4))):
        member_id = f"m{i}"
        tasks = MemberTasksState(
            member_id,
            draw(names),
            draw(st.integers(0, 50)),
            draw(st.sampled_from(list(MemberState))),
            draw(tasks_tuples),
            draw(tasks_tuples),
        )
        group.members[member_id] = StreamsGroupMember(
            tasks,
            draw(st.none() | names),
            draw(st.none() | names),
            draw(names),
            draw(names),
            draw(st.integers(-1, 60000)),
            draw(st.integers(-1, 5)),
            draw(st.none() | st.tuples(names, st.integers(0, 65535))),
            draw(st.dictionaries(names, names, max_size=2)),
        )
        group.previous_member_epochs[member_id] = draw(st.integers(0, 50))
        if draw(st.booleans()):
            group.targets[member_id] = draw(tasks_tuples)
    return group


def records_of(group: StreamsGroup) -> list[CoordinatorRecord]:
    """What the handlers write for ``group``, in the order they write it."""
    out = [metadata_record(group)]
    if group.topology is not None:
        out.append(topology_record(group.group_id, group.topology))
    for member in group.members.values():
        out.append(member_metadata_record(group.group_id, member))
    out.append(target_assignment_metadata_record(group.group_id, group.assignment_epoch))
    for m, target in group.targets.items():
        out.append(target_assignment_member_record(group.group_id, m, target))
    for m, member in group.members.items():
        out.append(current_assignment_record(group.group_id, member.tasks, group.previous_member_epochs[m]))
    return out


def through_the_log(record: CoordinatorRecord) -> tuple[Any, Any]:
    """The record as a new leader reads it: serialized with its type id, and parsed back."""
    registry = RecordTypeRegistry(STATE_TOPIC_RECORD_TYPES)
    record_type = registry.by_id(registry.by_key(type(record.key)).type_id)
    key = record_type.key_type.FromString(record.key.SerializeToString())
    value = None if record.value is None else record_type.value_type.FromString(record.value.SerializeToString())
    return key, value


@settings(max_examples=200, deadline=None)
@given(live_groups())
def test_the_records_of_a_group_replay_to_the_same_group(group: StreamsGroup) -> None:
    groups: dict[str, Any] = {}
    for record in records_of(group):
        replay(groups, *through_the_log(record))
    assert groups == {"app": group}
    for record in group.tombstone_records():
        replay(groups, *through_the_log(record))
    assert groups == {}


def test_a_streams_record_for_a_group_of_another_type_is_a_corrupted_log() -> None:
    groups: dict[str, Any] = {"app": object()}
    with pytest.raises(ValueError, match="StreamsGroup record"):
        replay(groups, *through_the_log(metadata_record(StreamsGroup("app"))))


def test_a_tombstone_of_a_group_already_gone_changes_nothing() -> None:
    groups: dict[str, Any] = {}
    for record in StreamsGroup("gone").tombstone_records():
        replay(groups, record.key, None)
    assert groups == {}
