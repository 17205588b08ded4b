"""KIP-848 online migration, end to end through the shard: the "Online Migration" case study.

Given a classic group of consumers A, B and C, when A restarts with group.protocol=consumer,
its ConsumerGroupHeartbeat converts the group (the generation becomes the group epoch, the
current assignment carries over); B and C keep speaking JoinGroup/SyncGroup/Heartbeat and are
reconciled one by one by the consumer group; when the last consumer-protocol member leaves, the
group converts back into a classic group and its members rebalance the classic way.
"""

from __future__ import annotations

from consumer_group_context import ConsumerGroupContext, G
from kio.schema.errors import ErrorCode as E
from shard_test_context import ShardContext

from groupcoord.coordinator.core.classic.classic_group import ClassicGroup
from groupcoord.coordinator.core.classic.classic_group import ClassicGroupState as S
from groupcoord.coordinator.core.classic.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from groupcoord.coordinator.core.config import GroupConfig, MigrationPolicy
from groupcoord.coordinator.core.consumer.consumer_group import ConsumerGroup, MemberState

SESSION_MS = 10_000
REBALANCE_MS = 30_000


def _sub(owned: dict[str, list[int]] | None = None) -> bytes:
    return encode_subscription(Subscription(["foo"], owned_partitions=owned or {}))


def _context(policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL) -> ConsumerGroupContext:
    ctx = ConsumerGroupContext(
        GroupConfig(classic_group_initial_rebalance_delay_ms=0, consumer_group_migration_policy=policy)
    )
    ctx.set_topics(foo=6)
    return ctx


def classic_join(ctx: ConsumerGroupContext, member_id: str, owned: dict[str, list[int]] | None = None, **kw):  # type: ignore[no-untyped-def]
    kw.setdefault("protocols", [("range", _sub(owned))])
    return ctx.answer(ShardContext.join(ctx, G, member_id, **kw))


def classic_sync(ctx: ConsumerGroupContext, member_id: str, generation: int):  # type: ignore[no-untyped-def]
    return ctx.answer(ShardContext.sync(ctx, G, member_id, generation))


def classic_heartbeat(ctx: ConsumerGroupContext, member_id: str, generation: int) -> int:
    return ShardContext.heartbeat(ctx, G, member_id, generation)


def _classic_group(ctx: ConsumerGroupContext) -> tuple[list[str], int]:
    """The case study's start: A=[foo-0, foo-1], B=[foo-3, foo-4], C=[foo-2, foo-5], Stable."""
    # (ConsumerGroupContext's join/heartbeat speak KIP-848: call ShardContext's classic ones.)
    # Client ids a, b, c prefix the member ids the coordinator generates: a stable order.
    ids = [classic_join(ctx, "", client_id=name).member_id for name in "abc"]
    tokens = [ShardContext.join(ctx, G, m, protocols=[("range", _sub())]) for m in ids]
    ctx.advance(0)
    generation = ctx.answer(tokens[0]).generation_id
    leader = ctx.answer(tokens[0]).leader
    assert leader == ids[0]
    ids.sort()
    plan = {
        ids[0]: encode_assignment(Assignment({"foo": [0, 1]})),
        ids[1]: encode_assignment(Assignment({"foo": [3, 4]})),
        ids[2]: encode_assignment(Assignment({"foo": [2, 5]})),
    }
    for m in ids[1:]:
        ShardContext.sync(ctx, G, m, generation)
    ShardContext.sync(ctx, G, ids[0], generation, plan)
    assert ctx.classic(G).state is S.STABLE
    return ids, generation


def _owners(ctx: ConsumerGroupContext) -> dict[str, list[str]]:
    """partition -> members holding it (assigned or still revoking)."""
    out: dict[str, list[str]] = {}
    for member_id in ctx.group().members:
        held = set(ctx.partitions(member_id)) | {
            f"{t}-{p}" for t, ps in ctx.pending(member_id).items() for p in ps
        }
        for partition in held:
            out.setdefault(partition, []).append(member_id)
    return out


