"""Building a consumer group from a classic group's members (the consumer side of online upgrade).

Kafka's ``ConsumerGroup.fromClassicGroup`` + ``createConsumerGroupRecords``: the classic
generation becomes the group epoch and the assignment epoch, every classic member becomes a
consumer group member that keeps its classic protocol metadata (so the group can still answer
its JoinGroup/SyncGroup/Heartbeat and convert back), its current assignment becomes both its
target and its current assignment at that epoch, and the member is Stable. Nothing is
recomputed: the group continues exactly where the classic group was, and the next change
bumps the epoch as usual.

The classic side (when an upgrade may happen, what each member brings, retiring the classic
group) is ``migration/online_migration.py``; members come as :class:`MigratingMember` values,
which both directions of a conversion use.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from groupcoord.coordinator.core.consumer.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
    current_assignment_record,
    group_metadata_record,
    member_metadata_record,
    target_member_record,
    target_metadata_record,
)
from groupcoord.coordinator.core.contract import CoordinatorRecord
from groupcoord.coordinator.core.topics_image import TopicsImage


@dataclass(frozen=True, slots=True)
class MigratingMember:
    """One member as both protocols need it across a conversion.

    ``protocols`` are the classic (name, metadata) pairs the member supports — a consumer group
    keeps them for its classic members so it can answer their JoinGroup and convert back
    (``ConsumerGroupMember.classic_member_metadata.supported_protocols`` in consumer/consumer_group.py,
    with ``session_timeout_ms``). ``assigned`` is the member's current assignment by topic
    *name* (the embedded protocol's form); the consumer group maps names to topic ids through
    its topics image.
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    subscribed_topics: tuple[str, ...]
    assigned: dict[str, list[int]]
    rack_id: str | None = None


M = TypeVar("M")


def carry_over(source: object, target: type[M], **changes: Any) -> M:
    """A ``target`` member built from the dataclass fields ``source`` has of the same name, then
    ``changes``: how a member moves between the classic member and the :class:`MigratingMember`
    forms, both ways, without a list of their common fields to keep in step."""
    names = {f.name for f in fields(target)}  # type: ignore[arg-type]
    values = {f.name: getattr(source, f.name) for f in fields(source) if f.name in names}  # type: ignore[arg-type]
    values.update(changes)
    return target(**values)


def consumer_member_from_classic(
    member: MigratingMember, epoch: int, image: TopicsImage
) -> ConsumerGroupMember:
    """The consumer group member for a classic member at ``epoch`` (topics the image does not
    know are dropped from its assignment: they cannot be described by id)."""
    assigned: dict[bytes, dict[int, int]] = {}
    for name, parts in member.assigned.items():
        tid = image.topic_id(name)
        if tid is not None and parts:
            assigned[tid] = dict.fromkeys(parts, epoch)
    return ConsumerGroupMember(
        member_id=member.member_id,
        instance_id=member.group_instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(set(member.subscribed_topics))),
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        classic_member_metadata=ClassicMemberMetadata(member.session_timeout_ms, tuple(member.protocols)),
        member_epoch=epoch,
        previous_member_epoch=epoch,
        state=MemberState.STABLE,
        assigned=assigned,
    )


def consumer_group_records_from_classic(
    group_id: str, epoch: int, members: Iterable[MigratingMember], image: TopicsImage, now_ms: int
) -> list[CoordinatorRecord]:
    """Records creating the consumer group (to follow the classic group's tombstones)."""
    converted = [consumer_member_from_classic(m, epoch, image) for m in members]
    names = {n for m in converted for n in m.subscribed_topic_names}
    records = [member_metadata_record(group_id, m) for m in converted]
    records.append(group_metadata_record(group_id, epoch, image.metadata_hash(names)))
    records += [target_member_record(group_id, m.member_id, m.assigned_partitions()) for m in converted]
    records.append(target_metadata_record(group_id, epoch, now_ms))
    records += [current_assignment_record(group_id, m) for m in converted]
    return records
