"""The classic group (JoinGroup/SyncGroup protocol): model, records and replay.

Follows Apache Kafka's ``ClassicGroup``: states Empty → PreparingRebalance → CompletingRebalance
→ Stable (and Dead, transient while a group is deleted), a leader chosen among the members, a
protocol chosen among those every member supports, static members (KIP-345) by instance id.

Difference from Kafka, on purpose: Kafka keeps a rebalance in memory and persists a whole-group
record only when a generation settles. Here a handler never mutates state, so every change is
a record and replay rebuilds exactly the live group — including a rebalance in progress.
Records are per group (metadata) and per member, so one join writes one member record.

Members are immutable values; a change replaces the member object. That lets a handler work on
a cheap scratch copy of a group (:meth:`ClassicGroup.copy` copies dicts of references) through
the very same mutators replay uses.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.classic.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_subscription
from groupcoord.coordinator.core.contract import CoordinatorRecord
from groupcoord.coordinator.core.group import GroupType, OffsetCommitValidation
from groupcoord.records.v1 import classic_group_pb2 as pb


class ClassicGroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Kafka's ClassicGroupState.validPreviousStates: what may precede each state.
_VALID_PREVIOUS: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    ClassicGroupState.EMPTY: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.PREPARING_REBALANCE: frozenset(
        {ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.EMPTY}
    ),
    ClassicGroupState.COMPLETING_REBALANCE: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.STABLE: frozenset({ClassicGroupState.COMPLETING_REBALANCE}),
    ClassicGroupState.DEAD: frozenset(
        {
            ClassicGroupState.STABLE,
            ClassicGroupState.PREPARING_REBALANCE,
            ClassicGroupState.COMPLETING_REBALANCE,
            ClassicGroupState.EMPTY,
            ClassicGroupState.DEAD,
        }
    ),
}


@dataclass(frozen=True, slots=True)
class ClassicGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata) in preference order
    assignment: bytes = b""
    joined_generation: int = -1
    is_new: bool = False

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol_name: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        return b""

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """Same protocols and metadata: a rejoin that changes nothing needs no rebalance."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    # --- records ---------------------------------------------------------------------------
    def record(self, group_id: str) -> CoordinatorRecord:
        value = pb.ClassicGroupMemberValue(
            client_id=self.client_id,
            client_host=self.client_host,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            session_timeout_ms=self.session_timeout_ms,
            protocol_type=self.protocol_type,
            protocols=[pb.ClassicMemberProtocol(name=n, metadata=m) for n, m in self.protocols],
            assignment=self.assignment,
            joined_generation=self.joined_generation,
            is_new=self.is_new,
        )
        if self.group_instance_id is not None:
            value.group_instance_id = self.group_instance_id
        return CoordinatorRecord(pb.ClassicGroupMemberKey(group_id=group_id, member_id=self.member_id), value)

    @classmethod
    def from_value(cls, member_id: str, v: pb.ClassicGroupMemberValue) -> ClassicGroupMember:
        return cls(
            member_id=member_id,
            group_instance_id=v.group_instance_id if v.HasField("group_instance_id") else None,
            client_id=v.client_id,
            client_host=v.client_host,
            rebalance_timeout_ms=v.rebalance_timeout_ms,
            session_timeout_ms=v.session_timeout_ms,
            protocol_type=v.protocol_type,
            protocols=tuple((p.name, p.metadata) for p in v.protocols),
            assignment=v.assignment,
            joined_generation=v.joined_generation,
            is_new=v.is_new,
        )