def test_online_migration_case_study() -> None:
    ctx = _context()
    (a, b, c), generation = _classic_group(ctx)

    # A restarts with the new protocol (a new member id); its first heartbeat converts the group.
    a2 = "a-upgraded"
    joined = ctx.join(a2)
    assert joined.error_code == 0
    group = ctx.group()
    assert isinstance(group, ConsumerGroup)
    for member_id in (a, b, c):
        member = ctx.member(member_id)
        assert member.uses_classic_protocol and member.member_epoch == generation
    assert ctx.partitions(a) == ["foo-0", "foo-1"]
    assert ctx.partitions(b) == ["foo-3", "foo-4"]
    assert ctx.partitions(c) == ["foo-2", "foo-5"]
    # A joining member bumps the epoch past the generation; it gets nothing still owned.
    assert group.group_epoch == generation + 1
    assert joined.member_epoch == generation + 1 and ctx.partitions(a2) == []
    ctx.assert_replay_equals_live()

    # The old incarnation of A leaves (its client closed): served by the consumer group.
    left = ctx.leave(G, (a, None))
    assert [m.error_code for m in left.members] == [0]
    assert set(ctx.group().members) == {a2, b, c}
    assert ctx.group().group_epoch == generation + 2
    ctx.ack(a2)
    assert all(len(holders) == 1 for holders in _owners(ctx).values())

    # A (upgraded) took one partition from B or C when it joined: call that member "loser"
    # (which one depends on member ids the coordinator generated) and the other "keeper".
    loser, keeper = (b, c) if set(ctx.owned(b)["foo"]) - set(ctx.target(b)["foo"]) else (c, b)
    owned_before = ctx.owned(loser)["foo"]
    lost = sorted(set(owned_before) - set(ctx.target(loser)["foo"]))
    assert len(lost) == 1

    # The loser heartbeats and learns that a rebalance is required.
    assert classic_heartbeat(ctx, loser, generation) == E.rebalance_in_progress.value
    # It is cooperative: it rejoins with what it owns and is told to give up what it loses,
    # still at its old generation.
    joined = classic_join(ctx, loser, owned={"foo": owned_before})
    assert joined.error_code == 0 and joined.leader == "" and joined.protocol_name == "range"
    assert joined.generation_id == generation
    assert ctx.member(loser).state is MemberState.UNREVOKED_PARTITIONS
    synced = classic_sync(ctx, loser, joined.generation_id)
    kept = sorted(set(owned_before) - set(lost))
    assert synced.error_code == 0 and decode_assignment(synced.assignment).partitions == {"foo": kept}
    # It revokes, heartbeats, is told to rejoin, and rejoins owning only what it kept.
    assert classic_heartbeat(ctx, loser, generation) == E.rebalance_in_progress.value
    joined = classic_join(ctx, loser, owned={"foo": kept})
    assert joined.generation_id == ctx.group().group_epoch
    assert classic_sync(ctx, loser, joined.generation_id).error_code == 0

    # The keeper is eager: it revokes everything before rejoining, so it moves to the new
    # epoch at once and gets its partitions back in SyncGroup.
    assert classic_heartbeat(ctx, keeper, generation) == E.rebalance_in_progress.value
    joined = classic_join(ctx, keeper, owned={})
    assert joined.generation_id == ctx.group().group_epoch
    synced = classic_sync(ctx, keeper, joined.generation_id)
    assert decode_assignment(synced.assignment).partitions == {"foo": ctx.target(keeper)["foo"]}

    # A (upgraded) picks up what B and C released; everyone converges on the target.
    ctx.ack(a2)
    for member_id in (b, c):
        member = ctx.member(member_id)
        if member.state is not MemberState.STABLE:
            assert classic_heartbeat(ctx, member_id, member.member_epoch) == E.rebalance_in_progress.value
            again = classic_join(ctx, member_id, owned=ctx.owned(member_id))
            classic_sync(ctx, member_id, again.generation_id)
    ctx.ack(a2)
    owners = _owners(ctx)
    assert sorted(owners) == [f"foo-{p}" for p in range(6)]
    assert all(len(holders) == 1 for holders in owners.values())
    for member_id in (a2, b, c):
        assert ctx.member(member_id).state is MemberState.STABLE
        assert ctx.owned(member_id) == ctx.target(member_id)
    assert classic_heartbeat(ctx, b, ctx.member(b).member_epoch) == 0

    # Classic members commit with their generation (= member epoch); an old one is refused.
    epoch_b = ctx.member(b).member_epoch
    partition = ctx.owned(b)["foo"][0]
    assert ctx.commit(G, {("foo", partition): 42}, member_id=b, generation=epoch_b, version=8) == {
        ("foo", partition): 0
    }
    assert ctx.commit(G, {("foo", partition): 43}, member_id=b, generation=generation, version=8) == {
        ("foo", partition): E.illegal_generation.value
    }
    ctx.assert_replay_equals_live()

    # The last consumer-protocol member leaves: the group converts back to a classic group.
    epoch = ctx.group().group_epoch
    assert ctx.heartbeat(a2, -1).error_code == 0
    classic = ctx.classic(G)
    assert classic.generation_id == epoch
    assert set(classic.members) == {b, c}
    assert classic.state is S.PREPARING_REBALANCE
    assert ctx.fetch(G)[("foo", partition)] == 42  # offsets belong to the group id
    ctx.assert_replay_equals_live()

    # B and C rebalance the classic way: a new generation with a leader.
    assert classic_heartbeat(ctx, b, epoch) == E.rebalance_in_progress.value
    tokens = [
        ShardContext.join(ctx, G, m, protocols=[("range", _sub(ctx_owned))])
        for m, ctx_owned in ((b, {}), (c, {}))
    ]
    answers = [ctx.answer(t) for t in tokens]
    assert all(r.error_code == 0 and r.generation_id == epoch + 1 for r in answers)
    assert answers[0].leader in (b, c)
    ctx.assert_replay_equals_live()


