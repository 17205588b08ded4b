"""The KIP-1071 streams group: model, records and replay.

Like a KIP-848 consumer group, with tasks for partitions and a topology beside the members:

* the **group epoch** is bumped when what the assignor sees changes (a member joins or leaves,
  the topology or its topics' metadata changes);
* the **topology** is the one every member runs (its epoch is the members' topology epoch);
  ``validated_topology_epoch`` is the epoch whose topics were found ready;
* the **assignment epoch** is the group epoch the target assignment was computed for;
* each member's reconciliation (:mod:`.reconciliation`) moves its tasks towards its target.

State changes only by replaying records (``proto/groupcoord/records/v1/streams_group.proto``,
type ids 80-85): the handlers build records with the ``*_record`` functions here, and
:func:`replay` applies them, live and after a takeover alike. Members are immutable values.

A :class:`~groupcoord.coordinator.core.group.Group` of the shard like the other types: the
offsets and admin APIs work on it through that protocol (its committed offsets are validated
by member epoch, as a consumer group's).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.contract import CoordinatorRecord
from groupcoord.coordinator.core.group import (
    GroupType,
    OffsetCommitValidation,
    accept_memberless_commit,
    group_to_replay,
)
from groupcoord.coordinator.core.streams.reconciliation import (
    MemberState,
    MemberTasksState,
    TasksTuple,
)
from groupcoord.coordinator.core.streams.topology import (
    CopartitionGroup,
    InternalTopic,
    SubtopologySpec,
    Topology,
)
from groupcoord.records.v1 import streams_group_pb2 as pb

# Kafka's MemberState ids in the current-assignment record
_STATE_IDS = {MemberState.STABLE: 0, MemberState.UNREVOKED_TASKS: 1, MemberState.UNRELEASED_TASKS: 2}
_STATES = {v: k for k, v in _STATE_IDS.items()}


class StreamsGroupState(enum.Enum):
    """Kafka's StreamsGroupState names, as ListGroups and StreamsGroupDescribe report them."""

    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


@dataclass(frozen=True, slots=True)
class StreamsGroupMember:
    """A member as it described itself, and its reconciliation."""

    tasks: MemberTasksState
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    user_endpoint: tuple[str, int] | None = None
    client_tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def member_id(self) -> str:
        return self.tasks.member_id


