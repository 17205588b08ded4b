"""The group coordinator's state machine for one state-topic partition (Kafka's GroupCoordinatorShard).

Its state is one :class:`~groupcoord.coordinator.core.state.GroupCoordinatorState`
(``data``): every group hashed to the partition — classic, consumer (KIP-848), share
(KIP-932) and streams (KIP-1071) groups share one ``groups`` map, since a group id names exactly one group — their
committed and pending offsets, group configs, the share-partitions' delivery states and the
topics image. The code acting on it is wiring built once by the constructor — one context per
group type (``classic``, ``consumer``, ``share``, ``streams``), the offsets, admin and config managers, and
the metrics object the runtime exports (``metrics()``, core/group_metrics.py); ``restore(data)``
is the runtime's revert and copies data only. One method per coordinator API, named like the
``Coordinator`` service's oneof fields (``join_group``, ``offset_commit``...), each
``(request, now_ms)`` → ``CoordinatorResult``, bound to its API in core/group_operations.py;
``replay(record)`` dispatches by record type. Handlers that answer later (classic JoinGroup,
SyncGroup) also take the runtime's ``token`` for the waiting request (see contract.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from google.protobuf.message import Message
from kio.schema.errors import ErrorCode

from groupcoord.coordinator.core.adoption import GroupAdoptions, replay_adoption
from groupcoord.coordinator.core.assignors.api import PartitionAssignor
from groupcoord.coordinator.core.classic import classic_membership, classic_replay
from groupcoord.coordinator.core.classic import join as classic_join
from groupcoord.coordinator.core.classic import rebalance as classic_rebalance
from groupcoord.coordinator.core.classic import sync as classic_sync
from groupcoord.coordinator.core.classic.classic_context import ClassicContext
from groupcoord.coordinator.core.classic.classic_group import SIMPLE_GROUPS
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.consumer import consumer_heartbeat, consumer_membership, consumer_replay
from groupcoord.coordinator.core.consumer import metadata as consumer_metadata
from groupcoord.coordinator.core.consumer.consumer_context import ConsumerContext
from groupcoord.coordinator.core.consumer.consumer_describe import describe_consumer_groups
from groupcoord.coordinator.core.consumer.consumer_group import CONSUMER_GROUP_REPLAY, ConsumerGroup
from groupcoord.coordinator.core.contract import ArmedTimers, CoordinatorRecord, CoordinatorResult
from groupcoord.coordinator.core.group import Group
from groupcoord.coordinator.core.group_admin import GroupAdmin
from groupcoord.coordinator.core.group_configs import GroupConfigManager, replay_group_config
from groupcoord.coordinator.core.group_metrics import GroupCoordinatorMetricsShard
from groupcoord.coordinator.core.migration.classic_members import ClassicMembersOfConsumerGroups
from groupcoord.coordinator.core.migration.online_migration import OnlineMigration
from groupcoord.coordinator.core.offsets import (
    OffsetMetadataManager,
    replay_marker,
    replay_offset,
    replay_pending,
)
from groupcoord.coordinator.core.share import delivery as share_delivery
from groupcoord.coordinator.core.share import share_group, share_offsets
from groupcoord.coordinator.core.share.share_context import ShareContext
from groupcoord.coordinator.core.share.share_describe import describe_share_groups
from groupcoord.coordinator.core.state import ActsOnState, GroupCoordinatorState
from groupcoord.coordinator.core.streams import streams_group
from groupcoord.coordinator.core.streams.streams_context import StreamsContext
from groupcoord.coordinator.core.topics_image import UNKNOWN_IMAGE, TopicsImage
from groupcoord.records.v1 import classic_group_pb2 as classic_rpb
from groupcoord.records.v1 import offsets_pb2 as offsets_rpb
from groupcoord.records.v1 import share_group_pb2 as share_rpb
from groupcoord.records.v1 import streams_group_pb2 as streams_rpb
from groupcoord.rpc.v1 import classic_group_pb2 as classic_pb
from groupcoord.rpc.v1 import consumer_group_pb2 as consumer_pb
from groupcoord.rpc.v1 import group_admin_pb2 as admin_pb
from groupcoord.rpc.v1 import offsets_pb2 as offsets_pb
from groupcoord.rpc.v1 import share_group_pb2 as share_pb
from groupcoord.rpc.v1 import streams_group_pb2 as streams_pb


class GroupCoordinatorShard(ActsOnState):
    def __init__(
        self,
        armed: ArmedTimers,
        config: GroupConfig | None = None,
        partition: int = 0,
        new_uuid: Callable[[], uuid.UUID] = uuid.uuid4,
        assignors: Mapping[str, PartitionAssignor] | None = None,
    ) -> None:
        """``armed`` is the read-only view of the partition's timers (the runtime's timer will
        do): handlers return timer intents and only ask whether one already runs.
        ``new_uuid()`` gives the random part of the member ids the coordinator generates
        (classic members joining without one, ConsumerGroupHeartbeat v0): an injected source,
        so a test can replay exactly what a call returned. ``assignors``: the consumer groups'
        server-side assignors by name, the first the default (built from the config's names
        when None; the server layer passes plugins in, server/assignor_plugins.py)."""
        self.partition = partition
        self.config = config or GroupConfig()
        # The partition's whole state; everything below is wiring acting on it, never copied.
        self.data = GroupCoordinatorState()
        self.classic = ClassicContext(
            self.data,
            self.config,
            join_other_group=self._join_consumer_group,
            new_uuid=new_uuid,
        )
        self.offset_manager = OffsetMetadataManager(
            self.data,
            self.config,
            SIMPLE_GROUPS,
            delete_group=self.delete_group_records,
        )
        self.config_manager = GroupConfigManager(self.data, self.config)
        # KIP-848 online migration: conversions both ways, and classic members of consumer groups.
        self.migration = OnlineMigration(self.classic, self.config)
        self.consumer = ConsumerContext(
            self.data,
            armed,
            self.config,
            session_timeout_ms=self.config_manager.session_timeout_ms,
            heartbeat_interval_ms=self.config_manager.heartbeat_interval_ms,
            assignment_interval_ms=self.config_manager.assignment_interval_ms,
            assignors=assignors,
            upgrade_classic_group=self.migration.upgrade,
            downgrade_to_classic=self.migration.downgrade,
            new_uuid=new_uuid,
        )
        self.admin = GroupAdmin(self.data, self.delete_group_records, self.consumer.default_assignor)
        self.classic_members = ClassicMembersOfConsumerGroups(self.consumer, self.config)
        self.share = ShareContext(self.data, self.config, self.config_manager, armed)
        self.streams = StreamsContext(self.data, self.config_manager, armed)
        self.adoptions = GroupAdoptions(self.data)
        self._metrics = GroupCoordinatorMetricsShard(self.data)
        self._replay = self._replay_switch()

    def restore(self, data: GroupCoordinatorState) -> None:
        """Make this shard's state a copy of ``data`` (the runtime's revert of a failed write:
        the committed replica's data into the live one). Only data is copied; the wiring stays.
        All or nothing: the copy is made before anything here changes, so if it raises this
        shard is untouched (the runtime then reloads the partition). Parked JoinGroup/SyncGroup
        requests are dropped: the runtime failed their callers (the only place they are)."""
        copied = data.copy()
        self.data.assign(copied)
        self.classic.waiters.clear()

    # --- replay and loading ------------------------------------------------------------------
    def _replay_switch(self) -> dict[type[Message], Callable[[Any, Any], None]]:
        """Record key type → its replay function bound to the state root (Kafka's
        GroupCoordinatorShard.replay switch). Replay needs nothing but the state: the root stays
        (restore refills its fields), so every function reads the containers per record. Every
        type of the production table in groupcoord.common.records except the runtime's own
        (leadership markers)."""
        data = self.data
        switch: dict[type[Message], Callable[[Any, Any], None]] = {
            key_type: partial(consumer_replay.replay, data, method)
            for key_type, method in CONSUMER_GROUP_REPLAY.items()
        }
        switch[classic_rpb.ClassicGroupMetadataKey] = partial(classic_replay.replay_metadata, data)
        switch[classic_rpb.ClassicGroupMemberKey] = partial(classic_replay.replay_member, data)
        switch[classic_rpb.ClassicGroupPendingMemberKey] = partial(classic_replay.replay_pending_member, data)
        switch[offsets_rpb.OffsetCommitKey] = partial(replay_offset, data, SIMPLE_GROUPS)
        switch[offsets_rpb.PendingTxnOffsetKey] = partial(replay_pending, data, SIMPLE_GROUPS)
        switch[offsets_rpb.TxnMarkerKey] = partial(replay_marker, data, SIMPLE_GROUPS)
        switch[offsets_rpb.GroupConfigKey] = partial(replay_group_config, data)
        switch[offsets_rpb.GroupAdoptionKey] = partial(replay_adoption, data)
        switch[share_rpb.SharePartitionStateKey] = lambda key, value: share_delivery.replay(
            data.share_partitions, key, value
        )
        for key_type in (
            share_rpb.ShareGroupMetadataKey,
            share_rpb.ShareGroupMemberKey,
            share_rpb.ShareGroupTargetAssignmentMetadataKey,
            share_rpb.ShareGroupTargetAssignmentMemberKey,
        ):
            switch[key_type] = lambda key, value: share_group.replay(data.groups, key, value)
        for key_type in (
            streams_rpb.StreamsGroupMetadataKey,
            streams_rpb.StreamsGroupTopologyKey,
            streams_rpb.StreamsGroupMemberMetadataKey,
            streams_rpb.StreamsGroupCurrentMemberAssignmentKey,
            streams_rpb.StreamsGroupTargetAssignmentMetadataKey,
            streams_rpb.StreamsGroupTargetAssignmentMemberKey,
        ):
            switch[key_type] = lambda key, value: streams_group.replay(data.groups, key, value)
        return switch

    def replay(self, record: CoordinatorRecord) -> None:
        replay = self._replay.get(type(record.key))
        if replay is None:
            raise ValueError(f"no replay for record {type(record.key).__name__}")
        replay(record.key, record.value if record.decoded is None else record.decoded)

    def on_loaded(self, now_ms: int) -> CoordinatorResult[None]:
        """Called once after loading the partition: the timers replay does not arm."""
        timers = [self.offset_manager.expiry_timer(now_ms)]
        timers += consumer_membership.timers_after_load(self.consumer, now_ms).timers
        timers += classic_rebalance.timers_after_load(self.classic, now_ms).timers
        timers += self.share.timers_after_load(now_ms)
        timers += self.streams.timers_after_load(now_ms)
        # Offsets that COMMIT markers applied and the previous leader had not restated yet.
        return CoordinatorResult(records=self.data.transactions.restatements(), timers=timers)

    def after_markers(self, now_ms: int) -> CoordinatorResult[None]:
        """Run by the runtime right after it replays transaction markers: restate the offsets
        they applied as ordinary records (see core/txn_offsets.py)."""
        return CoordinatorResult(records=self.data.transactions.restatements())

    def delete_group_records(self, group: Group) -> list[CoordinatorRecord]:
        """Tombstones deleting a group and its offsets (DeleteGroups, offset expiry), and a
        share group's share-partition states."""
        delivery = self.share.delete_records(group.group_id)
        return self.offset_manager.delete_all_records(group.group_id) + delivery + group.tombstone_records()

    # --- KIP-848 consumer groups -------------------------------------------------------------
    def consumer_group_heartbeat(
        self, request: consumer_pb.ConsumerGroupHeartbeatRequest, now_ms: int
    ) -> CoordinatorResult[consumer_pb.ConsumerGroupHeartbeatResponse]:
        return consumer_heartbeat.heartbeat(self.consumer, request, now_ms)

    def consumer_group_describe(
        self, request: consumer_pb.ConsumerGroupDescribeRequest, now_ms: int = 0
    ) -> CoordinatorResult[consumer_pb.ConsumerGroupDescribeResponse]:
        return CoordinatorResult(
            response=describe_consumer_groups(
                request, self.groups, self.image, self.consumer.default_assignor
            )
        )

    def on_metadata_update(self, image: TopicsImage, now_ms: int) -> CoordinatorResult[None]:
        """The runtime's new view of the cluster's topics: tombstones for the offsets of the
        topics it no longer has (Kafka's ``onPartitionsDeleted``), and records bumping the
        epochs of the groups whose subscribed topics changed (and re-resolved regexes). The
        first image after a load resumes the dead letters that waited for it."""
        first = self.data.image is UNKNOWN_IMAGE
        deleted = self.data.image.deleted_in(image)
        self.data.image = image
        records = self.offset_manager.delete_topics_records(deleted) if deleted else []
        consumer = consumer_metadata.on_metadata_update(self.groups, image, now_ms)
        timers = self.share.resumed_dead_letters() if first else []
        return CoordinatorResult(records=records + consumer.records, timers=timers)

    # --- KIP-932 share groups ----------------------------------------------------------------
    def share_group_heartbeat(
        self, request: share_pb.ShareGroupHeartbeatRequest, now_ms: int
    ) -> CoordinatorResult[share_pb.ShareGroupHeartbeatResponse]:
        return self.share.heartbeat(request, now_ms)

    def share_delivery(
        self, request: share_pb.ShareDeliveryRequest, now_ms: int
    ) -> CoordinatorResult[share_pb.ShareDeliveryResponse]:
        """ShareFetch's two steps and ShareAcknowledge (its first step alone)."""
        return self.share.delivery(request, now_ms)

    def describe_share_group_offsets(
        self, request: share_pb.DescribeShareGroupOffsetsRequest, now_ms: int = 0
    ) -> CoordinatorResult[share_pb.DescribeShareGroupOffsetsResponse]:
        return share_offsets.describe(request, self.groups, self.data.share_partitions, self.image)

    def alter_share_group_offsets(
        self, request: share_pb.AlterShareGroupOffsetsRequest, now_ms: int = 0
    ) -> CoordinatorResult[share_pb.AlterShareGroupOffsetsResponse]:
        return share_offsets.alter(request, self.groups, self.data.share_partitions, self.image)

    def delete_share_group_offsets(
        self, request: share_pb.AlterShareGroupOffsetsRequest, now_ms: int = 0
    ) -> CoordinatorResult[share_pb.AlterShareGroupOffsetsResponse]:
        request.delete = True
        return share_offsets.alter(request, self.groups, self.data.share_partitions, self.image)

    def share_group_describe(
        self, request: share_pb.ShareGroupDescribeRequest, now_ms: int = 0
    ) -> CoordinatorResult[share_pb.ShareGroupDescribeResponse]:
        return CoordinatorResult(response=describe_share_groups(request, self.groups, self.image))

    # --- KIP-1071 streams groups -------------------------------------------------------------
    def streams_group_heartbeat(
        self, request: streams_pb.StreamsGroupHeartbeatRequest, now_ms: int
    ) -> CoordinatorResult[streams_pb.StreamsGroupHeartbeatResponse]:
        return self.streams.heartbeat(request, now_ms)

    def streams_group_describe(
        self, request: streams_pb.StreamsGroupDescribeRequest, now_ms: int = 0
    ) -> CoordinatorResult[streams_pb.StreamsGroupDescribeResponse]:
        return self.streams.describe(request, now_ms)

    # --- classic group protocol -------------------------------------------------------------
    # A classic request to a consumer group comes from a classic member inside it (online
    # migration): migration/classic_members.py serves it.
    def join_group(
        self, request: classic_pb.JoinGroupRequest, now_ms: int, token: Any = None
    ) -> CoordinatorResult[classic_pb.JoinGroupResponse]:
        return classic_join.join_group(self.classic, request, now_ms, token)

    def _join_consumer_group(
        self, group: Group, request: classic_pb.JoinGroupRequest, now_ms: int
    ) -> CoordinatorResult[classic_pb.JoinGroupResponse]:
        if not isinstance(group, ConsumerGroup):
            return CoordinatorResult(
                response=classic_pb.JoinGroupResponse(
                    error_code=ErrorCode.inconsistent_group_protocol.value, member_id=request.member_id
                )
            )
        return self.classic_members.join_group(group, request, now_ms)

    def sync_group(
        self, request: classic_pb.SyncGroupRequest, now_ms: int, token: Any = None
    ) -> CoordinatorResult[classic_pb.SyncGroupResponse]:
        group = self.groups.get(request.group_id)
        if isinstance(group, ConsumerGroup):
            return self.classic_members.sync_group(group, request, now_ms)
        return classic_sync.sync_group(self.classic, request, now_ms, token)

    def heartbeat(
        self, request: classic_pb.HeartbeatRequest, now_ms: int
    ) -> CoordinatorResult[classic_pb.HeartbeatResponse]:
        group = self.groups.get(request.group_id)
        if isinstance(group, ConsumerGroup):
            return self.classic_members.heartbeat(group, request, now_ms)
        return classic_membership.heartbeat(self.classic, request, now_ms)

    def leave_group(
        self, request: classic_pb.LeaveGroupRequest, now_ms: int
    ) -> CoordinatorResult[classic_pb.LeaveGroupResponse]:
        group = self.groups.get(request.group_id)
        if isinstance(group, ConsumerGroup):
            return self.classic_members.leave_group(group, request, now_ms)
        return classic_membership.leave_group(self.classic, request, now_ms)

    # --- offsets -----------------------------------------------------------------------------
    def offset_commit(
        self, request: offsets_pb.OffsetCommitRequest, now_ms: int
    ) -> CoordinatorResult[offsets_pb.OffsetCommitResponse]:
        return self.offset_manager.offset_commit(request, now_ms)

    def transaction_stats(self) -> tuple[int, int, int]:
        """(pending transactional offsets, commit markers applied, abort outcomes applied),
        for the metrics; the counts grow with replay, the runtime exports their changes."""
        transactions = self.data.transactions
        pending = sum(len(p) for p in transactions.by_producer.values())
        return pending, transactions.commits_applied, transactions.aborts_applied

    def transactions(self) -> GroupCoordinatorShard:
        """TxnOffsetCommit keeps offsets pending until the upstream's markers decide them."""
        return self

    def producer_sequences(self) -> dict[int, tuple[int, int]]:
        """Producer id -> (epoch, next sequence) of transactional writes here (the runtime's
        marker follower starts from these; see TxnMarkerValue.sequence_bound)."""
        return self.data.transactions.producer_sequences()

    def has_pending_transaction(self, producer_id: int) -> bool:
        return producer_id in self.data.transactions.by_producer

    def open_transactions(self) -> int:
        """Producers with pending transactional offsets here (the runtime follows the log for
        their markers while any are open)."""
        return len(self.data.transactions.by_producer)

    def txn_offset_commit(
        self, request: offsets_pb.TxnOffsetCommitRequest, now_ms: int
    ) -> CoordinatorResult[offsets_pb.TxnOffsetCommitResponse]:
        return self.offset_manager.txn_offset_commit(request, now_ms)

    def offset_fetch(
        self, request: offsets_pb.OffsetFetchRequest, now_ms: int
    ) -> CoordinatorResult[offsets_pb.OffsetFetchResponse]:
        return self.offset_manager.offset_fetch(request, now_ms)

    def offset_delete(
        self, request: offsets_pb.OffsetDeleteRequest, now_ms: int
    ) -> CoordinatorResult[offsets_pb.OffsetDeleteResponse]:
        return self.offset_manager.offset_delete(request, now_ms)

    def adopt_group(
        self, request: offsets_pb.AdoptGroupRequest, now_ms: int
    ) -> CoordinatorResult[offsets_pb.AdoptGroupResponse]:
        return self.adoptions.adopt(request, now_ms)

    # --- group admin -------------------------------------------------------------------------
    def metrics(self) -> GroupCoordinatorMetricsShard:
        """The shard's gauges and counters (core/group_metrics.py), which the runtime exports."""
        return self._metrics

    def list_groups(
        self, request: admin_pb.ListGroupsRequest, now_ms: int
    ) -> CoordinatorResult[admin_pb.ListGroupsResponse]:
        return self.admin.list_groups(request, now_ms)

    def describe_groups(
        self, request: admin_pb.DescribeGroupsRequest, now_ms: int
    ) -> CoordinatorResult[admin_pb.DescribeGroupsResponse]:
        return self.admin.describe_groups(request, now_ms)

    def delete_groups(
        self, request: admin_pb.DeleteGroupsRequest, now_ms: int
    ) -> CoordinatorResult[admin_pb.DeleteGroupsResponse]:
        return self.admin.delete_groups(request, now_ms)

    def describe_group_configs(
        self, request: admin_pb.DescribeGroupConfigsRequest, now_ms: int
    ) -> CoordinatorResult[admin_pb.DescribeGroupConfigsResponse]:
        return self.config_manager.describe_group_configs(request, now_ms)

    def alter_group_configs(
        self, request: admin_pb.AlterGroupConfigsRequest, now_ms: int
    ) -> CoordinatorResult[admin_pb.AlterGroupConfigsResponse]:
        return self.config_manager.alter_group_configs(request, now_ms)
