"""Property: whatever members do, replaying the written records rebuilds the live classic group,
and the group's invariants hold (one leader among the members, static ids map to members)."""

from __future__ import annotations

from hypothesis import event, given, settings
from hypothesis import strategies as st
from mock_timer import MockClock, MockTimer
from shard_test_context import ShardContext

from groupcoord.coordinator.core.classic.group import ClassicGroupState as S
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