@dataclass(slots=True)
class StreamsGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    validated_topology_epoch: int = -1
    assignment_configs: dict[str, str] = field(default_factory=dict)
    topology: Topology | None = None
    assignment_epoch: int = 0
    members: dict[str, StreamsGroupMember] = field(default_factory=dict)
    # the previous epoch of each member's current assignment (a lost response is retried
    # with it), kept beside the member's tasks as the record keeps it
    previous_member_epochs: dict[str, int] = field(default_factory=dict)
    targets: dict[str, TasksTuple] = field(default_factory=dict)

    def state(self) -> StreamsGroupState:
        """Kafka's ``StreamsGroup.maybeUpdateGroupState``: no members, Empty; a topology not
        (yet) validated against the cluster's topics, NotReady; a target behind the group
        epoch, Assigning; a member not at the target epoch or not settled, Reconciling."""
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.topology is None or self.validated_topology_epoch != self.topology.epoch:
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        for member in self.members.values():
            tasks = member.tasks
            if tasks.member_epoch != self.assignment_epoch or tasks.state is not MemberState.STABLE:
                return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    def copy(self) -> StreamsGroup:
        return replace(
            self,
            assignment_configs=dict(self.assignment_configs),
            members=dict(self.members),
            previous_member_epochs=dict(self.previous_member_epochs),
            targets=dict(self.targets),
        )

    def topic_names(self) -> set[str]:
        """Every topic the topology reads or keeps state in (source, repartition, changelog)."""
        if self.topology is None:
            return set()
        return topology_topic_names(self.topology)

    # --- the Group protocol (core/group.py) --------------------------------------------------
    @property
    def group_type(self) -> GroupType:
        return GroupType.STREAMS

    def state_name(self) -> str:
        return self.state().value

    def is_empty(self) -> bool:
        return not self.members

    def validate_offset_commit(self, commit: OffsetCommitValidation, topic: str, partition: int) -> None:
        """Kafka's ``StreamsGroup.validateOffsetCommit``: an admin commit (no member id, epoch
        -1) only while the group is empty; a member's commit at its current epoch, or at the
        one before it for a partition of an active task it still holds (the commit raced the
        epoch bump: Streams commits what it processed before it gives a task back; Kafka 4.4
        keeps each task's assignment epoch for this, we the member's previous epoch), else
        STALE_MEMBER_EPOCH."""
        if accept_memberless_commit(commit, bool(self.members)):
            return
        member = self.members.get(commit.member_id)
        if member is None:
            raise CoordinatorError(ErrorCode.unknown_member_id)
        epoch = commit.generation_or_member_epoch
        if epoch == member.tasks.member_epoch:
            return
        previous = self.previous_member_epochs.get(commit.member_id)
        if epoch > member.tasks.member_epoch or previous is None or epoch < previous:
            raise CoordinatorError(ErrorCode.stale_member_epoch)
        tasks = member.tasks
        held = {**tasks.pending_revocation.active}
        for subtopology_id, partitions in tasks.assigned.active.items():
            held[subtopology_id] = held.get(subtopology_id, frozenset()) | partitions
        if not any(partition in held.get(s, ()) for s in self._subtopologies_reading(topic)):
            raise CoordinatorError(ErrorCode.stale_member_epoch)

    def _subtopologies_reading(self, topic: str) -> list[str]:
        """The subtopologies whose tasks read ``topic`` (a source or repartition source topic):
        partition p of it is task p of each."""
        if self.topology is None:
            return []
        return [
            sub.subtopology_id
            for sub in self.topology.subtopologies
            if topic in sub.source_topics or any(t.name == topic for t in sub.repartition_source_topics)
        ]

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        if member_id is None or member_epoch < 0:
            return
        member = self.members.get(member_id)
        if member is None:
            raise CoordinatorError(ErrorCode.unknown_member_id)
        if member_epoch != member.tasks.member_epoch:
            raise CoordinatorError(ErrorCode.stale_member_epoch)

    def validate_offset_delete(self) -> None:
        """Allowed; topics the topology reads are refused per topic (is_subscribed_to_topic)."""

    def validate_delete_group(self) -> None:
        if self.members:
            raise CoordinatorError(ErrorCode.non_empty_group)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.topology is None or not self.members:
            return False
        return any(
            topic in sub.source_topics or any(t.name == topic for t in sub.repartition_source_topics)
            for sub in self.topology.subtopologies
        )

    def offset_expiration_base_ms(self, commit_timestamp_ms: int) -> int | None:
        """As a consumer group's: retention counts from the commit time."""
        return commit_timestamp_ms

    def tombstone_records(self) -> list[CoordinatorRecord]:
        """The group's records, every member's first, the group's metadata last."""
        g = self.group_id
        out: list[CoordinatorRecord] = []
        for m in sorted(self.members.keys() | self.targets.keys()):
            out += member_tombstones(g, m)
        return out + [
            CoordinatorRecord(pb.StreamsGroupTargetAssignmentMetadataKey(group_id=g), None),
            CoordinatorRecord(pb.StreamsGroupTopologyKey(group_id=g), None),
            CoordinatorRecord(pb.StreamsGroupMetadataKey(group_id=g), None),
        ]


def member_tombstones(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    """A member's records deleted: its assignment, its target, its metadata last (Kafka's
    order: the metadata tombstone ends the member on replay)."""
    return [
        CoordinatorRecord(pb.StreamsGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id), None),
        CoordinatorRecord(pb.StreamsGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), None),
        CoordinatorRecord(pb.StreamsGroupMemberMetadataKey(group_id=group_id, member_id=member_id), None),
    ]


def topology_topic_names(topology: Topology) -> set[str]:
    return {
        name
        for sub in topology.subtopologies
        for name in (
            *sub.source_topics,
            *(t.name for t in sub.repartition_source_topics),
            *(t.name for t in sub.state_changelog_topics),
        )
    }


# --- records ---------------------------------------------------------------------------------


def metadata_record(group: StreamsGroup) -> CoordinatorRecord:
    return CoordinatorRecord(
        pb.StreamsGroupMetadataKey(group_id=group.group_id),
        pb.StreamsGroupMetadataValue(
            epoch=group.group_epoch,
            metadata_hash=group.metadata_hash,
            validated_topology_epoch=group.validated_topology_epoch,
            assignment_configs=[pb.KeyValue(key=k, value=v) for k, v in sorted(group.assignment_configs.items())],
        ),
    )


