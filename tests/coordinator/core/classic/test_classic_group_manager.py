"""Classic group protocol case studies: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

Each test: given a group, when members send requests (and timers fire), then the answers,
the group's state and the records are as Apache Kafka's coordinator would have them; and
replaying the written records rebuilds exactly the live state.
"""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode as E
from mock_timer import MockClock, MockTimer
from shard_test_context import ShardContext

from groupcoord.coordinator.core.classic.classic_group import ClassicGroupState as S
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.group_coordinator_shard import GroupCoordinatorShard
from groupcoord.rpc.v1 import classic_group_pb2 as classic_pb

G = "group"


@pytest.fixture
def ctx() -> ShardContext:
    return ShardContext()


# --- JoinGroup -------------------------------------------------------------------------------


def test_new_member_v4_gets_member_id_required_then_joins(ctx: ShardContext) -> None:
    first = ctx.answer(ctx.join(G, version=4))
    assert first.error_code == E.member_id_required.value
    assert first.member_id.startswith("client-")
    assert ctx.classic(G).pending_members.keys() == {first.member_id}

    token = ctx.join(G, first.member_id, version=4)
    assert ctx.answer(token) is None  # waits for the join phase (initial delay 0 → next tick)
    ctx.advance(0)
    response = ctx.answer(token)
    assert response.error_code == 0
    assert response.generation_id == 1
    assert response.leader == first.member_id
    assert [m.member_id for m in response.members] == [first.member_id]
    assert ctx.classic(G).state is S.COMPLETING_REBALANCE
    assert not ctx.classic(G).pending_members
    ctx.assert_replay_equals_live()


def test_v3_member_joins_without_member_id_round_trip(ctx: ShardContext) -> None:
    token = ctx.join(G, version=3)
    ctx.advance(0)
    assert ctx.answer(token).error_code == 0
    assert ctx.answer(token).generation_id == 1


def test_invalid_group_id_and_session_timeout(ctx: ShardContext) -> None:
    assert ctx.answer(ctx.join("")).error_code == E.invalid_group_id.value
    assert ctx.answer(ctx.join(G, session_ms=10)).error_code == E.invalid_session_timeout.value
    assert ctx.answer(ctx.join(G, session_ms=10**8)).error_code == E.invalid_session_timeout.value
    assert G not in ctx.shard.groups  # nothing written


def test_known_member_id_for_unknown_group_is_unknown_member(ctx: ShardContext) -> None:
    assert ctx.answer(ctx.join(G, "ghost")).error_code == E.unknown_member_id.value


def test_protocol_type_and_protocols_must_match_the_group(ctx: ShardContext) -> None:
    ctx.form_group(G, 1, protocols=[("range", b"")])
    assert ctx.answer(ctx.join(G, protocol_type="connect")).error_code == E.inconsistent_group_protocol.value
    assert (
        ctx.answer(ctx.join(G, protocols=[("roundrobin", b"")])).error_code
        == E.inconsistent_group_protocol.value
    )
    assert ctx.answer(ctx.join(G, protocols=[])).error_code == E.inconsistent_group_protocol.value
    assert ctx.answer(ctx.join("other", protocol_type="")).error_code == E.inconsistent_group_protocol.value


def test_protocol_supported_by_everyone_chosen_by_preference_votes(ctx: ShardContext) -> None:
    a = ctx.join_dynamic(G, protocols=[("cooperative-sticky", b"a"), ("range", b"a")])
    b = ctx.join_dynamic(G, protocols=[("range", b"b"), ("cooperative-sticky", b"b"), ("roundrobin", b"b")])
    c = ctx.join_dynamic(G, protocols=[("cooperative-sticky", b"c"), ("range", b"c")])
    ctx.advance(0)
    for t in (a, b, c):
        assert ctx.answer(t).protocol_name == "cooperative-sticky"
    leader = ctx.answer(a)
    assert leader.leader == leader.member_id  # first to join leads
    # The leader sees each member's metadata for the chosen protocol.
    assert [m.metadata for m in leader.members] == [b"a", b"b", b"c"]
    assert ctx.answer(b).members == []


