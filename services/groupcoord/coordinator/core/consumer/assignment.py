"""A consumer group's epoch and target assignment, and driving a member towards its target.

KIP-848 steps 3-5 of a heartbeat, as Kafka's ``GroupMetadataManager`` does them: a changed
subscription, rack or assignor, a new member, or changed topic metadata bumps the **group
epoch**; when the group epoch is ahead of the assignment epoch, a new **target assignment** is
computed (at most once per ``consumer.assignment.interval.ms``; later by a timer otherwise);
then the member is reconciled towards its target (consumer/reconciliation.py). Shared by
ConsumerGroupHeartbeat and the JoinGroup of a classic member inside a consumer group.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.assignors.api import PartitionAssignor
from groupcoord.coordinator.core.consumer.consumer_context import ConsumerContext
from groupcoord.coordinator.core.consumer.consumer_group import (
    ConsumerGroup,
    ConsumerGroupMember,
    current_assignment_record,
    group_metadata_record,
    member_metadata_record,
    member_tombstones,
    regex_record,
    target_member_record,
)
from groupcoord.coordinator.core.consumer.consumer_timers import assignment_timer_key
from groupcoord.coordinator.core.consumer.reconciliation import reconcile
from groupcoord.coordinator.core.consumer.regex_subscriptions import resolve
from groupcoord.coordinator.core.consumer.target_assignment import (
    GroupSnapshot,
    TargetAssignment,
    compute_snapshot_target,
    snapshot_target_steps,
)
from groupcoord.coordinator.core.contract import (
    CoordinatorRecord,
    CoordinatorResult,
    Offload,
    TimerIntent,
    deadline_timer,
)


def subscribed_topics(
    group: ConsumerGroup,
    resolved: Mapping[str, frozenset[str]],
    gone: Iterable[ConsumerGroupMember | None] = (),
    joining: ConsumerGroupMember | None = None,
) -> tuple[set[str], Counter[str]]:
    """Every topic name the group subscribes to once the ``gone`` members have left and
    ``joining`` has (re)joined — by name, or through a regex (``resolved``: regex → topics) —
    and how many members then use each regex. The one count behind a heartbeat's group epoch
    bump, a removal's metadata hash and a topic change's re-hash."""
    counts = Counter(group.subscribed_names)
    regexes = Counter(group.regex_count)
    for member in gone:
        if member is not None:
            counts.subtract(member.subscribed_topic_names)
            if member.subscribed_topic_regex is not None:
                regexes[member.subscribed_topic_regex] -= 1
    if joining is not None:
        counts.update(joining.subscribed_topic_names)
        if joining.subscribed_topic_regex is not None:
            regexes[joining.subscribed_topic_regex] += 1
    names = {n for n, c in counts.items() if c > 0}
    for regex, c in regexes.items():
        if c > 0:
            names |= resolved.get(regex, frozenset())
    return names, regexes


@dataclass(frozen=True, slots=True)
class MemberUpdate:
    """What one request does to one member: ``member`` as the group knows it (a fresh one when
    ``is_new``), ``updated`` with the request's fields applied, and ``replaced`` a static
    member's previous incarnation that ``updated`` takes over."""

    member: ConsumerGroupMember
    updated: ConsumerGroupMember
    is_new: bool
    replaced: ConsumerGroupMember | None = None


