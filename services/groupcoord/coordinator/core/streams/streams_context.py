"""What every KIP-1071 streams group handler works on.

The streams-group counterpart of the share and consumer contexts: the streams groups of one
state-topic partition live in the partition's ``groups`` (core/state.py); this object holds that
root and the group configs, and turns a group's dynamic configs (else the broker-level
defaults) into the :class:`~.streams_heartbeat.StreamsGroupConfig` the heartbeat takes, so that
module stays a function of plain values. Handlers compute without mutating anything: the records
they return, once replayed, are the change.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.contract import (
    ArmedTimers,
    CoordinatorRecord,
    CoordinatorResult,
    TimerIntent,
)
from groupcoord.coordinator.core.group import GroupType
from groupcoord.coordinator.core.group_configs import (
    STREAMS_HEARTBEAT_INTERVAL_MS,
    STREAMS_INITIAL_REBALANCE_DELAY_MS,
    STREAMS_NUM_STANDBY_REPLICAS,
    STREAMS_SESSION_TIMEOUT_MS,
    GroupConfigManager,
)
from groupcoord.coordinator.core.state import ActsOnState, GroupCoordinatorState
from groupcoord.coordinator.core.streams import streams_describe, streams_heartbeat
from groupcoord.coordinator.core.streams.streams_group import StreamsGroup
from groupcoord.coordinator.core.topics_image import UNKNOWN_IMAGE
from groupcoord.rpc.v1 import streams_group_pb2 as rpc


class StreamsContext(ActsOnState):
    """The streams groups of one state-topic partition and what their handlers need."""

    def __init__(self, data: GroupCoordinatorState, config_manager: GroupConfigManager, armed: ArmedTimers) -> None:
        self.data = data
        self.config_manager = config_manager
        self._expiries = streams_heartbeat.Expiries(
            self.session_expired,
            self.rebalance_expired,
            self.initial_rebalance_expired,
            lambda group_id: armed.is_scheduled(streams_heartbeat.initial_rebalance_key(group_id)),
        )

    def group_config(self, group_id: str) -> streams_heartbeat.StreamsGroupConfig:
        """The group's streams.* configs (its dynamic configs, else the broker-level defaults)."""
        value = self.config_manager.int_value
        return streams_heartbeat.StreamsGroupConfig(
            session_timeout_ms=value(group_id, STREAMS_SESSION_TIMEOUT_MS),
            heartbeat_interval_ms=value(group_id, STREAMS_HEARTBEAT_INTERVAL_MS),
            num_standby_replicas=value(group_id, STREAMS_NUM_STANDBY_REPLICAS),
            initial_rebalance_delay_ms=value(group_id, STREAMS_INITIAL_REBALANCE_DELAY_MS),
        )

    def heartbeat(
        self, request: rpc.StreamsGroupHeartbeatRequest, now_ms: int
    ) -> CoordinatorResult[rpc.StreamsGroupHeartbeatResponse]:
        group = self.groups.get(request.group_id)
        migrated: list[CoordinatorRecord] = []
        if group is not None and not isinstance(group, StreamsGroup):
            if not (
                group.group_type is GroupType.CLASSIC
                and group.is_empty()
                and request.member_epoch == streams_heartbeat.JOIN_GROUP_MEMBER_EPOCH
            ):
                raise CoordinatorError(
                    ErrorCode.group_id_not_found, f"Group {request.group_id} is not a streams group."
                )
            # Kafka's offline migration: an empty classic group (a Streams application that ran
            # the classic protocol) is replaced; its committed offsets stay.
            migrated, group = group.tombstone_records(), None
        if self.image is UNKNOWN_IMAGE and request.member_epoch >= 0:
            # right after a takeover, before the runtime's first topics image: the topology
            # must not be configured against no topics (every source topic "missing")
            return streams_heartbeat.error_result(
                ErrorCode.coordinator_load_in_progress, "The coordinator has not loaded topic metadata yet."
            )
        result = streams_heartbeat.heartbeat(
            group, request, now_ms, self.group_config(request.group_id), self.image, self._expiries
        )
        if migrated and result.records:
            return CoordinatorResult(records=migrated + result.records, response=result.response, timers=result.timers)
        return result

    def session_expired(self, group_id: str, member_id: str, now_ms: int) -> CoordinatorResult[None]:
        """A streams member's session timer: run on the state as it is when it fires."""
        group = self.groups.get(group_id)
        return streams_heartbeat.session_expired(group if isinstance(group, StreamsGroup) else None, member_id)

    def rebalance_expired(self, group_id: str, member_id: str, member_epoch: int, now_ms: int) -> CoordinatorResult[None]:
        """A streams member's rebalance timer: run on the state as it is when it fires."""
        group = self.groups.get(group_id)
        return streams_heartbeat.rebalance_expired(
            group if isinstance(group, StreamsGroup) else None, member_id, member_epoch
        )

    def initial_rebalance_expired(self, group_id: str, now_ms: int) -> CoordinatorResult[None]:
        """A new group's initial rebalance delay ended: its first target (left to the next
        heartbeat while the topics are not known yet)."""
        group = self.groups.get(group_id)
        if self.image is UNKNOWN_IMAGE:
            return CoordinatorResult()
        return streams_heartbeat.initial_rebalance_expired(
            group if isinstance(group, StreamsGroup) else None, self.group_config(group_id), self.image
        )

    def timers_after_load(self, now_ms: int) -> list[TimerIntent]:
        timers: list[TimerIntent] = []
        for group in self.groups.values():
            if isinstance(group, StreamsGroup):
                timers += streams_heartbeat.timers_after_load(
                    group, now_ms, self.group_config(group.group_id), self._expiries
                )
        return timers

    def describe(
        self, request: rpc.StreamsGroupDescribeRequest, now_ms: int
    ) -> CoordinatorResult[rpc.StreamsGroupDescribeResponse]:
        return CoordinatorResult(response=streams_describe.describe(self.groups, request, self.image))
