"""What every KIP-932 share group handler works on.

The share-group counterpart of :class:`~groupcoord.coordinator.core.classic.classic_context.ClassicContext`
and :class:`~groupcoord.coordinator.core.consumer.consumer_context.ConsumerContext`: the share groups and
share-partitions of one state-topic partition live in the partition's state (``groups``,
``share_partitions``, core/state.py); this object holds that root, the config and the group
configs, and turns a group's dynamic configs (else the broker-level defaults) into the values
the share modules take as arguments (:class:`~.heartbeat.ShareGroupConfig`,
:class:`~.delivery.DeliveryConfig`), so those modules stay functions of plain values.

Handlers compute without mutating anything (the rule of every group type, core/state.py): the
records they return, once replayed, are the change.
"""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import (
    ArmedTimers,
    CoordinatorRecord,
    CoordinatorResult,
    PublishOutcome,
    TimerIntent,
    TopicRule,
)
from groupcoord.coordinator.core.group_configs import (
    DLQ_COPY_RECORD_ENABLE,
    DLQ_TOPIC_NAME,
    SHARE_AUTO_OFFSET_RESET,
    SHARE_DELIVERY_COUNT_LIMIT,
    SHARE_HEARTBEAT_INTERVAL_MS,
    SHARE_ISOLATION_LEVEL,
    SHARE_PARTITION_MAX_RECORD_LOCKS,
    SHARE_RECORD_LOCK_DURATION_MS,
    SHARE_RENEW_ACKNOWLEDGE_ENABLE,
    SHARE_SESSION_TIMEOUT_MS,
    GroupConfigManager,
)
from groupcoord.coordinator.core.share import delivery as share_delivery
from groupcoord.coordinator.core.share import share_group, share_heartbeat
from groupcoord.coordinator.core.share.share_group import ShareGroup
from groupcoord.coordinator.core.share.share_partition import DeliveryLimits, SharePartition
from groupcoord.coordinator.core.state import ActsOnState, GroupCoordinatorState
from groupcoord.coordinator.core.topics_image import UNKNOWN_IMAGE
from groupcoord.rpc.v1 import share_group_pb2 as share_pb


