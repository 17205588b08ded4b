"""The KIP-848 consumer group: model, records and replay.

Follows Apache Kafka's ``ConsumerGroup`` / ``ConsumerGroupMember``:

* the **group epoch** is bumped whenever something an assignor sees changes (a member joins,
  leaves or changes its subscription, rack or assignor; the subscribed topics' metadata
  changes);
* the **assignment epoch** is the group epoch the target assignment was computed for;
* each member's **member epoch** reaches the assignment epoch once the member has reconciled
  (revoked what it must give up); until then it is in a reconciliation state: ``UNREVOKED_PARTITIONS``
  (waiting for the client to revoke) or ``UNRELEASED_PARTITIONS`` (waiting for another member
  to release a partition it is to get).

State changes only by replaying records (type ids 0-5 in ``groupcoord.common.records``,
``proto/groupcoord/records/v1/consumer_group.proto``). Members are immutable values: a change replaces the member object,
so handlers compute with them freely without mutating the group.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message
from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.contract import CoordinatorRecord
from groupcoord.coordinator.core.group import GroupType, OffsetCommitValidation, accept_memberless_commit
from groupcoord.records.v1 import consumer_group_pb2 as pb

# Special member epochs in ConsumerGroupHeartbeat.
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

# OffsetCommit below v9 cannot carry a member epoch (Kafka: UNSUPPORTED_VERSION for them).
_MIN_OFFSET_COMMIT_VERSION = 9

# topic id -> partitions
Partitions = Mapping[bytes, frozenset[int]]


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.IntEnum):
    """Kafka's MemberState values (persisted in the current assignment record)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member speaking the classic protocol inside a consumer group keeps (Kafka's
    ConsumerGroupMember.classicMemberMetadata): for online migration."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    classic_member_metadata: ClassicMemberMetadata | None = None
    # current assignment and reconciliation state
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    # topic id -> partition -> member epoch at which the partition was assigned (KIP-1251)
    assigned: Mapping[bytes, Mapping[int, int]] = field(default_factory=dict)
    # the same for the partitions it still has to give back: a commit that raced the epoch
    # bump which took them away is still its to make (Kafka's createAssignmentEpochValidator)
    pending_revocation: Mapping[bytes, Mapping[int, int]] = field(default_factory=dict)

    def assignment_epoch(self, topic_id: bytes, partition: int) -> int | None:
        """The epoch at which the member got ``partition``, if it holds it, assigned or pending
        revocation (Kafka's getAssignmentEpoch), else None."""
        epoch = self.assigned.get(topic_id, {}).get(partition)
        return epoch if epoch is not None else self.pending_revocation.get(topic_id, {}).get(partition)

    def assigned_partitions(self) -> dict[bytes, frozenset[int]]:
        return {tid: frozenset(parts) for tid, parts in self.assigned.items() if parts}

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_member_metadata is not None

    # --- records ---------------------------------------------------------------------------
    def metadata_value(self) -> pb.ConsumerGroupMemberMetadataValue:
        v = pb.ConsumerGroupMemberMetadataValue(
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=sorted(self.subscribed_topic_names),
            rebalance_timeout_ms=self.rebalance_timeout_ms,
        )
        if self.instance_id is not None:
            v.instance_id = self.instance_id
        if self.rack_id is not None:
            v.rack_id = self.rack_id
        if self.subscribed_topic_regex is not None:
            v.subscribed_topic_regex = self.subscribed_topic_regex
        if self.server_assignor is not None:
            v.server_assignor = self.server_assignor
        if self.classic_member_metadata is not None:
            c = self.classic_member_metadata
            v.classic_member_metadata.session_timeout_ms = c.session_timeout_ms
            for name, metadata in c.supported_protocols:
                v.classic_member_metadata.supported_protocols.add(name=name, metadata=metadata)
        return v

    def assignment_value(self) -> pb.ConsumerGroupCurrentMemberAssignmentValue:
        v = pb.ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=self.member_epoch,
            previous_member_epoch=self.previous_member_epoch,
            state=int(self.state),
        )
        _add_partition_epochs(v.assigned_partitions, self.assigned)
        _add_partition_epochs(v.partitions_pending_revocation, self.pending_revocation)
        return v

    def with_metadata(self, v: pb.ConsumerGroupMemberMetadataValue) -> ConsumerGroupMember:
        classic = None
        if v.HasField("classic_member_metadata"):
            c = v.classic_member_metadata
            classic = ClassicMemberMetadata(
                c.session_timeout_ms, tuple((p.name, p.metadata) for p in c.supported_protocols)
            )
        return replace_member(
            self,
            instance_id=v.instance_id if v.HasField("instance_id") else None,
            rack_id=v.rack_id if v.HasField("rack_id") else None,
            client_id=v.client_id,
            client_host=v.client_host,
            subscribed_topic_names=tuple(v.subscribed_topic_names),
            subscribed_topic_regex=v.subscribed_topic_regex if v.HasField("subscribed_topic_regex") else None,
            server_assignor=v.server_assignor if v.HasField("server_assignor") else None,
            rebalance_timeout_ms=v.rebalance_timeout_ms,
            classic_member_metadata=classic,
        )

    def with_assignment(self, v: pb.ConsumerGroupCurrentMemberAssignmentValue) -> ConsumerGroupMember:
        return replace_member(
            self,
            member_epoch=v.member_epoch,
            previous_member_epoch=v.previous_member_epoch,
            state=MemberState(v.state),
            assigned={
                tp.topic_id: dict(zip(tp.partitions, tp.assignment_epochs, strict=True))
                for tp in v.assigned_partitions
            },
            pending_revocation={
                tp.topic_id: _epochs_or(tp, v.member_epoch) for tp in v.partitions_pending_revocation
            },
        )


