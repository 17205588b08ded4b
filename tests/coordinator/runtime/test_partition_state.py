"""The table of a partition's state transitions, as Kafka's CoordinatorRuntimeTest checks
``CoordinatorState.canTransitionFrom``: every legal move is allowed, every other one raises."""

from __future__ import annotations

import pytest
from register_shard import RegisterShard

from groupcoord.coordinator.runtime.partition_loop import PartitionRuntime
from groupcoord.coordinator.runtime.partition_state import (
    IllegalStateTransition,
    PartitionState,
    check_transition,
)
from groupcoord.coordinator.runtime.statelog import StateLogWriter

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


async def test_a_partition_runtime_changes_state_only_through_the_table() -> None:
    writer = StateLogWriter("127.0.0.1:1", "t")  # never started: nothing here writes
    part = PartitionRuntime(
        3, bootstrap="127.0.0.1:1", topic="t", writer=writer, shard_factory=RegisterShard, shard_id="0"
    )
    assert part.state is S.STOPPED
    with pytest.raises(AttributeError):
        part.state = S.ACTIVE  # type: ignore[misc] - read-only: no bare assignment
    with pytest.raises(IllegalStateTransition):
        part._transition_to(S.ACTIVE)  # serving without a load
    assert part.state is S.STOPPED
    await part.stop()  # resigning what is stopped is fine
    assert part.state is S.STOPPED
    await writer.stop()