class ShareContext(ActsOnState):
    """The share groups of one state-topic partition and what their handlers need."""

    def __init__(
        self,
        data: GroupCoordinatorState,
        config: GroupConfig,
        config_manager: GroupConfigManager,
        armed: ArmedTimers,
    ) -> None:
        self.data = data
        self.config = config
        self.config_manager = config_manager
        self.armed = armed
        # The operator's bounds on every group's DLQ topic (the coordinator writes there with
        # its own identity): a name prefix, the topic's own opt-in, creation of a missing one.
        self._dlq_rule = TopicRule(
            required_prefix=config.share_group_dlq_topic_name_prefix,
            required_config=share_delivery.DLQ_TOPIC_ENABLE_CONFIG,
            create_if_missing=config.share_group_dlq_auto_create_topics,
        )

    # --- configs -----------------------------------------------------------------------------
    def session_config(self, group_id: str) -> share_heartbeat.ShareGroupConfig:
        """The group's share.session.timeout.ms and share.heartbeat.interval.ms (its dynamic
        configs, else the broker-level defaults)."""
        return share_heartbeat.ShareGroupConfig(
            session_timeout_ms=self.config_manager.int_value(group_id, SHARE_SESSION_TIMEOUT_MS),
            heartbeat_interval_ms=self.config_manager.int_value(group_id, SHARE_HEARTBEAT_INTERVAL_MS),
            max_size=self.config.share_group_max_size,
        )

    def delivery_config(self, group_id: str) -> share_delivery.DeliveryConfig:
        """The group's delivery configs: lock duration, delivery count limit, locks per
        share-partition, where a share-partition never read starts, isolation, RENEW."""
        value = self.config_manager.value
        dlq_topic = str(value(group_id, DLQ_TOPIC_NAME))
        return share_delivery.DeliveryConfig(
            DeliveryLimits(
                delivery_count_limit=self.config_manager.int_value(group_id, SHARE_DELIVERY_COUNT_LIMIT),
                lock_duration_ms=self.config_manager.int_value(group_id, SHARE_RECORD_LOCK_DURATION_MS),
                max_in_flight=self.config_manager.int_value(group_id, SHARE_PARTITION_MAX_RECORD_LOCKS),
                dead_letters=bool(dlq_topic),
            ),
            auto_offset_reset=str(value(group_id, SHARE_AUTO_OFFSET_RESET)),
            isolation_level=str(value(group_id, SHARE_ISOLATION_LEVEL)),
            renew_enabled=bool(value(group_id, SHARE_RENEW_ACKNOWLEDGE_ENABLE)),
            dead_letter_queue=share_delivery.DeadLetterQueue(
                dlq_topic, bool(value(group_id, DLQ_COPY_RECORD_ENABLE)), self._dlq_rule
            )
            if dlq_topic
            else None,
        )

    # --- ShareGroupHeartbeat and sessions ----------------------------------------------------
    def heartbeat(
        self, request: share_pb.ShareGroupHeartbeatRequest, now_ms: int
    ) -> CoordinatorResult[share_pb.ShareGroupHeartbeatResponse]:
        group = self.groups.get(request.group_id)
        if group is not None and not isinstance(group, ShareGroup):
            # no conversion between share groups and the others exists, even of an empty group
            raise CoordinatorError(
                ErrorCode.group_id_not_found, f"Group {request.group_id} is not a share group."
            )
        result = share_heartbeat.heartbeat(
            group,
            share_heartbeat.from_request(request),
            now_ms,
            self.session_config(request.group_id),
            self.image,
            self.session_expired,
        )
        records, timers = result.records, result.timers
        if request.member_epoch == share_group.LEAVE_GROUP_MEMBER_EPOCH and result.records:
            released = self._release_member(request.group_id, request.member_id, now_ms)
            records = records + released.records
            timers = timers + released.timers
        return CoordinatorResult(records=records, response=share_heartbeat.to_response(result.response), timers=timers)

    def session_expired(self, group_id: str, member_id: str, now_ms: int) -> CoordinatorResult[None]:
        """A share member's session timer: run on the state as it is when it fires."""
        group = self.groups.get(group_id)
        result = share_heartbeat.session_expired(group if isinstance(group, ShareGroup) else None, member_id)
        if not result.records:
            return result
        released = self._release_member(group_id, member_id, now_ms)
        return CoordinatorResult(records=result.records + released.records, timers=released.timers)

    def _release_member(self, group_id: str, member_id: str, now_ms: int) -> CoordinatorResult[None]:
        """What the member holds, given back as it goes (records past their delivery count
        limit go to the group's dead-letter queue, if it has one)."""
        limits = self.delivery_config(group_id).limits
        changed = share_delivery.release_member(self.data.share_partitions, group_id, member_id, limits, now_ms)
        return CoordinatorResult(
            records=[share_delivery.state_record(key, state) for key, state in changed.items()],
            timers=self._dead_letters(changed) if limits.dead_letters else [],
        )

    # --- dead-letter queues (KIP-1191) -------------------------------------------------------
    def _dead_letters(
        self, changed: Mapping[share_delivery.SharePartitionKey, SharePartition], *, resuming: bool = False
    ) -> list[TimerIntent]:
        """The dead letters due in ``changed`` share-partitions, as Publish intents; none before
        the runtime's first topics image (right after a load): a dead letter's headers name its
        source topic, which only the image knows, and a predecessor's copies are told apart by
        them. They stay ARCHIVING until that image resumes them (:meth:`resumed_dead_letters`)."""
        if self.image is UNKNOWN_IMAGE:
            return []
        return share_delivery.dead_letter_intents(
            changed,
            self.delivery_config,
            self.image.topic_name,
            self.armed,
            self.dead_letters_written,
            resuming=resuming,
        )

    def dead_letters_written(
        self, key: share_delivery.SharePartitionKey, offsets: tuple[int, ...], outcome: PublishOutcome
    ) -> CoordinatorResult[None]:
        """A Publish of dead letters ended (run on the state as it is then): those offsets are
        ARCHIVED, and the share-partition's next dead letters, if any arrived meanwhile, go."""
        changed = share_delivery.dead_letters_written(self.data.share_partitions, key, offsets)
        state = changed.get(key, self.data.share_partitions.get(key))
        timers = self._dead_letters({key: state}) if state is not None else []
        return CoordinatorResult(
            records=[share_delivery.state_record(k, s) for k, s in changed.items()], timers=timers
        )

    def timers_after_load(self, now_ms: int) -> list[TimerIntent]:
        """The session timers of every share member, which replay does not arm, and the dead
        letters a predecessor left ARCHIVING (resumed: what it wrote already is not written
        again)."""
        timers: list[TimerIntent] = []
        for group in self.groups.values():
            if isinstance(group, ShareGroup):
                timers += share_heartbeat.timers_after_load(
                    group, now_ms, self.session_config(group.group_id), self.session_expired
                )
        return timers + self.resumed_dead_letters()

    def resumed_dead_letters(self) -> list[TimerIntent]:
        """The dead letters a predecessor left ARCHIVING, resumed (what it wrote already is not
        written again): after a load, or at the first topics image if the load had none."""
        archiving = {key: state for key, state in self.data.share_partitions.items() if state.has_dead_letters()}
        return self._dead_letters(archiving, resuming=True)

    # --- ShareFetch, ShareAcknowledge --------------------------------------------------------
    def delivery(
        self, request: share_pb.ShareDeliveryRequest, now_ms: int
    ) -> CoordinatorResult[share_pb.ShareDeliveryResponse]:
        """ShareFetch's two steps and ShareAcknowledge (its first step alone): one operation on
        the delivery state, whichever API asked (core/share/delivery.py)."""
        return share_delivery.deliver(
            self.data.share_partitions, request, now_ms, self.delivery_config, self._dead_letters
        )

    def delete_records(self, group_id: str) -> list[CoordinatorRecord]:
        """Tombstones of the group's share-partition states (the group is being deleted)."""
        return [
            share_delivery.state_record(key, None)
            for key in sorted(self.data.share_partitions)
            if key[0] == group_id
        ]
