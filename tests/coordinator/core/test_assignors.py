"""Server-side assignors: balance, stickiness, co-partitioning and rack awareness."""

from __future__ import annotations

import math
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.coordinator.core.assignors.api import GroupSpec, MemberSpec
from groupcoord.coordinator.core.assignors.range_assignor import RangeAssignor
from groupcoord.coordinator.core.assignors.uniform_assignor import UniformAssignor
from groupcoord.coordinator.core.topics_image import TopicImage, TopicsImage

Result = dict[str, dict[bytes, list[int]]]


def tid(name: str) -> bytes:
    return uuid.uuid5(uuid.NAMESPACE_OID, name).bytes


def image(racks: dict[str, list[list[str]]] | None = None, **counts: int) -> TopicsImage:
    return TopicsImage.of(
        TopicImage(tid(n), n, c, tuple(frozenset(r) for r in (racks or {}).get(n, [])))
        for n, c in counts.items()
    )


def spec(
    members: dict[str, list[str]], current: Result | None = None, racks: dict[str, str] | None = None
) -> GroupSpec:
    return GroupSpec(
        {
            m: MemberSpec((racks or {}).get(m), frozenset(tid(t) for t in topics), (current or {}).get(m, {}))
            for m, topics in members.items()
        }
    )


def counts(result: Result) -> dict[str, int]:
    return {m: sum(len(p) for p in a.values()) for m, a in result.items()}


def pairs(result: Result) -> dict[tuple[bytes, int], str]:
    out: dict[tuple[bytes, int], str] = {}
    for m, a in result.items():
        for t, ps in a.items():
            for p in ps:
                assert (t, p) not in out, f"{(t, p)} assigned twice"
                out[(t, p)] = m
    return out


def moved(before: Result, after: Result) -> int:
    b = pairs(before)
    return sum(1 for tp, m in pairs(after).items() if tp in b and b[tp] != m)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 12),
    topic_sizes=st.lists(st.integers(0, 17), min_size=1, max_size=4),
)
def test_uniform_homogeneous_is_balanced_complete_sticky_and_moves_little_on_join(
    n: int, topic_sizes: list[int]
) -> None:
    img = image(**{f"t{i}": c for i, c in enumerate(topic_sizes)})
    topics = [f"t{i}" for i in range(len(topic_sizes))]
    total = sum(topic_sizes)
    a = UniformAssignor()
    members = {f"m{i}": topics for i in range(n)}
    first = a.assign(spec(members), img)
    c = counts(first)
    assert max(c.values()) - min(c.values()) <= 1
    assert len(pairs(first)) == total
    # recomputation with no change moves nothing
    assert pairs(a.assign(spec(members, first), img)) == pairs(first)
    # one member joining N moves at most ceil(P / (N+1)) partitions
    members["new"] = topics
    after = a.assign(spec(members, first), img)
    assert moved(first, after) <= math.ceil(total / (n + 1))
    c = counts(after)
    assert max(c.values()) - min(c.values()) <= 1 and len(pairs(after)) == total


@settings(max_examples=60, deadline=None)
@given(
    subs=st.lists(st.sets(st.sampled_from(["a", "b", "c", "d"]), min_size=1), min_size=1, max_size=8),
    sizes=st.tuples(*[st.integers(0, 9)] * 4),
)
def test_uniform_heterogeneous_assigns_only_subscribed_partitions_once_and_is_stable(
    subs: list[set[str]], sizes: tuple[int, ...]
) -> None:
    img = image(a=sizes[0], b=sizes[1], c=sizes[2], d=sizes[3])
    members = {f"m{i}": sorted(s) for i, s in enumerate(subs)}
    a = UniformAssignor()
    first = a.assign(spec(members), img)
    owners = pairs(first)
    wanted = {t for s in subs for t in s}
    assert len(owners) == sum(sizes[i] for i, t in enumerate("abcd") if t in wanted)
    for (t, _p), m in owners.items():
        assert t in {tid(x) for x in members[m]}
    assert pairs(a.assign(spec(members, first), img)) == owners  # nothing moves
    # no subscriber of a topic could take one of its partitions from a member holding 2+ more
    c = counts(first)
    for (t, _p), m in owners.items():
        for other, topics in members.items():
            if t in {tid(x) for x in topics}:
                assert c[m] - c[other] <= 1


def test_uniform_heterogeneous_balances_when_possible() -> None:
    img = image(a=6, b=6)
    result = UniformAssignor().assign(spec({"m1": ["a"], "m2": ["a", "b"], "m3": ["b"]}), img)
    assert sorted(counts(result).values()) == [4, 4, 4]


