"""ConsumerGroupHeartbeat: validation, membership (dynamic and static), fencing, subscription
changes, regexes, topic changes, assignment batching, describe and offset commit validation."""

from __future__ import annotations

import pytest
from consumer_group_context import ConsumerGroupContext, G
from kio.schema.errors import ErrorCode as E
from mock_timer import MockClock, MockTimer
from shard_test_context import ShardContext

from groupcoord.coordinator.core.classic.classic_group import ClassicGroup
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.consumer.consumer_group import MemberState
from groupcoord.coordinator.core.contract import apply_timer_intents
from groupcoord.coordinator.core.group_coordinator_shard import GroupCoordinatorShard
from groupcoord.rpc.v1 import consumer_group_pb2 as pb


def _stable(ctx: ConsumerGroupContext, *members: str, rounds: int = 3) -> None:
    for _ in range(rounds):
        for m in members:
            ctx.ack(m)
    assert ctx.group().state_name() == "Stable"


# --- validation ---------------------------------------------------------------------------


def _raw(ctx: ConsumerGroupContext, **fields: object) -> pb.ConsumerGroupHeartbeatResponse:
    base: dict[str, object] = {"api_version": 1, "group_id": G, "member_id": "m", "member_epoch": 0}
    base.update(fields)
    r = pb.ConsumerGroupHeartbeatRequest(**base)  # type: ignore[arg-type]
    return ctx.answer(ctx.call("consumer_group_heartbeat", r)[0])  # type: ignore[no-any-return]


def _join_fields() -> dict[str, object]:
    return {
        "rebalance_timeout_ms": 1000,
        "subscribed_topic_names": pb.ConsumerGroupHeartbeatTopicNames(names=["foo"]),
        "topic_partitions": pb.ConsumerGroupHeartbeatOwnedPartitions(),
    }


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"group_id": ""}, "GroupId can't be empty."),
        ({"instance_id": ""}, "InstanceId can't be empty."),
        ({"rack_id": ""}, "RackId can't be empty."),
        ({"member_id": ""}, "MemberId can't be empty."),  # v1: the client generates it
        ({"rebalance_timeout_ms": -1}, "RebalanceTimeoutMs must be provided in first request."),
        ({"topic_partitions": None}, "TopicPartitions must be empty when (re-)joining."),
        (
            {
                "topic_partitions": pb.ConsumerGroupHeartbeatOwnedPartitions(
                    topic_partitions=[
                        pb.ConsumerGroupHeartbeatTopicPartitions(topic_id=b"x" * 16, partitions=[0])
                    ]
                )
            },
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            {"subscribed_topic_names": None},
            "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
        ),
        ({"member_epoch": -2}, "InstanceId can't be null."),
        ({"member_epoch": -3}, "MemberEpoch -3 is invalid."),
    ],
)
def test_invalid_requests(fields: dict[str, object], message: str) -> None:
    ctx = ConsumerGroupContext()
    merged = _join_fields()
    merged.update(fields)
    resp = _raw(ctx, **{k: v for k, v in merged.items() if v is not None})
    assert (resp.error_code, resp.error_message) == (E.invalid_request.value, message)
    assert not ctx.log.entries


def test_v0_member_id_is_generated_by_the_coordinator_and_required_afterwards() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=2)
    resp = ctx.join("", version=0)
    assert resp.error_code == 0 and len(resp.member_id) == 22 and resp.member_epoch == 2
    assert ctx.heartbeat("", 2, version=0).error_code == E.invalid_request.value
    assert ctx.heartbeat(resp.member_id, 2, version=0).error_code == 0


def test_unsupported_assignor_and_invalid_regex() -> None:
    ctx = ConsumerGroupContext()
    resp = ctx.join("m", assignor="sticky")
    assert resp.error_code == E.unsupported_assignor.value
    assert "Supported assignors: uniform, range" in resp.error_message
    resp = ctx.join("m", names=None, regex="foo(")
    assert resp.error_code == E.invalid_regular_expression.value
    assert not ctx.log.entries


