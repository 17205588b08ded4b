"""Replay of the consumer group records: the only place a consumer group changes.

The shard's replay switch (GroupCoordinatorShard) holds one entry per record type of
``CONSUMER_GROUP_REPLAY`` (consumer/consumer_group.py), each :func:`replay` with that type's method.
"""

from __future__ import annotations

from typing import Any

from groupcoord.coordinator.core.consumer.consumer_group import ConsumerGroup, ConsumerGroupReplay
from groupcoord.coordinator.core.state import GroupCoordinatorState


def replay(data: GroupCoordinatorState, method: ConsumerGroupReplay, key: Any, value: Any) -> None:
    """One consumer group record: find (or create) the group, then let ``method`` apply the
    record; the group metadata's tombstone drops the group."""
    groups = data.groups
    group_id = key.group_id
    group = groups.get(group_id)
    if value is None and method is ConsumerGroup.replay_group_metadata:
        if isinstance(group, ConsumerGroup):
            del groups[group_id]
        return
    if not isinstance(group, ConsumerGroup):
        if group is not None and not group.is_empty():
            raise ValueError(f"consumer group record for the non-empty {group.group_type.value} group {group_id}")
        if value is None:
            return  # tombstone of something already gone
        group = ConsumerGroup(group_id)
        groups[group_id] = group
    method(group, key, value)
