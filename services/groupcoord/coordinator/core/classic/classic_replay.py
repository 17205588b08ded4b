"""Replay of the classic group records: the only place a classic group changes.

The shard's replay switch (GroupCoordinatorShard) sends each classic record here, with the
partition's state root (``data``); live processing and loading after a failover run the same
code.
"""

from __future__ import annotations

from groupcoord.coordinator.core.classic.classic_group import ClassicGroup
from groupcoord.coordinator.core.group import Group
from groupcoord.coordinator.core.state import GroupCoordinatorState
from groupcoord.records.v1 import classic_group_pb2 as rpb


def replay_metadata(
    data: GroupCoordinatorState, key: rpb.ClassicGroupMetadataKey, value: rpb.ClassicGroupMetadataValue | None
) -> None:
    groups = data.groups
    if value is None:
        groups.pop(key.group_id, None)
    else:
        _group_for_replay(groups, key.group_id).replay_metadata(value)


def replay_member(
    data: GroupCoordinatorState, key: rpb.ClassicGroupMemberKey, value: rpb.ClassicGroupMemberValue | None
) -> None:
    groups = data.groups
    if value is None:
        group = groups.get(key.group_id)
        if isinstance(group, ClassicGroup):
            group.remove_member(key.member_id)
    else:
        _group_for_replay(groups, key.group_id).replay_member(key.member_id, value)


def replay_pending_member(
    data: GroupCoordinatorState,
    key: rpb.ClassicGroupPendingMemberKey,
    value: rpb.ClassicGroupPendingMemberValue | None,
) -> None:
    groups = data.groups
    if value is None:
        group = groups.get(key.group_id)
        if isinstance(group, ClassicGroup):
            group.pending_members.pop(key.member_id, None)
    else:
        _group_for_replay(groups, key.group_id).pending_members[key.member_id] = value.session_timeout_ms


def _group_for_replay(groups: dict[str, Group], group_id: str) -> ClassicGroup:
    group = groups.get(group_id)
    if not isinstance(group, ClassicGroup):
        # A classic record for a group of another type replaces it (a conversion writes the
        # other type's tombstones first; Kafka replays the same way).
        group = ClassicGroup(group_id)
        groups[group_id] = group
    return group