def advance_member(
    ctx: ConsumerContext,
    group: ConsumerGroup,
    records: list[CoordinatorRecord],
    timers: list[TimerIntent],
    change: MemberUpdate,
    *,
    group_is_new: bool,
    owned: Mapping[bytes, frozenset[int]] | None,
    now_ms: int,
    undescribable: frozenset[str] = frozenset(),
) -> ConsumerGroupMember:
    """Steps 3-5 for a member whose request fields are applied: group epoch, target
    assignment, reconciliation. Appends the records to ``records`` (and the batched
    assignment's timer, when it must wait, to ``timers``) and returns the reconciled member.
    Shared by ConsumerGroupHeartbeat and the classic JoinGroup of a classic member inside a
    consumer group (migration/classic_members.py), which differ only in how they find the
    member and read its fields from the request.

    ``owned`` is the partitions the member reports owning (None: not reported).
    ``undescribable``: topics the member's principal may not DESCRIBE, which its regex must not
    resolve to (Kafka 4.0, KAFKA-18813: a regex resolves with the rights of the member whose
    heartbeat refreshes it; the gateway checks the ACLs and names them).
    """
    member, updated, is_new, replaced = change.member, change.updated, change.is_new, change.replaced
    gid = group.group_id
    member_id = updated.member_id
    image = ctx.image
    previous_for_subscription = replaced if replaced is not None else member
    subscription_changed = is_new or _subscription_changed(previous_for_subscription, updated)

    # Regular expressions: resolve a new one now; drop one no member uses any more.
    resolved: dict[str, frozenset[str]] = {k: v.topics for k, v in group.resolved_regexes.items()}
    regex_counts = Counter(group.regex_count)
    regex_changed = False
    old_regex = None if is_new else (replaced or member).subscribed_topic_regex
    if updated.subscribed_topic_regex != old_regex:
        if old_regex is not None:
            regex_counts[old_regex] -= 1
        if updated.subscribed_topic_regex is not None:
            regex_counts[updated.subscribed_topic_regex] += 1
        for regex, n in regex_counts.items():
            if n > 0 and regex not in resolved:
                resolved[regex] = resolve(regex, image)
                records.append(regex_record(gid, regex, resolved[regex], now_ms))
                regex_changed = True
            elif n <= 0 and regex in resolved:
                del resolved[regex]
                records.append(regex_record(gid, regex, None))
                regex_changed = True
    own_regex = updated.subscribed_topic_regex
    if undescribable and own_regex is not None and resolved.get(own_regex, frozenset()) & undescribable:
        resolved[own_regex] = resolved[own_regex] - undescribable
        records.append(regex_record(gid, own_regex, resolved[own_regex], now_ms))
        regex_changed = True

    # Group epoch: bumped when the subscription or the subscribed topics' metadata changed.
    group_epoch = group.group_epoch
    metadata_hash = group.metadata_hash
    if subscription_changed or regex_changed or group_is_new:
        old = member if not is_new and member.member_id in group.members else None
        names, _ = subscribed_topics(group, resolved, gone=(old, replaced), joining=updated)
        metadata_hash = image.metadata_hash(names)
        group_epoch += 1
        records.append(group_metadata_record(gid, group_epoch, metadata_hash))

    # Membership as it will be after this request.
    if replaced is not None:
        records += member_tombstones(gid, replaced.member_id)
    if is_new or replaced is not None or (updated is not member and _metadata_differs(member, updated)):
        records.append(member_metadata_record(gid, updated))

    # Target assignment.
    target_epoch = group.assignment_epoch
    member_target = group.target.get(replaced.member_id if replaced is not None else member_id, {})
    if replaced is not None:
        records.append(target_member_record(gid, member_id, member_target))
    if group_epoch > group.assignment_epoch:
        if may_assign(ctx, group, now_ms):
            # copies (the snapshot's), with this request's change applied
            members, current_target = dict(group.members), dict(group.target)
            if replaced is not None:
                del members[replaced.member_id]
                current_target[member_id] = member_target
            members[member_id] = updated
            snapshot = GroupSnapshot(members, current_target, resolved, image)
            target, offloaded = assign(ctx, gid, snapshot, _assignor(ctx, group, member, updated), group_epoch, now_ms)
            timers += offloaded
            if target is not None:
                records += target.records
                target_epoch = group_epoch
                member_target = target.by_member.get(member_id, {})
        else:
            timers += assignment_timer(ctx, group, now_ms)

    # Reconciliation.
    def owner_of(tid: bytes, p: int) -> str | None:
        return group.partition_epoch_owner(tid, p)

    reconciled = reconcile(
        updated,
        target_epoch,
        member_target,
        owner_of,
        owned,
        also_self=replaced.member_id if replaced is not None else None,
    )
    if (
        is_new
        or replaced is not None
        or reconciled.member_epoch != member.member_epoch
        or reconciled.previous_member_epoch != member.previous_member_epoch
        or reconciled.state is not member.state
        or reconciled.assigned != member.assigned
        or reconciled.pending_revocation != member.pending_revocation
    ):
        records.append(current_assignment_record(gid, reconciled))
    return reconciled


def may_assign(ctx: ConsumerContext, group: ConsumerGroup, now_ms: int) -> bool:
    """Whether the target assignment may be computed now (consumer.assignment.interval.ms)."""
    interval = ctx.assignment_interval_ms(group.group_id)
    return (
        interval <= 0
        or group.assignment_timestamp_ms < 0
        or now_ms - group.assignment_timestamp_ms >= interval
    )


def assignment_timer(ctx: ConsumerContext, group: ConsumerGroup, now_ms: int) -> list[TimerIntent]:
    """The batched assignment (consumer.assignment.interval.ms), unless already armed."""
    key = assignment_timer_key(group.group_id)
    if ctx.armed.is_scheduled(key):
        return []
    due = group.assignment_timestamp_ms + ctx.assignment_interval_ms(group.group_id)
    return [deadline_timer(key, due - now_ms, now_ms, _assign_now, ctx, group.group_id)]


def _assign_now(ctx: ConsumerContext, group_id: str, now_ms: int) -> CoordinatorResult[None]:
    """The batched assignment: compute the target for the group as it is now. Not for a group
    the last member left meanwhile: nobody would receive it (Kafka computes a target only for
    a member's heartbeat), and the next member's join computes one."""
    group = ctx.consumer_group(group_id)
    if group is None or group.group_epoch <= group.assignment_epoch or not group.members:
        return CoordinatorResult()
    resolved = {k: v.topics for k, v in group.resolved_regexes.items()}
    snapshot = GroupSnapshot.of(group.members, group.target, resolved, ctx.image)
    assignor = ctx.assignors[group.preferred_assignor(ctx.default_assignor)]
    target, offloaded = assign(ctx, group_id, snapshot, assignor, group.group_epoch, now_ms)
    return CoordinatorResult(records=target.records if target is not None else [], timers=offloaded)