def _add_partition_epochs(into: Any, by_topic: Mapping[bytes, Mapping[int, int]]) -> None:
    """``by_topic`` (topic id -> partition -> assignment epoch) as repeated TopicPartitionEpochs,
    in topic and partition order."""
    for tid in sorted(by_topic):
        parts = by_topic[tid]
        if parts:
            ordered = sorted(parts)
            into.add(topic_id=tid, partitions=ordered, assignment_epochs=[parts[p] for p in ordered])


def _epochs_or(tp: pb.TopicPartitionEpochs, member_epoch: int) -> dict[int, int]:
    """A record's partitions with their assignment epochs; a record written before the pending
    partitions carried theirs reads them as assigned at the member's epoch (a commit with an
    older epoch is refused for them, as it was when that record was written)."""
    if not tp.assignment_epochs:
        return dict.fromkeys(tp.partitions, member_epoch)
    return dict(zip(tp.partitions, tp.assignment_epochs, strict=True))


def replace_member(member: ConsumerGroupMember, **changes: object) -> ConsumerGroupMember:
    """``member`` with ``changes``: the one way a member is copied. Not ``dataclasses.replace``,
    which checks the fields on every call and takes half as long again (2.6 vs 3.9 us); a
    heartbeat copies its member several times."""
    values = {f: getattr(member, f) for f in member.__dataclass_fields__}
    values.update(changes)
    return ConsumerGroupMember(**values)  # type: ignore[arg-type]


def member_metadata_record(group_id: str, member: ConsumerGroupMember) -> CoordinatorRecord:
    return CoordinatorRecord(
        pb.ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member.member_id),
        member.metadata_value(),
    )


def current_assignment_record(group_id: str, member: ConsumerGroupMember) -> CoordinatorRecord:
    return CoordinatorRecord(
        pb.ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member.member_id),
        member.assignment_value(),
    )


