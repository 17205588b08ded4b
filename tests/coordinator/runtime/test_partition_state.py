"""The table of a partition's state transitions, as Kafka's CoordinatorRuntimeTest checks
``CoordinatorState.canTransitionFrom``: every legal move is allowed, every other one raises."""

from __future__ import annotations

import pytest

from groupcoord.coordinator.runtime.partition_state import (
    IllegalStateTransition,
    PartitionState,
    check_transition,
)

S = PartitionState
LEGAL = {
    # resigning is possible from anywhere, including a repeated resignation
    *((s, S.STOPPED) for s in S),
    (S.STOPPED, S.STANDBY),
    (S.STOPPED, S.LOADING),  # a cold load
    (S.STANDBY, S.LOADING),  # a warm load: the standby's replicas are kept
    (S.LOADING, S.ACTIVE),
    (S.STANDBY, S.FAILED),  # the tail failed
    (S.LOADING, S.FAILED),
    (S.ACTIVE, S.FAILED),
}


@pytest.mark.parametrize(("current", "target"), sorted(LEGAL, key=lambda t: (t[0].value, t[1].value)))
def test_legal_transitions_are_allowed(current: PartitionState, target: PartitionState) -> None:
    assert check_transition(3, current, target) is target


ILLEGAL = sorted(
    ({(a, b) for a in S for b in S} - LEGAL),
    key=lambda t: (t[0].value, t[1].value),
)


@pytest.mark.parametrize(("current", "target"), ILLEGAL)
def test_every_other_transition_raises(current: PartitionState, target: PartitionState) -> None:
    with pytest.raises(IllegalStateTransition, match=f"partition 3: cannot transition from {current.name}"):
        check_transition(3, current, target)


def test_the_illegal_moves_include_the_ones_that_would_hide_a_bug() -> None:
    # serving without a load, reloading while serving, failing what runs nothing, and
    # leaving a failure any other way than by resigning
    for current, target in [
        (S.STOPPED, S.ACTIVE),
        (S.STANDBY, S.ACTIVE),
        (S.ACTIVE, S.LOADING),
        (S.ACTIVE, S.ACTIVE),
        (S.STOPPED, S.FAILED),
        (S.FAILED, S.FAILED),
        (S.FAILED, S.LOADING),
        (S.FAILED, S.ACTIVE),
    ]:
        assert (current, target) in ILLEGAL
