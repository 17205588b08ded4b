"""ConsumerGroupHeartbeat v0/v1, member timeouts and topic changes for KIP-848 groups.

Modelled on Apache Kafka 4.x's ``GroupMetadataManager.consumerGroupHeartbeat``. One heartbeat:

1. validates the request (INVALID_REQUEST per KIP rule, UNSUPPORTED_ASSIGNOR,
   INVALID_REGULAR_EXPRESSION);
2. finds or creates the group and the member — dynamic by member id, static by instance id
   (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED) —
   and checks the member epoch (FENCED_MEMBER_EPOCH, except the previous epoch when the
   owned partitions are a subset of the assignment: the last response was lost);
3. applies the fields the heartbeat carries (null = unchanged); a changed subscription, rack
   or assignor, a new member, or changed topic metadata bumps the **group epoch**;
4. computes a new **target assignment** when the group epoch is ahead of it (at most once per
   ``consumer.assignment.interval.ms``; later by a timer otherwise);
5. reconciles the member towards its target (consumer/reconciliation.py);
6. re-arms the session timer (and the rebalance timer while it must revoke).

All of it is computed without mutating anything: the returned records, once replayed, are the
change, and the timers to (re)arm or cancel are intents in the result too (the runtime applies
them); whether a timer is already armed is read through the read-only ``ArmedTimers`` view.
A repeated heartbeat that changes nothing writes nothing.
"""

from __future__ import annotations

import base64
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from groupcoord.common.errors import CoordinatorError, ErrorCode, error_response
from groupcoord.coordinator.core.assignors.api import PartitionAssignor
from groupcoord.coordinator.core.assignors.range_assignor import RangeAssignor
from groupcoord.coordinator.core.assignors.uniform_assignor import UniformAssignor
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.consumer.group import (
    CONSUMER_GROUP_REPLAY,
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupReplay,
    MemberState,
    current_assignment_record,
    group_metadata_record,
    member_metadata_record,
    member_tombstones,
    regex_record,
    replace_member,
    target_member_record,
)
from groupcoord.coordinator.core.consumer.reconciliation import reconcile
from groupcoord.coordinator.core.consumer.regex_subscriptions import compile_regex, resolve
from groupcoord.coordinator.core.consumer.target_assignment import compute_target_assignment
from groupcoord.coordinator.core.consumer.timers import (
    assignment_timer_key,
    member_timer_cancels,
    rebalance_timer_key,
    session_timer_key,
)
from groupcoord.coordinator.core.contract import (
    ArmedTimers,
    CancelTimer,
    CoordinatorRecord,
    CoordinatorResult,
    ScheduleTimer,
    TimerIntent,
    deadline_timer,
)
from groupcoord.coordinator.core.group import Group
from groupcoord.coordinator.core.topics_image import UNKNOWN_IMAGE, TopicsImage
from groupcoord.records.v1 import consumer_group_pb2 as rpb
from groupcoord.rpc.v1 import consumer_group_pb2 as pb

# ConsumerGroupHeartbeat v1+: the client generates the member id (KIP-1082).
CONSUMER_GENERATED_MEMBER_ID_VERSION = 1

BUILTIN_ASSIGNORS: dict[str, Callable[[], PartitionAssignor]] = {
    "uniform": UniformAssignor,
    "range": RangeAssignor,
}


# (classic group, now) -> (records replacing it by a consumer group, what retires the classic
# group — completions of its waiting requests and cancels of its timers: call once the
# heartbeat succeeded) or None when the policy or the group forbids it.
UpgradeClassicGroup = Callable[
    [Group, int], tuple[list[CoordinatorRecord], Callable[[], CoordinatorResult[None]]] | None
]
# (consumer group, leaving member id, now, joining member or None) -> the records (and the
# classic group's timers) converting the group back to a classic group without the leaving
# member (and with the joining one: a classic static member replacing a consumer-protocol
# one), or None when it stays a consumer group.
DowngradeToClassic = Callable[
    [ConsumerGroup, str, int, "ConsumerGroupMember | None"], CoordinatorResult[None] | None
]


def _invalid(message: str) -> CoordinatorError:
    return CoordinatorError(ErrorCode.invalid_request, message)