def test_unknown_group_and_member() -> None:
    ctx = ConsumerGroupContext()
    assert ctx.heartbeat("m", 1).error_code == E.group_id_not_found.value
    ctx.join("a")
    assert ctx.heartbeat("m", 1).error_code == E.unknown_member_id.value
    assert ctx.heartbeat("m", -1).error_code == E.unknown_member_id.value


def test_group_max_size_reached() -> None:
    ctx = ConsumerGroupContext(GroupConfig(consumer_group_max_size=2))
    ctx.join("a")
    ctx.join("b")
    assert ctx.join("c").error_code == E.group_max_size_reached.value
    assert ctx.join("a").error_code == 0  # an existing member rejoining is not a new one


def test_a_classic_group_of_another_protocol_type_is_not_a_consumer_group() -> None:
    ctx = ConsumerGroupContext()
    ShardContext.join(ctx, "classic", version=3, protocol_type="connect")  # Kafka Connect workers
    ctx.advance(0)
    assert not ctx.shard.groups["classic"].is_empty()
    resp = ctx.join("m", group="classic")
    assert resp.error_code == E.group_id_not_found.value
    assert resp.error_message == "Group classic is not a consumer group."


def test_a_classic_group_with_a_malformed_subscription_cannot_be_upgraded() -> None:
    ctx = ConsumerGroupContext()
    ShardContext.join(ctx, "classic", version=3, protocols=[("range", b"")])
    ctx.advance(0)
    resp = ctx.join("m", group="classic")
    assert resp.error_code == E.group_id_not_found.value
    assert resp.error_message.startswith("Cannot upgrade the classic group classic")
    assert isinstance(ctx.shard.groups["classic"], ClassicGroup)


def test_an_empty_simple_group_holding_offsets_becomes_a_consumer_group() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=1)
    assert ctx.commit(G, {("foo", 0): 5}) == {("foo", 0): 0}
    assert ctx.join("m").member_epoch == 2
    assert ctx.group().group_type.value == "consumer"
    assert ctx.fetch(G) == {("foo", 0): 5}
    ctx.assert_replay_equals_live()


# --- fencing and idempotence --------------------------------------------------------------


def test_epoch_fencing_and_the_lost_response_rule() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=4)
    ctx.join("a")
    ctx.join("b")
    _stable(ctx, "a", "b")
    e = ctx.member("a").member_epoch
    assert ctx.heartbeat("a", e + 1).error_code == E.fenced_member_epoch.value
    ctx.join("c")
    # a is asked to revoke, revokes, and moves to e+1; say that response got lost.
    ctx.ack("a")
    ctx.ack("a")
    assert ctx.member("a").member_epoch == e + 1 and ctx.member("a").previous_member_epoch == e
    # The previous epoch is accepted with owned partitions within the assignment ...
    resp = ctx.heartbeat("a", e, owned=ctx.owned("a"))
    assert resp.error_code == 0 and resp.member_epoch == e + 1
    # ... but not without owned partitions, nor with partitions it does not have, nor older.
    assert ctx.heartbeat("a", e).error_code == E.fenced_member_epoch.value
    assert ctx.heartbeat("a", e, owned={"foo": [0, 1, 2, 3]}).error_code == E.fenced_member_epoch.value
    assert ctx.heartbeat("a", e - 1, owned={}).error_code == E.fenced_member_epoch.value
    ctx.assert_replay_equals_live()


def test_duplicated_full_heartbeats_and_joins_are_idempotent() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=4)
    first = ctx.join("a")
    records = len(ctx.log.entries)
    again = ctx.join("a")  # the join's response was lost: the client retries it
    assert len(ctx.log.entries) == records
    assert (again.member_epoch, ctx.assignment(again)) == (first.member_epoch, ctx.assignment(first))
    full = {"names": ["foo"], "rebalance_ms": 300_000, "owned": {"foo": [0, 1, 2, 3]}}
    r1 = ctx.heartbeat("a", 2, **full)  # type: ignore[arg-type]
    r2 = ctx.heartbeat("a", 2, **full)  # type: ignore[arg-type]
    assert r1 == r2 and r1.error_code == 0 and ctx.assignment(r1) == {"foo": [0, 1, 2, 3]}
    assert len(ctx.log.entries) == records