def assign(
    ctx: ConsumerContext,
    group_id: str,
    snapshot: GroupSnapshot,
    assignor: PartitionAssignor,
    epoch: int,
    now_ms: int,
) -> tuple[TargetAssignment | None, list[TimerIntent]]:
    """The group's target at ``epoch`` computed now, or (a large one, see :func:`offloads`)
    None and the intent that computes it off the loop."""
    if offloads(ctx, snapshot):
        return None, offloaded_assignment(ctx, group_id, snapshot, assignor, epoch, now_ms)
    try:
        return compute_snapshot_target(group_id, snapshot, assignor, epoch, now_ms), []
    except CoordinatorError:
        raise
    except Exception as exc:  # an assignor (a plugin's, maybe) failed: this group's heartbeat only
        raise CoordinatorError(
            ErrorCode.unknown_server_error, f"Failed to compute a new target assignment for epoch {epoch}: {exc}"
        ) from exc


def offloads(ctx: ConsumerContext, snapshot: GroupSnapshot) -> bool:
    """Whether the assignment of ``snapshot`` runs off the partition's loop (KIP-1263's
    assignor offload): only one large enough that holding the loop for it would delay the
    other groups of the partition (``consumer_group_assignor_offload_min_size``). A small one
    runs at once, so that the member whose heartbeat asked for it gets its assignment in the
    answer; an offloaded one reaches the members with their next heartbeats."""
    min_size = ctx.config.consumer_group_assignor_offload_min_size
    return min_size >= 0 and snapshot.size_reaches(min_size)


def offloaded_assignment(
    ctx: ConsumerContext,
    group_id: str,
    snapshot: GroupSnapshot,
    assignor: PartitionAssignor,
    epoch: int,
    now_ms: int,
) -> list[TimerIntent]:
    """Run the assignor over ``snapshot`` (the group at ``epoch``) off the loop, in slices on
    the offload thread, its input built there too (every member's subscription resolved:
    milliseconds for thousands of members, which the loop would otherwise spend on every join
    and leave); one run per group at a time: while one is in flight, members reconcile towards
    the current target and the run's end computes again if the group moved on
    (:func:`_offloaded_done`)."""
    key = assignment_timer_key(group_id)
    if ctx.armed.is_scheduled(key):
        return []
    return [
        Offload(
            key,
            partial(snapshot_target_steps, group_id, snapshot, assignor, epoch, now_ms),
            partial(_offloaded_done, ctx, group_id, epoch, frozenset(snapshot.members), now_ms),
        )
    ]


def _offloaded_done(
    ctx: ConsumerContext,
    group_id: str,
    epoch: int,
    member_ids: frozenset[str],
    now_ms: int,
    target: TargetAssignment,
) -> CoordinatorResult[None]:
    """An offloaded assignment returned: its target is written only if the group is still
    the one it was computed for (same group epoch, same members); a target for members that
    left or without ones that joined would hand partitions to nobody or to two targets.
    Its records were made against the targets of the snapshot, which are the group's still:
    only an assignment (one in flight per group) or a member leaving changes a target.
    Otherwise it computes again for the group as it is now (Kafka's run-again of a stale
    offloaded assignment)."""
    group = ctx.consumer_group(group_id)
    if group is None or group.assignment_epoch >= epoch:
        return CoordinatorResult()
    if group.group_epoch != epoch or group.members.keys() != member_ids:
        return _assign_now(ctx, group_id, now_ms)
    return CoordinatorResult(records=target.records)


def _assignor(
    ctx: ConsumerContext, group: ConsumerGroup, old: ConsumerGroupMember, new: ConsumerGroupMember
) -> PartitionAssignor:
    counts = Counter(group.assignor_count)
    if old.server_assignor is not None and old.member_id in group.members:
        counts[old.server_assignor] -= 1
    if new.server_assignor is not None:
        counts[new.server_assignor] += 1
    return ctx.assignors[_most_common(counts, ctx.default_assignor)]


def _most_common(counts: Counter[str], default: str) -> str:
    live = {a: c for a, c in counts.items() if c > 0}
    if not live:
        return default
    top = max(live.values())
    return min(a for a, c in live.items() if c == top)


def _subscription_changed(old: ConsumerGroupMember, new: ConsumerGroupMember) -> bool:
    return (
        old.subscribed_topic_names != new.subscribed_topic_names
        or old.subscribed_topic_regex != new.subscribed_topic_regex
        or old.server_assignor != new.server_assignor
        or old.rack_id != new.rack_id
    )


def _metadata_differs(old: ConsumerGroupMember, new: ConsumerGroupMember) -> bool:
    return old.metadata_value() != new.metadata_value()
