"""Replay of the consumer group records: the only place a consumer group changes.

The shard's replay switch (GroupCoordinatorShard) holds one entry per record type of
``CONSUMER_GROUP_REPLAY`` (consumer/group.py), each built by :func:`replayer`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from groupcoord.coordinator.core.consumer.context import ConsumerContext
from groupcoord.coordinator.core.consumer.group import ConsumerGroup, ConsumerGroupReplay


def replayer(ctx: ConsumerContext, method: ConsumerGroupReplay) -> Callable[[Any, Any], None]:
    """The coordinator shard's replay entry for one consumer group record type: find (or
    create) the group, then let ``method`` apply the record; the group metadata's tombstone
    drops the group."""
    return partial(_replay, ctx, method, method is ConsumerGroup.replay_group_metadata)


def _replay(ctx: ConsumerContext, method: ConsumerGroupReplay, deletes_group: bool, key: Any, value: Any) -> None:
    groups = ctx.data.groups
    group_id = key.group_id
    group = groups.get(group_id)
    if deletes_group and value is None:
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
