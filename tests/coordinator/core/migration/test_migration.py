"""Online migration, the classic protocol's side (KIP-848 "Supporting Online Consumer Group
Upgrade"): what a classic group hands over on upgrade, and the classic group rebuilt on
downgrade. The consumer-group half of the case study lives with the KIP-848 core."""

from __future__ import annotations

from typing import Any

import pytest
from consumer_group_context import ConsumerGroupContext
from kio.schema.errors import ErrorCode as E
from shard_test_context import ShardContext

from groupcoord.common.errors import CoordinatorError
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
from groupcoord.coordinator.core.consumer.consumer_group import ConsumerGroup
from groupcoord.coordinator.core.contract import CoordinatorRecord, apply_timer_intents
from groupcoord.coordinator.core.migration.online_migration import (
    can_upgrade,
    classic_group_from_members,
    members_for_upgrade,
    release_for_upgrade,
)

G = "group"
SUB = encode_subscription(Subscription(["orders", "payments"], rack_id="r1"))


def retire_for_upgrade(
    ctx: ShardContext, group: ClassicGroup
) -> tuple[list[CoordinatorRecord], list[tuple[Any, Any]]]:
    """The classic half of an upgrade on its own (OnlineMigration.upgrade adds the consumer
    group's records): the classic group's tombstones, and the answers for its waiting requests;
    its timers end as the runtime would end them."""
    released = release_for_upgrade(ctx.shard.classic, group)
    apply_timer_intents(ctx.timer, released.timers)
    return group.tombstone_records(), released.completions


def _classic_consumer_group(ctx: ShardContext) -> tuple[list[str], int]:
    ids, gen = ctx.form_group(G, 2, protocols=[("range", SUB)])
    # A rebalance (the leader rejoins first) replaces form_group's placeholder assignments
    # with real consumer-protocol ones.
    tokens = [ctx.join(G, m, protocols=[("range", SUB)]) for m in ids]
    answers = [ctx.answer(t) for t in tokens]
    gen = answers[0].generation_id
    plan = {
        ids[0]: encode_assignment(Assignment({"orders": [0, 1]})),
        ids[1]: encode_assignment(Assignment({"orders": [2], "payments": [0]})),
    }
    ctx.sync(G, ids[1], gen)
    ctx.sync(G, ids[0], gen, plan)
    assert ctx.classic(G).state is S.STABLE
    return ids, gen


def test_upgrade_is_allowed_by_policy_protocol_type_and_size() -> None:
    ctx = ShardContext()
    _classic_consumer_group(ctx)
    group = ctx.classic(G)
    assert can_upgrade(group, ctx.config, consumer_group_max_size=10)
    assert not can_upgrade(group, ctx.config, consumer_group_max_size=1)
    for policy in (MigrationPolicy.DOWNGRADE, MigrationPolicy.DISABLED):
        assert not can_upgrade(group, GroupConfig(consumer_group_migration_policy=policy), 10)
    connect = ShardContext()
    connect.form_group(G, 1, protocol_type="connect")
    assert not can_upgrade(connect.classic(G), connect.config, 10)


def test_members_carry_their_subscription_and_current_assignment_into_the_upgrade() -> None:
    ctx = ShardContext()
    ids, gen = _classic_consumer_group(ctx)
    epoch, members = members_for_upgrade(ctx.classic(G))
    assert epoch == gen  # the generation becomes the group epoch
    assert [m.member_id for m in members] == ids
    assert members[0].subscribed_topics == ("orders", "payments")
    assert members[0].rack_id == "r1"
    assert members[0].assigned == {"orders": [0, 1]}
    assert members[1].assigned == {"orders": [2], "payments": [0]}
    assert members[1].protocols == (("range", SUB),)


def test_a_malformed_embedded_protocol_blocks_the_upgrade() -> None:
    ctx = ShardContext()
    ctx.form_group(G, 1, protocols=[("range", b"\x00")])
    with pytest.raises(CoordinatorError) as error:
        members_for_upgrade(ctx.classic(G))
    assert error.value.code is E.group_id_not_found


