"""A consumer group built from a classic group's members (the consumer side of online upgrade)."""

from __future__ import annotations

from consumer_group_context import ConsumerGroupContext, G

from groupcoord.coordinator.core.consumer.consumer_group import MemberState
from groupcoord.coordinator.core.contract import CoordinatorResult
from groupcoord.coordinator.core.migration.consumer_records import (
    MigratingMember,
    consumer_group_records_from_classic,
)


def _member(member_id: str, assigned: dict[str, list[int]], instance: str | None = None) -> MigratingMember:
    return MigratingMember(
        member_id=member_id,
        group_instance_id=instance,
        client_id="classic-client",
        client_host="/10.0.0.1",
        rebalance_timeout_ms=30_000,
        session_timeout_ms=10_000,
        protocols=(("range", b"meta"),),
        subscribed_topics=("orders", "payments"),
        assigned=assigned,
        rack_id="r1",
    )


def test_classic_members_carry_over_with_their_assignment_at_the_generation() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(orders=3, payments=1)
    members = [_member("c1", {"orders": [0, 1]}, "i1"), _member("c2", {"orders": [2], "payments": [0]})]
    ctx.apply(
        CoordinatorResult(records=consumer_group_records_from_classic(G, 7, members, ctx.shard.image, 0))
    )
    group = ctx.group()
    assert (group.group_epoch, group.assignment_epoch, group.state_name()) == (7, 7, "Stable")
    c1 = ctx.member("c1")
    assert c1.uses_classic_protocol and c1.classic_member_metadata.supported_protocols == (
        ("range", b"meta"),
    )
    assert (c1.member_epoch, c1.state, c1.instance_id, c1.rack_id) == (7, MemberState.STABLE, "i1", "r1")
    assert ctx.owned("c1") == ctx.target("c1") == {"orders": [0, 1]}
    assert ctx.owned("c2") == {"orders": [2], "payments": [0]}
    assert group.member_by_instance("i1") is c1
    assert [m.member_type for m in ctx.describe(G).groups[0].members] == [0, 0]
    # classic members commit with their generation, at any OffsetCommit version
    assert ctx.commit(G, {("orders", 0): 1}, member_id="c1", generation=7, version=2) == {("orders", 0): 0}
    # the group goes on from there: a consumer-protocol member joining bumps the epoch
    resp = ctx.join("k1", names=["orders", "payments"])
    assert group.group_epoch == 8 and resp.error_code == 0
    assert sum(len(ps) for ps in ctx.target("k1").values()) == 1
    ctx.assert_replay_equals_live()