def test_heartbeat_fields_are_optional_and_only_changes_bump_the_epoch() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=2, bar=2)
    ctx.join("a")
    e = ctx.group().group_epoch
    resp = ctx.heartbeat("a", 2)  # nothing changed: no field, no record
    assert resp.error_code == 0 and ctx.assignment(resp) is None
    assert ctx.group().group_epoch == e
    resp = ctx.heartbeat("a", 2, names=["foo", "bar"])
    assert ctx.group().group_epoch == e + 1
    assert ctx.assignment(resp) == {"bar": [0, 1], "foo": [0, 1]}
    ctx.heartbeat("a", resp.member_epoch, rack="r1")  # rack-aware assignors see racks
    assert ctx.group().group_epoch == e + 2
    ctx.heartbeat("a", ctx.member("a").member_epoch, assignor="range")
    assert ctx.group().group_epoch == e + 3
    assert ctx.describe(G).groups[0].assignor_name == "range"
    ctx.assert_replay_equals_live()


def test_leave_removes_the_member_and_bumps_the_epoch() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=2)
    ctx.join("a")
    ctx.join("b")
    _stable(ctx, "a", "b")
    e = ctx.group().group_epoch
    resp = ctx.heartbeat("b", -1)
    assert (resp.error_code, resp.member_epoch, resp.member_id) == (0, -1, "b")
    assert "b" not in ctx.group().members and ctx.group().group_epoch == e + 1
    assert ctx.assignment(ctx.ack("a")) == {"foo": [0, 1]}
    ctx.heartbeat("a", -1)
    assert ctx.group().state_name() == "Empty"
    assert not ctx.timer.is_scheduled("consumer-session:group:a")
    ctx.assert_replay_equals_live()


# --- static membership --------------------------------------------------------------------


def test_static_member_bounce_gets_its_assignment_back_without_an_epoch_bump() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=4)
    ctx.join("a1", instance_id="i-a")
    ctx.join("b", instance_id="i-b")
    _stable(ctx, "a1", "b")
    e = ctx.group().group_epoch
    before = ctx.owned("a1")
    resp = ctx.heartbeat("a1", ctx.member("a1").member_epoch, instance_id="i-a")
    resp = ctx.heartbeat("a1", -2, instance_id="i-a")
    assert (resp.error_code, resp.member_epoch) == (0, -2)
    records = len(ctx.log.entries)
    assert ctx.heartbeat("a1", -2, instance_id="i-a").member_epoch == -2  # retried: nothing new
    assert len(ctx.log.entries) == records
    assert ctx.member("a1").member_epoch == -2
    # Another process cannot take the instance id while it is not released ...
    ctx.join("b2", instance_id="i-b")
    assert ctx.join("b2", instance_id="i-b").error_code == E.unreleased_instance_id.value
    # ... but the restarted a (new member id) takes over a1's assignment.
    resp = ctx.join("a2", instance_id="i-a")
    assert resp.error_code == 0 and ctx.assignment(resp) == before
    assert "a1" not in ctx.group().members and ctx.group().group_epoch == e
    assert resp.member_epoch == e
    # The old incarnation is fenced.
    assert ctx.heartbeat("a1", e, instance_id="i-a").error_code == E.fenced_instance_id.value
    assert ctx.heartbeat("x", 1, instance_id="i-unknown").error_code == E.unknown_member_id.value
    assert ctx.group().state_name() == "Stable"
    ctx.assert_replay_equals_live()


def test_static_member_that_does_not_come_back_expires() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=2)
    ctx.join("a", instance_id="i-a")
    ctx.join("b")
    _stable(ctx, "a", "b")
    ctx.heartbeat("a", ctx.member("a").member_epoch, instance_id="i-a")
    ctx.heartbeat("a", -2, instance_id="i-a")
    for _ in range(10):
        ctx.advance(5_000)
        ctx.ack("b")
    assert "a" not in ctx.group().members
    assert ctx.owned("b") == {"foo": [0, 1]}
    ctx.assert_replay_equals_live()


# --- timeouts ----------------------------------------------------------------------------