def test_waiting_classic_requests_are_told_to_rejoin_when_the_group_converts() -> None:
    ctx = _context()
    (a, b, c), generation = _classic_group(ctx)
    waiting = ShardContext.join(ctx, G, a, protocols=[("range", _sub({"foo": [0, 1]}))])
    assert ctx.answer(waiting) is None  # the classic group prepares a rebalance
    assert ctx.join("new").error_code == 0
    assert isinstance(ctx.shard.groups[G], ConsumerGroup)
    assert ctx.answer(waiting).error_code == E.rebalance_in_progress.value
    # A rejoins, now served by the consumer group, and keeps what it owns.
    again = classic_join(ctx, a, owned={"foo": [0, 1]})
    assert again.error_code == 0
    assert set(ctx.partitions(a)) <= {"foo-0", "foo-1"}
    ctx.assert_replay_equals_live()


def test_the_policy_decides_which_conversions_happen() -> None:
    for policy in (MigrationPolicy.DOWNGRADE, MigrationPolicy.DISABLED):
        ctx = _context(policy)
        _classic_group(ctx)
        response = ctx.join("new")
        assert response.error_code == E.group_id_not_found.value
        assert isinstance(ctx.shard.groups[G], ClassicGroup)

    ctx = _context(MigrationPolicy.UPGRADE)
    (a, b, c), _ = _classic_group(ctx)
    ctx.join("new")
    assert ctx.heartbeat("new", -1).error_code == 0
    group = ctx.group()  # no downgrade: it stays a consumer group of classic members
    assert set(group.members) == {a, b, c}


def test_no_upgrade_beyond_the_consumer_group_max_size() -> None:
    ctx = ConsumerGroupContext(
        GroupConfig(classic_group_initial_rebalance_delay_ms=0, consumer_group_max_size=2)
    )
    ctx.set_topics(foo=6)
    _classic_group(ctx)
    assert ctx.join("new").error_code == E.group_id_not_found.value


def test_classic_join_to_a_consumer_group() -> None:
    """A new classic member joins a consumer group: KIP-394's member id round trip, then it
    is reconciled like any member; protocols the classic members cannot share are refused."""
    ctx = _context()
    (a, b, c), generation = _classic_group(ctx)
    ctx.join("new")
    first = classic_join(ctx, "")
    assert first.error_code == E.member_id_required.value and first.member_id
    joined = classic_join(ctx, first.member_id)
    assert joined.error_code == 0 and joined.member_id == first.member_id
    assert ctx.member(first.member_id).uses_classic_protocol
    assert joined.generation_id == ctx.member(first.member_id).member_epoch
    # Only "roundrobin": not a protocol the classic members support.
    refused = classic_join(ctx, "", protocols=[("roundrobin", _sub())], version=3)
    assert refused.error_code == E.inconsistent_group_protocol.value
    refused = classic_join(ctx, "", protocol_type="connect", version=3)
    assert refused.error_code == E.inconsistent_group_protocol.value
    ctx.assert_replay_equals_live()


