"""Property: whatever members do, replaying the written records rebuilds the live classic group,
and the group's invariants hold (one leader among the members, static ids map to members)."""

from __future__ import annotations

from hypothesis import event, given, settings
from hypothesis import strategies as st
from mock_timer import MockClock, MockTimer
from shard_test_context import ShardContext

from groupcoord.coordinator.core.classic.classic_group import ClassicGroupState as S
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import apply_timer_intents
from groupcoord.coordinator.core.group_coordinator_shard import GroupCoordinatorShard

G = "group"

_ACTION = st.tuples(
    st.sampled_from(
        ["join", "join_static", "rejoin", "sync", "sync", "heartbeat", "leave", "tick", "tick", "commit"]
    ),
    st.integers(0, 5),
)


def _check_invariants(ctx: ShardContext) -> None:
    group = ctx.shard.groups.get(G)
    if group is None:
        return
    if group.members:
        assert group.leader_id in group.members
    else:
        assert group.state in (S.EMPTY, S.PREPARING_REBALANCE)
    for instance_id, member_id in group.static_members.items():
        assert group.members[member_id].group_instance_id == instance_id
    if group.state in (S.COMPLETING_REBALANCE, S.STABLE):
        assert group.protocol_name is not None


@settings(max_examples=200, deadline=None)
@given(st.lists(_ACTION, min_size=1, max_size=40))
def test_replay_equals_live_under_any_sequence_of_requests(actions: list[tuple[str, int]]) -> None:
    ctx = ShardContext()
    ctx.apply(ctx.shard.on_loaded(0))
    reached: set[str] = set()
    for action, k in actions:
        group = ctx.shard.groups.get(G)
        members = list(group.members) if group is not None else []
        member = members[k % len(members)] if members else ""
        gen = group.generation_id if group is not None else 0
        if action == "join":
            ctx.join(G, version=3 + k % 7, session_ms=10_000, rebalance_ms=15_000)
        elif action == "join_static":
            ctx.join(G, instance_id=f"i-{k % 3}", session_ms=10_000, rebalance_ms=15_000)
        elif action == "rejoin" and member:
            metadata = bytes([k % 2])
            ctx.join(G, member, protocols=[("range", metadata)], session_ms=10_000, rebalance_ms=15_000)
        elif action == "sync" and member:
            if k % 2 == 0:
                member = group.leader_id
            assignments = {m: m.encode() for m in members} if group.leader_id == member else None
            ctx.sync(G, member, gen, assignments)
        elif action == "heartbeat" and member:
            ctx.heartbeat(G, member, gen)
        elif action == "leave" and member:
            ctx.leave(G, (member, None))
        elif action == "tick":
            ctx.advance(2_000 * k)  # k == 0 runs the timers due now (e.g. the join phase's end)
        elif action == "commit":
            ctx.commit(G, {("t", k): k}, member_id=member, generation=gen if member else -1)
        _check_invariants(ctx)
        ctx.assert_replay_equals_live()
        if G in ctx.shard.groups:
            reached.add(ctx.classic(G).state.value)
    event(f"reached Stable: {'Stable' in reached}")


def test_a_takeover_replays_the_log_and_rearms_session_timers() -> None:
    """After failover the new leader's shard has the same groups; members that stay silent
    past their session timeout are then removed by the re-armed timers."""
    ctx = ShardContext()
    ids, gen = ctx.form_group(G, 2, session_ms=10_000)
    clock = MockClock(now_ms=ctx.clock.now_ms)
    timer = MockTimer(clock)
    successor = GroupCoordinatorShard(timer, ctx.config)
    for record in ctx.log.records():
        successor.replay(record)
    assert successor.groups == ctx.shard.groups
    apply_timer_intents(timer, successor.on_loaded(clock.now_ms).timers)
    clock.now_ms += 10_000
    for _, operation in timer.pop_expired():
        result = operation()
        apply_timer_intents(timer, result.timers)
        for record in result.records:
            successor.replay(record)
    group = successor.groups[G]
    assert not group.members
    assert group.state is S.PREPARING_REBALANCE or group.state is S.EMPTY


def _successor(ctx: ShardContext, after_ms: int) -> ShardContext:
    """The shard that takes over ``ctx``'s partition ``after_ms`` later: the log replayed,
    the load hook applied; requests waiting at the old leader are gone with it."""
    successor = ShardContext(ctx.config)
    successor.clock.now_ms = ctx.clock.now_ms + after_ms
    for record in ctx.log.records():
        successor.shard.replay(record)
    successor.log.entries = list(ctx.log.entries)
    successor.apply(successor.shard.on_loaded(successor.clock.now_ms))
    return successor


def test_a_group_forming_at_a_takeover_answers_its_rejoining_members_after_the_initial_delay() -> None:
    """Two librdkafka members join a new group (rebalance timeout: max.poll.interval.ms, 300 s)
    and the leader changes within the initial delay. They rejoin the new leader with their
    member ids, and the join phase ends once the initial delay passes, as it does for a new
    group: they were held for the whole rebalance timeout, 5 minutes without a consumer (the
    deployment test's stuck classic group)."""
    ctx = ShardContext(GroupConfig(classic_group_initial_rebalance_delay_ms=3_000))
    ids = [ctx.answer(ctx.join(G, rebalance_ms=300_000)).member_id for _ in range(2)]
    waiting = [ctx.join(G, member, rebalance_ms=300_000) for member in ids]
    assert ctx.classic(G).state is S.PREPARING_REBALANCE and not any(ctx.answer(t) for t in waiting)

    successor = _successor(ctx, after_ms=1_000)
    rejoined = [successor.join(G, member, rebalance_ms=300_000) for member in ids]
    successor.advance(2_999)
    assert not any(successor.answer(t) for t in rejoined), "the initial delay, as for a new group"
    successor.advance(1)
    answers = [successor.answer(t) for t in rejoined]
    assert [a.error_code for a in answers] == [0, 0] and {a.generation_id for a in answers} == {1}
    successor.assert_replay_equals_live()


def test_a_stable_group_rebalancing_at_a_takeover_completes_once_every_member_rejoined() -> None:
    ctx = ShardContext()
    ids, gen = ctx.form_group(G, 2, session_ms=10_000)
    ctx.join(G, ids[0], session_ms=10_000)  # a rejoin starts a rebalance; the leader changes
    assert ctx.classic(G).state is S.PREPARING_REBALANCE

    successor = _successor(ctx, after_ms=1_000)
    rejoined = [successor.join(G, member, session_ms=10_000) for member in ids]
    answers = [successor.answer(t) for t in rejoined]
    assert [a.error_code for a in answers] == [0, 0] and {a.generation_id for a in answers} == {gen + 1}