def test_rebalance_timeout_removes_a_member_that_does_not_revoke() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=2)
    ctx.join("a", rebalance_ms=10_000)
    ctx.join("b")
    ctx.heartbeat("a", 2, owned={"foo": [0, 1]})  # told to revoke foo-1
    assert ctx.member("a").state is MemberState.UNREVOKED_PARTITIONS
    ctx.advance(9_000)
    ctx.heartbeat("a", 1, owned={"foo": [0, 1]})  # still holding it
    ctx.ack("b")
    ctx.advance(1_000)
    assert "a" not in ctx.group().members
    ctx.ack("b")
    ctx.ack("b")
    assert ctx.owned("b") == {"foo": [0, 1]}
    ctx.assert_replay_equals_live()


def test_session_timeout_is_rearmed_by_every_heartbeat() -> None:
    ctx = ConsumerGroupContext()
    ctx.join("a")
    assert ctx.timer.deadline("consumer-session:group:a") == 45_000
    ctx.advance(40_000)
    ctx.heartbeat("a", 2)
    assert ctx.timer.deadline("consumer-session:group:a") == 85_000


# --- topics and regexes -------------------------------------------------------------------


def test_topic_created_deleted_and_recreated_bump_the_epoch() -> None:
    ctx = ConsumerGroupContext()
    ctx.join("a", names=["foo", "bar"])
    e = ctx.group().group_epoch
    assert ctx.owned("a") == {}
    ctx.set_topics(foo=2)
    assert ctx.group().group_epoch == e + 1
    assert ctx.assignment(ctx.ack("a")) == {"foo": [0, 1]}
    ctx.set_topics(other=3)  # not subscribed: nothing
    assert ctx.group().group_epoch == e + 1
    old_id = ctx.topic_id("foo")
    ctx.recreate_topic("foo", 2)  # same name, new id: a new topic
    assert ctx.group().group_epoch == e + 2
    resp = ctx.heartbeat("a", ctx.member("a").member_epoch, owned={})  # client dropped the old one
    assert ctx.assignment(resp) == {"foo": [0, 1]}
    assert old_id not in ctx.member("a").assigned and ctx.topic_id("foo") in ctx.member("a").assigned
    ctx.delete_topic("foo")
    assert ctx.group().group_epoch == e + 3
    assert ctx.assignment(ctx.heartbeat("a", ctx.member("a").member_epoch, owned={})) == {}
    ctx.assert_replay_equals_live()


def test_regex_subscription_follows_topic_changes() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(orders_eu=1, orders_us=1, payments=1)
    resp = ctx.join("a", names=None, regex="orders_.*")
    assert ctx.assignment(resp) == {"orders_eu": [0], "orders_us": [0]}
    assert ctx.group().resolved_regexes["orders_.*"].topics == {"orders_eu", "orders_us"}
    e = ctx.group().group_epoch
    ctx.set_topics(orders_asia=1)
    assert ctx.group().group_epoch == e + 1
    assert ctx.assignment(ctx.ack("a")) == {"orders_asia": [0], "orders_eu": [0], "orders_us": [0]}
    assert ctx.group().is_subscribed_to_topic("orders_asia")
    assert not ctx.group().is_subscribed_to_topic("payments")
    # leaving drops the regex resolution
    ctx.heartbeat("a", -1)
    assert ctx.group().resolved_regexes == {}
    ctx.assert_replay_equals_live()


def test_a_regex_never_resolves_to_topics_the_refreshing_member_cannot_describe() -> None:
    """KAFKA-18813: a regex resolves with the rights of the member whose heartbeat refreshes it
    (the gateway names the topics its principal may not DESCRIBE)."""
    ctx = ConsumerGroupContext()
    ctx.set_topics(orders_eu=1, orders_us=1, orders_secret=1)
    resp = ctx.join("a", names=None, regex="orders_.*", undescribable=["orders_secret"])
    assert ctx.assignment(resp) == {"orders_eu": [0], "orders_us": [0]}
    assert ctx.group().resolved_regexes["orders_.*"].topics == {"orders_eu", "orders_us"}
    # a topic created later reaches the regex with the new image; the next heartbeat of a member
    # denied it takes it out again, before the member is ever assigned it
    ctx.set_topics(orders_vault=1)
    e = ctx.group().group_epoch
    ctx.ack("a", undescribable=["orders_secret", "orders_vault"])
    assert ctx.group().resolved_regexes["orders_.*"].topics == {"orders_eu", "orders_us"}
    assert ctx.group().group_epoch == e + 1
    assert set(ctx.target("a")) == {"orders_eu", "orders_us"}
    ctx.assert_replay_equals_live()


