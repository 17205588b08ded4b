"""A failed write's revert leaves the partition equal to a fresh replay of its committed records.

The runtime keeps a live and a committed replica of each partition's shard and, when a write
fails, makes the live one the committed state again (runtime/replicas.py). Here a partition is
driven as the runtime drives it: every result replayed into the live replica at once and kept
in flight until acknowledged, several writes in flight at a time, acknowledged in order into
the committed replica; a failure fails every unacknowledged write together, reverts, replays
the markers read meanwhile (in the log anyway) and re-arms the timers by ``on_loaded``. The
operations are random sequences of KIP-848 heartbeats, classic joins (which a consumer
heartbeat may upgrade, and a consumer member's leave downgrade again), offset commits,
transactional offsets with their markers, group configs, deletions and topic changes; fixed
scenarios below pin the cases a random search may take long to reach.

Each replica's ``replay`` is this test's own closure over that replica: a revert that copied
the shard object (or shared a container of its state) instead of copying its data would leave
the live replica replaying into the committed one, which the comparison with the log catches.
The comparison covers every attribute of the state's objects (:func:`contents`), and the two
replicas must share no mutable object (:func:`shared_mutables`).
"""

from __future__ import annotations

import enum
import itertools
import uuid
from collections import Counter
from dataclasses import fields, is_dataclass
from types import MappingProxyType
from typing import Any, Literal

from google.protobuf.message import Message
from hypothesis import example, given, settings
from hypothesis import strategies as st
from mock_timer import MockClock, MockTimer
from shard_test_context import RecordLog

from groupcoord.coordinator.core.classic.classic_group import ClassicGroup
from groupcoord.coordinator.core.classic.consumer_protocol import Subscription, encode_subscription
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.consumer.consumer_group import ConsumerGroup
from groupcoord.coordinator.core.contract import (
    ArmedTimers,
    CoordinatorRecord,
    CoordinatorResult,
    apply_timer_intents,
    marker_record,
)
from groupcoord.coordinator.core.group_coordinator_shard import GroupCoordinatorShard
from groupcoord.coordinator.core.offsets import CommittedOffset
from groupcoord.coordinator.core.state import GroupCoordinatorState
from groupcoord.coordinator.core.topics_image import TopicImage, TopicsImage
from groupcoord.coordinator.runtime.replicas import ShardReplicas
from groupcoord.rpc.v1 import classic_group_pb2 as classic_pb
from groupcoord.rpc.v1 import consumer_group_pb2 as consumer_pb
from groupcoord.rpc.v1 import group_admin_pb2 as admin_pb
from groupcoord.rpc.v1 import offsets_pb2 as offsets_pb

Outcome = Literal["ack", "keep", "fail"]
"""What happens to a write: acknowledged with every write before it, kept in flight, or failed
with every unacknowledged write."""

GROUPS = ("g", "h")
MEMBERS = ("a", "b", "c")
FOO_ID = b"\x01" * 16
SUBSCRIPTION = encode_subscription(Subscription(["foo"]))  # upgradeable: the embedded protocol


