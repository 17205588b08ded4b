"""A failed write's revert leaves the partition equal to a fresh replay of its committed records.

The runtime keeps a live and a committed replica of each partition's shard and, when a write
fails, makes the live one the committed state again (runtime/replicas.py). Here a partition is
driven as the runtime drives it — every result replayed into the live replica, acknowledged
records into the committed one, a failed write reverted, the timers cancelled and re-armed by
``on_loaded`` — through random sequences of KIP-848 heartbeats, classic joins (which a consumer
heartbeat may upgrade), offset commits, transactional offsets with their markers, group configs,
deletions and topic changes, any of whose writes may fail.

The shard's wiring holds closures (its replay switch reads the state root through lambdas, and
each replica here gets one more, a lambda-wired session timeout): a revert that copied the
shard object instead of its data would share those with the committed replica, whose state the
live replica would then keep changing after the revert.
"""

from __future__ import annotations

import enum
import itertools
import uuid
from dataclasses import fields, is_dataclass
from types import MappingProxyType
from typing import Any

from google.protobuf.message import Message
from hypothesis import given, settings
from hypothesis import strategies as st
from mock_timer import MockClock, MockTimer
from shard_test_context import RecordLog

from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.consumer.group import ConsumerGroup
from groupcoord.coordinator.core.contract import (
    ArmedTimers,
    CoordinatorRecord,
    CoordinatorResult,
    apply_timer_intents,
    marker_record,
)
from groupcoord.coordinator.core.group_coordinator_shard import GroupCoordinatorShard
from groupcoord.coordinator.core.topics_image import TopicImage, TopicsImage
from groupcoord.coordinator.runtime.replicas import ShardReplicas
from groupcoord.rpc.v1 import classic_group_pb2 as classic_pb
from groupcoord.rpc.v1 import consumer_group_pb2 as consumer_pb
from groupcoord.rpc.v1 import group_admin_pb2 as admin_pb
from groupcoord.rpc.v1 import offsets_pb2 as offsets_pb

GROUPS = ("g", "h")
MEMBERS = ("a", "b", "c")
FOO_ID = b"\x01" * 16


