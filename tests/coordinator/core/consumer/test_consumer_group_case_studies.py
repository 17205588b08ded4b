"""KIP-848's case studies, step by step: every epoch and partition set in the order the KIP shows.

The KIP's "pending-partitions" of a member that waits for a partition (B after the second
join) is Kafka 4.x's UNRELEASED_PARTITIONS state: the member is at the target epoch and gets
the partition once its previous owner has released it. A new group starts at epoch 1, as in
Kafka 4.4 (KAFKA-20268), so every epoch here is one above the KIP's.
"""

from __future__ import annotations

from consumer_group_context import ConsumerGroupContext

from groupcoord.coordinator.core.consumer.consumer_group import MemberState


def _stable_pair_on_six_partitions(ctx: ConsumerGroupContext) -> int:
    """A and B, stable, A owning foo-0..2 and B foo-3..5; returns the group epoch."""
    ctx.set_topics(foo=6)
    ctx.join("A")
    ctx.join("B")
    ctx.ack("A")  # revokes foo-3..5 (A got all six first)
    ctx.ack("A")
    ctx.ack("B")
    group = ctx.group()
    assert group.state_name() == "Stable"
    assert ctx.partitions("A") == ["foo-0", "foo-1", "foo-2"]
    assert ctx.partitions("B") == ["foo-3", "foo-4", "foo-5"]
    return group.group_epoch


def test_basic() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=3)

    # Member A joins: group epoch 2, target epoch 2 with all partitions; A reconciles at once.
    resp = ctx.join("A")
    group = ctx.group()
    assert (group.group_epoch, group.assignment_epoch) == (2, 2)
    assert ctx.target("A") == {"foo": [0, 1, 2]}
    assert resp.member_epoch == 2 and ctx.assignment(resp) == {"foo": [0, 1, 2]}
    assert ctx.partitions("A") == ["foo-0", "foo-1", "foo-2"]

    # Member B joins: epoch 3, target A=[0,1] B=[2]; B moves to epoch 3 without foo-2 (unreleased).
    resp = ctx.join("B")
    assert (group.group_epoch, group.assignment_epoch) == (3, 3)
    assert ctx.target("A") == {"foo": [0, 1]} and ctx.target("B") == {"foo": [2]}
    assert resp.member_epoch == 3 and ctx.assignment(resp) == {}
    assert ctx.member("B").state is MemberState.UNRELEASED_PARTITIONS
    assert ctx.member("A").member_epoch == 2

    # A heartbeats: asked to revoke foo-2 (assignment without it), still epoch 2.
    resp = ctx.heartbeat("A", 2, owned={"foo": [0, 1, 2]})
    assert resp.member_epoch == 2 and ctx.assignment(resp) == {"foo": [0, 1]}
    assert ctx.pending("A") == {"foo": [2]}
    assert ctx.member("A").state is MemberState.UNREVOKED_PARTITIONS

    # A acknowledges: epoch 3, foo-2 released.
    resp = ctx.heartbeat("A", 2, owned={"foo": [0, 1]})
    assert resp.member_epoch == 3 and ctx.partitions("A") == ["foo-0", "foo-1"] and ctx.pending("A") == {}

    # B heartbeats and gets foo-2.
    resp = ctx.heartbeat("B", 3, owned={})
    assert resp.member_epoch == 3 and ctx.assignment(resp) == {"foo": [2]}
    assert group.state_name() == "Stable"

    # Member C joins: epoch 4, target A=[0] B=[2] C=[1].
    resp = ctx.join("C")
    assert (group.group_epoch, group.assignment_epoch) == (4, 4)
    assert (ctx.target("A"), ctx.target("B"), ctx.target("C")) == ({"foo": [0]}, {"foo": [2]}, {"foo": [1]})
    # C transitions to epoch 4 but cannot get foo-1 yet.
    assert resp.member_epoch == 4 and ctx.assignment(resp) == {}

    # B heartbeats: nothing to revoke, straight to epoch 4.
    resp = ctx.heartbeat("B", 3, owned={"foo": [2]})
    assert resp.member_epoch == 4 and ctx.partitions("B") == ["foo-2"]

    # A revokes foo-1, then acknowledges and moves to epoch 4.
    resp = ctx.heartbeat("A", 3, owned={"foo": [0, 1]})
    assert resp.member_epoch == 3 and ctx.assignment(resp) == {"foo": [0]}
    resp = ctx.heartbeat("A", 3, owned={"foo": [0]})
    assert resp.member_epoch == 4 and ctx.partitions("A") == ["foo-0"]

    # C gets foo-1: every member at the group epoch.
    resp = ctx.heartbeat("C", 4, owned={})
    assert resp.member_epoch == 4 and ctx.assignment(resp) == {"foo": [1]}
    assert group.state_name() == "Stable"
    assert {m.member_epoch for m in group.members.values()} == {4}
    ctx.assert_replay_equals_live()


