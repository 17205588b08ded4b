"""Placement properties: one leader each, balanced, sticky, failover to live shards, epochs up.

Each test states one rule of ``groupcoord.controlplane.placement`` and lets hypothesis search
for a counterexample over partition counts, shard sets, standby counts and histories of
scale-outs, scale-ins and failures.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.controlplane.placement import (
    Assignment,
    PlacementError,
    moved_partitions,
    place,
    placement_from_status,
    placement_to_status,
)

partitions_st = st.integers(min_value=1, max_value=64)
shard_sets = st.sets(st.integers(min_value=0, max_value=15), min_size=1, max_size=10)
standbys_st = st.integers(min_value=0, max_value=3)


def leader_loads(placement, shards) -> Counter:
    loads = Counter(dict.fromkeys(shards, 0))
    loads.update(a.leader for a in placement.values())
    return loads


def minimal_moves(previous, live, partitions) -> int:
    """Independent count of leader moves balance forces on shards that stay alive.

    With ``n`` live shards every shard ends with ``base`` or ``base + 1`` leaders and only
    ``extra`` of them with ``base + 1``: each shard above ``base + 1`` must shed the excess,
    and if more shards than ``extra`` still hold ``base + 1``, each surplus one sheds one more.
    """
    base, extra = divmod(partitions, len(live))
    kept = Counter(a.leader for a in previous.values() if a.leader in live)
    shed = sum(max(0, kept[s] - (base + 1)) for s in live)
    full = sum(1 for s in live if kept[s] >= base + 1)
    return shed + max(0, full - extra)


def check_invariants(placement, partitions, live, standbys) -> None:
    assert sorted(placement) == list(range(partitions)), "every partition has exactly one entry"
    loads = leader_loads(placement, live)
    assert set(loads) == set(live), "leaders only on live shards"
    assert max(loads.values()) - min(loads.values()) <= 1, f"unbalanced: {loads}"
    k = min(standbys, len(live) - 1)
    for p, a in placement.items():
        assert a.epoch >= 1
        assert len(a.standbys) == k, f"partition {p} has {a.standbys}, wanted {k}"
        assert len(set(a.standbys)) == k
        assert a.leader not in a.standbys, "a standby must be on another shard"
        assert set(a.standbys) <= set(live)


@given(partitions_st, shard_sets, standbys_st)
def test_initial_placement_has_one_leader_per_partition_balanced(partitions, shards, standbys):
    placement = place(partitions, shards, None, standbys)
    check_invariants(placement, partitions, shards, standbys)
    assert all(a.epoch == 1 for a in placement.values())


@given(partitions_st, shard_sets, standbys_st)
def test_same_inputs_same_placement_and_replacing_is_a_no_op(partitions, shards, standbys):
    first = place(partitions, shards, None, standbys)
    assert place(partitions, list(reversed(sorted(shards))), None, standbys) == first
    again = place(partitions, shards, first, standbys)
    assert again == first, "re-running on its own output must change nothing (idempotent reconcile)"


@given(partitions_st, shard_sets, st.integers(min_value=1, max_value=8), standbys_st)
def test_scale_out_moves_only_what_balance_requires(partitions, shards, added, standbys):
    before = place(partitions, shards, None, standbys)
    new_ids = set(range(max(shards) + 1, max(shards) + 1 + added))
    after = place(partitions, shards | new_ids, before, standbys)
    check_invariants(after, partitions, shards | new_ids, standbys)
    moved = moved_partitions(before, after)
    assert len(moved) == minimal_moves(before, shards | new_ids, partitions)
    # every moved partition goes to a new shard: old shards never trade among themselves
    assert all(after[p].leader in new_ids for p in moved)


@given(partitions_st, shard_sets, st.data(), standbys_st)
def test_failover_never_targets_a_dead_shard_and_bumps_epochs_of_moved_only(
    partitions, shards, data, standbys
):
    before = place(partitions, shards, None, standbys)
    if len(shards) == 1:
        dead: set[int] = set()
    else:
        dead = data.draw(st.sets(st.sampled_from(sorted(shards)), min_size=1, max_size=len(shards) - 1))
    live = shards - dead
    after = place(partitions, live, before, standbys)
    check_invariants(after, partitions, live, standbys)
    for p, a in after.items():
        assert a.leader not in dead
        assert not (set(a.standbys) & dead)
        if before[p].leader == a.leader:
            assert a.epoch == before[p].epoch
        else:
            assert a.epoch == before[p].epoch + 1
    # partitions of surviving shards only move when balance forces it
    orphaned = {p for p, a in before.items() if a.leader in dead}
    survivors_moved = set(moved_partitions(before, after)) - orphaned
    assert len(survivors_moved) == minimal_moves(before, live, partitions)


@settings(max_examples=60)
@given(
    st.integers(min_value=1, max_value=48),
    st.lists(
        st.tuples(shard_sets, st.integers(min_value=0, max_value=8), standbys_st),
        min_size=1,
        max_size=12,
    ),
)
def test_epochs_only_increase_over_any_history(partitions, history):
    """Scale-outs, scale-ins, failures, recoveries and partition growth, in any order."""
    current = None
    current_partitions = partitions
    for shards, grow, standbys in history:
        current_partitions += grow
        nxt = place(current_partitions, shards, current, standbys)
        check_invariants(nxt, current_partitions, shards, standbys)
        if current is not None:
            for p, a in current.items():
                assert nxt[p].epoch >= a.epoch
                assert (nxt[p].epoch > a.epoch) == (nxt[p].leader != a.leader)
        current = nxt


@given(st.integers(min_value=1, max_value=4), st.data())
def test_failed_shard_partitions_prefer_their_warm_standby(twelfths, data):
    """An orphan goes to a shard that already tails it (a fast takeover) when that shard has room.

    With ``12k`` partitions on four shards, each survivor of one failure has room for ``k``
    more leaders, so at least the first orphan must land on its standby.
    """
    partitions = 12 * twelfths
    shards = {0, 1, 2, 3}
    before = place(partitions, shards, None, standbys=1)
    dead = data.draw(st.sampled_from(sorted(shards)))
    after = place(partitions, shards - {dead}, before, standbys=1)
    check_invariants(after, partitions, shards - {dead}, 1)
    orphaned = [p for p, a in before.items() if a.leader == dead]
    warm = [p for p in orphaned if after[p].leader in before[p].standbys]
    assert orphaned and warm
    assert after[orphaned[0]].leader == before[orphaned[0]].standbys[0]


def test_worked_example_scale_from_two_to_three_shards():
    """Six partitions on shards 0,1 → add shard 2: exactly two partitions move, to shard 2."""
    before = place(6, [0, 1])
    assert sorted(Counter(a.leader for a in before.values()).values()) == [3, 3]
    after = place(6, [0, 1, 2], before)
    moved = moved_partitions(before, after)
    assert len(moved) == 2
    assert all(after[p].leader == 2 and after[p].epoch == 2 for p in moved)
    assert all(after[p].epoch == 1 for p in set(range(6)) - set(moved))


def test_refuses_impossible_requests():
    with pytest.raises(PlacementError, match="no live shard"):
        place(4, [])
    with pytest.raises(PlacementError, match="cannot shrink"):
        place(2, [0], place(4, [0]))
    with pytest.raises(PlacementError, match="at least 1"):
        place(0, [0])


@given(partitions_st, shard_sets, standbys_st)
def test_status_round_trip(partitions, shards, standbys):
    placement = place(partitions, shards, None, standbys)
    status = placement_to_status(placement)
    assert [item["partition"] for item in status] == list(range(partitions))
    assert placement_from_status(status) == placement
    assert placement_from_status(None) == {}
    assert placement_from_status([{"partition": 0, "leader": 1, "epoch": 3}]) == {0: Assignment(1, 3, ())}