def test_initial_rebalance_delay_waits_for_more_members_up_to_rebalance_timeout() -> None:
    ctx = ShardContext(GroupConfig(classic_group_initial_rebalance_delay_ms=3_000))
    a = ctx.join_dynamic(G, rebalance_ms=10_000)
    ctx.advance(2_000)
    b = ctx.join_dynamic(G, rebalance_ms=10_000)
    ctx.advance(1_000)  # first delay ends, but b arrived: wait another delay
    assert ctx.answer(a) is None
    ctx.advance(3_000)
    assert ctx.answer(a).error_code == 0 and ctx.answer(b).error_code == 0
    assert ctx.answer(a).generation_id == 1
    assert len(ctx.answer(a).members) == 2
    ctx.assert_replay_equals_live()


def test_initial_delay_is_bounded_by_the_rebalance_timeout() -> None:
    ctx = ShardContext(GroupConfig(classic_group_initial_rebalance_delay_ms=3_000))
    first = ctx.join_dynamic(G, rebalance_ms=5_000)
    for _ in range(5):  # a new member before each delay ends
        ctx.advance(2_900)
        if ctx.answer(first) is not None:
            break
        ctx.join_dynamic(G, rebalance_ms=5_000)
    assert ctx.answer(first) is not None
    assert ctx.clock.now_ms <= 5_000 + 3_000


def test_rejoin_of_all_members_completes_the_join_phase_without_waiting(ctx: ShardContext) -> None:
    ids, gen = ctx.form_group(G, 3)
    tokens = [ctx.join(G, ids[0])]  # the leader rejoining starts a rebalance
    assert ctx.classic(G).state is S.PREPARING_REBALANCE
    tokens += [ctx.join(G, m) for m in ids[1:]]
    assert all(ctx.answer(t) is not None for t in tokens)  # the last join completed it
    assert {ctx.answer(t).generation_id for t in tokens} == {gen + 1}
    assert ctx.classic(G).state is S.COMPLETING_REBALANCE
    ctx.assert_replay_equals_live()


def test_members_that_do_not_rejoin_within_the_rebalance_timeout_are_removed(ctx: ShardContext) -> None:
    ids, gen = ctx.form_group(G, 3, rebalance_ms=20_000, session_ms=60_000)
    tokens = [ctx.join(G, m, rebalance_ms=20_000, session_ms=60_000) for m in ids[:2]]
    assert all(ctx.answer(t) is None for t in tokens)
    ctx.advance(20_000)
    assert all(ctx.answer(t).error_code == 0 for t in tokens)
    group = ctx.classic(G)
    assert list(group.members) == ids[:2]
    assert group.generation_id == gen + 1
    ctx.assert_replay_equals_live()


def test_leader_that_does_not_rejoin_is_replaced(ctx: ShardContext) -> None:
    ids, _ = ctx.form_group(G, 2, rebalance_ms=20_000, session_ms=60_000)
    follower = ctx.join(G, ids[1], rebalance_ms=20_000, session_ms=60_000, protocols=[("range", b"new")])
    ctx.advance(20_000)
    assert ctx.answer(follower).leader == ids[1]
    assert len(ctx.answer(follower).members) == 1


def test_follower_rejoining_in_stable_with_same_metadata_gets_current_generation(ctx: ShardContext) -> None:
    ids, gen = ctx.form_group(G, 2)
    response = ctx.answer(ctx.join(G, ids[1]))
    assert response.error_code == 0 and response.generation_id == gen
    assert ctx.classic(G).state is S.STABLE


def test_member_with_new_metadata_in_stable_triggers_a_rebalance(ctx: ShardContext) -> None:
    ids, gen = ctx.form_group(G, 2)
    token = ctx.join(G, ids[1], protocols=[("range", b"new-topics")])
    assert ctx.answer(token) is None
    assert ctx.classic(G).state is S.PREPARING_REBALANCE
    assert ctx.heartbeat(G, ids[0], gen) == E.rebalance_in_progress.value
    lead = ctx.join(G, ids[0])
    assert ctx.answer(lead).generation_id == gen + 1
    assert ctx.answer(token).generation_id == gen + 1