def target_member_record(group_id: str, member_id: str, target: Partitions) -> CoordinatorRecord:
    """A member's target; the record carries it decoded (``CoordinatorRecord.decoded``), as
    :meth:`ConsumerGroup.replay_target_member` would read it from the message."""
    v = pb.ConsumerGroupTargetAssignmentMemberValue()
    decoded: dict[bytes, frozenset[int]] = {}
    for tid in sorted(target):
        if target[tid]:
            v.topic_partitions.add(topic_id=tid, partitions=sorted(target[tid]))
            decoded[tid] = frozenset(target[tid])
    return CoordinatorRecord(
        pb.ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), v, decoded
    )


def target_metadata_record(group_id: str, epoch: int, timestamp_ms: int) -> CoordinatorRecord:
    return CoordinatorRecord(
        pb.ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id),
        pb.ConsumerGroupTargetAssignmentMetadataValue(
            assignment_epoch=epoch, assignment_timestamp_ms=timestamp_ms
        ),
    )


def group_metadata_record(group_id: str, epoch: int, metadata_hash: int) -> CoordinatorRecord:
    return CoordinatorRecord(
        pb.ConsumerGroupMetadataKey(group_id=group_id),
        pb.ConsumerGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash),
    )


def regex_record(
    group_id: str, regex: str, topics: Iterable[str] | None, now_ms: int = 0
) -> CoordinatorRecord:
    key = pb.ConsumerGroupRegularExpressionKey(group_id=group_id, regular_expression=regex)
    if topics is None:
        return CoordinatorRecord(key, None)
    return CoordinatorRecord(
        key, pb.ConsumerGroupRegularExpressionValue(topics=sorted(topics), resolution_timestamp_ms=now_ms)
    )


def member_tombstones(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    """Kafka's order: current assignment, target assignment, then the member itself."""
    return [
        CoordinatorRecord(
            pb.ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id), None
        ),
        CoordinatorRecord(
            pb.ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), None
        ),
        CoordinatorRecord(pb.ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member_id), None),
    ]


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    topics: frozenset[str]
    timestamp_ms: int


def _decrement(counter: Counter[str], key: str) -> None:
    n = counter[key] - 1
    if n > 0:
        counter[key] = n
    else:
        del counter[key]


# A new group's epoch and target assignment epoch, as Kafka 4.4 starts them (KAFKA-20268): epoch
# 1 holds the empty assignment, so the first computed assignment is epoch 2 and a member's epoch
# is never 0 (which means "joining") once it is in the group. kafka-consumer-groups.sh and the
# clients see the same epochs from us as from Kafka's own coordinator.
INITIAL_GROUP_EPOCH = 1


