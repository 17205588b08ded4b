"""Topic metadata changes reaching the consumer groups (Kafka's onNewMetadataImage).

The runtime hands the shard a new topics image; the groups whose subscribed topics changed
(created, deleted, recreated with a new id, partitions added, racks changed) or whose regexes
now match other topics get a group epoch bump, so the assignor runs again.
"""

from __future__ import annotations

from groupcoord.coordinator.core.consumer.assignment import subscribed_topics
from groupcoord.coordinator.core.consumer.consumer_group import (
    ConsumerGroup,
    group_metadata_record,
    regex_record,
)
from groupcoord.coordinator.core.consumer.regex_subscriptions import resolve
from groupcoord.coordinator.core.contract import CoordinatorRecord, CoordinatorResult
from groupcoord.coordinator.core.group import Group
from groupcoord.coordinator.core.topics_image import TopicsImage


def on_metadata_update(groups: dict[str, Group], image: TopicsImage, now_ms: int) -> CoordinatorResult[None]:
    """Records for the groups the new image affects: regexes re-resolved, and a group epoch
    bump where the subscribed topics changed (created, deleted, recreated with a new id,
    partitions added, racks changed) or a regex now matches other topics."""
    records: list[CoordinatorRecord] = []
    for group in list(groups.values()):
        if not isinstance(group, ConsumerGroup):
            continue
        resolved = {k: v.topics for k, v in group.resolved_regexes.items()}
        regex_changed = False
        for regex in group.regex_count:
            topics = resolve(regex, image)
            if resolved.get(regex) != topics:
                resolved[regex] = topics
                records.append(regex_record(group.group_id, regex, topics, now_ms))
                regex_changed = True
        names, _ = subscribed_topics(group, resolved)
        metadata_hash = image.metadata_hash(names)
        if regex_changed or metadata_hash != group.metadata_hash:
            records.append(group_metadata_record(group.group_id, group.group_epoch + 1, metadata_hash))
    return CoordinatorResult(records=records)
