"""Computing a group's target assignment (Kafka's TargetAssignmentBuilder).

Runs the group's assignor over every member's subscription (topic names and the resolved
regex, as topic ids of the current image), rack and current target (for stickiness), and
returns the records of the new target: one record per member whose target changed, then the
target metadata with the new assignment epoch. The result is deterministic, so the same
inputs always give the same target.

In two parts, so that the second may run off the partition's loop (KIP-1263's offload): a
:class:`GroupSnapshot` of values taken on the loop (shallow copies, as cheap for a group of
thousands as for one), and :func:`snapshot_target_steps`, which reads only that snapshot: the
assignor's input built from it (every member's subscription as topic ids), the assignor, and
the records of what changed. It is written as steps (:mod:`groupcoord.common.steps`), so that
an offloaded assignment runs in slices with pauses for the loops; an inline one runs it to its
end at once (:func:`compute_snapshot_target`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from groupcoord.common.steps import Steps, finish, stride
from groupcoord.coordinator.core.assignors.api import (
    GroupSpec,
    MemberSpec,
    PartitionAssignor,
    assign_in_steps,
)
from groupcoord.coordinator.core.consumer.consumer_group import (
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


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """A group's members, current targets and resolved regexes as they are now, and the image
    to read them with: the inputs of an assignment, fixed while the group moves on. Members
    are immutable and a replayed target replaces its member's dict, so shallow copies of the
    group's mappings are a snapshot (taken in C, not a Python walk over the members)."""

    members: Mapping[str, ConsumerGroupMember]
    current_target: Mapping[str, Mapping[bytes, frozenset[int]]]
    resolved_regexes: Mapping[str, frozenset[str]]
    image: TopicsImage

    @classmethod
    def of(
        cls,
        members: Mapping[str, ConsumerGroupMember],
        current_target: Mapping[str, Mapping[bytes, frozenset[int]]],
        resolved_regexes: Mapping[str, frozenset[str]],
        image: TopicsImage,
    ) -> GroupSnapshot:
        return cls(dict(members), dict(current_target), dict(resolved_regexes), image)

    def spec(self) -> GroupSpec:
        return finish(self.spec_steps())

    def spec_steps(self) -> Steps[GroupSpec]:
        """The assignor's input: every member's subscription as topic ids of the image, its
        rack and its current target. Only values: a spec stays valid while the group changes.
        The image remembers each subscription's ids
        (:meth:`~groupcoord.coordinator.core.topics_image.TopicsImage.subscription_ids`), so
        members sharing one share its frozenset, across specs too."""
        per = stride()
        members: dict[str, MemberSpec] = {}
        for i, (mid, m) in enumerate(self.members.items()):
            if not i % per:
                yield
            members[mid] = MemberSpec(
                m.rack_id, _topic_ids(m, self.resolved_regexes, self.image), self.current_target.get(mid, {})
            )
        return GroupSpec(members)

    def size_reaches(self, limit: int) -> bool:
        """Whether an assignment of this group costs at least ``limit``, roughly, in the
        assignors' unit of work: its members plus the partitions they subscribe to (the uniform
        and range assignors walk both; bench/assignor.py). Stops as soon as it does: for a
        large group after the first members' subscriptions, where the full count would resolve
        every member's on the loop."""
        size = len(self.members)
        if size >= limit:
            return True
        topics: set[bytes] = set()
        seen: set[tuple[tuple[str, ...], str | None]] = set()
        for member in self.members.values():
            key = (member.subscribed_topic_names, member.subscribed_topic_regex)
            if key in seen:
                continue
            seen.add(key)
            for topic_id in _topic_ids(member, self.resolved_regexes, self.image) - topics:
                topics.add(topic_id)
                size += self.image.num_partitions(topic_id)
                if size >= limit:
                    return True
        return False


def snapshot_target_steps(
    group_id: str, snapshot: GroupSnapshot, assignor: PartitionAssignor, epoch: int, now_ms: int
) -> Steps[TargetAssignment]:
    """The target at ``epoch`` for the members of ``snapshot``, with the records of what
    changed against the targets it holds. Reads nothing but its arguments (values), so it may
    run while the group moves on: an assignment offloaded whole, records included."""
    spec = yield from snapshot.spec_steps()
    result = yield from assign_in_steps(assignor, spec, snapshot.image)
    return (yield from target_records(group_id, spec, result, epoch, now_ms))


def compute_snapshot_target(
    group_id: str, snapshot: GroupSnapshot, assignor: PartitionAssignor, epoch: int, now_ms: int
) -> TargetAssignment:
    """:func:`snapshot_target_steps` run to its end at once: an inline assignment."""
    return finish(snapshot_target_steps(group_id, snapshot, assignor, epoch, now_ms))


def _topic_ids(
    member: ConsumerGroupMember, resolved_regexes: Mapping[str, frozenset[str]], image: TopicsImage
) -> frozenset[bytes]:
    """A member's subscription as topic ids of ``image``: its names and what its regex resolves
    to (resolved now if the group has not resolved it yet)."""
    regex = member.subscribed_topic_regex
    if regex is None:
        return image.subscription_ids(member.subscribed_topic_names)
    resolved = resolved_regexes.get(regex)
    return image.subscription_ids(
        member.subscribed_topic_names, resolved if resolved is not None else resolve(regex, image)
    )


def target_records(
    group_id: str,
    spec: GroupSpec,
    result: Mapping[str, Mapping[bytes, Iterable[int]]],
    epoch: int,
    now_ms: int,
) -> Steps[TargetAssignment]:
    """The records of an assignor's ``result`` at ``epoch``: one per member of ``spec`` whose
    target differs from the one the spec holds (the group's, when the spec was taken), then
    the target metadata."""
    per = stride()
    by_member: dict[str, dict[bytes, frozenset[int]]] = {}
    records: list[CoordinatorRecord] = []
    for i, (mid, member) in enumerate(spec.members.items()):
        if not i % per:
            yield
        new = {tid: frozenset(parts) for tid, parts in result.get(mid, {}).items() if parts}
        by_member[mid] = new
        if member.assignment != new:
            records.append(target_member_record(group_id, mid, new))
    records.append(target_metadata_record(group_id, epoch, now_ms))
    return TargetAssignment(epoch, by_member, records)