def test_every_rebalance_is_logged_with_its_reason_in_kafkas_words(
    ctx: ShardContext, caplog: pytest.LogCaptureFixture
) -> None:
    """A group that keeps rebalancing is diagnosed from these lines, as with Kafka's
    GroupMetadataManager: which member, why, in which state."""
    ids, gen = ctx.form_group(G, 2)
    caplog.set_level("INFO", logger="groupcoord.coordinator.core.classic.rebalance")
    ctx.join(G, ids[1], protocols=[("range", b"new-topics")])
    ctx.leave(G, (ids[0], None))
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        f"Preparing to rebalance group {G} in state Stable with old generation {gen} (reason: "
        f"Updating metadata for member {ids[1]} during Stable; client reason: not provided)."
    ]  # the leave came during PreparingRebalance: no new join phase
    ctx.join(G, ids[1], protocols=[("range", b"new-topics")])
    ctx.advance(0)
    caplog.clear()
    ctx.leave(G, (ids[1], None))
    assert [r.getMessage() for r in caplog.records] == [
        f"Preparing to rebalance group {G} in state CompletingRebalance with old generation "
        f"{gen + 1} (reason: Removing member {ids[1]} on LeaveGroup; client reason: not provided)."
    ]


def test_group_max_size_rejects_extra_members() -> None:
    ctx = ShardContext(GroupConfig(classic_group_initial_rebalance_delay_ms=0, classic_group_max_size=2))
    ctx.form_group(G, 2)
    assert ctx.answer(ctx.join(G, version=3)).error_code == E.group_max_size_reached.value


def test_pending_member_blocks_the_join_phase_until_it_joins_or_expires(ctx: ShardContext) -> None:
    ids, gen = ctx.form_group(G, 1, session_ms=10_000)
    pending = ctx.answer(ctx.join(G, session_ms=10_000))
    assert pending.error_code == E.member_id_required.value
    token = ctx.join(G, ids[0], session_ms=10_000)
    assert ctx.answer(token) is None  # the pending member may still join
    ctx.advance(10_000)  # its session ends: the join phase completes without it
    assert ctx.answer(token).error_code == 0
    assert list(ctx.classic(G).members) == ids
    ctx.assert_replay_equals_live()


# --- SyncGroup -------------------------------------------------------------------------------


def test_followers_wait_for_the_leaders_assignment(ctx: ShardContext) -> None:
    a = ctx.join_dynamic(G)
    b = ctx.join_dynamic(G)
    ctx.advance(0)
    leader, follower = ctx.answer(a), ctx.answer(b)
    f = ctx.sync(G, follower.member_id, follower.generation_id)
    assert ctx.answer(f) is None
    lead = ctx.sync(
        G, leader.member_id, leader.generation_id, {leader.member_id: b"A", follower.member_id: b"B"}
    )
    assert ctx.answer(lead).assignment == b"A"
    assert ctx.answer(f).assignment == b"B"
    assert ctx.answer(f).protocol_name == "range"
    assert ctx.classic(G).state is S.STABLE
    # A late sync in Stable is answered at once.
    assert ctx.answer(ctx.sync(G, follower.member_id, follower.generation_id)).assignment == b"B"
    ctx.assert_replay_equals_live()


def test_members_missing_from_the_leaders_assignment_get_empty_bytes(ctx: ShardContext) -> None:
    a = ctx.join_dynamic(G)
    b = ctx.join_dynamic(G)
    ctx.advance(0)
    ctx.sync(G, ctx.answer(a).member_id, 1, {ctx.answer(a).member_id: b"A"})
    assert ctx.answer(ctx.sync(G, ctx.answer(b).member_id, 1)).assignment == b""


def test_sync_errors(ctx: ShardContext) -> None:
    assert ctx.answer(ctx.sync("nope", "m", 1)).error_code == E.unknown_member_id.value
    ids, gen = ctx.form_group(G, 2)
    assert ctx.answer(ctx.sync(G, "ghost", gen)).error_code == E.unknown_member_id.value
    assert ctx.answer(ctx.sync(G, ids[0], gen + 7)).error_code == E.illegal_generation.value
    ctx.join(G, ids[0])  # the leader rejoins: rebalance
    assert ctx.answer(ctx.sync(G, ids[1], gen)).error_code == E.rebalance_in_progress.value


