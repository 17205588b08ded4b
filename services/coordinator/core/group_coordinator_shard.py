"""The group coordinator's state machine for one state-topic partition (Kafka's GroupCoordinatorShard).

Holds every group hashed to the partition — classic and consumer (KIP-848) groups share one
``groups`` map, since a group id names exactly one group — and their committed offsets. One
method per coordinator API, named like the ``Coordinator`` service's oneof fields
(``join_group``, ``offset_commit``...), each ``(request, now_ms)`` → ``CoordinatorResult``;
``replay(record)`` dispatches by record type. Handlers that answer later (classic JoinGroup,
SyncGroup) also take the runtime's ``token`` for the waiting request (see contract.py).
"""

from __future__ import annotations

from typing import Any

from groupcoord.coordinator.core.classic_group_manager import ClassicGroupManager
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import CoordinatorRecord, CoordinatorResult, Timer
from groupcoord.coordinator.core.group import Group
from groupcoord.rpc.v1 import classic_group_pb2 as classic_pb


class GroupCoordinatorShard:
    def __init__(self, timer: Timer, config: GroupConfig | None = None, partition: int = 0) -> None:
        self.partition = partition
        self.timer = timer
        self.config = config or GroupConfig()
        self.groups: dict[str, Group] = {}
        self.classic = ClassicGroupManager(self.groups, timer, self.config)

    # --- replay and loading ------------------------------------------------------------------
    def replay(self, record: CoordinatorRecord) -> None:
        if self.classic.replay(record):
            return
        raise ValueError(f"no replay for record {type(record.key).__name__}")

    def on_loaded(self, now_ms: int) -> CoordinatorResult[None]:
        """Called once after loading the partition: arm the timers replay does not."""
        return self.classic.on_loaded(now_ms)

    # --- classic group protocol -------------------------------------------------------------
    def join_group(
        self, request: classic_pb.JoinGroupRequest, now_ms: int, token: Any = None
    ) -> CoordinatorResult[classic_pb.JoinGroupResponse]:
        return self.classic.join_group(request, now_ms, token)

    def sync_group(
        self, request: classic_pb.SyncGroupRequest, now_ms: int, token: Any = None
    ) -> CoordinatorResult[classic_pb.SyncGroupResponse]:
        return self.classic.sync_group(request, now_ms, token)

    def heartbeat(
        self, request: classic_pb.HeartbeatRequest, now_ms: int
    ) -> CoordinatorResult[classic_pb.HeartbeatResponse]:
        return self.classic.heartbeat(request, now_ms)

    def leave_group(
        self, request: classic_pb.LeaveGroupRequest, now_ms: int
    ) -> CoordinatorResult[classic_pb.LeaveGroupResponse]:
        return self.classic.leave_group(request, now_ms)
