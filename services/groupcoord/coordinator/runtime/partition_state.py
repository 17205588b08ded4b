"""The states of one state-topic partition in a worker, and the one table of their transitions.

Kafka's coordinator runtime guards its ``CoordinatorState`` with ``canTransitionFrom``: a
partition that is asked to serve while it loads, or to load while it serves, is a runtime bug,
and an unchecked assignment would let it pass silently. Here every change of a partition's
state goes through :func:`check_transition`, against :data:`ALLOWED_FROM`.

The life of a partition: resigning (``STOPPED``) is allowed from anywhere, and is the way back
from every other state; a hot standby starts from ``STOPPED``; a load starts cold (from
``STOPPED``) or warm (from ``STANDBY``); only a finished load serves (``ACTIVE``); and only a
partition that runs something (tails, loads or serves) can fail.
"""

from __future__ import annotations

import enum


class PartitionState(enum.Enum):
    STOPPED = "stopped"
    STANDBY = "standby"
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"


ALLOWED_FROM: dict[PartitionState, frozenset[PartitionState]] = {
    PartitionState.STOPPED: frozenset(PartitionState),
    PartitionState.STANDBY: frozenset({PartitionState.STOPPED}),
    PartitionState.LOADING: frozenset({PartitionState.STOPPED, PartitionState.STANDBY}),
    PartitionState.ACTIVE: frozenset({PartitionState.LOADING}),
    PartitionState.FAILED: frozenset({PartitionState.STANDBY, PartitionState.LOADING, PartitionState.ACTIVE}),
}
"""Target state → the states it may be entered from (Kafka's ``canTransitionFrom``)."""


class IllegalStateTransition(RuntimeError):
    """A partition was moved between two states the table does not connect: a runtime bug."""


def check_transition(partition: int, current: PartitionState, target: PartitionState) -> PartitionState:
    """``target`` if a partition in ``current`` may enter it; raises IllegalStateTransition."""
    if current not in ALLOWED_FROM[target]:
        raise IllegalStateTransition(
            f"partition {partition}: cannot transition from {current.name} to {target.name}"
        )
    return target