def test_rebalance_during_completing_answers_waiting_syncs_rebalance_in_progress(ctx: ShardContext) -> None:
    a = ctx.join_dynamic(G)
    b = ctx.join_dynamic(G)
    ctx.advance(0)
    f = ctx.sync(G, ctx.answer(b).member_id, 1)
    ctx.join(G, ctx.answer(b).member_id, protocols=[("range", b"changed")])
    assert ctx.answer(f).error_code == E.rebalance_in_progress.value
    assert ctx.classic(G).state is S.PREPARING_REBALANCE
    assert ctx.answer(a).error_code == 0


# --- Heartbeat -------------------------------------------------------------------------------


def test_heartbeat_errors_and_states(ctx: ShardContext) -> None:
    assert ctx.heartbeat(G, "m", 1) == E.unknown_member_id.value
    ids, gen = ctx.form_group(G, 2)
    assert ctx.heartbeat(G, ids[1], gen) == 0
    assert ctx.heartbeat(G, "ghost", gen) == E.unknown_member_id.value
    assert ctx.heartbeat(G, ids[1], gen - 1) == E.illegal_generation.value
    ctx.join(G, ids[0])
    assert ctx.heartbeat(G, ids[1], gen) == E.rebalance_in_progress.value


def test_heartbeats_keep_a_member_and_silence_expires_it(ctx: ShardContext) -> None:
    ids, gen = ctx.form_group(G, 2, session_ms=10_000)
    for _ in range(5):
        ctx.advance(6_000)
        assert ctx.heartbeat(G, ids[0], gen) == 0
        if ctx.classic(G).state is S.STABLE:
            assert ctx.heartbeat(G, ids[1], gen) == 0
    assert list(ctx.classic(G).members) == ids
    ctx.advance(10_000)  # both silent
    group = ctx.classic(G)
    assert not group.members
    assert group.state is S.EMPTY
    assert group.generation_id == gen + 1  # Kafka bumps the generation when the group empties
    ctx.assert_replay_equals_live()


# --- LeaveGroup ------------------------------------------------------------------------------


def test_leave_batch_and_by_instance_id(ctx: ShardContext) -> None:
    s1 = ctx.join(G, instance_id="i-1", version=5)
    d = ctx.join_dynamic(G, version=5)
    ctx.advance(0)
    static_id, dyn_id = ctx.answer(s1).member_id, ctx.answer(d).member_id
    response = ctx.leave(G, ("", "i-1"), ("ghost", None), ("wrong", "i-1"))
    assert [m.error_code for m in response.members] == [
        0,
        E.unknown_member_id.value,
        E.unknown_member_id.value,
    ]
    assert list(ctx.classic(G).members) == [dyn_id]
    assert ctx.classic(G).leader_id == dyn_id
    assert ctx.leave(G, (dyn_id, None), version=1).error_code == 0
    assert ctx.classic(G).state is S.EMPTY
    assert static_id not in ctx.classic(G).static_members.values()
    ctx.assert_replay_equals_live()


def test_leave_of_unknown_group_and_v0_errors(ctx: ShardContext) -> None:
    assert ctx.leave("nope", ("m", None)).error_code == E.unknown_member_id.value
    ctx.form_group(G, 1)
    assert ctx.leave(G, ("ghost", None), version=0).error_code == E.unknown_member_id.value


def test_leaving_member_answers_its_waiting_join_and_completes_the_phase(ctx: ShardContext) -> None:
    ids, gen = ctx.form_group(G, 2)
    first = ctx.join(G, ids[0])
    assert ctx.answer(first) is None
    ctx.leave(G, (ids[1], None))
    response = ctx.answer(first)
    assert response.error_code == 0 and response.generation_id == gen + 1
    assert [m.member_id for m in response.members] == [ids[0]]


def test_a_resent_join_answers_the_earlier_waiting_request_too(ctx: ShardContext) -> None:
    """A client whose JoinGroup timed out on its side resends it; both connections get the
    answer (the runtime drops the one nobody listens to any more)."""
    ids, gen = ctx.form_group(G, 2)
    first = ctx.join(G, ids[0], protocols=[("range", b"v2")])
    again = ctx.join(G, ids[0], protocols=[("range", b"v2")])
    assert ctx.answer(first) is None and ctx.answer(again) is None
    ctx.join(G, ids[1])
    assert ctx.answer(first) == ctx.answer(again)
    assert ctx.answer(first).generation_id == gen + 1
    # In CompletingRebalance an identical JoinGroup gets the same answer at once.
    resent = ctx.join(G, ids[0], protocols=[("range", b"v2")])
    assert ctx.answer(resent) == ctx.answer(first)