def test_uniform_is_rack_aware_without_breaking_balance() -> None:
    racks = {"foo": [["r1"], ["r2"], ["r1"], ["r2"], ["r1"], ["r2"]]}
    img = image(racks=racks, foo=6)
    members = {"a": ["foo"], "b": ["foo"]}
    result = UniformAssignor().assign(spec(members, racks={"a": "r2", "b": "r1"}), img)
    foo = tid("foo")
    assert sorted(result["a"][foo]) == [1, 3, 5] and sorted(result["b"][foo]) == [0, 2, 4]
    # uneven racks: balance first (3 each), same-rack as far as possible
    lopsided = image(racks={"foo": [["r1"]] * 5 + [["r2"]]}, foo=6)
    result = UniformAssignor().assign(spec(members, racks={"a": "r1", "b": "r2"}), lopsided)
    assert sorted(counts(result).values()) == [3, 3]
    assert 5 in result["b"][foo]
    # heterogeneous: among the least loaded subscribers, a same-rack one
    result = UniformAssignor().assign(
        spec({"a": ["foo"], "b": ["foo", "bar"]}, racks={"a": "r2", "b": "r1"}),
        image(racks=racks, foo=6, bar=0),
    )
    assert sorted(result["a"][foo]) == [1, 3, 5]


def test_range_co_partitions_and_is_sticky() -> None:
    img = image(orders=5, payments=5)
    members = {m: ["orders", "payments"] for m in ("a", "b")}
    r = RangeAssignor()
    first = r.assign(spec(members), img)
    assert first["a"] == {tid("orders"): [0, 1, 2], tid("payments"): [0, 1, 2]}
    assert first["b"] == {tid("orders"): [3, 4], tid("payments"): [3, 4]}
    assert r.assign(spec(members, first), img) == first
    members["c"] = ["orders", "payments"]
    after = r.assign(spec(members, first), img)
    for m in after:
        assert after[m].get(tid("orders")) == after[m].get(tid("payments"))  # co-partitioned
    assert sorted(counts(after).values()) == [2, 4, 4]
    assert moved(first, after) <= 2  # only what c needs


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 6), p=st.integers(0, 20), joins=st.integers(0, 3))
def test_range_co_partitions_topics_with_equal_partition_counts(n: int, p: int, joins: int) -> None:
    img = image(x=p, y=p)
    members = {f"m{i}": ["x", "y"] for i in range(n)}
    r = RangeAssignor()
    current = r.assign(spec(members), img)
    for j in range(joins):
        members[f"j{j}"] = ["x", "y"]
        current = r.assign(spec(members, current), img)
    for m in members:
        assert sorted(current[m].get(tid("x"), [])) == sorted(current[m].get(tid("y"), []))
    c = counts(current)
    assert max(c.values()) - min(c.values()) <= 2  # one per topic at most
    assert len(pairs(current)) == 2 * p


def test_range_is_rack_aware_and_keeps_co_partitioning_when_racks_agree() -> None:
    layout = [["r2"], ["r1"], ["r2"], ["r1"]]
    img = image(racks={"orders": layout, "payments": layout}, orders=4, payments=4)
    members = {"a": ["orders", "payments"], "b": ["orders", "payments"]}
    result = RangeAssignor().assign(spec(members, racks={"a": "r1", "b": "r2"}), img)
    assert result["a"] == {tid("orders"): [1, 3], tid("payments"): [1, 3]}
    assert result["b"] == {tid("orders"): [0, 2], tid("payments"): [0, 2]}
    # more partitions in one rack than its member's quota: balance wins
    lopsided = image(racks={"orders": [["r1"]] * 4}, orders=4)
    result = RangeAssignor().assign(
        spec({"a": ["orders"], "b": ["orders"]}, racks={"a": "r1", "b": "r2"}), lopsided
    )
    assert sorted(counts(result).values()) == [2, 2] and result["a"][tid("orders")] == [0, 1]


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 6),
    sizes=st.tuples(st.integers(0, 9), st.integers(0, 9)),
    current=st.lists(st.tuples(st.sampled_from(["a", "b", "gone"]), st.integers(0, 12)), max_size=30),
    heterogeneous=st.booleans(),
)
def test_uniform_copes_with_stale_current_assignments(
    n: int, sizes: tuple[int, int], current: list[tuple[str, int]], heterogeneous: bool
) -> None:
    """Current targets naming deleted topics, partitions beyond a shrunk topic, or a partition
    twice (never produced by the coordinator, but the assignor must not trust its input)."""
    img = image(a=sizes[0], b=sizes[1])
    members = {f"m{i}": (["a"] if heterogeneous and i % 2 else ["a", "b"]) for i in range(n)}
    owned: Result = {m: {} for m in members}
    for k, (topic, p) in enumerate(current):
        owned[f"m{k % n}"].setdefault(tid(topic), []).append(p)
    result = UniformAssignor().assign(spec(members, owned), img)
    owners = pairs(result)  # asserts no partition twice
    assert all(t in (tid("a"), tid("b")) and p < sizes[0 if t == tid("a") else 1] for t, p in owners)
    wanted = sizes[0] + (sizes[1] if any("b" in t for t in members.values()) else 0)
    assert len(owners) == wanted
    if not heterogeneous:
        c = counts(result)
        assert max(c.values()) - min(c.values()) <= 1