def topology_record(group_id: str, topology: Topology) -> CoordinatorRecord:
    return CoordinatorRecord(
        pb.StreamsGroupTopologyKey(group_id=group_id),
        pb.StreamsGroupTopologyValue(
            epoch=topology.epoch, subtopologies=[_subtopology_pb(s) for s in topology.subtopologies]
        ),
    )


def member_metadata_record(group_id: str, member: StreamsGroupMember) -> CoordinatorRecord:
    value = pb.StreamsGroupMemberMetadataValue(
        client_id=member.client_id,
        client_host=member.client_host,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        topology_epoch=member.topology_epoch,
        process_id=member.tasks.process_id,
        client_tags=[pb.KeyValue(key=k, value=v) for k, v in sorted(member.client_tags.items())],
    )
    if member.instance_id is not None:
        value.instance_id = member.instance_id
    if member.rack_id is not None:
        value.rack_id = member.rack_id
    if member.user_endpoint is not None:
        value.user_endpoint.host, value.user_endpoint.port = member.user_endpoint
    return CoordinatorRecord(pb.StreamsGroupMemberMetadataKey(group_id=group_id, member_id=member.member_id), value)


def current_assignment_record(group_id: str, tasks: MemberTasksState, previous_member_epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(
        pb.StreamsGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=tasks.member_id),
        pb.StreamsGroupCurrentMemberAssignmentValue(
            member_epoch=tasks.member_epoch,
            previous_member_epoch=previous_member_epoch,
            state=_STATE_IDS[tasks.state],
            assigned=_tasks_pb(tasks.assigned),
            pending_revocation=_tasks_pb(tasks.pending_revocation),
        ),
    )


def target_assignment_metadata_record(group_id: str, assignment_epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(
        pb.StreamsGroupTargetAssignmentMetadataKey(group_id=group_id),
        pb.StreamsGroupTargetAssignmentMetadataValue(assignment_epoch=assignment_epoch),
    )


def target_assignment_member_record(group_id: str, member_id: str, target: TasksTuple) -> CoordinatorRecord:
    return CoordinatorRecord(
        pb.StreamsGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id),
        pb.StreamsGroupTargetAssignmentMemberValue(tasks=_tasks_pb(target)),
    )


M = TypeVar("M")