def test_leave_of_a_pending_member_unblocks_the_join_phase(ctx: ShardContext) -> None:
    ids, gen = ctx.form_group(G, 1, session_ms=10_000)
    pending = ctx.answer(ctx.join(G, session_ms=10_000)).member_id
    token = ctx.join(G, ids[0], session_ms=10_000)
    assert ctx.answer(token) is None
    assert ctx.leave(G, (pending, None)).members[0].error_code == 0
    assert ctx.answer(token).generation_id == gen + 1
    ctx.assert_replay_equals_live()


def test_a_takeover_mid_rebalance_completes_it_on_the_rebalance_timeout() -> None:
    """The waiting JoinGroups died with the old leader; the loaded group still finishes its
    join phase when the re-armed timer fires, with the members that joined."""
    ctx = ShardContext()
    ids, gen = ctx.form_group(G, 2, session_ms=60_000, rebalance_ms=20_000)
    ctx.join(G, ids[0], session_ms=60_000, rebalance_ms=20_000, protocols=[("range", b"new")])
    successor = ShardContext(ctx.config)
    successor.clock.now_ms = ctx.clock.now_ms
    for record in ctx.log.records():
        successor.shard.replay(record)
    successor.log.entries = list(ctx.log.entries)
    assert successor.classic(G).state is S.PREPARING_REBALANCE
    successor.apply(successor.shard.on_loaded(successor.clock.now_ms))
    successor.advance(20_000)
    group = successor.classic(G)
    assert group.state is S.COMPLETING_REBALANCE
    assert list(group.members) == [ids[0]] and group.generation_id == gen + 1
    successor.assert_replay_equals_live()


def test_join_v0_uses_the_session_timeout_as_rebalance_timeout(ctx: ShardContext) -> None:
    token = ctx.join(G, version=0, session_ms=7_000, rebalance_ms=0)
    ctx.advance(0)
    member_id = ctx.answer(token).member_id
    assert ctx.classic(G).members[member_id].rebalance_timeout_ms == 7_000


def test_a_leader_that_never_syncs_is_removed_after_the_rebalance_timeout(ctx: ShardContext) -> None:
    """Followers wait (and keep heartbeating); the silent leader must not wedge the group in
    CompletingRebalance forever: after the rebalance timeout it is removed and the group
    rebalances without it."""
    a = ctx.join_dynamic(G, session_ms=60_000, rebalance_ms=20_000)
    b = ctx.join_dynamic(G, session_ms=60_000, rebalance_ms=20_000)
    ctx.advance(0)
    leader, follower = ctx.answer(a), ctx.answer(b)
    waiting = ctx.sync(G, follower.member_id, follower.generation_id)
    for _ in range(4):
        ctx.advance(5_000)
        ctx.heartbeat(G, follower.member_id, follower.generation_id)
    assert ctx.answer(waiting).error_code == E.rebalance_in_progress.value
    group = ctx.classic(G)
    assert list(group.members) == [follower.member_id]
    assert group.state is S.PREPARING_REBALANCE
    rejoin = ctx.join(G, follower.member_id, session_ms=60_000, rebalance_ms=20_000)
    assert ctx.answer(rejoin).leader == follower.member_id
    assert leader.member_id not in group.members
    ctx.assert_replay_equals_live()


def test_generated_member_ids_come_from_the_injected_uuid_source() -> None:
    """Member ids the coordinator makes up are replayable: a classic member's (client id, a
    dash, the uuid) and a ConsumerGroupHeartbeat v0 member's (the uuid, base64url)."""
    ids = iter([uuid.UUID(int=1), uuid.UUID(int=2)])
    shard = GroupCoordinatorShard(MockTimer(MockClock()), new_uuid=lambda: next(ids))
    join = classic_pb.JoinGroupRequest(
        api_version=9,
        group_id="g",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=30_000,
        protocol_type="consumer",
        protocols=[classic_pb.JoinGroupProtocol(name="range", metadata=b"")],
        client_id="client",
    )
    response = shard.join_group(join, 0).response
    assert response.member_id == "client-00000000-0000-0000-0000-000000000001"
    assert shard.classic.new_uuid is shard.consumer.new_uuid