class ConsumerGroup:
    """One consumer group. Mutated only by replay."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = INITIAL_GROUP_EPOCH
        self.metadata_hash = 0
        self.assignment_epoch = INITIAL_GROUP_EPOCH
        self.assignment_timestamp_ms = -1
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target: dict[str, dict[bytes, frozenset[int]]] = {}
        self.resolved_regexes: dict[str, ResolvedRegex] = {}
        # derived from members (kept incrementally by replay)
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.partition_owner: dict[bytes, dict[int, str]] = {}  # assigned or pending revocation
        self.subscribed_names: Counter[str] = Counter()
        self.regex_count: Counter[str] = Counter()
        self.assignor_count: Counter[str] = Counter()

    def copy(self) -> ConsumerGroup:
        """A copy for a revert: the containers are copied, the members and resolved regexes
        (immutable values) and the target's partition sets (frozen) shared. Handlers never
        copy a consumer group: they copy the member they change (see core/state.py)."""
        g = ConsumerGroup.__new__(ConsumerGroup)
        g.group_id = self.group_id
        g.group_epoch = self.group_epoch
        g.metadata_hash = self.metadata_hash
        g.assignment_epoch = self.assignment_epoch
        g.assignment_timestamp_ms = self.assignment_timestamp_ms
        g.members = dict(self.members)
        g.target = {member_id: dict(target) for member_id, target in self.target.items()}
        g.resolved_regexes = dict(self.resolved_regexes)
        g.static_members = dict(self.static_members)
        g.partition_owner = {topic_id: dict(owners) for topic_id, owners in self.partition_owner.items()}
        g.subscribed_names = self.subscribed_names.copy()
        g.regex_count = self.regex_count.copy()
        g.assignor_count = self.assignor_count.copy()
        return g

    # --- Group protocol ----------------------------------------------------------------------
    @property
    def group_type(self) -> GroupType:
        return GroupType.CONSUMER

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            # as Kafka, a static member away (epoch -2) keeps the group reconciling
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def state_name(self) -> str:
        return self.state.value

    def is_empty(self) -> bool:
        return not self.members

    def validate_offset_commit(self, commit: OffsetCommitValidation, topic: str, partition: int) -> None:
        """Kafka's ConsumerGroup.validateOffsetCommit plus KIP-1251's per-partition epochs.

        An admin commit (no member id, epoch -1) is allowed only while the group is empty. A
        member's commit must carry its current epoch — or an older one for a partition it was
        assigned at or before that epoch and still holds, assigned or pending revocation (the
        commit raced with an epoch bump: a consumer commits what it consumed before it gives a
        partition back, and refusing that commit hands the next owner records to consume
        twice): else STALE_MEMBER_EPOCH.
        """
        member_id, generation_or_member_epoch, transactional = (
            commit.member_id,
            commit.generation_or_member_epoch,
            commit.transactional,
        )
        if accept_memberless_commit(commit, bool(self.members)):
            return
        member = self.members.get(member_id)
        if member is None:
            raise CoordinatorError(ErrorCode.unknown_member_id)
        if (
            not transactional
            and not member.uses_classic_protocol
            and commit.api_version < _MIN_OFFSET_COMMIT_VERSION
        ):
            raise CoordinatorError(ErrorCode.unsupported_version)
        if generation_or_member_epoch == member.member_epoch:
            return
        if member.uses_classic_protocol:
            # A classic member commits with its generation, which is its member epoch.
            raise CoordinatorError(ErrorCode.illegal_generation)
        if generation_or_member_epoch > member.member_epoch:
            raise CoordinatorError(ErrorCode.stale_member_epoch)
        topic_id = commit.image.topic_id(topic)
        assigned_at = member.assignment_epoch(topic_id, partition) if topic_id is not None else None
        if assigned_at is None or assigned_at > generation_or_member_epoch:
            raise CoordinatorError(ErrorCode.stale_member_epoch)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """A member fetching with an epoch must be known and current (Kafka: StaleMemberEpoch);
        a fetch without member (admin, epoch -1) is always fine."""
        if member_id is None or member_epoch < 0:
            return
        member = self.members.get(member_id)
        if member is None:
            raise CoordinatorError(ErrorCode.unknown_member_id)
        if member_epoch != member.member_epoch:
            raise CoordinatorError(ErrorCode.stale_member_epoch)

    def validate_offset_delete(self) -> None:
        """Allowed; topics the group subscribes to are refused per topic (is_subscribed_to_topic)."""

    def validate_delete_group(self) -> None:
        if self.members:
            raise CoordinatorError(ErrorCode.non_empty_group)

    def offset_expiration_base_ms(self, commit_timestamp_ms: int) -> int | None:
        """Kafka's ConsumerGroup.offsetExpirationCondition: retention counts from the commit
        time (offsets expire only for topics the group no longer subscribes to)."""
        return commit_timestamp_ms

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if topic in self.subscribed_names:
            return True
        return any(topic in r.topics for r in self.resolved_regexes.values())

    # --- derived views -----------------------------------------------------------------------
    def subscribed_topic_names(self) -> set[str]:
        """Every topic some member subscribes to, by name or through a resolved regex."""
        names = set(self.subscribed_names)
        for regex in self.regex_count:
            resolved = self.resolved_regexes.get(regex)
            if resolved is not None:
                names |= resolved.topics
        return names

    def member_subscribed_names(self, member: ConsumerGroupMember) -> set[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex is not None:
            resolved = self.resolved_regexes.get(member.subscribed_topic_regex)
            if resolved is not None:
                names |= resolved.topics
        return names

    def preferred_assignor(self, default: str) -> str:
        """The most common assignor the members ask for (ties: by name), else the default."""
        if not self.assignor_count:
            return default
        top = max(self.assignor_count.values())
        return min(a for a, c in self.assignor_count.items() if c == top)

    def partition_epoch_owner(self, topic_id: bytes, partition: int) -> str | None:
        owners = self.partition_owner.get(topic_id)
        return None if owners is None else owners.get(partition)

    def member_by_instance(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    # --- replay ------------------------------------------------------------------------------
    def put_member(self, member: ConsumerGroupMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._uncount(old)
        self.members[member.member_id] = member
        self._count(member)

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is not None:
            self._uncount(old)

    def _count(self, m: ConsumerGroupMember) -> None:
        if m.instance_id is not None:
            self.static_members[m.instance_id] = m.member_id
        self.subscribed_names.update(m.subscribed_topic_names)
        if m.subscribed_topic_regex is not None:
            self.regex_count[m.subscribed_topic_regex] += 1
        if m.server_assignor is not None:
            self.assignor_count[m.server_assignor] += 1
        for tid, parts in m.assigned.items():
            owners = self.partition_owner.setdefault(tid, {})
            for p in parts:
                owners[p] = m.member_id
        for tid, parts in m.pending_revocation.items():
            owners = self.partition_owner.setdefault(tid, {})
            for p in parts:
                owners[p] = m.member_id

    def _uncount(self, m: ConsumerGroupMember) -> None:
        if m.instance_id is not None and self.static_members.get(m.instance_id) == m.member_id:
            del self.static_members[m.instance_id]
        for name in m.subscribed_topic_names:
            _decrement(self.subscribed_names, name)
        if m.subscribed_topic_regex is not None:
            _decrement(self.regex_count, m.subscribed_topic_regex)
        if m.server_assignor is not None:
            _decrement(self.assignor_count, m.server_assignor)
        for source in (m.assigned, m.pending_revocation):
            for tid, parts in source.items():
                owners = self.partition_owner.get(tid)
                if owners is None:
                    continue
                for p in parts:
                    if owners.get(p) == m.member_id:
                        del owners[p]
                if not owners:
                    del self.partition_owner[tid]

    # --- replay: one method per record type (CONSUMER_GROUP_REPLAY maps key types to them) ---
    def replay_group_metadata(
        self, key: pb.ConsumerGroupMetadataKey, v: pb.ConsumerGroupMetadataValue | None
    ) -> None:
        if v is None:
            return  # the group is deleted: consumer/consumer_replay.py drops it from the shard's map
        self.group_epoch = v.epoch
        self.metadata_hash = v.metadata_hash

    def replay_member_metadata(
        self, key: pb.ConsumerGroupMemberMetadataKey, v: pb.ConsumerGroupMemberMetadataValue | None
    ) -> None:
        if v is None:
            self.remove_member(key.member_id)
        else:
            old = self.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
            self.put_member(old.with_metadata(v))

    def replay_target_metadata(
        self,
        key: pb.ConsumerGroupTargetAssignmentMetadataKey,
        v: pb.ConsumerGroupTargetAssignmentMetadataValue | None,
    ) -> None:
        if v is None:
            self.assignment_epoch, self.assignment_timestamp_ms = INITIAL_GROUP_EPOCH, -1
            return
        self.assignment_epoch = v.assignment_epoch
        self.assignment_timestamp_ms = v.assignment_timestamp_ms

    def replay_target_member(
        self,
        key: pb.ConsumerGroupTargetAssignmentMemberKey,
        v: pb.ConsumerGroupTargetAssignmentMemberValue | dict[bytes, frozenset[int]] | None,
    ) -> None:
        """``v`` is the message, or the record's ``decoded`` target (a record made in this
        process): each replica gets a dict of its own, sharing only the frozen sets."""
        if v is None:
            self.target.pop(key.member_id, None)
        elif isinstance(v, dict):
            self.target[key.member_id] = dict(v)
        else:
            self.target[key.member_id] = {tp.topic_id: frozenset(tp.partitions) for tp in v.topic_partitions}

    def replay_current_assignment(
        self,
        key: pb.ConsumerGroupCurrentMemberAssignmentKey,
        v: pb.ConsumerGroupCurrentMemberAssignmentValue | None,
    ) -> None:
        if v is None:
            # the member's metadata tombstone follows; release its partitions now
            old = self.members.get(key.member_id)
            if old is not None:
                self.put_member(replace_member(old, assigned={}, pending_revocation={}, member_epoch=0))
        else:
            old = self.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
            self.put_member(old.with_assignment(v))

    def replay_regex(
        self, key: pb.ConsumerGroupRegularExpressionKey, v: pb.ConsumerGroupRegularExpressionValue | None
    ) -> None:
        if v is None:
            self.resolved_regexes.pop(key.regular_expression, None)
        else:
            self.resolved_regexes[key.regular_expression] = ResolvedRegex(
                frozenset(v.topics), v.resolution_timestamp_ms
            )

    # --- equality (replay == live) -------------------------------------------------------------
    def snapshot(self) -> tuple[object, ...]:
        return (
            self.group_id,
            self.group_epoch,
            self.metadata_hash,
            self.assignment_epoch,
            self.assignment_timestamp_ms,
            self.members,
            self.target,
            self.resolved_regexes,
            self.static_members,
            self.partition_owner,
            self.subscribed_names,
            self.regex_count,
            self.assignor_count,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConsumerGroup) and self.snapshot() == other.snapshot()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"ConsumerGroup({self.group_id!r}, epoch={self.group_epoch}, "
            f"assignment_epoch={self.assignment_epoch}, state={self.state.value}, members={len(self.members)})"
        )

    def tombstone_records(self) -> list[CoordinatorRecord]:
        """Records deleting the group (members first, then target metadata, regexes, group)."""
        out: list[CoordinatorRecord] = []
        for member_id in self.members:
            out += member_tombstones(self.group_id, member_id)
        for regex in self.resolved_regexes:
            out.append(regex_record(self.group_id, regex, None))
        out.append(
            CoordinatorRecord(pb.ConsumerGroupTargetAssignmentMetadataKey(group_id=self.group_id), None)
        )
        out.append(CoordinatorRecord(pb.ConsumerGroupMetadataKey(group_id=self.group_id), None))
        return out


ConsumerGroupReplay = Callable[[ConsumerGroup, Any, Any], None]

CONSUMER_GROUP_REPLAY: dict[type[Message], ConsumerGroupReplay] = {
    pb.ConsumerGroupMetadataKey: ConsumerGroup.replay_group_metadata,
    pb.ConsumerGroupMemberMetadataKey: ConsumerGroup.replay_member_metadata,
    pb.ConsumerGroupTargetAssignmentMetadataKey: ConsumerGroup.replay_target_metadata,
    pb.ConsumerGroupTargetAssignmentMemberKey: ConsumerGroup.replay_target_member,
    pb.ConsumerGroupCurrentMemberAssignmentKey: ConsumerGroup.replay_current_assignment,
    pb.ConsumerGroupRegularExpressionKey: ConsumerGroup.replay_regex,
}
"""Consumer group record key type → the group's replay method. The coordinator shard's replay
switch routes these through consumer/consumer_replay.py, which finds or creates the group."""
