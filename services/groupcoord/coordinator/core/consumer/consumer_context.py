"""What every KIP-848 consumer group handler works on.

The consumer-group half of Apache Kafka's ``GroupMetadataManager`` is split by concept:
ConsumerGroupHeartbeat (heartbeat.py), members joining, leaving and being fenced
(membership.py), the group epoch and the target assignment (assignment.py), topic metadata
changes (metadata.py) and replay (replay.py). Each is plain functions taking the partition's
:class:`ConsumerContext`, as Kafka's manager helpers take the manager's state.

All of it is computed without mutating anything: a handler builds new member values and copies
the group counters it changes (the one rule of every group type, core/state.py); the returned
records, once replayed, are the change, and the timers to (re)arm or cancel are intents in the
result too (the runtime applies them); whether a timer is already armed is read through the
read-only ``ArmedTimers`` view.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from groupcoord.coordinator.core.assignors.api import PartitionAssignor
from groupcoord.coordinator.core.assignors.range_assignor import RangeAssignor
from groupcoord.coordinator.core.assignors.uniform_assignor import UniformAssignor
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.consumer.consumer_group import ConsumerGroup, ConsumerGroupMember
from groupcoord.coordinator.core.contract import ArmedTimers, CoordinatorRecord, CoordinatorResult
from groupcoord.coordinator.core.group import Group
from groupcoord.coordinator.core.state import ActsOnState, GroupCoordinatorState

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


class ConsumerContext(ActsOnState):
    """The consumer groups of one state-topic partition (they live in the partition state's
    ``groups``, core/state.py) and what their handlers need.

    ``image`` is the partition's current topics image; ``session_timeout_ms(group)``,
    ``heartbeat_interval_ms(group)`` and ``assignment_interval_ms(group)`` give the
    effective (possibly per-group) settings.

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
        data: GroupCoordinatorState,
        armed: ArmedTimers,
        config: GroupConfig,
        session_timeout_ms: Callable[[str], int] | None = None,
        heartbeat_interval_ms: Callable[[str], int] | None = None,
        assignment_interval_ms: Callable[[str], int] | None = None,
        assignors: Mapping[str, PartitionAssignor] | None = None,
        upgrade_classic_group: UpgradeClassicGroup | None = None,
        downgrade_to_classic: DowngradeToClassic | None = None,
        new_uuid: Callable[[], uuid.UUID] = uuid.uuid4,
    ) -> None:
        self.data = data
        self.armed = armed
        self.config = config
        self.session_timeout_ms = session_timeout_ms or (lambda _g: config.consumer_group_session_timeout_ms)
        self.heartbeat_interval_ms = heartbeat_interval_ms or (
            lambda _g: config.consumer_group_heartbeat_interval_ms
        )
        self.assignment_interval_ms = assignment_interval_ms or (
            lambda _g: config.consumer_group_assignment_interval_ms
        )
        self.upgrade_classic_group = upgrade_classic_group
        self.downgrade_to_classic = downgrade_to_classic
        self.new_uuid = new_uuid  # member ids of v0 joins (injected: tests replay exactly)
        if assignors is None:
            assignors = {name: BUILTIN_ASSIGNORS[name]() for name in config.consumer_group_assignors}
        if not assignors:
            raise ValueError("at least one consumer group assignor must be configured")
        self.assignors = dict(assignors)
        self.default_assignor = next(iter(self.assignors))

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