class Partition:
    """One state-topic partition as the runtime holds it, with the log of acknowledged records."""

    def __init__(self) -> None:
        self.config = GroupConfig(classic_group_initial_rebalance_delay_ms=0)
        self.clock = MockClock()
        self.timer = MockTimer(self.clock)
        self.log = RecordLog()
        self.reverts = 0
        self._marker_offsets = itertools.count(1_000_000)
        uuids = itertools.count(1)

        def build(partition: int, armed: ArmedTimers) -> GroupCoordinatorShard:
            shard = GroupCoordinatorShard(
                armed, self.config, partition, new_uuid=lambda: uuid.UUID(int=next(uuids))
            )
            configs = shard.group_configs  # a closure over this replica's wiring
            shard.consumer.session_timeout_ms = lambda group_id: configs.session_timeout_ms(group_id)
            return shard

        self.replicas = ShardReplicas(build, 0, self.timer)  # type: ignore[arg-type]
        self.topics(3)

    @property
    def live(self) -> GroupCoordinatorShard:
        return self.replicas.live  # type: ignore[return-value]

    # --- what the partition loop does --------------------------------------------------------
    def write(self, result: CoordinatorResult[Any], fail: bool = False) -> None:
        apply_timer_intents(self.timer, result.timers)
        self.replicas.replay_live(result.records)
        if not fail:
            self.log.append(result.records)
            self.replicas.commit(result.records)
            return
        self.replicas.revert()
        self.reverts += 1
        self.timer.cancel_all()
        self.write(self.live.on_loaded(self.clock.now_ms))

    def markers(self, records: list[CoordinatorRecord], fail: bool) -> None:
        """Markers are in the log already: both replicas replay them; the restatements the live
        replica writes next are an ordinary write."""
        self.log.append(records)
        self.replicas.replay_live(records)
        self.replicas.commit(records)
        self.write(self.live.after_markers(self.clock.now_ms), fail)

    def topics(self, partitions: int, fail: bool = False) -> None:
        image = TopicsImage.of([TopicImage(FOO_ID, "foo", partitions)])
        self.replicas.committed.on_metadata_update(image, self.clock.now_ms)  # type: ignore[attr-defined]
        self.write(self.live.on_metadata_update(image, self.clock.now_ms), fail)

    def tick(self, ms: int, fail: bool) -> None:
        self.clock.now_ms += ms
        for _key, operation in self.timer.pop_expired():
            self.write(operation(), fail)

    # --- requests ----------------------------------------------------------------------------
    def consumer_heartbeat(self, group_id: str, member_id: str, fail: bool) -> None:
        group = self.live.groups.get(group_id)
        member = group.members.get(member_id) if isinstance(group, ConsumerGroup) else None
        request = consumer_pb.ConsumerGroupHeartbeatRequest(
            api_version=1,
            group_id=group_id,
            member_id=member_id,
            member_epoch=0 if member is None else member.member_epoch,
            rebalance_timeout_ms=60_000,
        )
        request.topic_partitions.SetInParent()
        if member is None:
            request.subscribed_topic_names.SetInParent()
            request.subscribed_topic_names.names.append("foo")
        else:
            for topic_id, partitions in member.assigned.items():
                request.topic_partitions.topic_partitions.add(topic_id=topic_id, partitions=sorted(partitions))
        self.write(self.live.consumer_group_heartbeat(request, self.clock.now_ms), fail)

    def consumer_leave(self, group_id: str, member_id: str, fail: bool) -> None:
        request = consumer_pb.ConsumerGroupHeartbeatRequest(
            api_version=1, group_id=group_id, member_id=member_id, member_epoch=-1
        )
        self.write(self.live.consumer_group_heartbeat(request, self.clock.now_ms), fail)

    def classic_join(self, group_id: str, fail: bool) -> None:
        request = classic_pb.JoinGroupRequest(
            api_version=3,
            group_id=group_id,
            session_timeout_ms=30_000,
            rebalance_timeout_ms=60_000,
            protocol_type="consumer",
            protocols=[classic_pb.JoinGroupProtocol(name="range", metadata=b"")],
        )
        self.write(self.live.join_group(request, self.clock.now_ms, token=object()), fail)

    def commit(self, group_id: str, partition: int, offset: int, fail: bool) -> None:
        request = offsets_pb.OffsetCommitRequest(
            api_version=9, group_id=group_id, generation_id_or_member_epoch=-1
        )
        request.topics.add(name="foo").partitions.add(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1
        )
        self.write(self.live.offset_commit(request, self.clock.now_ms), fail)

    def txn_commit(self, producer_id: int, group_id: str, partition: int, offset: int, fail: bool) -> None:
        request = offsets_pb.TxnOffsetCommitRequest(
            api_version=3,
            transactional_id=f"tx-{producer_id}",
            group_id=group_id,
            producer_id=producer_id,
            producer_epoch=0,
            generation_id=-1,
        )
        request.topics.add(name="foo").partitions.add(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1
        )
        self.write(self.live.txn_offset_commit(request, self.clock.now_ms), fail)

    def marker(self, producer_id: int, commit: bool, fail: bool) -> None:
        self.markers([marker_record(next(self._marker_offsets), producer_id, 0, commit)], fail)

    def alter_config(self, group_id: str, session_timeout_ms: int, fail: bool) -> None:
        request = admin_pb.AlterGroupConfigsRequest(group_id=group_id)
        request.configs.add(name="consumer.session.timeout.ms", config_operation=0, value=str(session_timeout_ms))
        self.write(self.live.alter_group_configs(request, self.clock.now_ms), fail)

    def delete(self, group_id: str, fail: bool) -> None:
        request = admin_pb.DeleteGroupsRequest(groups_names=[group_id])
        self.write(self.live.delete_groups(request, self.clock.now_ms), fail)

    # --- the property ------------------------------------------------------------------------
    def assert_both_replicas_are_the_replay_of_the_log(self) -> None:
        fresh = GroupCoordinatorShard(MockTimer(MockClock()), self.config)
        for record in self.log.records():
            fresh.replay(record)
        fresh.data.image = self.live.image  # input from the runtime, not in the log
        assert self.live.data == fresh.data
        assert self.replicas.committed.data == fresh.data  # type: ignore[attr-defined]
        assert callables_in(self.live.data) == []


