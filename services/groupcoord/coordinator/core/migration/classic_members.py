"""Classic-protocol members inside a consumer group (KIP-848 online migration).

Once a classic group has been upgraded (migration/online_migration.py), the members still running an old
client keep sending JoinGroup, SyncGroup, Heartbeat and LeaveGroup. The consumer group serves
them by translation, each member reconciled on its own, as Kafka 4.x's
``classicGroupJoinToConsumerGroup`` & co. do:

* **JoinGroup** is a heartbeat carrying a full subscription: the member's topics and rack come
  from its embedded consumer-protocol subscription, and the partitions it still owns from the
  subscription's owned partitions (cooperative clients send them; eager ones own nothing once
  they rejoin). The member goes through the same group epoch / target assignment /
  reconciliation steps as a ConsumerGroupHeartbeat. The answer comes at once: generation =
  member epoch, no leader (the assignment is the server's), the member's first protocol.
* **SyncGroup** returns the member's current assignment, encoded in the consumer protocol —
  while it still has partitions to revoke, without them; a cooperative client then revokes
  them and rejoins, which moves it to the next epoch.
* **Heartbeat** keeps the session and answers REBALANCE_IN_PROGRESS whenever the member has
  something to do: the group epoch moved past it, it must revoke, or partitions it waits for
  were released.
* **LeaveGroup** removes the members (by member id or instance id) with one epoch bump.

A classic member that is told to rejoin must do so within its rebalance timeout, and one that
joined must sync within it; otherwise it is removed (timer events, like every timeout here).
"""

from __future__ import annotations

import struct
from typing import Any

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError, error_response
from groupcoord.coordinator.core.classic.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Assignment,
    Subscription,
    decode_subscription,
    encode_assignment,
)
from groupcoord.coordinator.core.classic.join import (
    JOIN_REQUIRES_KNOWN_MEMBER_ID_VERSION,
    new_member_id,
)
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.consumer.assignment import MemberUpdate, advance_member
from groupcoord.coordinator.core.consumer.consumer_context import ConsumerContext
from groupcoord.coordinator.core.consumer.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    replace_member,
)
from groupcoord.coordinator.core.consumer.consumer_membership import (
    downgrade,
    fencing_timer,
    known_static_member,
    remove_members,
    session_timer,
    static_takeover,
)
from groupcoord.coordinator.core.consumer.consumer_timers import (
    classic_join_timer_key,
    classic_sync_timer_key,
    member_timer_cancels,
)
from groupcoord.coordinator.core.contract import (
    CancelTimer,
    CoordinatorRecord,
    CoordinatorResult,
    TimerIntent,
)
from groupcoord.rpc.v1 import classic_group_pb2 as pb