def test_a_regex_matches_kafkas_internal_topics_as_kafka_4_4_does_but_never_the_coordinators_own() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(
        __groupcoord_state=4, __groupcoord_metrics=1, __consumer_offsets=4, __transaction_state=2, app=1
    )
    ctx.join("a", names=None, regex=".*")
    assert ctx.group().resolved_regexes[".*"].topics == {"app", "__consumer_offsets", "__transaction_state"}



# --- assignment batching ------------------------------------------------------------------


def test_assignment_is_computed_at_most_once_per_interval() -> None:
    ctx = ConsumerGroupContext(GroupConfig(consumer_group_assignment_interval_ms=1_000))
    ctx.set_topics(foo=4)
    ctx.join("a")  # first assignment: immediately
    assert ctx.group().assignment_epoch == 2
    ctx.advance(100)
    resp = ctx.join("b")
    assert ctx.group().group_epoch == 3 and ctx.group().assignment_epoch == 2
    assert resp.member_epoch == 2 and ctx.assignment(resp) == {}
    ctx.join("c")
    ctx.advance(899)
    assert ctx.group().assignment_epoch == 2
    ctx.advance(1)  # the batched assignment runs once for both joins
    assert ctx.group().assignment_epoch == 4
    assert sorted(len(ctx.target(m).get("foo", [])) for m in "abc") == [1, 1, 2]
    ctx.assert_replay_equals_live()


# --- describe ------------------------------------------------------------------------------


def test_describe() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=2)
    ctx.join("a", instance_id="i", rack="r1")
    d = ctx.describe(G, "missing").groups
    assert d[0].group_state == "Stable" and d[0].group_epoch == 2 and d[0].assignor_name == "uniform"
    (m,) = d[0].members
    assert (m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.member_type) == ("a", "i", "r1", 2, 1)
    assert [(t.topic_name, list(t.partitions)) for t in m.assignment.topic_partitions] == [("foo", [0, 1])]
    assert [(t.topic_name, list(t.partitions)) for t in m.target_assignment.topic_partitions] == [
        ("foo", [0, 1])
    ]
    assert d[1].error_code == E.group_id_not_found.value
    assert d[0].authorized_operations == -(2**31)


# --- offsets -------------------------------------------------------------------------------


def test_offset_commit_validation_with_per_partition_assignment_epochs() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=2)
    ctx.join("a")
    e = ctx.member("a").member_epoch
    ok = {("foo", 0): 0, ("foo", 1): 0}
    assert ctx.commit(G, {("foo", 0): 1, ("foo", 1): 1}, member_id="a", generation=e) == ok
    assert ctx.commit(G, {("foo", 0): 1}, member_id="a", generation=e, version=8) == {
        ("foo", 0): E.unsupported_version.value
    }
    assert ctx.commit(G, {("foo", 0): 1}, member_id="x", generation=e) == {
        ("foo", 0): E.unknown_member_id.value
    }
    assert ctx.commit(G, {("foo", 0): 1}) == {("foo", 0): E.unknown_member_id.value}  # admin: not empty
    ctx.join("b")
    ctx.ack("a")
    ctx.ack("a")  # a revoked foo-1 and moved to e+1, keeping foo-0 (assigned at e)
    assert ctx.member("a").member_epoch == e + 1
    # A commit one epoch behind is accepted for foo-0 (still owned since epoch e) ...
    assert ctx.commit(G, {("foo", 0): 2}, member_id="a", generation=e) == {("foo", 0): 0}
    # ... not for foo-1 (no longer owned), nor with a future epoch.
    assert ctx.commit(G, {("foo", 1): 2}, member_id="a", generation=e) == {
        ("foo", 1): E.stale_member_epoch.value
    }
    assert ctx.commit(G, {("foo", 0): 2}, member_id="a", generation=e + 2) == {
        ("foo", 0): E.stale_member_epoch.value
    }
    # b got foo-1 at epoch e+1: a commit of b with epoch e for it is stale.
    ctx.ack("b")
    assert ctx.commit(G, {("foo", 1): 3}, member_id="b", generation=e) == {
        ("foo", 1): E.stale_member_epoch.value
    }
    ctx.assert_replay_equals_live()