def callables_in(value: object, path: str = "data") -> list[str]:
    """Where a callable (function, lambda, bound method, partial) hides in a state's data: the
    state is plain data, so the answer is always nothing."""
    if isinstance(value, (str, bytes, int, float, bool, type(None), enum.Enum, Message)):
        return []
    if callable(value):
        return [path]
    if isinstance(value, (dict, MappingProxyType)):
        return [p for k, v in value.items() for p in callables_in(v, f"{path}[{k!r}]")]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [p for i, v in enumerate(value) for p in callables_in(v, f"{path}[{i}]")]
    if is_dataclass(value):
        return [p for f in fields(value) for p in callables_in(getattr(value, f.name), f"{path}.{f.name}")]
    attributes = getattr(value, "__dict__", None)
    if attributes is None:
        return []  # a value without attributes of its own
    return [p for k, v in attributes.items() for p in callables_in(v, f"{path}.{k}")]


group_ids = st.sampled_from(GROUPS)
operations = st.one_of(
    st.tuples(st.just("consumer_heartbeat"), group_ids, st.sampled_from(MEMBERS)),
    st.tuples(st.just("consumer_leave"), group_ids, st.sampled_from(MEMBERS)),
    st.tuples(st.just("classic_join"), group_ids),
    st.tuples(st.just("commit"), group_ids, st.integers(0, 2), st.integers(0, 100)),
    st.tuples(st.just("txn_commit"), st.integers(1, 2), group_ids, st.integers(0, 2), st.integers(0, 100)),
    st.tuples(st.just("marker"), st.integers(1, 2), st.booleans()),
    st.tuples(st.just("alter_config"), group_ids, st.sampled_from([20_000, 45_000])),
    st.tuples(st.just("delete"), group_ids),
    st.tuples(st.just("topics"), st.integers(1, 4)),
    st.tuples(st.just("tick"), st.sampled_from([1_000, 40_000])),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(operations, st.booleans()), max_size=30), operations)
def test_a_reverted_write_leaves_the_replay_of_the_committed_records(
    steps: list[tuple[tuple[Any, ...], bool]], last: tuple[Any, ...]
) -> None:
    partition = Partition()
    for (name, *args), fail in [*steps, (last, True)]:
        reverts = partition.reverts
        getattr(partition, name)(*args, fail=fail)
        if partition.reverts != reverts:
            partition.assert_both_replicas_are_the_replay_of_the_log()
    partition.assert_both_replicas_are_the_replay_of_the_log()


def test_writes_after_a_revert_land_in_the_live_replica() -> None:
    """The case the old deep-copy revert broke (commits 2a28e1f, e9dd71d): after one reverted
    write, groups created on the partition must appear in the live replica (KIP-848 groups
    vanished from it: their records were replayed into the committed replica instead)."""
    partition = Partition()
    partition.consumer_heartbeat("g", "a", fail=False)
    partition.commit("g", 0, 5, fail=True)

    partition.consumer_heartbeat("h", "b", fail=False)
    partition.classic_join("fresh", fail=False)

    live, committed = partition.live, partition.replicas.committed
    assert isinstance(live.groups["h"], ConsumerGroup) and "fresh" in live.groups
    assert "g" not in live.data.offsets
    partition.assert_both_replicas_are_the_replay_of_the_log()
    assert live is partition.replicas.live and live is not committed
