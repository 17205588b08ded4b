"""What every classic handler works on, and the scratch copy a handler changes.

The classic half of Apache Kafka's ``GroupMetadataManager`` is split by concept (join.py,
sync.py, membership.py, rebalance.py, replay.py); each is plain functions taking the
:class:`ClassicContext` of the partition, as Kafka's manager helpers take the manager's state.

Sans-IO, as every core: a handler copies the group into a :class:`GroupChange`, applies
Kafka's logic to that scratch copy through the same mutators replay uses, and returns the
records describing the change. Live state moves only when the runtime replays them (the rule
every group type follows, and why the classic one copies its whole group: core/state.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.classic.classic_group import (
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
)
from groupcoord.coordinator.core.classic.waiters import Waiters, WaitKey
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import CoordinatorRecord, CoordinatorResult, TimerIntent
from groupcoord.coordinator.core.group import Group
from groupcoord.coordinator.core.state import ActsOnState, GroupCoordinatorState
from groupcoord.records.v1 import classic_group_pb2 as rpb
from groupcoord.rpc.v1 import classic_group_pb2 as pb


class ClassicContext(ActsOnState):
    """The classic groups of one state-topic partition and what their handlers need.

    ``groups`` is the partition state's map of every group (classic and consumer groups share
    it: a group id names one group); ``waiters`` the parked JoinGroup/SyncGroup requests
    (connections, not state: core/state.py leaves them out);
    ``new_uuid()`` where new member ids come from (injected, so a test replays exactly what a
    call returned); ``join_other_group(group, request, now_ms)`` serves a JoinGroup to a non-empty group of
    another type (a classic member inside a consumer group, online migration).
    """

    def __init__(
        self,
        data: GroupCoordinatorState,
        config: GroupConfig,
        join_other_group: Callable[[Group, pb.JoinGroupRequest, int], CoordinatorResult[pb.JoinGroupResponse]]
        | None = None,
        new_uuid: Callable[[], uuid.UUID] = uuid.uuid4,
    ) -> None:
        self.data = data
        self.config = config
        self.waiters = Waiters()
        self.join_other_group = join_other_group
        self.new_uuid = new_uuid

    def classic_group(self, group_id: str) -> ClassicGroup | None:
        """The classic group of that id, None if there is none; INCONSISTENT_GROUP_PROTOCOL if
        the id names a group of another type."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if not isinstance(group, ClassicGroup):
            # A consumer (KIP-848) group of that name: classic requests do not apply to it.
            raise CoordinatorError(
                ErrorCode.inconsistent_group_protocol, f"{group_id} is not a classic group"
            )
        return group


class GroupChange:
    """A handler's scratch copy of one group plus the records, answers and timers it produced.

    Session timers are collected as member ids (``reschedule``, ``cancel``) because the
    members they concern may still leave within the same change; rebalance.finish turns them
    into intents at the end. The other timer intents are in ``timers``, in the order Kafka's
    code would have scheduled them.
    """

    def __init__(self, group_id: str, live: ClassicGroup | None, now_ms: int) -> None:
        self.group = live.copy() if live is not None else ClassicGroup(group_id, now_ms)
        self.created = live is None
        self._original = None if live is None else live.metadata_record().value
        self.now_ms = now_ms
        # Tombstones of an empty group of another type this classic group replaces.
        self.replaced: list[CoordinatorRecord] = []
        self.records: list[CoordinatorRecord] = []
        self.answers: list[tuple[WaitKey, Any]] = []
        self.reschedule: list[tuple[str, int]] = []  # (member id, delay) session timers to (re)arm
        self.cancel: list[str] = []  # member ids whose session timers stop
        self.timers: list[TimerIntent] = []  # the other timer intents, in order

    # Writes go to the scratch copy and the record list together.
    def put_member(self, member: ClassicGroupMember) -> None:
        self.group.put_member(member)
        self.records.append(member.record(self.group.group_id))

    def remove_member(self, member_id: str) -> None:
        self.group.remove_member(member_id)
        self.records.append(
            CoordinatorRecord(
                rpb.ClassicGroupMemberKey(group_id=self.group.group_id, member_id=member_id), None
            )
        )
        self.cancel.append(member_id)

    def add_pending(self, member_id: str, session_timeout_ms: int) -> None:
        self.group.pending_members[member_id] = session_timeout_ms
        self.records.append(
            CoordinatorRecord(
                rpb.ClassicGroupPendingMemberKey(group_id=self.group.group_id, member_id=member_id),
                rpb.ClassicGroupPendingMemberValue(session_timeout_ms=session_timeout_ms),
            )
        )

    def remove_pending(self, member_id: str) -> None:
        if self.group.pending_members.pop(member_id, None) is not None:
            self.records.append(
                CoordinatorRecord(
                    rpb.ClassicGroupPendingMemberKey(group_id=self.group.group_id, member_id=member_id), None
                )
            )

    def transition_to(self, state: ClassicGroupState) -> None:
        self.group.transition_to(state, self.now_ms)

    def answer(self, kind: str, member_id: str, response: Any) -> None:
        self.answers.append(((kind, self.group.group_id, member_id), response))

    def all_records(self) -> list[CoordinatorRecord]:
        """The member records, then the group metadata if anything group-level changed."""
        meta = self.group.metadata_record()
        if self.created or meta.value != self._original:
            return [*self.replaced, *self.records, meta]
        return list(self.records)