def owned_partitions(request: pb.ConsumerGroupHeartbeatRequest) -> dict[bytes, frozenset[int]] | None:
    if not request.HasField("topic_partitions"):
        return None
    out: dict[bytes, frozenset[int]] = {}
    for tp in request.topic_partitions.topic_partitions:
        out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return out


def _is_subset(owned: Mapping[bytes, frozenset[int]] | None, member: ConsumerGroupMember) -> bool:
    if owned is None:
        return False
    for tid, parts in owned.items():
        if not parts:
            continue
        have = member.assigned.get(tid)
        if have is None or any(p not in have for p in parts):
            return False
    return True


class ConsumerGroupManager:
    """The consumer groups of one state-topic partition (they live in the shard's ``groups``).

    ``image()`` is the shard's current topics image; ``session_timeout_ms(group)``,
    ``heartbeat_interval_ms(group)`` and ``assignment_interval_ms(group)`` give the
    effective (possibly per-group) settings; ``delete_classic_group(group)`` returns the
    tombstones of an empty classic group a consumer group replaces.

    ``armed`` is the read-only view of the partition's timers: handlers return timer intents
    and only ask whether one is already running (a revoking member's rebalance timeout is not
    re-armed on every heartbeat).

    Online migration (migration/online_migration.py) plugs in through ``upgrade_classic_group`` (a
    ConsumerGroupHeartbeat joining a non-empty classic group converts it) and
    ``downgrade_to_classic`` (the last consumer-protocol member leaving converts back);
    classic members inside a consumer group are served by migration/classic_members.py.
    """

    def __init__(
        self,
        groups: dict[str, Group],
        armed: ArmedTimers,
        config: GroupConfig,
        image: Callable[[], TopicsImage] = lambda: UNKNOWN_IMAGE,
        session_timeout_ms: Callable[[str], int] | None = None,
        heartbeat_interval_ms: Callable[[str], int] | None = None,
        assignment_interval_ms: Callable[[str], int] | None = None,
        delete_classic_group: Callable[[Group], list[CoordinatorRecord]] | None = None,
        assignors: Mapping[str, PartitionAssignor] | None = None,
        upgrade_classic_group: UpgradeClassicGroup | None = None,
        downgrade_to_classic: DowngradeToClassic | None = None,
        new_uuid: Callable[[], uuid.UUID] = uuid.uuid4,
    ) -> None:
        self.groups = groups
        self.armed = armed
        self.config = config
        self.image = image
        self.session_timeout_ms = session_timeout_ms or (lambda _g: config.consumer_group_session_timeout_ms)
        self.heartbeat_interval_ms = heartbeat_interval_ms or (
            lambda _g: config.consumer_group_heartbeat_interval_ms
        )
        self.assignment_interval_ms = assignment_interval_ms or (
            lambda _g: config.consumer_group_assignment_interval_ms
        )
        self.delete_classic_group = delete_classic_group or (lambda _g: [])
        self.upgrade_classic_group = upgrade_classic_group
        self.downgrade_to_classic = downgrade_to_classic
        self.new_uuid = new_uuid  # member ids of v0 joins (injected: tests replay exactly)
        if assignors is None:
            assignors = {name: BUILTIN_ASSIGNORS[name]() for name in config.consumer_group_assignors}
        if not assignors:
            raise ValueError("at least one consumer group assignor must be configured")
        self.assignors = dict(assignors)
        self.default_assignor = next(iter(self.assignors))

    # --- replay ------------------------------------------------------------------------------
    def replayer(self, method: ConsumerGroupReplay) -> Callable[[Any, Any], None]:
        """The coordinator shard's replay entry for one consumer group record type: find (or
        create) the group, then let ``method`` apply the record; the group metadata's tombstone
        drops the group."""
        groups = self.groups
        deletes_group = method is ConsumerGroup.replay_group_metadata

        def replay(key: Any, value: Any) -> None:
            group_id = key.group_id
            group = groups.get(group_id)
            if deletes_group and value is None:
                if isinstance(group, ConsumerGroup):
                    del groups[group_id]
                return
            if not isinstance(group, ConsumerGroup):
                if group is not None and not group.is_empty():
                    raise ValueError(
                        f"consumer group record for the non-empty {group.group_type.value} group {group_id}"
                    )
                if value is None:
                    return  # tombstone of something already gone
                group = self.new_group(group_id)
                groups[group_id] = group
            method(group, key, value)

        return replay

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    # --- heartbeat ---------------------------------------------------------------------------
    def heartbeat(
        self, request: pb.ConsumerGroupHeartbeatRequest, now_ms: int
    ) -> CoordinatorResult[pb.ConsumerGroupHeartbeatResponse]:
        try:
            self._validate(request)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request, now_ms)
            if self.image() is UNKNOWN_IMAGE:
                raise CoordinatorError(
                    ErrorCode.coordinator_load_in_progress,
                    "The coordinator has not loaded topic metadata yet.",
                )
            return self._heartbeat(request, now_ms)
        except CoordinatorError as e:
            return CoordinatorResult(response=error_response(pb.ConsumerGroupHeartbeatResponse, e))

    def _validate(self, r: pb.ConsumerGroupHeartbeatRequest) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid, rule by rule."""
        if not r.group_id:
            raise _invalid("GroupId can't be empty.")
        if r.HasField("instance_id") and not r.instance_id:
            raise _invalid("InstanceId can't be empty.")
        if r.HasField("rack_id") and not r.rack_id:
            raise _invalid("RackId can't be empty.")
        if r.api_version >= CONSUMER_GENERATED_MEMBER_ID_VERSION and not r.member_id:
            raise _invalid("MemberId can't be empty.")
        if (r.member_epoch > 0 or r.member_epoch == LEAVE_GROUP_MEMBER_EPOCH) and not r.member_id:
            raise _invalid("MemberId can't be empty.")
        if r.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if r.rebalance_timeout_ms == -1:
                raise _invalid("RebalanceTimeoutMs must be provided in first request.")
            if not r.HasField("topic_partitions") or r.topic_partitions.topic_partitions:
                raise _invalid("TopicPartitions must be empty when (re-)joining.")
            if not r.HasField("subscribed_topic_names") and not r.HasField("subscribed_topic_regex"):
                raise _invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
                )
        elif r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not r.HasField("instance_id"):
                raise _invalid("InstanceId can't be null.")
        elif r.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _invalid(f"MemberEpoch {r.member_epoch} is invalid.")
        if r.rebalance_timeout_ms < -1:
            raise _invalid("RebalanceTimeoutMs must be -1 (unchanged) or positive.")
        if r.HasField("subscribed_topic_regex") and r.api_version < 1:
            raise _invalid("SubscribedTopicRegex requires ConsumerGroupHeartbeat v1.")
        if r.HasField("server_assignor") and r.server_assignor not in self.assignors:
            raise CoordinatorError(
                ErrorCode.unsupported_assignor,
                f"ServerAssignor {r.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(self.assignors)}.",
            )
        if r.HasField("subscribed_topic_regex") and r.subscribed_topic_regex:
            compile_regex(r.subscribed_topic_regex)

    def _group_for(
        self, r: pb.ConsumerGroupHeartbeatRequest, now_ms: int
    ) -> tuple[ConsumerGroup, list[CoordinatorRecord], bool, Callable[[], CoordinatorResult[None]] | None]:
        """The consumer group (a scratch one when it is to be created or converted), the
        records that must precede this heartbeat's (an empty classic group's tombstones, or a
        classic group's conversion), whether the group is new, and what retires a converted
        classic group (its waiting requests' answers, its timers' cancels) once the heartbeat
        succeeded."""
        existing = self.groups.get(r.group_id)
        if isinstance(existing, ConsumerGroup):
            return existing, [], False, None
        if existing is not None and r.member_epoch == JOIN_GROUP_MEMBER_EPOCH and not existing.is_empty():
            upgrade = (
                None if self.upgrade_classic_group is None else self.upgrade_classic_group(existing, now_ms)
            )
            if upgrade is not None:
                records, finish = upgrade
                group = self.new_group(r.group_id)
                for record in records:
                    replay = CONSUMER_GROUP_REPLAY.get(type(record.key))
                    if replay is not None:
                        replay(group, record.key, record.value)
                return group, list(records), False, finish
        if existing is None or existing.is_empty():
            if r.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
                raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {r.group_id} not found.")
            pre = self.delete_classic_group(existing) if existing is not None else []
            return self.new_group(r.group_id), pre, True, None
        raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {r.group_id} is not a consumer group.")

    def new_group(self, group_id: str) -> ConsumerGroup:
        """An empty consumer group resolving topic names through the current image."""
        group = ConsumerGroup(group_id)
        group.topic_id_of = lambda name: self.image().topic_id(name)
        return group

    def _heartbeat(
        self, r: pb.ConsumerGroupHeartbeatRequest, now_ms: int
    ) -> CoordinatorResult[pb.ConsumerGroupHeartbeatResponse]:
        group, records, group_is_new, finish_upgrade = self._group_for(r, now_ms)
        gid = group.group_id
        owned = owned_partitions(r)
        instance_id = r.instance_id if r.HasField("instance_id") else None
        replaced: ConsumerGroupMember | None = None  # a static member's previous incarnation
        member_id = r.member_id
        if r.member_epoch == JOIN_GROUP_MEMBER_EPOCH and not member_id:
            member_id = base64.urlsafe_b64encode(self.new_uuid().bytes).rstrip(b"=").decode()  # v0

        if instance_id is None:
            member = group.members.get(member_id)
            if r.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
                is_new = member is None
                if member is None:
                    member = ConsumerGroupMember(member_id)
            else:
                if member is None:
                    raise CoordinatorError(
                        ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {gid}."
                    )
                is_new = False
                _check_epoch(member, r.member_epoch, owned)
        else:
            static = group.member_by_instance(instance_id)
            if r.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
                if static is None:
                    member = group.members.get(member_id) or ConsumerGroupMember(member_id)
                    is_new = member_id not in group.members
                elif static.member_id == member_id:
                    member, is_new = static, False  # a retried join
                elif static.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    raise CoordinatorError(
                        ErrorCode.unreleased_instance_id,
                        f"Static member {member_id} with instance id {instance_id} cannot join the group "
                        f"because the instance id is owned by member {static.member_id}.",
                    )
                else:
                    replaced, member, is_new = static, static_takeover(static, member_id), False
            else:
                member, is_new = known_static_member(group, instance_id, member_id), False
                _check_epoch(member, r.member_epoch, owned)

        if is_new and len(group.members) >= self.config.consumer_group_max_size:
            raise CoordinatorError(
                ErrorCode.group_max_size_reached,
                f"The consumer group has reached its maximum capacity of {self.config.consumer_group_max_size} members.",
            )

        updated = _apply_fields(member, r, instance_id)
        timers: list[TimerIntent] = []
        reconciled = self.advance_member(
            group,
            records,
            timers,
            member=member,
            updated=updated,
            is_new=is_new,
            replaced=replaced,
            group_is_new=group_is_new,
            owned=owned,
            now_ms=now_ms,
        )

        # Timers.
        timers.append(self.session_timer(gid, member_id, now_ms))
        if replaced is not None:
            timers += member_timer_cancels(gid, replaced.member_id)
        timers += self._rebalance_timer(gid, member, reconciled, now_ms)

        response = pb.ConsumerGroupHeartbeatResponse(
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(gid),
        )
        full_request = (
            r.rebalance_timeout_ms != -1
            and (r.HasField("subscribed_topic_names") or r.HasField("subscribed_topic_regex"))
            and r.HasField("topic_partitions")
        )
        if (
            r.member_epoch == JOIN_GROUP_MEMBER_EPOCH
            or full_request
            or reconciled.assigned_partitions() != member.assigned_partitions()
        ):
            response.assignment.SetInParent()
            for tid in sorted(reconciled.assigned):
                parts = reconciled.assigned[tid]
                if parts:
                    response.assignment.topic_partitions.add(topic_id=tid, partitions=sorted(parts))
        completions: list[tuple[Any, Any]] = []
        if finish_upgrade is not None:
            # The converted classic members keep their own session timeouts (Kafka's
            # convertToConsumerGroup); the classic group's timers and waiting requests end.
            retired = finish_upgrade()
            completions = retired.completions
            timers += retired.timers
            for other in group.members.values():
                classic = other.classic_member_metadata
                if classic is not None and other.member_id != member_id:
                    timers.append(
                        self.session_timer(gid, other.member_id, now_ms, classic.session_timeout_ms)
                    )
        return CoordinatorResult(records=records, response=response, completions=completions, timers=timers)

    def advance_member(
        self,
        group: ConsumerGroup,
        records: list[CoordinatorRecord],
        timers: list[TimerIntent],
        *,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        is_new: bool,
        replaced: ConsumerGroupMember | None,
        group_is_new: bool,
        owned: Mapping[bytes, frozenset[int]] | None,
        now_ms: int,
    ) -> ConsumerGroupMember:
        """Steps 3-5 for a member whose request fields are applied (``updated``): group epoch,
        target assignment, reconciliation. Appends the records to ``records`` (and the batched
        assignment's timer, when it must wait, to ``timers``) and returns the reconciled member. Shared by ConsumerGroupHeartbeat and the classic JoinGroup of a
        classic member inside a consumer group (migration/classic_members.py).

        ``member`` is the member as the group knows it (a fresh one when ``is_new``),
        ``replaced`` a static member's previous incarnation that ``updated`` takes over,
        ``owned`` the partitions the member reports owning (None: not reported).
        """
        gid = group.group_id
        member_id = updated.member_id
        image = self.image()
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
            if self._may_assign(group, now_ms):
                members = dict(group.members)
                if replaced is not None:
                    del members[replaced.member_id]
                members[member_id] = updated
                current_target: dict[str, Any] = group.target
                if replaced is not None:
                    current_target = dict(group.target)
                    current_target[member_id] = member_target
                target = compute_target_assignment(
                    group,
                    members,
                    current_target,
                    resolved,
                    self._assignor(group, member, updated),
                    image,
                    group_epoch,
                    now_ms,
                )
                if replaced is not None:
                    # the new member's target record was written above; write it again only if changed
                    target.records[:] = [
                        rec
                        for rec in target.records
                        if not (
                            isinstance(rec.key, rpb.ConsumerGroupTargetAssignmentMemberKey)
                            and rec.key.member_id == member_id
                            and target.by_member[member_id] == member_target
                        )
                    ]
                records += target.records
                target_epoch = group_epoch
                member_target = target.by_member.get(member_id, {})
            else:
                timers += self._assignment_timer(group, now_ms)

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

    def _assignor(
        self, group: ConsumerGroup, old: ConsumerGroupMember, new: ConsumerGroupMember
    ) -> PartitionAssignor:
        counts = Counter(group.assignor_count)
        if old.server_assignor is not None and old.member_id in group.members:
            counts[old.server_assignor] -= 1
        if new.server_assignor is not None:
            counts[new.server_assignor] += 1
        return self.assignors[_most_common(counts, self.default_assignor)]

    def _may_assign(self, group: ConsumerGroup, now_ms: int) -> bool:
        interval = self.assignment_interval_ms(group.group_id)
        return (
            interval <= 0
            or group.assignment_timestamp_ms < 0
            or now_ms - group.assignment_timestamp_ms >= interval
        )

    # --- leaving -----------------------------------------------------------------------------
    def _leave(
        self, r: pb.ConsumerGroupHeartbeatRequest, now_ms: int
    ) -> CoordinatorResult[pb.ConsumerGroupHeartbeatResponse]:
        group = self.consumer_group(r.group_id)
        if group is None:
            raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {r.group_id} not found.")
        instance_id = r.instance_id if r.HasField("instance_id") else None
        if instance_id is not None:
            member = known_static_member(group, instance_id, r.member_id)
        else:
            member = group.members.get(r.member_id)
            if member is None:
                raise CoordinatorError(
                    ErrorCode.unknown_member_id,
                    f"Member {r.member_id} is not a member of group {group.group_id}.",
                )
        response = pb.ConsumerGroupHeartbeatResponse(member_id=member.member_id, member_epoch=r.member_epoch)
        if r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if member.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                return CoordinatorResult(response=response)  # a retried temporary leave
            # Temporary leave: keep the assignment for the instance id, release what it was revoking.
            away = replace_member(
                member,
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                previous_member_epoch=member.member_epoch,
                pending_revocation={},
                state=MemberState.STABLE
                if member.state is MemberState.UNREVOKED_PARTITIONS
                else member.state,
            )
            return CoordinatorResult(
                records=[current_assignment_record(group.group_id, away)],
                response=response,
                timers=[CancelTimer(rebalance_timer_key(group.group_id, member.member_id))],
            )
        removal = self.remove_member(group, member, now_ms)
        return CoordinatorResult(records=removal.records, response=response, timers=removal.timers)

    def remove_member(
        self, group: ConsumerGroup, member: ConsumerGroupMember, now_ms: int
    ) -> CoordinatorResult[None]:
        """Kafka's fencing/removal: the member's tombstones, its regex if nobody else uses it,
        and a group epoch bump (the assignor runs on the next heartbeat) — or, when only
        classic members remain, the records converting the group back into a classic group
        (online downgrade). The member's timers end either way."""
        converted = self.downgrade(group, member.member_id, now_ms)
        if converted is not None:
            return converted
        return self.remove_members(group, [member])

    def downgrade(
        self,
        group: ConsumerGroup,
        leaving_member_id: str,
        now_ms: int,
        joining: ConsumerGroupMember | None = None,
    ) -> CoordinatorResult[None] | None:
        """The records converting the group back into a classic group when
        ``leaving_member_id`` goes (``joining`` taking its place), None when it stays a
        consumer group; on a conversion the members' consumer-group timers end and the classic
        group's start."""
        if self.downgrade_to_classic is None:
            return None
        converted = self.downgrade_to_classic(group, leaving_member_id, now_ms, joining)
        if converted is None:
            return None
        member_ids = list(group.members)
        if joining is not None:
            member_ids.append(joining.member_id)
        timers = list(converted.timers)
        for member_id in member_ids:
            timers += member_timer_cancels(group.group_id, member_id)
        return CoordinatorResult(records=converted.records, timers=timers)

    def remove_members(
        self, group: ConsumerGroup, members: list[ConsumerGroupMember]
    ) -> CoordinatorResult[None]:
        """Removing several members at once (a classic LeaveGroup batch): their tombstones,
        the regexes only they used, and one group epoch bump; their timers end."""
        gid = group.group_id
        records: list[CoordinatorRecord] = []
        timers: list[TimerIntent] = []
        for member in members:
            records += member_tombstones(gid, member.member_id)
            timers += member_timer_cancels(gid, member.member_id)
        resolved = {k: v.topics for k, v in group.resolved_regexes.items()}
        names, regexes = subscribed_topics(group, resolved, gone=members)
        for regex in group.resolved_regexes:
            if regexes.get(regex, 0) <= 0:
                records.append(regex_record(gid, regex, None))
        records.append(group_metadata_record(gid, group.group_epoch + 1, self.image().metadata_hash(names)))
        return CoordinatorResult(records=records, timers=timers)

    # --- timers ------------------------------------------------------------------------------
    def session_timer(
        self, group_id: str, member_id: str, now_ms: int, delay_ms: int | None = None
    ) -> ScheduleTimer:
        """(Re-)arming the member's session: the group's session timeout, or ``delay_ms`` (a
        classic member's own session timeout)."""
        delay = self.session_timeout_ms(group_id) if delay_ms is None else delay_ms
        return self.fencing_timer(session_timer_key(group_id, member_id), group_id, member_id, now_ms, delay)

    def fencing_timer(
        self,
        key: str,
        group_id: str,
        member_id: str,
        now_ms: int,
        delay_ms: int,
        still: Callable[[ConsumerGroupMember], bool] | None = None,
    ) -> ScheduleTimer:
        """A timer that removes the member when it fires, if it is still there (and ``still``
        holds for it: the world may have moved since)."""
        return deadline_timer(key, delay_ms, now_ms, self._fence, group_id, member_id, still)

    def _fence(
        self, group_id: str, member_id: str, still: Callable[[ConsumerGroupMember], bool] | None, now_ms: int
    ) -> CoordinatorResult[None]:
        group = self.consumer_group(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None or (still is not None and not still(member)):
            return CoordinatorResult()
        return self.remove_member(group, member, now_ms)

    def _rebalance_timer(
        self, group_id: str, before: ConsumerGroupMember, after: ConsumerGroupMember, now_ms: int
    ) -> list[TimerIntent]:
        """A revoking member must revoke within its rebalance timeout: armed when it starts
        revoking at an epoch (not re-armed while it keeps revoking at that epoch), cancelled
        once it stops."""
        key = rebalance_timer_key(group_id, after.member_id)
        if after.state is not MemberState.UNREVOKED_PARTITIONS:
            return [CancelTimer(key)]
        if (
            before.state is MemberState.UNREVOKED_PARTITIONS
            and before.member_epoch == after.member_epoch
            and self.armed.is_scheduled(key)
        ):
            return []
        epoch = after.member_epoch
        return [
            self.fencing_timer(
                key,
                group_id,
                after.member_id,
                now_ms,
                after.rebalance_timeout_ms,
                lambda m: m.member_epoch == epoch and m.state is MemberState.UNREVOKED_PARTITIONS,
            )
        ]

    def _assignment_timer(self, group: ConsumerGroup, now_ms: int) -> list[TimerIntent]:
        """The batched assignment (consumer.assignment.interval.ms), unless already armed."""
        key = assignment_timer_key(group.group_id)
        if self.armed.is_scheduled(key):
            return []
        due = group.assignment_timestamp_ms + self.assignment_interval_ms(group.group_id)
        return [deadline_timer(key, due - now_ms, now_ms, self._assign_now, group.group_id)]

    def _assign_now(self, group_id: str, now_ms: int) -> CoordinatorResult[None]:
        """The batched assignment: compute the target for the group as it is now."""
        group = self.consumer_group(group_id)
        if group is None or group.group_epoch <= group.assignment_epoch:
            return CoordinatorResult()
        resolved = {k: v.topics for k, v in group.resolved_regexes.items()}
        target = compute_target_assignment(
            group,
            group.members,
            group.target,
            resolved,
            self.assignors[group.preferred_assignor(self.default_assignor)],
            self.image(),
            group.group_epoch,
            now_ms,
        )
        return CoordinatorResult(records=target.records)

    def on_loaded(self, now_ms: int) -> CoordinatorResult[None]:
        """After a takeover: every member gets a fresh session (and a revoking member a fresh
        rebalance timeout); a group waiting for a batched assignment gets its timer back."""
        timers: list[TimerIntent] = []
        for group in list(self.groups.values()):
            if not isinstance(group, ConsumerGroup):
                continue
            for member in group.members.values():
                classic = member.classic_member_metadata
                session_ms = classic.session_timeout_ms if classic is not None else None
                timers.append(self.session_timer(group.group_id, member.member_id, now_ms, session_ms))
                if member.state is MemberState.UNREVOKED_PARTITIONS and classic is None:
                    timers += self._rebalance_timer(
                        group.group_id, ConsumerGroupMember(member.member_id), member, now_ms
                    )
            if (
                group.group_epoch > group.assignment_epoch
                and group.members
                and not self._may_assign(group, now_ms)
            ):
                timers += self._assignment_timer(group, now_ms)
        return CoordinatorResult(timers=timers)

    # --- topic metadata ----------------------------------------------------------------------
    def on_metadata_update(self, image: TopicsImage, now_ms: int) -> CoordinatorResult[None]:
        """Records for the groups the new image affects: regexes re-resolved, and a group epoch
        bump where the subscribed topics changed (created, deleted, recreated with a new id,
        partitions added, racks changed) or a regex now matches other topics."""
        records: list[CoordinatorRecord] = []
        for group in list(self.groups.values()):
            if not isinstance(group, ConsumerGroup):
                continue
            resolved = {k: v.topics for k, v in group.resolved_regexes.items()}
            regex_changed = False
            for regex in group.regex_count:
                topics = resolve(regex, image)
                if resolved.get(regex) != topics:
                    resolved[regex] = topics
                    records.append(regex_record(group.group_id, regex, topics, now_ms))
                    regex_changed = True
            names, _ = subscribed_topics(group, resolved)
            metadata_hash = image.metadata_hash(names)
            if regex_changed or metadata_hash != group.metadata_hash:
                records.append(group_metadata_record(group.group_id, group.group_epoch + 1, metadata_hash))
        return CoordinatorResult(records=records)


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


def static_takeover(static: ConsumerGroupMember, member_id: str) -> ConsumerGroupMember:
    """A static member back under a new member id takes over the old member's assignment,
    without a group epoch bump (KIP-848 static membership); its epoch starts again at 0."""
    return replace_member(static, member_id=member_id, member_epoch=0, previous_member_epoch=0)


def known_static_member(group: ConsumerGroup, instance_id: str, member_id: str | None) -> ConsumerGroupMember:
    """The member holding ``instance_id``: UNKNOWN_MEMBER_ID if none, FENCED_INSTANCE_ID if it
    has another member id than ``member_id`` (None: any, an admin removing by instance id)."""
    static = group.member_by_instance(instance_id)
    if static is None:
        raise CoordinatorError(
            ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown in group {group.group_id}."
        )
    if member_id is not None and static.member_id != member_id:
        raise CoordinatorError(
            ErrorCode.fenced_instance_id,
            f"Static member {member_id} with instance id {instance_id} is fenced by member {static.member_id}.",
        )
    return static


def _most_common(counts: Counter[str], default: str) -> str:
    live = {a: c for a, c in counts.items() if c > 0}
    if not live:
        return default
    top = max(live.values())
    return min(a for a, c in live.items() if c == top)


def _check_epoch(
    member: ConsumerGroupMember, received: int, owned: Mapping[bytes, frozenset[int]] | None
) -> None:
    """Kafka's throwIfMemberEpochIsInvalid, with the lost-response rule."""
    if received > member.member_epoch:
        raise CoordinatorError(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a greater member epoch ({received}) than the one known by "
            f"the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )
    # The member may have missed the response that bumped its epoch: accept the previous
    # epoch while it owns nothing it was not given.
    if received < member.member_epoch and (
        received != member.previous_member_epoch or not _is_subset(owned, member)
    ):
        raise CoordinatorError(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a smaller member epoch ({received}) than the one known by "
            f"the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )


def _apply_fields(
    member: ConsumerGroupMember, r: pb.ConsumerGroupHeartbeatRequest, instance_id: str | None
) -> ConsumerGroupMember:
    changes: dict[str, Any] = {}
    if instance_id is not None and instance_id != member.instance_id:
        changes["instance_id"] = instance_id
    if r.HasField("rack_id") and r.rack_id != member.rack_id:
        changes["rack_id"] = r.rack_id
    if r.rebalance_timeout_ms != -1 and r.rebalance_timeout_ms != member.rebalance_timeout_ms:
        changes["rebalance_timeout_ms"] = r.rebalance_timeout_ms
    if r.client_id and r.client_id != member.client_id:
        changes["client_id"] = r.client_id
    if r.client_host and r.client_host != member.client_host:
        changes["client_host"] = r.client_host
    if r.HasField("subscribed_topic_names"):
        names = tuple(sorted(set(r.subscribed_topic_names.names)))
        if names != member.subscribed_topic_names:
            changes["subscribed_topic_names"] = names
    if r.HasField("subscribed_topic_regex"):
        regex = r.subscribed_topic_regex or None
        if regex != member.subscribed_topic_regex:
            changes["subscribed_topic_regex"] = regex
    if r.HasField("server_assignor") and r.server_assignor != member.server_assignor:
        changes["server_assignor"] = r.server_assignor
    return replace_member(member, **changes) if changes else member


def _subscription_changed(old: ConsumerGroupMember, new: ConsumerGroupMember) -> bool:
    return (
        old.subscribed_topic_names != new.subscribed_topic_names
        or old.subscribed_topic_regex != new.subscribed_topic_regex
        or old.server_assignor != new.server_assignor
        or old.rack_id != new.rack_id
    )


def _metadata_differs(old: ConsumerGroupMember, new: ConsumerGroupMember) -> bool:
    return old.metadata_value() != new.metadata_value()