class ClassicGroup:
    """One classic group. Mutated only by replay (or on a handler's scratch copy)."""

    def __init__(self, group_id: str, created_ms: int = 0) -> None:
        self.group_id = group_id
        self.protocol_type: str = ""  # "" = none (a "simple" group that only stores offsets)
        self.generation_id = 0
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.state = ClassicGroupState.EMPTY
        self.previous_state = ClassicGroupState.EMPTY
        self.state_timestamp_ms = created_ms
        self.members: dict[str, ClassicGroupMember] = {}
        self.static_members: dict[str, str] = {}  # group_instance_id -> member_id
        self.pending_members: dict[str, int] = {}  # member id -> session timeout (MEMBER_ID_REQUIRED)
        # Derived counts kept up to date by put/remove_member, so a join in a large group does
        # not scan every member: protocol name -> members supporting it; joined_generation ->
        # members that joined for it.
        self._supported: Counter[str] = Counter()
        self._joined: Counter[int] = Counter()

    @property
    def group_type(self) -> GroupType:
        return GroupType.CLASSIC

    def copy(self) -> ClassicGroup:
        """A copy for a handler's scratch work or a revert: members are immutable, so copying
        the dicts and counters suffices."""
        g = ClassicGroup.__new__(ClassicGroup)
        g.group_id = self.group_id
        g.protocol_type = self.protocol_type
        g.generation_id = self.generation_id
        g.protocol_name = self.protocol_name
        g.leader_id = self.leader_id
        g.state = self.state
        g.previous_state = self.previous_state
        g.state_timestamp_ms = self.state_timestamp_ms
        g.members = dict(self.members)
        g.static_members = dict(self.static_members)
        g.pending_members = dict(self.pending_members)
        g._supported = self._supported.copy()
        g._joined = self._joined.copy()
        return g

    def snapshot(self) -> tuple[object, ...]:
        """Everything the group holds (its derived counts too), for replay == live comparisons."""
        return (
            self.group_id,
            self.protocol_type,
            self.generation_id,
            self.protocol_name,
            self.leader_id,
            self.state,
            self.previous_state,
            self.state_timestamp_ms,
            list(self.members.items()),
            sorted(self.static_members.items()),
            sorted(self.pending_members.items()),
            self._supported,
            self._joined,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClassicGroup) and self.snapshot() == other.snapshot()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"ClassicGroup({self.group_id!r}, {self.state.value}, gen={self.generation_id}, "
            f"leader={self.leader_id!r}, members={list(self.members)})"
        )

    # --- mutators (replay and scratch) -----------------------------------------------------
    def transition_to(self, state: ClassicGroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise ValueError(f"group {self.group_id}: illegal transition {self.state.value} -> {state.value}")
        self.previous_state = self.state
        self.state = state
        self.state_timestamp_ms = now_ms

    def put_member(self, member: ClassicGroupMember) -> None:
        """Add or replace a member (Kafka's add/updateMember): the first member leads."""
        if not self.members and not self.protocol_type:
            self.protocol_type = member.protocol_type
        old = self.members.get(member.member_id)
        if old is not None:
            self._uncount(old)
        self.members[member.member_id] = member
        self._supported.update(set(member.protocol_names()))
        self._joined[member.joined_generation] += 1
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.pop(member.member_id, None)
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove_member(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self._uncount(member)
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            # Prefer a member that already joined the rebalance being prepared.
            joined = [m for m in self.members.values() if self.is_awaiting_join(m)]
            pick = joined[0] if joined else next(iter(self.members.values()), None)
            self.leader_id = None if pick is None else pick.member_id

    def _uncount(self, member: ClassicGroupMember) -> None:
        self._supported.subtract(set(member.protocol_names()))
        self._joined[member.joined_generation] -= 1

    # --- replay -----------------------------------------------------------------------------
    def replay_metadata(self, v: pb.ClassicGroupMetadataValue) -> None:
        self.protocol_type = v.protocol_type
        self.generation_id = v.generation_id
        self.protocol_name = v.protocol_name if v.HasField("protocol_name") else None
        self.leader_id = v.leader_id if v.HasField("leader_id") else None
        self.state = ClassicGroupState(v.state)
        self.previous_state = ClassicGroupState(v.previous_state)
        self.state_timestamp_ms = v.state_timestamp_ms

    def replay_member(self, member_id: str, v: pb.ClassicGroupMemberValue | None) -> None:
        if v is None:
            self.remove_member(member_id)
            return
        member = ClassicGroupMember.from_value(member_id, v)
        old = self.members.get(member_id)
        if old is not None and old.group_instance_id != member.group_instance_id:
            self.remove_member(member_id)
        self.put_member(member)

    def tombstone_records(self) -> list[CoordinatorRecord]:
        """Records deleting the group: its members, pending members, then its metadata (its
        offsets belong to the offset manager)."""
        gid = self.group_id
        out = [
            CoordinatorRecord(pb.ClassicGroupMemberKey(group_id=gid, member_id=m), None) for m in self.members
        ]
        out += [
            CoordinatorRecord(pb.ClassicGroupPendingMemberKey(group_id=gid, member_id=m), None)
            for m in self.pending_members
        ]
        out.append(CoordinatorRecord(pb.ClassicGroupMetadataKey(group_id=gid), None))
        return out

    def metadata_record(self) -> CoordinatorRecord:
        v = pb.ClassicGroupMetadataValue(
            protocol_type=self.protocol_type,
            generation_id=self.generation_id,
            state=self.state.value,
            previous_state=self.previous_state.value,
            state_timestamp_ms=self.state_timestamp_ms,
        )
        if self.protocol_name is not None:
            v.protocol_name = self.protocol_name
        if self.leader_id is not None:
            v.leader_id = self.leader_id
        return CoordinatorRecord(pb.ClassicGroupMetadataKey(group_id=self.group_id), v)

    # --- queries ----------------------------------------------------------------------------
    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_awaiting_join(self, member: ClassicGroupMember) -> bool:
        """Sent JoinGroup for the rebalance being prepared and waits for its answer."""
        return (
            self.state is ClassicGroupState.PREPARING_REBALANCE
            and member.joined_generation == self.generation_id + 1
        )

    def num_awaiting_join(self) -> int:
        if self.state is not ClassicGroupState.PREPARING_REBALANCE:
            return 0
        return self._joined[self.generation_id + 1]

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and self.num_awaiting_join() == len(self.members)

    def not_yet_rejoined(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if not self.is_awaiting_join(m)]

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of the members: how long the join phase may last."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def candidate_protocols(self, members: list[ClassicGroupMember] | None = None) -> set[str]:
        ms = list(self.members.values()) if members is None else members
        if not ms:
            return set()
        common = set(ms[0].protocol_names())
        for m in ms[1:]:
            common &= set(m.protocol_names())
        return common

    def supports_protocols(self, protocol_type: str, protocol_names: list[str]) -> bool:
        """Kafka's rule: an empty group takes any non-empty protocol list; otherwise the type
        must match and at least one protocol must be supported by every member."""
        if self.state is ClassicGroupState.EMPTY or not self.members:
            return bool(protocol_type) and bool(protocol_names)
        if protocol_type != self.protocol_type:
            return False
        return any(self._supported[n] == len(self.members) for n in protocol_names)

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that every member supports; the
        most voted wins (ties: the earliest in the first member's preference order)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id}: no protocol supported by every member")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        first = next(iter(self.members.values()))
        order = {n: i for i, n in enumerate(first.protocol_names())}
        return max(votes, key=lambda n: (votes[n], -order.get(n, len(order))))

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, when the protocol type is "consumer" and the
        selected protocol's metadata parses; None when unknown (Kafka's Optional.empty)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics.update(decode_subscription(m.metadata(self.protocol_name)).topics)
        except Exception:
            return None
        return topics

    # --- the Group protocol (offsets and admin) ---------------------------------------------
    def state_name(self) -> str:
        return self.state.value

    def is_empty(self) -> bool:
        return self.state is ClassicGroupState.EMPTY

    def validate_member(self, member_id: str, group_instance_id: str | None) -> None:
        """UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID, as Kafka's ClassicGroup.validateMember."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                raise CoordinatorError(ErrorCode.unknown_member_id)
            if existing != member_id:
                raise CoordinatorError(ErrorCode.fenced_instance_id)
        elif member_id not in self.members:
            raise CoordinatorError(ErrorCode.unknown_member_id)

    def validate_offset_commit(self, commit: OffsetCommitValidation, topic: str, partition: int) -> None:
        """Kafka's ClassicGroup.validateOffsetCommit. A transactional commit (TxnOffsetCommit)
        without member information comes from a producer older than KIP-447 and is accepted in
        any state, and it is not refused while the group completes a rebalance."""
        member_id, group_instance_id = commit.member_id, commit.group_instance_id
        generation_or_member_epoch, transactional = commit.generation_or_member_epoch, commit.transactional
        if self.state is ClassicGroupState.DEAD:
            raise CoordinatorError(ErrorCode.coordinator_not_available)
        if generation_or_member_epoch < 0 and self.state is ClassicGroupState.EMPTY:
            # The admin client, or a consumer without group management: fine while empty.
            return
        if generation_or_member_epoch >= 0 or member_id or group_instance_id is not None:
            self.validate_member(member_id, group_instance_id)
            if generation_or_member_epoch != self.generation_id:
                raise CoordinatorError(ErrorCode.illegal_generation)
        elif not transactional and self.state is not ClassicGroupState.EMPTY:
            raise CoordinatorError(ErrorCode.unknown_member_id)
        if not transactional and self.state is ClassicGroupState.COMPLETING_REBALANCE:
            # The member has the new generation from its JoinGroup answer but no assignment yet.
            raise CoordinatorError(ErrorCode.rebalance_in_progress)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        # Classic members fetch without member validation (only consumer-protocol members send
        # an epoch); Kafka checks nothing here either.
        if self.state is ClassicGroupState.DEAD:
            raise CoordinatorError(ErrorCode.group_id_not_found)

    def validate_offset_delete(self) -> None:
        """Kafka: offsets of a group with members can be deleted only when it uses the
        consumer protocol (then per topic, for topics it does not subscribe to)."""
        if self.state is ClassicGroupState.DEAD:
            raise CoordinatorError(ErrorCode.group_id_not_found)
        if self.state is not ClassicGroupState.EMPTY and self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise CoordinatorError(ErrorCode.non_empty_group)

    def validate_delete_group(self) -> None:
        if self.state is ClassicGroupState.DEAD:
            raise CoordinatorError(ErrorCode.group_id_not_found)
        if self.state is not ClassicGroupState.EMPTY:
            raise CoordinatorError(ErrorCode.non_empty_group)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        topics = self.subscribed_topics()
        return topics is not None and topic in topics

    def offset_expiration_base_ms(self, commit_timestamp_ms: int) -> int | None:
        """When an offset's retention starts counting (None = the offset does not expire now).

        Kafka's ClassicGroup.offsetExpirationCondition: an empty group expires from the time it
        became empty; a stable consumer group expires offsets of topics it no longer
        subscribes to from their commit time; a simple group (no protocol type) from commit
        time; otherwise nothing expires.
        """
        if not self.protocol_type:
            return commit_timestamp_ms
        if self.state is ClassicGroupState.EMPTY:
            return self.state_timestamp_ms
        if self.state is ClassicGroupState.STABLE and self.subscribed_topics() is not None:
            return commit_timestamp_ms
        return None


def with_assignment(member: ClassicGroupMember, assignment: bytes) -> ClassicGroupMember:
    return replace(member, assignment=assignment)


class SimpleClassicGroups:
    """Kafka's simple group is a classic group without protocol type: the
    :class:`~groupcoord.coordinator.core.group.SimpleGroups` the shard hands the offsets
    manager and the offsets' replay."""

    @staticmethod
    def new_group(group_id: str, now_ms: int = 0) -> ClassicGroup:
        return ClassicGroup(group_id, now_ms)

    @staticmethod
    def create(group_id: str, now_ms: int) -> tuple[ClassicGroup, list[CoordinatorRecord]]:
        group = ClassicGroup(group_id, now_ms)
        return group, [group.metadata_record()]


SIMPLE_GROUPS = SimpleClassicGroups()


def simple_group_records(group_id: str, now_ms: int) -> list[CoordinatorRecord]:
    """Records creating an empty classic group without protocol type (a "simple" group that
    only stores offsets: commits with generation -1 to a group that does not exist)."""
    return SIMPLE_GROUPS.create(group_id, now_ms)[1]
