"""What every group type (consumer/KIP-848, classic, share/KIP-932, streams/KIP-1071) offers the offset and admin logic.

The same group id namespace holds every type; a group id names exactly one group. Offsets
and admin APIs work on any group through this protocol, like Apache Kafka's ``Group``.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.contract import CoordinatorRecord
from groupcoord.coordinator.core.topics_image import TopicsImage

# No authorizer in the coordinator: Kafka's "not requested" marker, or every group operation
# (READ 3, DELETE 6, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11) as a bit field: the
# authorized_operations of every describe API (the gateway's authorizer refines it).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)


class GroupType(enum.Enum):
    CONSUMER = "consumer"
    CLASSIC = "classic"
    SHARE = "share"
    STREAMS = "streams"


class OffsetCommitValidation(NamedTuple):
    """What an OffsetCommit or TxnOffsetCommit says of its committer, once per request: the
    one parameter every group type's :meth:`Group.validate_offset_commit` takes (with the
    topic and partition of each offset), so the offsets manager asks the same question of any
    group type. A named tuple: built once per commit, on the offsets' hot path."""

    member_id: str
    group_instance_id: str | None
    generation_or_member_epoch: int
    api_version: int
    # resolves a topic name to its id, where the group type checks assignments
    image: TopicsImage
    # a TxnOffsetCommit: validated as Kafka's ``validateTransactionalOffsetCommit``
    transactional: bool = False


class SimpleGroups(Protocol):
    """How the offsets side gets Kafka's "simple" group: the group an offset commit with no
    generation makes exist (a consumer without group management, the admin client). The
    classic side's (core/classic/classic_group.py ``SIMPLE_GROUPS``), handed to the offsets manager
    and its replay, so the offsets code builds no group of any type itself."""

    def new_group(self, group_id: str, now_ms: int = 0) -> Group:
        """An empty simple group, as replay makes it for an offset of a group not known yet."""
        ...

    def create(self, group_id: str, now_ms: int) -> tuple[Group, list[CoordinatorRecord]]:
        """A new empty simple group, to validate a commit against, and the records creating it
        (written before its first offset): one call, as the commit needs both."""
        ...


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

    def validate_offset_commit(self, commit: OffsetCommitValidation, topic: str, partition: int) -> None:
        """Raise CoordinatorError (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, STALE_MEMBER_EPOCH,
        FENCED_INSTANCE_ID, UNSUPPORTED_VERSION...) when ``commit``'s offset of ``topic``
        ``partition`` must be rejected. An empty member id with generation -1 is an admin
        commit (allowed only when empty)."""
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


def authorized_operations(requested: bool) -> int:
    """A describe's ``authorized_operations`` as the coordinator answers it: every group
    operation when the caller asked for them, else Kafka's "not requested" marker."""
    return GROUP_OPERATIONS if requested else AUTHORIZED_OPERATIONS_OMITTED


def not_found_message(group_id: str, group: Group | None, type_name: str) -> str:
    """Kafka's GROUP_ID_NOT_FOUND message for a group that is missing, or of another type than
    the API's (``type_name``: "consumer", "classic", "share", "streams")."""
    return f"Group {group_id} not found." if group is None else f"Group {group_id} is not a {type_name} group."


def accept_memberless_commit(commit: OffsetCommitValidation, has_members: bool) -> bool:
    """True for a commit without a member (no member id, a negative generation or epoch),
    accepted: an admin's, while the group is empty; or a TxnOffsetCommit without member
    information (a producer older than KIP-447), always, as Kafka accepts them. Raises
    UNKNOWN_MEMBER_ID for another memberless commit; False for a member's commit."""
    if commit.member_id or commit.generation_or_member_epoch >= 0:
        return False
    if has_members and not (commit.transactional and commit.group_instance_id is None):
        raise CoordinatorError(ErrorCode.unknown_member_id)
    return True


G = TypeVar("G")


def group_to_replay(groups: dict[str, Any], group_id: str, group_type: type[G], value: Any) -> G | None:
    """The group of ``group_type`` a record of that type replays into (a new one, made with
    ``group_type(group_id)``, if there is none); None for a tombstone of a group already gone.
    A group never replaces one of another type through replay (no such conversion is ever
    written): that record is a corrupted log, and raises."""
    group = groups.get(group_id)
    if value is None and not isinstance(group, group_type):
        return None
    if group is None:
        group = groups[group_id] = group_type(group_id)
    elif not isinstance(group, group_type):
        raise ValueError(f"{group_type.__name__} record for the {type(group).__name__} {group_id}")
    return group