class Partition:
    """One state-topic partition as the runtime holds it, with the log of acknowledged records."""

    def __init__(self) -> None:
        self.config = GroupConfig(classic_group_initial_rebalance_delay_ms=0)
        self.clock = MockClock()
        self.timer = MockTimer(self.clock)
        self.log = RecordLog()
        # Unacknowledged writes in log order; markers read meanwhile wait behind them (True).
        self.in_flight: list[tuple[list[CoordinatorRecord], bool]] = []
        self.reverts = 0
        self._marker_offsets = itertools.count(1_000_000)
        uuids = itertools.count(1)

        def build(partition: int, armed: ArmedTimers) -> GroupCoordinatorShard:
            shard = GroupCoordinatorShard(
                armed, self.config, partition, new_uuid=lambda: uuid.UUID(int=next(uuids))
            )
            # This test's closure over this replica, on the replay path the runtime calls.
            replay = GroupCoordinatorShard.replay
            shard.replay = lambda record: replay(shard, record)  # type: ignore[method-assign]
            return shard

        self.replicas = ShardReplicas(build, 0, self.timer)  # type: ignore[arg-type]
        self.topics(3)

    @property
    def live(self) -> GroupCoordinatorShard:
        return self.replicas.live  # type: ignore[return-value]

    @property
    def committed(self) -> GroupCoordinatorShard:
        return self.replicas.committed  # type: ignore[return-value]

    # --- what the partition loop does --------------------------------------------------------
    def write(self, result: CoordinatorResult[Any], outcome: Outcome = "ack") -> None:
        apply_timer_intents(self.timer, result.timers)
        self.replicas.replay_live(result.records)
        self.in_flight.append((list(result.records), False))
        if outcome == "ack":
            self.acknowledge()
        elif outcome == "fail":
            self.fail()

    def acknowledge(self) -> None:
        """The log confirmed every write in flight (in order): reads see them from now on."""
        for records, _marker in self.in_flight:
            self.log.append(records)
            self.replicas.commit(records)
        self.in_flight = []

    def fail(self) -> None:
        """A write failed: so do all unacknowledged writes (their callers learn NOT_COORDINATOR)."""
        markers = [records for records, marker in self.in_flight if marker]
        self.in_flight = []
        self.replicas.revert()
        self.reverts += 1
        for records in markers:  # in the log anyway
            self.log.append(records)
            self.replicas.replay_live(records)
            self.replicas.commit(records)
        self.timer.cancel_all()
        self.write(self.live.on_loaded(self.clock.now_ms), "keep")

    def markers(self, records: list[CoordinatorRecord], outcome: Outcome) -> None:
        """Markers are in the log already: the live replica replays them at once, the committed
        one after the writes still in flight; the restatements next are an ordinary write."""
        self.replicas.replay_live(records)
        if self.in_flight:
            self.in_flight.append((records, True))
        else:
            self.log.append(records)
            self.replicas.commit(records)
        self.write(self.live.after_markers(self.clock.now_ms), outcome)

    def topics(self, partitions: int, outcome: Outcome = "ack") -> None:
        image = TopicsImage.of([TopicImage(FOO_ID, "foo", partitions)])
        self.committed.on_metadata_update(image, self.clock.now_ms)
        self.write(self.live.on_metadata_update(image, self.clock.now_ms), outcome)

    def tick(self, ms: int, outcome: Outcome) -> None:
        self.clock.now_ms += ms
        for _key, operation in self.timer.pop_expired():
            self.write(operation(), outcome)

    # --- requests ----------------------------------------------------------------------------
    def consumer_heartbeat(self, group_id: str, member_id: str, outcome: Outcome) -> None:
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
                request.topic_partitions.topic_partitions.add(
                    topic_id=topic_id, partitions=sorted(partitions)
                )
        self.write(self.live.consumer_group_heartbeat(request, self.clock.now_ms), outcome)

    def consumer_leave(self, group_id: str, member_id: str, outcome: Outcome) -> None:
        request = consumer_pb.ConsumerGroupHeartbeatRequest(
            api_version=1, group_id=group_id, member_id=member_id, member_epoch=-1
        )
        self.write(self.live.consumer_group_heartbeat(request, self.clock.now_ms), outcome)

    def classic_join(self, group_id: str, outcome: Outcome) -> None:
        request = classic_pb.JoinGroupRequest(
            api_version=3,
            group_id=group_id,
            session_timeout_ms=30_000,
            rebalance_timeout_ms=60_000,
            protocol_type="consumer",
            protocols=[classic_pb.JoinGroupProtocol(name="range", metadata=SUBSCRIPTION)],
        )
        self.write(self.live.join_group(request, self.clock.now_ms, token=object()), outcome)

    def commit(self, group_id: str, partition: int, offset: int, outcome: Outcome) -> None:
        request = offsets_pb.OffsetCommitRequest(
            api_version=9, group_id=group_id, generation_id_or_member_epoch=-1
        )
        request.topics.add(name="foo").partitions.add(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1
        )
        self.write(self.live.offset_commit(request, self.clock.now_ms), outcome)

    def txn_commit(
        self, producer_id: int, group_id: str, partition: int, offset: int, outcome: Outcome
    ) -> None:
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
        self.write(self.live.txn_offset_commit(request, self.clock.now_ms), outcome)

    def marker(self, producer_id: int, commit: bool, outcome: Outcome) -> None:
        self.markers([marker_record(next(self._marker_offsets), producer_id, 0, commit)], outcome)

    def alter_config(self, group_id: str, session_timeout_ms: int, outcome: Outcome) -> None:
        request = admin_pb.AlterGroupConfigsRequest(group_id=group_id)
        request.configs.add(
            name="consumer.session.timeout.ms", config_operation=0, value=str(session_timeout_ms)
        )
        self.write(self.live.alter_group_configs(request, self.clock.now_ms), outcome)

    def delete(self, group_id: str, outcome: Outcome) -> None:
        request = admin_pb.DeleteGroupsRequest(groups_names=[group_id])
        self.write(self.live.delete_groups(request, self.clock.now_ms), outcome)

    # --- the property ------------------------------------------------------------------------
    def replay_of(self, records: list[CoordinatorRecord]) -> GroupCoordinatorState:
        fresh = GroupCoordinatorShard(MockTimer(MockClock()), self.config)
        for record in records:
            fresh.replay(record)
        fresh.data.image = self.live.image  # input from the runtime, not in the log
        return fresh.data

    def assert_both_replicas_are_the_replay_of_the_log(self) -> None:
        """The committed replica is the replay of the log, the live one of the log and the
        writes in flight; the two share nothing a replay changes."""
        committed = self.log.records()
        in_flight = [record for records, _marker in self.in_flight for record in records]
        assert contents(self.committed.data) == contents(self.replay_of(committed))
        assert contents(self.live.data) == contents(self.replay_of(committed + in_flight))
        assert self.live.data == self.replay_of(committed + in_flight)  # the state's own equality
        assert shared_mutables(self.live.data, self.committed.data) == []
        assert callables_in(self.live.data) == []


