"""Timers are effects returned as values: a core never arms or cancels one, it returns
ScheduleTimer/CancelTimer intents in its result, and only reads which timers are armed."""

from __future__ import annotations

import uuid

from shard_test_context import ShardContext

from groupcoord.coordinator.core.classic.consumer_protocol import (
    Assignment,
    Subscription,
    encode_assignment,
    encode_subscription,
)
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import CancelTimer, CoordinatorResult, ScheduleTimer, deadline_timer
from groupcoord.coordinator.core.group_coordinator_shard import GroupCoordinatorShard
from groupcoord.coordinator.core.topics_image import TopicImage, TopicsImage
from groupcoord.rpc.v1 import classic_group_pb2 as classic_pb
from groupcoord.rpc.v1 import consumer_group_pb2 as pb

G = "group"


class ReadOnlyTimers:
    """All a core may see of its timers: nothing armed, and no way to arm one."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def is_scheduled(self, key: str) -> bool:
        self.asked.append(key)
        return False


def _shard() -> GroupCoordinatorShard:
    ids = iter(uuid.UUID(int=i) for i in range(1, 100))
    shard = GroupCoordinatorShard(
        ReadOnlyTimers(), GroupConfig(classic_group_initial_rebalance_delay_ms=0), new_uuid=lambda: next(ids)
    )
    shard.on_metadata_update(_image(), 0)
    return shard


def _image() -> TopicsImage:
    return TopicsImage.of([TopicImage(uuid.uuid5(uuid.NAMESPACE_OID, "foo").bytes, "foo", 2)])


def _keys(result: CoordinatorResult[object]) -> list[tuple[str, str]]:
    return [(type(t).__name__, t.key) for t in result.timers]


def test_a_consumer_heartbeat_returns_its_session_timer() -> None:
    shard = _shard()
    request = pb.ConsumerGroupHeartbeatRequest(
        api_version=1,
        group_id="g",
        member_id="a",
        member_epoch=0,
        rebalance_timeout_ms=1_000,
        subscribed_topic_names=pb.ConsumerGroupHeartbeatTopicNames(names=["foo"]),
    )
    request.topic_partitions.SetInParent()
    result = shard.consumer_group_heartbeat(request, 1_000)
    assert result.response.error_code == 0
    session = result.timers[0]
    assert isinstance(session, ScheduleTimer)
    assert (session.key, session.delay_ms) == ("consumer-session:g:a", 45_000)
    # Nothing to revoke and no rebalance timer armed: none is armed, and none needs cancelling.
    assert [key for _, key in _keys(result) if key.startswith("consumer-rebalance:")] == []


def test_a_classic_join_returns_its_pending_member_timer() -> None:
    shard = _shard()
    join = classic_pb.JoinGroupRequest(
        api_version=9,
        group_id="g",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=30_000,
        protocol_type="consumer",
        protocols=[classic_pb.JoinGroupProtocol(name="range", metadata=b"")],
        client_id="client",
    )
    result = shard.join_group(join, 0)
    member_id = "client-00000000-0000-0000-0000-000000000001"
    assert result.response.member_id == member_id
    assert _keys(result) == [("ScheduleTimer", f"classic-pending-member-g-{member_id}")]
    assert result.timers[0].delay_ms == 10_000  # type: ignore[union-attr]


def test_a_timer_operation_returns_the_next_timer() -> None:
    """The offset expiry re-arms itself by returning its next timer, at its own deadline."""
    ctx = ShardContext()
    (expiry,) = [t for t in ctx.shard.on_loaded(0).timers if t.key == "offsets-expiry"]
    assert isinstance(expiry, ScheduleTimer)
    again = expiry.operation().timers
    assert [(t.key, t.delay_ms) for t in again] == [("offsets-expiry", expiry.delay_ms)]  # type: ignore[union-attr]


def test_on_loaded_returns_every_timer_replay_does_not_arm() -> None:
    ctx = ShardContext()
    ids, _ = ctx.form_group("g", 2)
    fresh = ctx.replayed()
    keys = _keys(fresh.on_loaded(ctx.clock.now_ms))
    assert keys[0] == ("ScheduleTimer", "offsets-expiry")
    assert sorted(keys[1:]) == sorted(("ScheduleTimer", f"classic-heartbeat-g-{m}") for m in ids)


def test_conversions_carry_both_group_types_timers_with_their_records() -> None:
    """An upgrade ends the classic group's timers and starts the consumer group's sessions of
    its members; the downgrade back does the reverse, in the same results as the records."""
    ctx = ShardContext()
    ctx.apply(ctx.shard.on_metadata_update(_image(), 0))
    sub = encode_subscription(Subscription(["foo"]))
    ids, _ = ctx.form_group(G, 2, protocols=[("range", sub)])
    # A second rebalance replaces form_group's placeholder assignments with consumer-protocol ones.
    tokens = [ctx.join(G, m, protocols=[("range", sub)]) for m in ids]
    generation = ctx.answer(tokens[0]).generation_id
    ctx.sync(G, ids[1], generation)
    plan = {ids[0]: Assignment({"foo": [0]}), ids[1]: Assignment({"foo": [1]})}
    ctx.sync(G, ids[0], generation, {m: encode_assignment(a) for m, a in plan.items()})
    heartbeat = pb.ConsumerGroupHeartbeatRequest(
        api_version=1,
        group_id=G,
        member_id="x",
        member_epoch=0,
        rebalance_timeout_ms=1_000,
        subscribed_topic_names=pb.ConsumerGroupHeartbeatTopicNames(names=["foo"]),
    )
    heartbeat.topic_partitions.SetInParent()
    _, upgrade = ctx.call("consumer_group_heartbeat", heartbeat)
    assert upgrade.response.error_code == 0
    keys = _keys(upgrade)
    for m in ids:
        assert ("CancelTimer", f"classic-heartbeat-{G}-{m}") in keys
        assert ("ScheduleTimer", f"consumer-session:{G}:{m}") in keys
        assert ctx.timer.is_scheduled(f"consumer-session:{G}:{m}")
    assert ("CancelTimer", f"classic-join-{G}") in keys

    leave = pb.ConsumerGroupHeartbeatRequest(api_version=1, group_id=G, member_id="x", member_epoch=-1)
    _, downgrade = ctx.call("consumer_group_heartbeat", leave)
    assert downgrade.response.error_code == 0
    assert ctx.classic(G).members.keys() == set(ids)
    keys = _keys(downgrade)
    for m in ids:
        assert ("CancelTimer", f"consumer-session:{G}:{m}") in keys
        assert ("ScheduleTimer", f"classic-heartbeat-{G}-{m}") in keys
        assert ctx.timer.is_scheduled(f"classic-heartbeat-{G}-{m}")
    ctx.assert_replay_equals_live()


def test_deadline_timer_hands_its_deadline_to_the_operation() -> None:
    seen: list[tuple[str, int]] = []

    def expire(what: str, now_ms: int) -> CoordinatorResult[None]:
        seen.append((what, now_ms))
        return CoordinatorResult(timers=[CancelTimer(what)])

    timer = deadline_timer("k", 250, 1_000, expire, "x")
    assert (timer.key, timer.delay_ms) == ("k", 250)
    assert timer.operation().timers == [CancelTimer("x")]
    assert seen == [("x", 1_250)]
    assert deadline_timer("k", -5, 1_000, expire, "y").delay_ms == 0