class ClassicMembersOfConsumerGroups:
    """The classic group APIs for consumer groups of one state-topic partition."""

    def __init__(self, consumer: ConsumerContext, config: GroupConfig) -> None:
        self.consumer = consumer
        self.config = config

    # ------------------------------------------------------------------------------ JoinGroup
    def join_group(
        self, group: ConsumerGroup, request: pb.JoinGroupRequest, now_ms: int
    ) -> CoordinatorResult[pb.JoinGroupResponse]:
        """A classic JoinGroup to a non-empty consumer group (session timeout and group id were
        validated as for any JoinGroup)."""
        member_id = request.member_id
        unknown = member_id == ""
        if unknown:
            member_id = new_member_id(request.client_id, self.consumer.new_uuid())
        try:
            return self._join(group, request, member_id, unknown, now_ms)
        except CoordinatorError as e:
            return CoordinatorResult(
                response=error_response(pb.JoinGroupResponse, e, member_id=request.member_id)
            )

    def _join(
        self, group: ConsumerGroup, request: pb.JoinGroupRequest, member_id: str, unknown: bool, now_ms: int
    ) -> CoordinatorResult[pb.JoinGroupResponse]:
        gid = group.group_id
        instance_id = request.group_instance_id if request.HasField("group_instance_id") else None
        if member_id not in group.members and len(group.members) >= self.config.consumer_group_max_size:
            raise CoordinatorError(
                ErrorCode.group_max_size_reached,
                f"The consumer group has reached its maximum capacity of {self.config.consumer_group_max_size} members.",
            )
        protocols = tuple((p.name, p.metadata) for p in request.protocols)
        if not _supports_protocols(group, request.protocol_type, [n for n, _ in protocols]):
            raise CoordinatorError(
                ErrorCode.inconsistent_group_protocol, f"Member {member_id}'s protocols are not supported."
            )
        if unknown and instance_id is None and request.api_version >= JOIN_REQUIRES_KNOWN_MEMBER_ID_VERSION:
            return CoordinatorResult(
                response=pb.JoinGroupResponse(
                    error_code=ErrorCode.member_id_required.value, member_id=member_id
                )
            )
        subscription = _subscription(protocols)

        records: list[CoordinatorRecord] = []
        timers: list[TimerIntent] = []
        replaced: ConsumerGroupMember | None = None
        if instance_id is None:
            existing = group.members.get(member_id)
            member = existing if existing is not None else ConsumerGroupMember(member_id)
            is_new = existing is None
        else:
            static = group.member_by_instance(instance_id)
            if unknown:
                if static is None:
                    member, is_new = ConsumerGroupMember(member_id), True
                else:
                    # The static member restarted: the new id takes over its assignment.
                    replaced, member, is_new = static, static_takeover(static, member_id), False
            else:
                member, is_new = known_static_member(group, instance_id, member_id), False

        changes: dict[str, Any] = {
            "subscribed_topic_names": tuple(sorted(set(subscription.topics))),
            "client_id": request.client_id,
            "client_host": request.client_host,
            "classic_member_metadata": ClassicMemberMetadata(request.session_timeout_ms, protocols),
        }
        if instance_id is not None:
            changes["instance_id"] = instance_id
        if subscription.rack_id:
            changes["rack_id"] = subscription.rack_id
        if request.rebalance_timeout_ms != -1:
            changes["rebalance_timeout_ms"] = request.rebalance_timeout_ms
        updated = replace_member(member, **changes)

        image = self.consumer.image
        owned: dict[bytes, frozenset[int]] = {}
        for name, parts in subscription.owned_partitions.items():
            topic_id = image.topic_id(name)
            if topic_id is not None:
                owned[topic_id] = owned.get(topic_id, frozenset()) | frozenset(parts)
        change = MemberUpdate(member, updated, is_new, replaced)
        reconciled = advance_member(
            self.consumer, group, records, timers, change, group_is_new=False, owned=owned, now_ms=now_ms
        )

        timers.append(CancelTimer(classic_join_timer_key(gid, member_id)))
        if replaced is not None:
            timers += member_timer_cancels(gid, replaced.member_id)
            if not replaced.uses_classic_protocol:
                downgraded = self._downgrade_replacing(group, replaced, reconciled, now_ms)
                if downgraded is not None:
                    return CoordinatorResult(
                        records=downgraded.records,
                        response=downgraded.response,
                        timers=timers + downgraded.timers,
                    )
        timers.append(session_timer(self.consumer, gid, member_id, now_ms, request.session_timeout_ms))
        timers.append(
            fencing_timer(
                self.consumer,
                classic_sync_timer_key(gid, member_id),
                gid,
                member_id,
                now_ms,
                request.rebalance_timeout_ms,
            )
        )
        response = pb.JoinGroupResponse(
            error_code=ErrorCode.none.value,
            generation_id=reconciled.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=protocols[0][0],
            leader="",
            member_id=member_id,
        )
        return CoordinatorResult(records=records, response=response, timers=timers)

    def _downgrade_replacing(
        self, group: ConsumerGroup, replaced: ConsumerGroupMember, joining: ConsumerGroupMember, now_ms: int
    ) -> CoordinatorResult[pb.JoinGroupResponse] | None:
        """The classic static member replaced the last consumer-protocol member: the group
        converts back, Stable at generation = group epoch, the joining member holding what the
        replaced one held (its SyncGroup then returns it)."""
        converted = downgrade(self.consumer, group, replaced.member_id, now_ms, joining)
        if converted is None:
            return None
        response = pb.JoinGroupResponse(
            error_code=ErrorCode.none.value,
            generation_id=group.group_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=_protocol_name(joining),
            leader="",
            member_id=joining.member_id,
        )
        return CoordinatorResult(records=converted.records, response=response, timers=converted.timers)

    # ------------------------------------------------------------------------------ SyncGroup
    def sync_group(
        self, group: ConsumerGroup, request: pb.SyncGroupRequest, now_ms: int
    ) -> CoordinatorResult[pb.SyncGroupResponse]:
        timers: list[TimerIntent] = []
        try:
            member = self._classic_member(group, request.member_id, _instance_id(request))
            if request.generation_id != member.member_epoch:
                raise _illegal_generation(request.generation_id, member)
            protocol_name = _protocol_name(member)
            if request.HasField("protocol_type") and request.protocol_type != CONSUMER_PROTOCOL_TYPE:
                raise CoordinatorError(
                    ErrorCode.inconsistent_group_protocol,
                    f"The protocol type {request.protocol_type} is not {CONSUMER_PROTOCOL_TYPE}.",
                )
            if request.HasField("protocol_name") and request.protocol_name != protocol_name:
                raise CoordinatorError(
                    ErrorCode.inconsistent_group_protocol,
                    f"The protocol name {request.protocol_name} is not {protocol_name}, the one the join returned.",
                )
            if (
                group.group_epoch > member.member_epoch
                and member.state is not MemberState.UNREVOKED_PARTITIONS
            ):
                raise self._rebalance_in_progress(group, member, now_ms, timers)
        except CoordinatorError as e:
            return CoordinatorResult(response=error_response(pb.SyncGroupResponse, e), timers=timers)
        gid = group.group_id
        return CoordinatorResult(
            response=pb.SyncGroupResponse(
                error_code=ErrorCode.none.value,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocol_name=protocol_name,
                assignment=self._assignment(member),
            ),
            timers=[
                CancelTimer(classic_sync_timer_key(gid, member.member_id)),
                session_timer(self.consumer, gid, member.member_id, now_ms, _session_ms(member)),
            ],
        )

    def _assignment(self, member: ConsumerGroupMember) -> bytes:
        """The member's current partitions in the consumer protocol, at the version of its
        subscription (as Kafka answers)."""
        partitions = self.consumer.image.partitions_by_name(member.assigned)
        metadata = (
            member.classic_member_metadata.supported_protocols[0][1]
            if member.classic_member_metadata
            else b""
        )
        version = struct.unpack_from(">h", metadata)[0] if len(metadata) >= 2 else 0
        return encode_assignment(Assignment(partitions), version=max(0, min(version, 3)))

    # ------------------------------------------------------------------------------ Heartbeat
    def heartbeat(
        self, group: ConsumerGroup, request: pb.HeartbeatRequest, now_ms: int
    ) -> CoordinatorResult[pb.HeartbeatResponse]:
        timers: list[TimerIntent] = []
        try:
            member = self._classic_member(group, request.member_id, _instance_id(request))
            if request.generation_id != member.member_epoch:
                raise _illegal_generation(request.generation_id, member)
            timers.append(
                session_timer(self.consumer, group.group_id, member.member_id, now_ms, _session_ms(member))
            )
            if (
                member.member_epoch < group.group_epoch
                or member.state is MemberState.UNREVOKED_PARTITIONS
                or (
                    member.state is MemberState.UNRELEASED_PARTITIONS
                    and not self._waits_on_others(group, member)
                )
            ):
                raise self._rebalance_in_progress(group, member, now_ms, timers)
        except CoordinatorError as e:
            return CoordinatorResult(response=error_response(pb.HeartbeatResponse, e), timers=timers)
        return CoordinatorResult(response=pb.HeartbeatResponse(error_code=ErrorCode.none.value), timers=timers)

    def _waits_on_others(self, group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
        """Kafka's waitingOnUnreleasedPartition: a partition of its target is still owned by
        another member."""
        for topic_id, parts in group.target.get(member.member_id, {}).items():
            have = member.assigned.get(topic_id, {})
            for p in parts:
                if p in have:
                    continue
                owner = group.partition_epoch_owner(topic_id, p)
                if owner is not None and owner != member.member_id:
                    return True
        return False

    # ------------------------------------------------------------------------------ LeaveGroup
    def leave_group(
        self, group: ConsumerGroup, request: pb.LeaveGroupRequest, now_ms: int
    ) -> CoordinatorResult[pb.LeaveGroupResponse]:
        results: list[pb.LeaveGroupMemberResponse] = []
        leaving: dict[str, ConsumerGroupMember] = {}
        for identity in request.members:
            instance_id = identity.group_instance_id if identity.HasField("group_instance_id") else None
            result = pb.LeaveGroupMemberResponse(member_id=identity.member_id)
            if instance_id is not None:
                result.group_instance_id = instance_id
            try:
                if instance_id is None:
                    member = self._classic_member(group, identity.member_id, None)
                else:
                    # An admin may remove a static member by instance id alone (no member id).
                    member = self._classic_member(group, identity.member_id or None, instance_id)
                    result.member_id = member.member_id
                leaving[member.member_id] = member
            except CoordinatorError as e:
                result.error_code = e.code.value
            results.append(result)
        removal = (
            remove_members(self.consumer, group, list(leaving.values())) if leaving else CoordinatorResult()
        )
        top = ErrorCode.none.value
        if request.api_version < 3 and results:
            top = results[0].error_code
        return CoordinatorResult(
            records=removal.records,
            response=pb.LeaveGroupResponse(error_code=top, members=results),
            timers=removal.timers,
        )

    # ------------------------------------------------------------------------------ helpers
    def _classic_member(
        self, group: ConsumerGroup, member_id: str | None, instance_id: str | None
    ) -> ConsumerGroupMember:
        """Kafka's validateConsumerGroupMember + throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = group.members.get(member_id or "")
            if member is None:
                raise CoordinatorError(
                    ErrorCode.unknown_member_id,
                    f"Member {member_id} is not a member of group {group.group_id}.",
                )
        else:
            member = known_static_member(group, instance_id, member_id)
        if not member.uses_classic_protocol:
            raise CoordinatorError(
                ErrorCode.unknown_member_id, f"Member {member.member_id} does not use the classic protocol."
            )
        return member

    def _rebalance_in_progress(
        self, group: ConsumerGroup, member: ConsumerGroupMember, now_ms: int, timers: list[TimerIntent]
    ) -> CoordinatorError:
        """REBALANCE_IN_PROGRESS, and the member must rejoin within its rebalance timeout (the
        timer, unless already running, is appended to ``timers``)."""
        key = classic_join_timer_key(group.group_id, member.member_id)
        if not self.consumer.armed.is_scheduled(key):
            timers.append(
                fencing_timer(
                    self.consumer, key, group.group_id, member.member_id, now_ms, member.rebalance_timeout_ms
                )
            )
        return CoordinatorError(
            ErrorCode.rebalance_in_progress,
            f"A new rebalance is triggered in group {group.group_id} and member {member.member_id} should rejoin to catch up.",
        )


def _supports_protocols(group: ConsumerGroup, protocol_type: str, names: list[str]) -> bool:
    """Kafka's ConsumerGroup.supportsClassicProtocols: the embedded consumer protocol, and a
    protocol every classic member of the group supports."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
        return False
    classic = [m.classic_member_metadata for m in group.members.values() if m.classic_member_metadata]
    return any(all(any(n == name for n, _ in c.supported_protocols) for c in classic) for name in names)


def _subscription(protocols: tuple[tuple[str, bytes], ...]) -> Subscription:
    try:
        return decode_subscription(protocols[0][1])
    except Exception as e:
        raise CoordinatorError(
            ErrorCode.inconsistent_group_protocol, f"Malformed embedded consumer protocol subscription ({e})."
        ) from e


def _protocol_name(member: ConsumerGroupMember) -> str:
    classic = member.classic_member_metadata
    return classic.supported_protocols[0][0] if classic and classic.supported_protocols else ""


def _session_ms(member: ConsumerGroupMember) -> int | None:
    return member.classic_member_metadata.session_timeout_ms if member.classic_member_metadata else None


def _instance_id(request: pb.SyncGroupRequest | pb.HeartbeatRequest) -> str | None:
    return request.group_instance_id if request.HasField("group_instance_id") else None


def _illegal_generation(generation_id: int, member: ConsumerGroupMember) -> CoordinatorError:
    return CoordinatorError(
        ErrorCode.illegal_generation,
        f"The request generation id {generation_id} is not equal to the member epoch "
        f"{member.member_epoch} of member {member.member_id}.",
    )
