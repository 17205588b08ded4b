"""What every group type (consumer/KIP-848, classic, share/KIP-932) offers the offset and admin logic.

The same group id namespace holds every type; a group id names exactly one group. Offsets
and admin APIs work on any group through this protocol, like Apache Kafka's ``Group``.
"""

from __future__ import annotations

import enum
from typing import Protocol

from groupcoord.coordinator.core.contract import CoordinatorRecord
from groupcoord.coordinator.core.topics_image import TopicsImage


class GroupType(enum.Enum):
    CONSUMER = "consumer"
    CLASSIC = "classic"
    SHARE = "share"


class Group(Protocol):
    group_id: str

    @property
    def group_type(self) -> GroupType: ...

    def state_name(self) -> str:
        """Kafka's state name as ListGroups/DescribeGroups report it (e.g. "Stable", "Empty")."""
        ...

    def is_empty(self) -> bool: ...

    def copy(self) -> Group:
        """A copy sharing nothing a replay or a handler changes: its containers are copied, its
        members (immutable values) shared. A handler's scratch copy and a revert's copy."""
        ...

    def tombstone_records(self) -> list[CoordinatorRecord]:
        """Records deleting the group itself (Kafka's createGroupTombstoneRecords); its
        committed offsets are the offset manager's, since they outlive a change of type."""
        ...

    def validate_offset_commit(
        self,
        member_id: str,
        group_instance_id: str | None,
        generation_or_member_epoch: int,
        api_version: int,
        topic: str,
        partition: int,
        image: TopicsImage,
        transactional: bool = False,
    ) -> None:
        """Raise CoordinatorError (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, STALE_MEMBER_EPOCH,
        FENCED_INSTANCE_ID, UNSUPPORTED_VERSION...) when this commit must be rejected.
        An empty member id with generation -1 is an admin commit (allowed only when empty).
        ``image`` resolves ``topic`` to its id where the group type checks assignments."""
        ...

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None: ...

    def validate_offset_delete(self) -> None: ...

    def validate_delete_group(self) -> None:
        """Raise NON_EMPTY_GROUP when members remain."""
        ...

    def is_subscribed_to_topic(self, topic: str) -> bool: ...

    def offset_expiration_base_ms(self, commit_timestamp_ms: int) -> int | None:
        """When the retention of an offset committed at ``commit_timestamp_ms`` starts counting
        (None: it does not expire now), Kafka's ``Group.offsetExpirationCondition``."""
        ...