def test_retiring_the_classic_group_answers_waiting_requests_and_tombstones_it() -> None:
    ctx = ShardContext()
    ids, gen = _classic_consumer_group(ctx)
    waiting = ctx.join(G, ids[0], protocols=[("range", SUB + b"x")])
    assert ctx.answer(waiting) is None
    records, completions = retire_for_upgrade(ctx, ctx.classic(G))
    assert [(t, r.error_code) for t, r in completions] == [(waiting, E.rebalance_in_progress.value)]
    ctx.log.append(records)
    for r in records:
        ctx.shard.replay(r)
    assert G not in ctx.shard.groups
    ctx.assert_replay_equals_live()


def test_downgrade_rebuilds_a_stable_classic_group_then_rebalances_when_a_member_left() -> None:
    ctx = ShardContext()
    ids, gen = _classic_consumer_group(ctx)
    epoch, members = members_for_upgrade(ctx.classic(G))
    records, _ = retire_for_upgrade(ctx, ctx.classic(G))
    ctx.log.append(records)
    for r in records:
        ctx.shard.replay(r)
    # ... the consumer group runs; its last consumer-protocol member leaves at epoch + 3; the
    # remaining classic member (ids[1]) converts the group back.
    back = classic_group_from_members(
        ctx.shard.classic, G, epoch + 3, members[1:], ctx.clock.now_ms, rebalance=True
    )
    ctx.apply(back)
    group = ctx.classic(G)
    assert group.generation_id == epoch + 3
    assert list(group.members) == [ids[1]] and group.leader_id == ids[1]
    assert decode_assignment(group.members[ids[1]].assignment).partitions == {"orders": [2], "payments": [0]}
    assert group.state is S.PREPARING_REBALANCE
    ctx.assert_replay_equals_live()
    # The classic member learns of the rebalance from its heartbeat and rejoins.
    assert ctx.heartbeat(G, ids[1], epoch + 3) == E.rebalance_in_progress.value
    token = ctx.join(G, ids[1], protocols=[("range", SUB)])
    assert ctx.answer(token).generation_id == epoch + 4
    assert ctx.answer(token).leader == ids[1]


def test_downgrade_without_rebalance_keeps_the_generation_stable() -> None:
    ctx = ShardContext()
    ids, gen = _classic_consumer_group(ctx)
    epoch, members = members_for_upgrade(ctx.classic(G))
    records, _ = retire_for_upgrade(ctx, ctx.classic(G))
    back = classic_group_from_members(ctx.shard.classic, G, epoch, members, ctx.clock.now_ms, rebalance=False)
    ctx.log.append(records)
    for r in records:
        ctx.shard.replay(r)
    ctx.apply(back)
    group = ctx.classic(G)
    assert group.state is S.STABLE and group.protocol_name == "range"
    assert ctx.heartbeat(G, ids[0], epoch) == 0
    assert ctx.answer(ctx.sync(G, ids[0], epoch)).assignment == encode_assignment(
        Assignment({"orders": [0, 1]})
    )
    ctx.assert_replay_equals_live()


def test_join_group_to_an_empty_consumer_group_replaces_it_with_a_classic_group() -> None:
    """Kafka converts an empty consumer group when a classic member joins (no migration of
    members is needed); a non-empty one cannot take classic members here."""
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=2)
    joined = ctx.join("m1")  # a KIP-848 member (ConsumerGroupHeartbeat)
    assert isinstance(ctx.shard.groups[G], ConsumerGroup)

    def classic_join(member_id: str = "") -> str:
        return ShardContext.join(ctx, G, member_id, version=3)

    assert ctx.answer(classic_join()).error_code == E.inconsistent_group_protocol.value
    ctx.commit(G, {("foo", 0): 5}, member_id="m1", generation=joined.member_epoch)
    ctx.heartbeat("m1", -1)  # leaves: the consumer group is now empty
    assert ctx.shard.groups[G].is_empty()
    token = classic_join()
    ctx.advance(ctx.config.classic_group_initial_rebalance_delay_ms)
    member = ctx.answer(token)
    assert member.error_code == 0 and member.generation_id == 1
    assert ctx.classic(G).state is S.COMPLETING_REBALANCE
    assert ctx.fetch(G) == {("foo", 0): 5}  # offsets belong to the group id and stay
    ctx.assert_replay_equals_live()