def task_ids(tasks: Mapping[str, Iterable[int]], message: Callable[..., M]) -> list[M]:
    """Tasks as ``message(subtopology_id=, partitions=)`` values, in order, empty ones left
    out: the record's ``TaskIds`` and the describe's ``StreamsTaskIds`` alike."""
    return [message(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(tasks.items()) if ps]


def _tasks_pb(tasks: TasksTuple) -> pb.Tasks:
    return pb.Tasks(
        active=task_ids(tasks.active, pb.TaskIds),
        standby=task_ids(tasks.standby, pb.TaskIds),
        warmup=task_ids(tasks.warmup, pb.TaskIds),
    )


def _tasks_of(message: pb.Tasks) -> TasksTuple:
    def kind(ids: Iterable[pb.TaskIds]) -> dict[str, frozenset[int]]:
        return {t.subtopology_id: frozenset(t.partitions) for t in ids if t.partitions}

    return TasksTuple(kind(message.active), kind(message.standby), kind(message.warmup))


def _topic_pb(topic: InternalTopic) -> pb.TopicInfo:
    return pb.TopicInfo(
        name=topic.name,
        partitions=topic.partitions,
        replication_factor=topic.replication_factor,
        topic_configs=[pb.KeyValue(key=k, value=v) for k, v in sorted(topic.configs.items())],
    )


def _topic_of(message: pb.TopicInfo) -> InternalTopic:
    return InternalTopic(
        message.name,
        message.partitions,
        message.replication_factor,
        {c.key: c.value for c in message.topic_configs},
    )


def _subtopology_pb(sub: SubtopologySpec) -> pb.Subtopology:
    return pb.Subtopology(
        subtopology_id=sub.subtopology_id,
        source_topics=sub.source_topics,
        source_topic_regex=sub.source_topic_regex,
        state_changelog_topics=[_topic_pb(t) for t in sub.state_changelog_topics],
        repartition_sink_topics=sub.repartition_sink_topics,
        repartition_source_topics=[_topic_pb(t) for t in sub.repartition_source_topics],
        copartition_groups=[
            pb.CopartitionGroup(
                source_topics=g.source_topics, repartition_source_topics=g.repartition_source_topics
            )
            for g in sub.copartition_groups
        ],
    )


def _subtopology_of(message: pb.Subtopology) -> SubtopologySpec:
    return SubtopologySpec(
        message.subtopology_id,
        tuple(message.source_topics),
        tuple(message.repartition_sink_topics),
        tuple(_topic_of(t) for t in message.repartition_source_topics),
        tuple(_topic_of(t) for t in message.state_changelog_topics),
        tuple(
            CopartitionGroup(tuple(g.source_topics), tuple(g.repartition_source_topics))
            for g in message.copartition_groups
        ),
        tuple(message.source_topic_regex),
    )


# --- replay ----------------------------------------------------------------------------------


def replay(groups: dict[str, Any], key: Any, value: Any) -> None:
    """Apply one streams-group record to ``groups`` (group id -> group of any type). A streams
    group never replaces a group of another type: such a record is a corrupted log, and raises."""
    group_id = key.group_id
    group = group_to_replay(groups, group_id, StreamsGroup, value)
    if group is None:
        return  # a tombstone of a group already gone
    if isinstance(key, pb.StreamsGroupMetadataKey):
        if value is None:
            del groups[group_id]
        else:
            group.group_epoch, group.metadata_hash = value.epoch, value.metadata_hash
            group.validated_topology_epoch = value.validated_topology_epoch
            group.assignment_configs = {c.key: c.value for c in value.assignment_configs}
    elif isinstance(key, pb.StreamsGroupTopologyKey):
        group.topology = (
            None
            if value is None
            else Topology(value.epoch, tuple(_subtopology_of(s) for s in value.subtopologies))
        )
    elif isinstance(key, pb.StreamsGroupMemberMetadataKey):
        _replay_member_metadata(group, key.member_id, value)
    elif isinstance(key, pb.StreamsGroupCurrentMemberAssignmentKey):
        _replay_current_assignment(group, key.member_id, value)
    elif isinstance(key, pb.StreamsGroupTargetAssignmentMetadataKey):
        group.assignment_epoch = 0 if value is None else value.assignment_epoch
    elif isinstance(key, pb.StreamsGroupTargetAssignmentMemberKey):
        if value is None:
            group.targets.pop(key.member_id, None)
        else:
            group.targets[key.member_id] = _tasks_of(value.tasks)
    else:
        raise TypeError(f"not a streams-group record: {type(key).__name__}")


def _replay_member_metadata(group: StreamsGroup, member_id: str, value: Any) -> None:
    if value is None:
        group.members.pop(member_id, None)
        group.previous_member_epochs.pop(member_id, None)
        return
    old = group.members.get(member_id)
    tasks = old.tasks if old is not None else MemberTasksState(member_id, value.process_id, 0)
    if tasks.process_id != value.process_id:
        tasks = replace(tasks, process_id=value.process_id)
    group.members[member_id] = StreamsGroupMember(
        tasks,
        value.instance_id if value.HasField("instance_id") else None,
        value.rack_id if value.HasField("rack_id") else None,
        value.client_id,
        value.client_host,
        value.rebalance_timeout_ms,
        value.topology_epoch,
        (value.user_endpoint.host, value.user_endpoint.port) if value.HasField("user_endpoint") else None,
        {t.key: t.value for t in value.client_tags},
    )


def _replay_current_assignment(group: StreamsGroup, member_id: str, value: Any) -> None:
    old = group.members.get(member_id)
    if value is None:
        if old is not None:  # the member's tasks cleared; its metadata goes with its own tombstone
            group.members[member_id] = replace(old, tasks=MemberTasksState(member_id, old.tasks.process_id, 0))
        group.previous_member_epochs.pop(member_id, None)
        return
    process_id = old.tasks.process_id if old is not None else ""
    tasks = MemberTasksState(
        member_id,
        process_id,
        value.member_epoch,
        _STATES[value.state],
        _tasks_of(value.assigned),
        _tasks_of(value.pending_revocation),
    )
    group.members[member_id] = replace(old, tasks=tasks) if old is not None else StreamsGroupMember(tasks)
    group.previous_member_epochs[member_id] = value.previous_member_epoch