def test_sync_and_heartbeat_validate_the_member_and_generation() -> None:
    ctx = _context()
    (a, b, c), generation = _classic_group(ctx)
    ctx.join("new")
    assert classic_sync(ctx, b, generation + 5).error_code == E.illegal_generation.value
    assert classic_heartbeat(ctx, b, generation + 5) == E.illegal_generation.value
    assert classic_sync(ctx, "nobody", generation).error_code == E.unknown_member_id.value
    assert classic_heartbeat(ctx, "new", 0) == E.unknown_member_id.value  # not a classic member
    # The group moved past B's epoch: SyncGroup tells it to rejoin.
    assert classic_sync(ctx, b, generation).error_code == E.rebalance_in_progress.value


def test_a_classic_member_that_does_not_rejoin_or_sync_in_time_is_removed() -> None:
    ctx = _context()
    (a, b, c), generation = _classic_group(ctx)
    ctx.join("new")
    # B is told to rejoin, and never does: it is removed after its rebalance timeout.
    assert classic_heartbeat(ctx, b, generation) == E.rebalance_in_progress.value
    for _ in range(REBALANCE_MS // 5_000):
        ctx.advance(5_000)
        for m in (a, c):
            classic_heartbeat(ctx, m, ctx.member(m).member_epoch)
        ctx.heartbeat("new", ctx.member("new").member_epoch)
    assert b not in ctx.group().members
    # C joins but never syncs: removed after its rebalance timeout too.
    joined = classic_join(ctx, c, owned={})
    assert joined.error_code == 0
    ctx.advance(REBALANCE_MS)
    assert c not in ctx.group().members
    ctx.assert_replay_equals_live()


def test_a_classic_member_keeps_its_own_session_timeout() -> None:
    ctx = _context()
    (a, b, c), generation = _classic_group(ctx)
    ctx.join("new")
    ctx.advance(SESSION_MS - 1)
    ctx.heartbeat("new", ctx.member("new").member_epoch)
    assert {a, b, c} <= set(ctx.group().members)
    ctx.advance(2)
    assert not ({a, b, c} & set(ctx.group().members))


def test_a_restarted_static_classic_member_takes_over_its_assignment() -> None:
    ctx = _context()
    _classic_group(ctx)
    ctx.join("new")
    first = classic_join(ctx, "", instance_id="i-1", version=5)
    assert first.error_code == 0
    owned = ctx.owned(first.member_id)
    again = classic_join(ctx, "", instance_id="i-1", version=5)
    assert again.error_code == 0 and again.member_id != first.member_id
    assert first.member_id not in ctx.group().members
    assert ctx.owned(again.member_id) == owned
    # The old incarnation is fenced.
    stale = classic_join(ctx, first.member_id, instance_id="i-1", version=5)
    assert stale.error_code == E.fenced_instance_id.value
    ctx.assert_replay_equals_live()


def test_a_classic_static_member_replacing_the_last_consumer_protocol_member_downgrades() -> None:
    """Rolling back a static consumer: its instance id rejoins with the classic protocol; the
    group converts back at once, Stable, and the new incarnation keeps the partitions."""
    ctx = _context()
    (a, b, c), _ = _classic_group(ctx)
    assert ctx.join("static", instance_id="i-1").error_code == 0
    ctx.leave(G, (a, None), (b, None))
    for _ in range(3):
        ctx.ack("static", instance_id="i-1")
        member = ctx.member(c)
        if member.state is not MemberState.STABLE or member.member_epoch < ctx.group().group_epoch:
            again = classic_join(ctx, c, owned=ctx.owned(c))
            classic_sync(ctx, c, again.generation_id)
    held = ctx.owned("static")
    assert held
    epoch = ctx.group().group_epoch

    joined = classic_join(ctx, "", instance_id="i-1", version=5)
    assert joined.error_code == 0 and joined.generation_id == epoch
    group = ctx.classic(G)
    assert group.state is S.STABLE and group.generation_id == epoch
    assert set(group.members) == {c, joined.member_id}
    synced = classic_sync(ctx, joined.member_id, epoch)
    assert synced.error_code == 0
    assert decode_assignment(synced.assignment).partitions == held
    ctx.assert_replay_equals_live()