_ATOMS = (str, bytes, int, float, bool, type(None), enum.Enum)


def contents(value: object) -> object:
    """Every attribute of every object reachable from ``value``, as comparable values: what a
    class's own ``__eq__`` may leave out (derived counts, say) is compared too."""
    if isinstance(value, _ATOMS):
        return value
    if isinstance(value, Message):
        return (type(value).__name__, value.SerializeToString(deterministic=True))
    if isinstance(value, Counter):
        return ("Counter", sorted((k, n) for k, n in value.items() if n))  # a zero count is none
    if isinstance(value, (dict, MappingProxyType)):
        return {k: contents(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [contents(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if is_dataclass(value):
        return (type(value).__name__, {f.name: contents(getattr(value, f.name)) for f in fields(value)})
    return (type(value).__name__, {k: contents(v) for k, v in vars(value).items()})


def _is_value(value: object) -> bool:
    """Immutable, so two replicas may share it: atoms, frozen dataclasses (with what they hold:
    a member's assignment mappings are never changed, a new member replaces it), frozen
    containers, the image, and committed offsets (documented as never mutated; not frozen for
    the takeover's sake, see core/offsets.py)."""
    params = getattr(type(value), "__dataclass_params__", None)
    return isinstance(
        value, (*_ATOMS, frozenset, MappingProxyType, TopicsImage, CommittedOffset, Message)
    ) or (params is not None and params.frozen)


def shared_mutables(a: object, b: object) -> list[str]:
    """Paths to the mutable objects of ``a`` that ``b`` holds as well (by identity)."""
    in_b = {id(v) for _path, v in _mutables(b, "b")}
    return [path for path, v in _mutables(a, "data") if id(v) in in_b]


def _mutables(value: object, path: str) -> list[tuple[str, object]]:
    if isinstance(value, tuple):
        return [m for i, v in enumerate(value) for m in _mutables(v, f"{path}[{i}]")]
    if _is_value(value):
        return []  # a frozen value (a member, say) is shared whole, mappings inside it too
    found: list[tuple[str, object]] = [(path, value)]
    if isinstance(value, dict):
        items = [(f"{path}[{k!r}]", v) for k, v in value.items()]
    elif isinstance(value, (list, set)):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
    elif is_dataclass(value):
        items = [(f"{path}.{f.name}", getattr(value, f.name)) for f in fields(value)]
    else:
        items = [(f"{path}.{k}", v) for k, v in vars(value).items()]
    return found + [m for p, v in items for m in _mutables(v, p)]


def callables_in(value: object, path: str = "data") -> list[str]:
    """Where a callable (function, lambda, bound method, partial) hides in a state's data: the
    state is plain data, so the answer is always nothing."""
    if isinstance(value, (*_ATOMS, Message)):
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
outcomes = st.sampled_from(["ack", "keep", "keep", "fail"])

UPGRADE_THEN_DOWNGRADE = [
    (("classic_join", "g"), "ack"),
    (("tick", 1_000), "ack"),  # the join completes: a classic group with one member
    (("consumer_heartbeat", "g", "a"), "keep"),  # upgrades it
    (("consumer_leave", "g", "a"), "keep"),  # downgrades it again
    (("commit", "x", 0, 7), "keep"),
]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(operations, outcomes), max_size=30), operations)
@example(  # transactional commit, its COMMIT marker, then a failed write
    [(("txn_commit", 1, "g", 0, 5), "ack"), (("marker", 1, True), "keep"), (("commit", "h", 1, 3), "keep")],
    ("commit", "g", 2, 9),
)
@example(UPGRADE_THEN_DOWNGRADE[:2], ("consumer_heartbeat", "g", "a"))  # classic -> consumer, reverted
@example(UPGRADE_THEN_DOWNGRADE, ("consumer_leave", "g", "b"))
def test_a_reverted_write_leaves_the_replay_of_the_committed_records(
    steps: list[tuple[tuple[Any, ...], Outcome]], last: tuple[Any, ...]
) -> None:
    partition = Partition()
    for (name, *args), outcome in [*steps, (last, "fail")]:
        reverts = partition.reverts
        getattr(partition, name)(*args, outcome=outcome)
        if partition.reverts != reverts:
            partition.assert_both_replicas_are_the_replay_of_the_log()
    partition.assert_both_replicas_are_the_replay_of_the_log()


def test_writes_after_a_revert_land_in_the_live_replica() -> None:
    """The case the old deep-copy revert broke (commits 2a28e1f, e9dd71d): after reverted
    writes, groups created on the partition must appear in the live replica (KIP-848 groups
    vanished from it: their records were replayed into the committed replica instead)."""
    partition = Partition()
    partition.consumer_heartbeat("g", "a", "ack")
    partition.commit("x", 0, 5, "keep")  # creates group x and its offset
    partition.consumer_heartbeat("g", "b", "keep")
    assert "x" in partition.live.data.offsets
    assert "b" in partition.live.groups["g"].members  # type: ignore[attr-defined]
    partition.commit("y", 1, 6, "fail")  # fails all three

    assert "x" not in partition.live.groups and "x" not in partition.live.data.offsets
    assert set(partition.live.groups["g"].members) == {"a"}  # type: ignore[attr-defined]
    partition.acknowledge()  # on_loaded's write
    partition.consumer_heartbeat("h", "b", "ack")
    partition.classic_join("fresh", "ack")

    live, committed = partition.live, partition.committed
    assert isinstance(live.groups["h"], ConsumerGroup) and "fresh" in live.groups
    assert "h" in committed.groups and "fresh" in committed.groups
    partition.assert_both_replicas_are_the_replay_of_the_log()
    assert live is partition.replicas.live and live is not committed


def test_an_upgrade_and_a_downgrade_in_flight_revert_to_the_classic_group() -> None:
    partition = Partition()
    for (name, *args), outcome in UPGRADE_THEN_DOWNGRADE[:2]:
        getattr(partition, name)(*args, outcome=outcome)
    classic = partition.live.groups["g"].copy()  # the live object changes with the upgrade
    assert isinstance(classic, ClassicGroup) and len(classic.members) == 1
    partition.consumer_heartbeat("g", "a", "keep")
    assert isinstance(partition.live.groups["g"], ConsumerGroup)  # upgraded
    partition.consumer_leave("g", "a", "keep")
    assert isinstance(partition.live.groups["g"], ClassicGroup)  # downgraded
    partition.commit("x", 0, 7, "fail")

    assert partition.live.groups["g"] == classic
    assert contents(partition.live.groups["g"]) == contents(classic)
    partition.assert_both_replicas_are_the_replay_of_the_log()


def test_a_revert_after_a_commit_marker_keeps_the_marker_and_its_restatement() -> None:
    partition = Partition()
    partition.txn_commit(1, "g", 0, 5, "ack")
    partition.marker(1, True, "ack")  # the restatement of the offset is acknowledged
    partition.txn_commit(2, "g", 1, 6, "ack")
    partition.commit("h", 0, 1, "keep")
    partition.marker(2, True, "keep")  # read while a write is in flight: waits behind it
    partition.commit("g", 2, 8, "fail")  # fails h's commit and the restatement, not the marker

    offsets = partition.live.data.offsets["g"]["foo"]
    assert offsets[0].offset == 5 and offsets[1].offset == 6 and 2 not in offsets
    assert "h" not in partition.live.data.offsets
    # The restatement failed: the committed replica still waits for it, on_loaded's write
    # (in flight) restates it again in the live one.
    assert (
        partition.committed.data.transactions.unrestated and not partition.live.data.transactions.unrestated
    )
    partition.assert_both_replicas_are_the_replay_of_the_log()
