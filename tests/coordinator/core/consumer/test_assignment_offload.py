"""KIP-1263's assignor offload, step by step: a large assignment runs off the partition's loop.

The shard hands the assignor a snapshot of the group (an ``Offload`` intent) instead of running
it inside the heartbeat; the member that asked reconciles towards the current target meanwhile,
and gets the new one with its next heartbeat. A run that returns after the group moved on
(a member joined or left meanwhile) is never written: the group is computed again as it is now.
The mock timer finishes an offloaded run at the next ``advance`` (Kafka's MockCoordinatorExecutor
runs tasks when the test polls it), so each test decides what happens while a run is in flight.
"""

from __future__ import annotations

from consumer_group_context import ConsumerGroupContext

from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.consumer.consumer_timers import assignment_timer_key

EVERY_ASSIGNMENT = GroupConfig(consumer_group_assignor_offload_min_size=0)


def test_an_offloaded_assignment_reaches_the_member_with_its_next_heartbeat() -> None:
    ctx = ConsumerGroupContext(EVERY_ASSIGNMENT)
    ctx.set_topics(foo=3)

    # A joins: the group epoch moves to 2, the assignment is handed off; A stays at epoch 1
    # with nothing, and no target record is written yet.
    resp = ctx.join("A")
    group = ctx.group()
    assert (group.group_epoch, group.assignment_epoch) == (2, 1)
    assert resp.member_epoch == 1 and ctx.assignment(resp) == {}
    assert ctx.timer.is_scheduled(assignment_timer_key("group"))

    # The run returns: target epoch 2 with every partition for A.
    ctx.advance(0)
    assert group.assignment_epoch == 2 and ctx.target("A") == {"foo": [0, 1, 2]}
    assert not ctx.timer.is_scheduled(assignment_timer_key("group"))

    # A's next heartbeat gets it.
    resp = ctx.ack("A")
    assert resp.member_epoch == 2 and ctx.assignment(resp) == {"foo": [0, 1, 2]}
    ctx.assert_replay_equals_live()


def test_a_run_that_returns_after_a_join_is_computed_again_not_written() -> None:
    ctx = ConsumerGroupContext(EVERY_ASSIGNMENT)
    ctx.set_topics(foo=4)
    ctx.join("A")

    # B joins while A's run is in flight: the group epoch moves to 3; no second run starts.
    written = len(ctx.log.entries)
    ctx.join("B")
    group = ctx.group()
    assert group.group_epoch == 3 and group.assignment_epoch == 1

    # The first run (A alone, epoch 2) returns: stale, so nothing of it is written and a
    # run for A and B starts; it returns at the next advance with epoch 3.
    ctx.advance(0)
    assert group.assignment_epoch == 3
    assert ctx.target("A") == {"foo": [0, 1]} and ctx.target("B") == {"foo": [2, 3]}
    epochs = [
        r.value.assignment_epoch
        for r in ctx.log.records()[written:]
        if type(r.key).__name__ == "ConsumerGroupTargetAssignmentMetadataKey" and r.value is not None
    ]
    assert epochs == [3], "the stale run for epoch 2 was written"

    ctx.ack("A")
    ctx.ack("B")
    assert ctx.partitions("A") == ["foo-0", "foo-1"] and ctx.partitions("B") == ["foo-2", "foo-3"]
    ctx.assert_replay_equals_live()


def test_a_run_for_a_member_that_left_meanwhile_is_computed_again() -> None:
    ctx = ConsumerGroupContext(EVERY_ASSIGNMENT)
    ctx.set_topics(foo=2)
    ctx.join("A")
    ctx.advance(0)
    ctx.ack("A")
    ctx.join("B")  # a run for A and B starts
    ctx.heartbeat("B", -1)  # B leaves before it returns

    ctx.advance(0)
    group = ctx.group()
    assert set(group.target) == {"A"} and ctx.target("A") == {"foo": [0, 1]}
    assert group.assignment_epoch == group.group_epoch
    ctx.assert_replay_equals_live()


def test_small_assignments_stay_inline_by_default() -> None:
    """The default size (10,000 members + partitions) keeps a small group's assignment in the
    heartbeat that asked for it: a joining member gets its partitions in the answer."""
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=3)
    resp = ctx.join("A")
    assert resp.member_epoch == 2 and ctx.assignment(resp) == {"foo": [0, 1, 2]}


def test_large_assignments_are_offloaded_by_default() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=10_000)
    resp = ctx.join("A")
    assert resp.member_epoch == 1 and ctx.assignment(resp) == {}
    ctx.advance(0)
    assert len(ctx.target("A")["foo"]) == 10_000
