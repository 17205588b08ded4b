"""Computing a group's target assignment (Kafka's TargetAssignmentBuilder).

Runs the group's assignor over every member's subscription (topic names and the resolved
regex, as topic ids of the current image), rack and current target (for stickiness), and
returns the records of the new target: one record per member whose target changed, then the
target metadata with the new assignment epoch. The result is deterministic, so the same
inputs always give the same target.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from groupcoord.coordinator.core.assignors.api import GroupSpec, MemberSpec, PartitionAssignor
from groupcoord.coordinator.core.consumer.group import (
    ConsumerGroup,
    ConsumerGroupMember,
    target_member_record,
    target_metadata_record,
)
from groupcoord.coordinator.core.consumer.regex_subscriptions import resolve
from groupcoord.coordinator.core.contract import CoordinatorRecord
from groupcoord.coordinator.core.topics_image import TopicsImage


@dataclass(frozen=True, slots=True)
class TargetAssignment:
    epoch: int
    by_member: dict[str, dict[bytes, frozenset[int]]]
    records: list[CoordinatorRecord]


def compute_target_assignment(
    group: ConsumerGroup,
    members: Mapping[str, ConsumerGroupMember],
    current_target: Mapping[str, Mapping[bytes, frozenset[int]]],
    resolved_regexes: Mapping[str, frozenset[str]],
    assignor: PartitionAssignor,
    image: TopicsImage,
    epoch: int,
    now_ms: int,
) -> TargetAssignment:
    """The target for ``members`` (the group's members as they will be after this request)."""
    ids_cache: dict[str, bytes | None] = {}
    # Members mostly share subscriptions: one frozenset per distinct subscription (which also
    # makes the assignor's homogeneity check an identity comparison).
    by_subscription: dict[tuple[tuple[str, ...], str | None], frozenset[bytes]] = {}

    def topic_ids(member: ConsumerGroupMember) -> frozenset[bytes]:
        key = (member.subscribed_topic_names, member.subscribed_topic_regex)
        cached = by_subscription.get(key)
        if cached is None:
            cached = by_subscription[key] = _topic_ids(member)
        return cached

    def _topic_ids(member: ConsumerGroupMember) -> frozenset[bytes]:
        names = set(member.subscribed_topic_names)
        regex = member.subscribed_topic_regex
        if regex is not None:
            resolved = resolved_regexes.get(regex)
            names |= resolved if resolved is not None else resolve(regex, image)
        out = set()
        for name in names:
            tid = ids_cache.get(name, b"")
            if tid == b"":
                tid = ids_cache[name] = image.topic_id(name)
            if tid is not None:
                out.add(tid)
        return frozenset(out)

    specs = {
        mid: MemberSpec(m.rack_id, topic_ids(m), current_target.get(mid, {})) for mid, m in members.items()
    }
    result = assignor.assign(GroupSpec(specs), image)
    by_member: dict[str, dict[bytes, frozenset[int]]] = {}
    records: list[CoordinatorRecord] = []
    for mid in members:
        new = {tid: frozenset(parts) for tid, parts in result.get(mid, {}).items() if parts}
        by_member[mid] = new
        if group.target.get(mid) != new:
            records.append(target_member_record(group.group_id, mid, new))
    records.append(target_metadata_record(group.group_id, epoch, now_ms))
    return TargetAssignment(epoch, by_member, records)