def test_a_commit_racing_the_epoch_bump_that_takes_a_partition_away_is_accepted() -> None:
    """Seen with Kafka's VerifiableConsumer: a member that revoked what it had to sends its
    heartbeat and, before the answer comes, commits what it consumed since — with the epoch it
    still knows. The heartbeat moved it to the next epoch, which takes another partition away
    (a third member joined meanwhile): that partition is pending revocation, not assigned. Kafka
    (KIP-1251) accepts the commit for it; refusing it hands the next owner records to consume
    twice."""
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=6)
    ctx.join("a")
    ctx.ack("a")
    e = ctx.member("a").member_epoch
    assert ctx.owned("a") == {"foo": [0, 1, 2, 3, 4, 5]}
    ctx.join("b")
    ctx.heartbeat("a", e, owned={"foo": [0, 1, 2, 3, 4, 5]})  # told to give back half
    kept = ctx.owned("a")
    assert ctx.member("a").state is MemberState.UNREVOKED_PARTITIONS and ctx.member("a").member_epoch == e
    ctx.join("c")
    ctx.heartbeat("a", e, owned=kept)  # revoked; the next epoch takes one more away
    a = ctx.member("a")
    assert a.member_epoch == e + 1 and a.state is MemberState.UNREVOKED_PARTITIONS
    [(_, pending)] = ctx.pending("a").items()
    [(_, still)] = ctx.owned("a").items()
    # the commit sent with epoch e before that answer arrived
    commit = {("foo", p): 7 for p in pending + still}
    assert ctx.commit(G, commit, member_id="a", generation=e) == dict.fromkeys(commit, 0)
    # what it gave back at epoch e is no longer its to commit, at any older epoch
    gone = next(p for p in range(6) if p not in pending + still)
    assert ctx.commit(G, {("foo", gone): 7}, member_id="a", generation=e) == {
        ("foo", gone): E.stale_member_epoch.value
    }
    ctx.assert_replay_equals_live()


def test_a_pending_revocation_recorded_without_epochs_reads_as_assigned_at_the_member_epoch() -> None:
    """Records written before pending partitions carried their assignment epochs (the same wire
    form without them) still replay: an older-epoch commit is refused for them, as then."""
    from groupcoord.coordinator.core.consumer.consumer_group import ConsumerGroupMember
    from groupcoord.records.v1 import consumer_group_pb2 as rpb

    old = rpb.ConsumerGroupCurrentMemberAssignmentValue(member_epoch=5, previous_member_epoch=4, state=1)
    old.assigned_partitions.add(topic_id=b"t" * 16, partitions=[0], assignment_epochs=[3])
    old.partitions_pending_revocation.add(topic_id=b"t" * 16, partitions=[1, 2])
    member = ConsumerGroupMember("a").with_assignment(old)
    assert member.pending_revocation == {b"t" * 16: {1: 5, 2: 5}}
    assert member.with_assignment(member.assignment_value()) == member


def test_delete_group_needs_it_empty_and_writes_tombstones() -> None:
    from groupcoord.rpc.v1 import group_admin_pb2 as apb

    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=1)
    ctx.join("a", names=None, regex="f.*")
    req = apb.DeleteGroupsRequest(api_version=2, groups_names=[G])
    assert ctx.answer(ctx.call("delete_groups", req)[0]).results[0].error_code == E.non_empty_group.value
    ctx.heartbeat("a", -1)
    assert ctx.answer(ctx.call("delete_groups", req)[0]).results[0].error_code == 0
    assert G not in ctx.shard.groups
    ctx.assert_replay_equals_live()
    assert G not in ctx.replayed().groups


# --- takeover -------------------------------------------------------------------------------


