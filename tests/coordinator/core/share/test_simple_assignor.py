"""The share groups' ``simple`` assignor (KIP-932): every subscribed partition read by someone,
no member idle, balance, and stickiness — per topic, among that topic's subscribers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.coordinator.core.assignors.simple_assignor import SimpleAssignor
from tests.coordinator.core.test_assignors import Result, image, spec, tid


def readers(result: Result) -> dict[tuple[bytes, int], set[str]]:
    """(topic, partition) -> the members assigned it (a share-partition may have several)."""
    out: dict[tuple[bytes, int], set[str]] = {}
    for member, assignment in result.items():
        for topic, partitions in assignment.items():
            assert len(set(partitions)) == len(partitions) and partitions == sorted(partitions)
            for p in partitions:
                out.setdefault((topic, p), set()).add(member)
    return out


def test_fewer_members_than_partitions_each_partition_once_balanced() -> None:
    result = SimpleAssignor().assign(spec({"a": ["t"], "b": ["t"], "c": ["t"]}), image(t=8))
    assert all(len(m) == 1 for m in readers(result).values())
    assert sorted(len(a[tid("t")]) for a in result.values()) == [2, 3, 3]


def test_more_members_than_partitions_every_member_reads_one_partition() -> None:
    members = {f"m{i}": ["t"] for i in range(5)}
    result = SimpleAssignor().assign(spec(members), image(t=2))
    assert all(len(a[tid("t")]) == 1 for a in result.values()), "nobody idle"
    assert sorted(len(m) for m in readers(result).values()) == [2, 3]


def test_a_member_joining_a_crowded_group_moves_nobody() -> None:
    members = {f"m{i}": ["t"] for i in range(3)}
    first = SimpleAssignor().assign(spec(members), image(t=2))
    members["m3"] = ["t"]
    after = SimpleAssignor().assign(spec(members, first), image(t=2))
    assert all(after[m] == first[m] for m in first)
    assert sorted(len(m) for m in readers(after).values()) == [2, 2]


def test_unknown_topics_and_unsubscribed_members_get_nothing() -> None:
    result = SimpleAssignor().assign(spec({"a": ["missing"], "b": []}), image(t=3))
    assert result == {"a": {}, "b": {}}


@settings(max_examples=100, deadline=None)
@given(
    subs=st.lists(st.sets(st.sampled_from(["a", "b", "c"]), max_size=3), min_size=1, max_size=9),
    sizes=st.tuples(*[st.integers(0, 7)] * 3),
    joiner=st.sets(st.sampled_from(["a", "b", "c"]), max_size=3),
)
def test_every_partition_read_nobody_idle_balanced_and_stable(subs, sizes, joiner) -> None:
    img = image(a=sizes[0], b=sizes[1], c=sizes[2])
    members = {f"m{i}": sorted(s) for i, s in enumerate(subs)}
    assignor = SimpleAssignor()
    first = assignor.assign(spec(members), img)
    for topic, size in zip("abc", sizes, strict=True):
        subscribers = [m for m, topics in members.items() if topic in topics]
        if not subscribers or not size:
            continue
        got = {p: r for (t, p), r in readers(first).items() if t == tid(topic)}
        assert sorted(got) == list(range(size)), "every partition of a subscribed topic is read"
        assert all(r <= set(subscribers) for r in got.values()), "only by its subscribers"
        per_member = [len(first[m].get(tid(topic), ())) for m in subscribers]
        if len(subscribers) <= size:
            assert all(len(r) == 1 for r in got.values())
            assert max(per_member) - min(per_member) <= 1
        else:
            assert per_member == [1] * len(subscribers), "nobody idle"
            sharers = [len(r) for r in got.values()]
            assert max(sharers) - min(sharers) <= 1
    assert assignor.assign(spec(members, first), img) == first, "recomputing moves nothing"
    # a member joining: those who keep a partition of a topic keep it where balance allows
    members["new"] = sorted(joiner)
    after = assignor.assign(spec(members, first), img)
    for member, assignment in first.items():
        for topic, partitions in assignment.items():
            assert set(after[member].get(topic, ())) <= set(partitions) or len(partitions) == 1
