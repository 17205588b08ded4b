"""A copy of a coordinator shard is a separate shard: what the runtime's revert relies on.

When a write fails, the runtime makes the live replica the committed one again with
``copy.deepcopy(committed)`` (runtime/replicas.py). Every callback the shard's parts hold must
follow the copy; a closure would be shared by both and keep replaying into the original — after
one reverted write, KIP-848 groups created on the partition vanished from the live replica and
their members got GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

import copy

from consumer_group_context import ConsumerGroupContext, G

from groupcoord.coordinator.core.consumer.group import ConsumerGroup


def copy_as_the_runtime_reverts(ctx: ConsumerGroupContext) -> ConsumerGroupContext:
    """Point the context at a deep copy of its shard (sharing the timer, as revert does) and
    return it; the original stays in ``ctx.original``."""
    ctx.original = ctx.shard  # type: ignore[attr-defined]
    ctx.shard = copy.deepcopy(ctx.shard, {id(ctx.timer): ctx.timer})
    return ctx


def test_records_replayed_into_a_copy_change_only_the_copy() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=3)
    ctx.join("m1")
    copy_as_the_runtime_reverts(ctx)

    # Given the copy serves from now on, when a member joins a new group and one joins G
    ctx.join("m2", group="other")
    ctx.join("m3")

    # then the copy has both, and the original saw neither
    assert isinstance(ctx.shard.groups["other"], ConsumerGroup)
    assert set(ctx.shard.groups[G].members) == {"m1", "m3"}
    assert "other" not in ctx.original.groups
    assert set(ctx.original.groups[G].members) == {"m1"}


def test_a_copied_group_resolves_topics_through_the_copys_image() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=3)
    ctx.join("m1")
    copy_as_the_runtime_reverts(ctx)

    ctx.set_topics(foo=3, bar=2)  # only the copy learns of bar

    assert ctx.shard.groups[G].topic_id_of("bar") == ctx.topic_id("bar")
    assert ctx.original.groups[G].topic_id_of("bar") is None


def test_every_part_of_a_copy_works_on_the_copys_groups() -> None:
    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=3)
    copy_as_the_runtime_reverts(ctx)

    ctx.join("m1", group="fresh")
    group = ctx.shard.groups["fresh"]
    assert "fresh" not in ctx.original.groups
    assert ctx.shard.offsets.groups is ctx.shard.groups  # the parts share the copy's groups
    assert ctx.shard.consumer.groups is ctx.shard.groups
    assert ctx.shard.classic.groups is ctx.shard.groups
    assert group is ctx.shard.consumer.consumer_group("fresh")