def test_a_new_leader_replays_the_group_and_rearms_its_timers() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=2)
    ctx.join("a")
    ctx.join("b", rebalance_ms=20_000)
    ctx.heartbeat("a", 2, owned={"foo": [0, 1]})  # a must revoke foo-1
    fresh = ctx.replayed()
    assert fresh.groups == ctx.shard.groups
    fresh.data.image = ctx.shard.image
    timer = MockTimer(MockClock(ctx.clock.now_ms))
    apply_timer_intents(timer, fresh.on_loaded(ctx.clock.now_ms).timers)
    assert timer.is_scheduled("consumer-session:group:a") and timer.is_scheduled("consumer-session:group:b")
    assert timer.is_scheduled("consumer-rebalance:group:a")
    # the new leader serves the members where the old one left off
    resp = fresh.consumer_group_heartbeat(
        pb.ConsumerGroupHeartbeatRequest(
            api_version=1, group_id=G, member_id="b", member_epoch=3, rebalance_timeout_ms=-1
        ),
        0,
    ).response
    assert resp.error_code == 0 and resp.member_epoch == 3


def test_rack_changes_of_partitions_bump_the_epoch() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=2)
    ctx.join("a", rack="r1")
    e = ctx.group().group_epoch
    ctx.set_topics(racks={"foo": [["r1"], ["r2"]]}, foo=2)
    assert ctx.group().group_epoch == e + 1
    ctx.set_topics(racks={"foo": [["r1"], ["r2"]]}, foo=2)  # the same image again: nothing
    assert ctx.group().group_epoch == e + 1


def test_switching_from_names_to_a_regex() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=1, bar=1)
    ctx.join("a", names=["foo"])
    resp = ctx.heartbeat("a", 2, names=[], regex="b.*", owned={"foo": [0]})
    assert ctx.assignment(resp) == {}  # revoke foo first
    resp = ctx.heartbeat("a", 2, owned={})
    assert ctx.assignment(resp) == {"bar": [0]}
    assert set(ctx.group().resolved_regexes) == {"b.*"}
    ctx.assert_replay_equals_live()


def test_consumer_groups_are_listed_with_their_state_and_type() -> None:
    from groupcoord.rpc.v1 import group_admin_pb2 as apb

    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=2)
    ctx.join("a")
    ctx.join("b")  # b waits for a partition a still has: Reconciling
    listed = ctx.answer(ctx.call("list_groups", apb.ListGroupsRequest(api_version=5))[0]).groups
    assert [(g.group_id, g.group_state, g.group_type, g.protocol_type) for g in listed] == [
        (G, "Reconciling", "consumer", "consumer")
    ]
    assert ctx.shard.metrics().group_state_counts()["consumer"] == {"reconciling": 1}  # what the metrics export


def test_heartbeats_wait_for_the_first_topics_image() -> None:
    """Right after a takeover the shard has no topics image yet: assigning against nothing
    would revoke every partition, so members are told to retry (as during loading)."""
    from groupcoord.coordinator.core.topics_image import TopicsImage

    shard = GroupCoordinatorShard(MockTimer(MockClock()))
    request = pb.ConsumerGroupHeartbeatRequest(
        api_version=1,
        group_id=G,
        member_id="a",
        member_epoch=0,
        rebalance_timeout_ms=1_000,
        subscribed_topic_names=pb.ConsumerGroupHeartbeatTopicNames(names=["foo"]),
        topic_partitions=pb.ConsumerGroupHeartbeatOwnedPartitions(),
    )
    result = shard.consumer_group_heartbeat(request, 0)
    assert result.response.error_code == E.coordinator_load_in_progress.value and not result.records
    shard.on_metadata_update(TopicsImage.of([]), 0)
    assert shard.consumer_group_heartbeat(request, 0).response.error_code == 0


def test_per_group_heartbeat_interval_and_session_timeout() -> None:
    from groupcoord.rpc.v1 import group_admin_pb2 as apb

    ctx = ConsumerGroupContext()
    req = apb.AlterGroupConfigsRequest(api_version=1, group_id=G)
    req.configs.add(name="consumer.heartbeat.interval.ms", value="6000", config_operation=0)
    req.configs.add(name="consumer.session.timeout.ms", value="50000", config_operation=0)
    assert ctx.answer(ctx.call("alter_group_configs", req)[0]).error_code == 0
    resp = ctx.join("a")
    assert resp.heartbeat_interval_ms == 6_000
    assert ctx.timer.deadline("consumer-session:group:a") == 50_000
