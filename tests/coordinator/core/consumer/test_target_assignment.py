"""The inputs of a target assignment: a snapshot taken on the loop, whose assignor input is
built wherever the assignor runs, and the size check that decides where that is; a target
computed a step at a time while the group moves on is the snapshot's."""

from __future__ import annotations

from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from groupcoord.common import steps as steps_module
from groupcoord.coordinator.core.assignors.uniform_assignor import UniformAssignor
from groupcoord.coordinator.core.consumer.consumer_group import ConsumerGroupMember
from groupcoord.coordinator.core.consumer.target_assignment import (
    GroupSnapshot,
    compute_snapshot_target,
    snapshot_target_steps,
)
from groupcoord.coordinator.core.topics_image import TopicImage, TopicsImage

NAMES = [f"t{i}" for i in range(6)]
IMAGE = TopicsImage.of(TopicImage(n.encode().ljust(16, b"\0"), n, 1 + 3 * i, ()) for i, n in enumerate(NAMES))
REGEX = "t[0-2]"
RESOLVED = {REGEX: frozenset({"t0", "t1", "t2"})}

subscriptions = st.tuples(
    st.lists(st.sampled_from([*NAMES, "missing"]), max_size=4).map(tuple), st.sampled_from([None, REGEX])
)


def member(i: int, names: tuple[str, ...], regex: str | None) -> ConsumerGroupMember:
    return ConsumerGroupMember(f"m{i}", subscribed_topic_names=names, subscribed_topic_regex=regex)


def full_size(snapshot: GroupSnapshot) -> int:
    """Members plus the partitions of every topic any of them subscribes to, counted whole."""
    topics = set().union(*(m.subscribed_topic_ids for m in snapshot.spec().members.values()))
    return len(snapshot.members) + sum(IMAGE.num_partitions(t) for t in topics)


@given(st.lists(subscriptions, max_size=8), st.integers(0, 60))
def test_the_bounded_size_check_agrees_with_the_full_count(subs, limit) -> None:
    members = {f"m{i}": member(i, names, regex) for i, (names, regex) in enumerate(subs)}
    snapshot = GroupSnapshot.of(members, {}, RESOLVED, IMAGE)
    assert snapshot.size_reaches(limit) == (full_size(snapshot) >= limit)


def test_a_snapshot_does_not_see_the_group_change_after_it_was_taken() -> None:
    members = {"a": member(0, ("t1",), None)}
    target = {"a": {IMAGE.topic_id("t1"): frozenset({0})}}
    resolved = dict(RESOLVED)
    snapshot = GroupSnapshot.of(members, target, resolved, IMAGE)

    # the loop goes on: b joins, a's target is replaced (as replay does), a regex is dropped
    members["b"] = member(1, (), REGEX)
    target["a"] = {}
    resolved.clear()

    spec = snapshot.spec()  # built later, off the loop
    assert list(spec.members) == ["a"]
    assert spec.members["a"].assignment == {IMAGE.topic_id("t1"): frozenset({0})}


@given(st.lists(subscriptions, min_size=1, max_size=40), st.lists(subscriptions, max_size=40))
def test_a_target_computed_in_slices_while_the_group_moves_on_is_the_target_of_the_snapshot(subs, newcomers) -> None:
    """An offloaded assignment runs a step at a time while the loop changes the group between
    steps: members join, targets are replaced, regexes dropped. Its result is the target of
    the group as it was when the snapshot was taken, record for record."""
    members = {f"m{i}": member(i, names, regex) for i, (names, regex) in enumerate(subs)}
    target: dict[str, dict[bytes, frozenset[int]]] = {}
    resolved = dict(RESOLVED)
    snapshot = GroupSnapshot.of(members, target, resolved, IMAGE)
    at_once = compute_snapshot_target("g", GroupSnapshot.of(members, target, resolved, IMAGE), UniformAssignor(), 2, 0)

    with mock.patch.object(steps_module, "STRIDE", 1):  # a step per member, per topic
        sliced = run_while_the_group_moves_on(
            snapshot_target_steps("g", snapshot, UniformAssignor(), 2, 0), members, target, resolved, newcomers
        )
    assert sliced.by_member == at_once.by_member
    assert [r.key for r in sliced.records] == [r.key for r in at_once.records]
    assert [r.value for r in sliced.records] == [r.value for r in at_once.records]


def run_while_the_group_moves_on(steps, members, target, resolved, newcomers):  # noqa: ANN001, ANN201
    """Run ``steps`` to its end, changing the group between two steps while ``newcomers`` last."""
    newcomers = list(newcomers)
    while True:
        if newcomers:  # the loop runs between two steps
            names, regex = newcomers.pop()
            joining = member(100 + len(newcomers), names, regex)
            members[joining.member_id] = joining
            target[next(iter(members))] = {IMAGE.topic_id("t5"): frozenset({0})}
            resolved.clear()
        try:
            next(steps)
        except StopIteration as end:
            return end.value
