"""The KIP-932 share group: model, records and replay.

Like a KIP-848 consumer group (``consumer/consumer_group.py``), with what share groups leave out:

* the **group epoch** is bumped when what the assignor sees changes (a member joins, leaves or
  changes its subscription; the subscribed topics' metadata changes);
* the **assignment epoch** is the group epoch the target assignment was computed for (by the
  ``simple`` assignor);
* a member's **member epoch** moves to the assignment epoch at its next heartbeat, and it is
  given its target assignment at once: several members may read one partition, so there is no
  revocation to wait for and no reconciliation state.

State changes only by replaying records (``proto/groupcoord/records/v1/share_group.proto``).
Members are immutable values: a change replaces the member.

A share group is a :class:`~groupcoord.coordinator.core.group.Group` like the others, so
ListGroups, DeleteGroups and the offset APIs reach it, but it commits no offsets: OffsetCommit
and OffsetDelete on it are GROUP_ID_NOT_FOUND, "Group x is not a consumer group.", as Kafka's
``ShareGroup`` answers, and OffsetFetch finds nothing (its delivery progress is the
share-partitions' state).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.contract import CoordinatorRecord
from groupcoord.coordinator.core.group import GroupType, OffsetCommitValidation, group_to_replay
from groupcoord.records.v1 import consumer_group_pb2 as consumer_pb
from groupcoord.records.v1 import share_group_pb2 as pb

# Special member epochs in ShareGroupHeartbeat.
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1

# topic id -> partitions
Partitions = Mapping[bytes, frozenset[int]]


class ShareGroupState(enum.Enum):
    """Kafka's share group states (``ShareGroup.ShareGroupState``)."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assigned: Partitions = field(default_factory=dict)


def _partitions_out(partitions: Partitions) -> list[consumer_pb.TopicPartitions]:
    return [
        consumer_pb.TopicPartitions(topic_id=t, partitions=sorted(ps))
        for t, ps in sorted(partitions.items())
        if ps
    ]


