"""Online migration between the classic and the consumer (KIP-848) protocol: the classic side.

KIP-848's "Supporting Online Consumer Group Upgrade": the first ConsumerGroupHeartbeat to a
classic group converts it into a consumer group (the generation becomes the group epoch, the
members' current assignments carry over); when the last consumer-protocol member leaves a
group whose other members all use the classic protocol, it converts back. Apache Kafka does
this in ``GroupMetadataManager.convertToConsumerGroup`` / ``convertToClassicGroup`` with
``ConsumerGroup.fromClassicGroup`` / ``ClassicGroup.fromConsumerGroup``.

:class:`OnlineMigration` is what the shard wires into the consumer groups' context. This module
holds what the classic protocol contributes: whether a classic group may be upgraded, what each classic member brings into a consumer
group (:func:`members_for_upgrade`), the answers and timer cancels that retire the classic
group (:func:`release_for_upgrade`), and the records that rebuild a classic group from a consumer
group's members on a downgrade (:func:`classic_group_from_members`). The consumer-group side
lives beside it in this package: its records (consumer_records.py), and serving
JoinGroup/SyncGroup/Heartbeat/LeaveGroup of classic members inside a consumer group
(classic_members.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.classic.classic_context import ClassicContext
from groupcoord.coordinator.core.classic.classic_group import ClassicGroup, ClassicGroupMember
from groupcoord.coordinator.core.classic.classic_timers import heartbeat_key, join_key
from groupcoord.coordinator.core.classic.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Assignment,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from groupcoord.coordinator.core.classic.rebalance import create_converted_group
from groupcoord.coordinator.core.classic.waiters import WaitKey
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.consumer.consumer_group import ConsumerGroup, ConsumerGroupMember
from groupcoord.coordinator.core.contract import (
    CancelTimer,
    CoordinatorRecord,
    CoordinatorResult,
    TimerIntent,
)
from groupcoord.coordinator.core.group import Group
from groupcoord.coordinator.core.migration.consumer_records import (
    MigratingMember,
    carry_over,
    consumer_group_records_from_classic,
)
from groupcoord.coordinator.core.topics_image import TopicsImage
from groupcoord.rpc.v1 import classic_group_pb2 as pb


def can_upgrade(group: ClassicGroup, config: GroupConfig, consumer_group_max_size: int) -> bool:
    """Kafka's validateOnlineUpgrade: policy allows it, the group uses the embedded consumer
    protocol, and it is not larger than a consumer group may be."""
    return (
        config.consumer_group_migration_policy.upgrade_enabled
        and group.protocol_type == CONSUMER_PROTOCOL_TYPE
        and len(group.members) <= consumer_group_max_size
    )


def members_for_upgrade(group: ClassicGroup) -> tuple[int, list[MigratingMember]]:
    """The group epoch (the classic generation) and every member with its subscription and its
    current assignment, decoded from the embedded consumer protocol.

    A malformed subscription or assignment makes the upgrade impossible: Kafka answers
    GROUP_ID_NOT_FOUND then, and the group stays classic.
    """
    out = []
    for m in group.members.values():
        try:
            sub = decode_subscription(
                m.metadata(group.protocol_name) if group.protocol_name else m.protocols[0][1]
            )
            assigned = decode_assignment(m.assignment).partitions
        except Exception as e:
            raise CoordinatorError(
                ErrorCode.group_id_not_found,
                f"Cannot upgrade the classic group {group.group_id}: malformed consumer protocol ({e})",
            ) from e
        out.append(
            carry_over(
                m,
                MigratingMember,
                subscribed_topics=tuple(sub.topics),
                assigned={t: list(ps) for t, ps in assigned.items()},
                rack_id=sub.rack_id,
            )
        )
    return group.generation_id, out


def release_for_upgrade(classic: ClassicContext, group: ClassicGroup) -> CoordinatorResult[None]:
    """Ends the classic group's timers and answers its waiting requests: a JoinGroup or
    SyncGroup still waiting gets REBALANCE_IN_PROGRESS, so the member rejoins — now served by
    the consumer group (Kafka's convertToConsumerGroup)."""
    answers: list[tuple[WaitKey, Any]] = []
    timers: list[TimerIntent] = []
    code = ErrorCode.rebalance_in_progress.value
    for member_id in group.members:
        answers.append(
            (("join", group.group_id, member_id), pb.JoinGroupResponse(error_code=code, member_id=member_id))
        )
        answers.append((("sync", group.group_id, member_id), pb.SyncGroupResponse(error_code=code)))
        timers.append(CancelTimer(heartbeat_key(group.group_id, member_id)))
    timers.append(CancelTimer(join_key(group.group_id)))
    return CoordinatorResult(completions=classic.waiters.release(answers), timers=timers)


def classic_group_from_members(
    classic: ClassicContext,
    group_id: str,
    group_epoch: int,
    members: list[MigratingMember],
    now_ms: int,
    *,
    rebalance: bool,
) -> CoordinatorResult[None]:
    """Records (and session timers) of the classic group a consumer group converts back into (Kafka's
    ClassicGroup.fromConsumerGroup): generation = group epoch, every member with its current
    assignment encoded in the consumer protocol, the protocol every member supports, Stable.

    With ``rebalance`` (the downgrade was caused by a member leaving), the group then prepares a
    rebalance, as Kafka does, so the remaining classic members rejoin and redistribute.
    The consumer group's own tombstones must precede these records (they replace the group).
    """
    converted = [
        carry_over(
            m,
            ClassicGroupMember,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            assignment=encode_assignment(Assignment(m.assigned)),
            joined_generation=group_epoch,
        )
        for m in members
    ]
    return create_converted_group(classic, group_id, group_epoch, converted, now_ms, rebalance=rebalance)


def migrating_member_from_consumer(member: ConsumerGroupMember, image: TopicsImage) -> MigratingMember:
    """A classic member of a consumer group as the classic group it converts back into needs
    it: its classic protocols and session timeout, and its current assignment by topic name
    (Kafka's ClassicGroupMember built in ClassicGroup.fromConsumerGroup)."""
    classic = member.classic_member_metadata
    if classic is None:
        raise ValueError(f"member {member.member_id} does not use the classic protocol")
    return MigratingMember(
        member_id=member.member_id,
        group_instance_id=member.instance_id,
        client_id=member.client_id,
        client_host=member.client_host,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        session_timeout_ms=classic.session_timeout_ms,
        protocols=classic.supported_protocols,
        subscribed_topics=member.subscribed_topic_names,
        assigned=image.partitions_by_name(member.assigned),
        rack_id=member.rack_id,
    )


class OnlineMigration:
    """Both directions of KIP-848 online migration, wired by the shard into the consumer groups'
    context (``upgrade``, ``downgrade``): each returns the records that replace one group type
    by the other, so the conversion is written — and replayed after a failover — like any
    other change (Kafka's convertToConsumerGroup / convertToClassicGroup)."""

    def __init__(self, classic: ClassicContext, config: GroupConfig) -> None:
        self.classic = classic
        self.config = config

    def upgrade(
        self, group: Group, now_ms: int
    ) -> tuple[list[CoordinatorRecord], Callable[[], CoordinatorResult[None]]] | None:
        """The first ConsumerGroupHeartbeat to a non-empty classic group: the classic group's
        tombstones then the consumer group's records (generation = group epoch, current
        assignments carried over), and what answers the classic group's waiting requests
        (REBALANCE_IN_PROGRESS: they rejoin, served by the consumer group) and ends its timers. None when the
        policy, the protocol type or the size forbids it (the heartbeat then gets
        GROUP_ID_NOT_FOUND, as in Kafka); a malformed embedded protocol raises it."""
        if not isinstance(group, ClassicGroup) or not can_upgrade(
            group, self.config, self.config.consumer_group_max_size
        ):
            return None
        epoch, members = members_for_upgrade(group)
        records = group.tombstone_records()
        records += consumer_group_records_from_classic(group.group_id, epoch, members, self.classic.data.image, now_ms)

        return records, lambda: release_for_upgrade(self.classic, group)

    def downgrade(
        self,
        group: ConsumerGroup,
        leaving_member_id: str,
        now_ms: int,
        joining: ConsumerGroupMember | None = None,
    ) -> CoordinatorResult[None] | None:
        """When ``leaving_member_id`` leaves (or is fenced) and every other member uses the
        classic protocol: the consumer group's tombstones, then a classic group of the others
        at generation = group epoch, preparing a rebalance (Kafka's
        validateOnlineDowngradeWithFencedMember + convertToClassicGroup). With ``joining`` (a
        classic static member taking over a consumer-protocol member's instance id, Kafka's
        validateOnlineDowngradeWithReplacedMemberId), the joining member takes the leaving
        one's place and the classic group stays Stable. None when the group stays a consumer
        group: it would be empty, a consumer-protocol member remains, the policy forbids it,
        or it is larger than group.classic.max.size.

        The member check stops at the first consumer-protocol member that stays: every leave
        of a large consumer group asks, and walking its members took milliseconds of the loop."""
        if not self.config.consumer_group_migration_policy.downgrade_enabled:
            return None
        if (joining is not None and not joining.uses_classic_protocol) or any(
            not m.uses_classic_protocol and m.member_id != leaving_member_id for m in group.members.values()
        ):
            return None
        remaining = [m for m in group.members.values() if m.member_id != leaving_member_id]
        if joining is not None:
            remaining.append(joining)
        if not remaining or len(remaining) > self.config.classic_group_max_size:
            return None
        image = self.classic.data.image
        members = [migrating_member_from_consumer(m, image) for m in remaining]
        classic = classic_group_from_members(
            self.classic, group.group_id, group.group_epoch, members, now_ms, rebalance=joining is None
        )
        return CoordinatorResult(records=group.tombstone_records() + classic.records, timers=classic.timers)