def test_incremental_revocation_and_assignment() -> None:
    ctx = ConsumerGroupContext()
    e = _stable_pair_on_six_partitions(ctx)
    group = ctx.group()

    # C joins: epoch e+1, target A=[0,1] B=[3,4] C=[2,5]; C at e+1 with nothing yet.
    resp = ctx.join("C")
    assert group.group_epoch == group.assignment_epoch == e + 1
    assert ctx.target("A") == {"foo": [0, 1]}
    assert ctx.target("B") == {"foo": [3, 4]}
    assert ctx.target("C") == {"foo": [2, 5]}
    assert resp.member_epoch == e + 1 and ctx.assignment(resp) == {}
    assert ctx.member("A").member_epoch == ctx.member("B").member_epoch == e

    # A is told to revoke foo-2, B foo-5; C: no change.
    assert ctx.assignment(ctx.heartbeat("A", e, owned={"foo": [0, 1, 2]})) == {"foo": [0, 1]}
    assert ctx.assignment(ctx.heartbeat("B", e, owned={"foo": [3, 4, 5]})) == {"foo": [3, 4]}
    resp = ctx.heartbeat("C", e + 1, owned={})
    assert ctx.assignment(resp) is None and resp.member_epoch == e + 1

    # A acknowledges: epoch e+1, foo-2 released.
    assert ctx.heartbeat("A", e, owned={"foo": [0, 1]}).member_epoch == e + 1
    assert ctx.partitions("A") == ["foo-0", "foo-1"]

    # C gets foo-2, still waits for foo-5.
    assert ctx.assignment(ctx.heartbeat("C", e + 1, owned={})) == {"foo": [2]}
    assert ctx.member("C").state is MemberState.UNRELEASED_PARTITIONS

    # B acknowledges: epoch e+1; C gets foo-2 and foo-5.
    assert ctx.heartbeat("B", e, owned={"foo": [3, 4]}).member_epoch == e + 1
    assert ctx.assignment(ctx.heartbeat("C", e + 1, owned={"foo": [2]})) == {"foo": [2, 5]}
    assert group.state_name() == "Stable"
    ctx.assert_replay_equals_live()


def test_member_failure() -> None:
    ctx = ConsumerGroupContext()
    e = _stable_pair_on_six_partitions(ctx)
    ctx.join("C")
    for _ in range(3):
        for m in ("A", "B", "C"):
            ctx.ack(m)
    group = ctx.group()
    e = group.group_epoch
    assert group.state_name() == "Stable"
    assert (ctx.target("A"), ctx.target("B"), ctx.target("C")) == (
        {"foo": [0, 1]},
        {"foo": [3, 4]},
        {"foo": [2, 5]},
    )

    # A stops heartbeating; B and C keep going. After the session timeout A is removed, epoch e+1.
    for _ in range(8):
        ctx.advance(5_000)
        ctx.ack("B")
        ctx.ack("C")
    assert "A" in group.members
    ctx.advance(5_000)  # 45 s without a heartbeat from A
    assert "A" not in group.members and group.group_epoch == e + 1
    assert group.assignment_epoch == e
    assert ctx.member("B").member_epoch == ctx.member("C").member_epoch == e

    # The next heartbeat computes the target: B=[0,3,4], C=[1,2,5]; both move to e+1.
    resp_b = ctx.ack("B")
    assert group.assignment_epoch == e + 1
    assert ctx.target("B") == {"foo": [0, 3, 4]} and ctx.target("C") == {"foo": [1, 2, 5]}
    assert resp_b.member_epoch == e + 1 and ctx.assignment(resp_b) == {"foo": [0, 3, 4]}
    resp_c = ctx.ack("C")
    assert resp_c.member_epoch == e + 1 and ctx.assignment(resp_c) == {"foo": [1, 2, 5]}
    assert group.state_name() == "Stable"
    ctx.assert_replay_equals_live()


def test_partition_added() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=1)
    ctx.join("A")
    ctx.join("B")
    ctx.ack("A")
    ctx.ack("B")
    group = ctx.group()
    e = group.group_epoch
    assert ctx.partitions("A") == ["foo-0"] and ctx.partitions("B") == []
    assert group.state_name() == "Stable"

    # foo-1 is created: the coordinator detects it and bumps the group epoch.
    ctx.set_topics(foo=2)
    assert group.group_epoch == e + 1 and group.assignment_epoch == e

    # The next heartbeat computes the target A=[0] B=[1]; both move to e+1.
    resp_a = ctx.ack("A")
    assert ctx.target("A") == {"foo": [0]} and ctx.target("B") == {"foo": [1]}
    assert resp_a.member_epoch == e + 1 and ctx.assignment(resp_a) is None  # unchanged assignment
    resp_b = ctx.ack("B")
    assert resp_b.member_epoch == e + 1 and ctx.assignment(resp_b) == {"foo": [1]}
    assert group.state_name() == "Stable"
    ctx.assert_replay_equals_live()