def _partitions_in(entries: Any) -> dict[bytes, frozenset[int]]:
    return {e.topic_id: frozenset(e.partitions) for e in entries if e.partitions}


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)  # member id -> target assignment

    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def copy(self) -> ShareGroup:
        return replace(self, members=dict(self.members), target=dict(self.target))

    # --- the Group protocol (core/group.py) --------------------------------------------------
    @property
    def group_type(self) -> GroupType:
        return GroupType.SHARE

    def state_name(self) -> str:
        return self.state().value

    def is_empty(self) -> bool:
        return not self.members

    def _not_a_consumer_group(self) -> CoordinatorError:
        return CoordinatorError(
            ErrorCode.group_id_not_found, f"Group {self.group_id} is not a consumer group."
        )

    def validate_offset_commit(self, commit: OffsetCommitValidation, topic: str, partition: int) -> None:
        raise self._not_a_consumer_group()

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """Nothing to refuse: Kafka's offset fetch takes a group that is not a consumer group
        for one without offsets (no error, no topics), and a share group has none."""

    def validate_offset_delete(self) -> None:
        raise self._not_a_consumer_group()

    def validate_delete_group(self) -> None:
        if self.members:
            raise CoordinatorError(ErrorCode.non_empty_group)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return any(topic in m.subscribed_topic_names for m in self.members.values())

    def offset_expiration_base_ms(self, commit_timestamp_ms: int) -> int | None:
        return None  # a share group has no committed offsets to expire

    def subscribed_topic_names(self, members: Mapping[str, ShareGroupMember] | None = None) -> set[str]:
        return {
            t
            for m in (self.members if members is None else members).values()
            for t in m.subscribed_topic_names
        }

    # --- records ---------------------------------------------------------------------------
    def metadata_record(self, epoch: int, metadata_hash: int) -> CoordinatorRecord:
        return CoordinatorRecord(
            pb.ShareGroupMetadataKey(group_id=self.group_id),
            pb.ShareGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash),
        )

    def member_record(self, member: ShareGroupMember) -> CoordinatorRecord:
        value = pb.ShareGroupMemberValue(
            member_epoch=member.member_epoch,
            previous_member_epoch=member.previous_member_epoch,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=sorted(member.subscribed_topic_names),
            assigned=_partitions_out(member.assigned),
        )
        if member.rack_id is not None:
            value.rack_id = member.rack_id
        return CoordinatorRecord(
            pb.ShareGroupMemberKey(group_id=self.group_id, member_id=member.member_id), value
        )

    def target_metadata_record(self, assignment_epoch: int) -> CoordinatorRecord:
        return CoordinatorRecord(
            pb.ShareGroupTargetAssignmentMetadataKey(group_id=self.group_id),
            pb.ShareGroupTargetAssignmentMetadataValue(assignment_epoch=assignment_epoch),
        )

    def target_member_record(self, member_id: str, partitions: Partitions) -> CoordinatorRecord:
        return CoordinatorRecord(
            pb.ShareGroupTargetAssignmentMemberKey(group_id=self.group_id, member_id=member_id),
            pb.ShareGroupTargetAssignmentMemberValue(partitions=_partitions_out(partitions)),
        )

    def member_tombstones(self, member_id: str) -> list[CoordinatorRecord]:
        """A member leaving: its target assignment, then itself (Kafka's order)."""
        return [
            CoordinatorRecord(
                pb.ShareGroupTargetAssignmentMemberKey(group_id=self.group_id, member_id=member_id), None
            ),
            CoordinatorRecord(pb.ShareGroupMemberKey(group_id=self.group_id, member_id=member_id), None),
        ]

    def tombstone_records(self) -> list[CoordinatorRecord]:
        """Deleting the group: its members' records (none once empty, as DeleteGroups requires),
        the target metadata, then the group (Kafka's ``createGroupTombstoneRecords`` order)."""
        members = [r for member_id in sorted(self.members) for r in self.member_tombstones(member_id)]
        return [
            *members,
            CoordinatorRecord(pb.ShareGroupTargetAssignmentMetadataKey(group_id=self.group_id), None),
            CoordinatorRecord(pb.ShareGroupMetadataKey(group_id=self.group_id), None),
        ]


def replay(groups: dict[str, Any], key: Any, value: Any) -> None:
    """Apply one share-group record to ``groups`` (group id -> group of any type): the only way
    share groups change, live and after a takeover alike. A share group never replaces a group
    of another type (no conversion exists): such a record is a corrupted log, and raises."""
    group_id = key.group_id
    group = group_to_replay(groups, group_id, ShareGroup, value)
    if group is None:
        return  # a tombstone of a group already gone
    if isinstance(key, pb.ShareGroupMetadataKey):
        if value is None:
            del groups[group_id]
        else:
            group.group_epoch, group.metadata_hash = value.epoch, value.metadata_hash
    elif isinstance(key, pb.ShareGroupMemberKey):
        if value is None:
            group.members.pop(key.member_id, None)
        else:
            group.members[key.member_id] = ShareGroupMember(
                key.member_id,
                value.member_epoch,
                value.previous_member_epoch,
                value.rack_id if value.HasField("rack_id") else None,
                value.client_id,
                value.client_host,
                tuple(value.subscribed_topic_names),
                _partitions_in(value.assigned),
            )
    elif isinstance(key, pb.ShareGroupTargetAssignmentMetadataKey):
        group.assignment_epoch = 0 if value is None else value.assignment_epoch
    elif isinstance(key, pb.ShareGroupTargetAssignmentMemberKey):
        if value is None:
            group.target.pop(key.member_id, None)
        else:
            group.target[key.member_id] = _partitions_in(value.partitions)
    else:
        raise TypeError(f"not a share-group record: {type(key).__name__}")
