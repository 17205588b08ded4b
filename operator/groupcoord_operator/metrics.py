"""The operator's view as Prometheus metrics: what only the operator knows.

The shards and the gateway export the coordinator's own figures; whether each shard pod is
Ready and whether every state-topic partition is led by a Ready shard is known to the operator
(it reads the pods and writes the leadership). The alert rules of the chart read these:

* ``groupcoord_operator_shards{namespace,coordinator,state}``: shards by state (Ready, Starting,
  Failed) as the operator last saw them;
* ``groupcoord_operator_partitions_without_leader{namespace,coordinator}``: partitions whose
  leader is missing or not Ready (their groups are unavailable until they move).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from prometheus_client import Gauge

SHARD_STATES = ("Ready", "Starting", "Failed")

SHARDS = Gauge(
    "groupcoord_operator_shards",
    "Shards of a GroupCoordinator by state, as the operator last saw them.",
    ["namespace", "coordinator", "state"],
)
PARTITIONS_WITHOUT_LEADER = Gauge(
    "groupcoord_operator_partitions_without_leader",
    "State-topic partitions whose leader is missing or not Ready.",
    ["namespace", "coordinator"],
)


def partitions_without_leader(
    partitions: int, placement: Mapping[int, Any], states: Mapping[int, str]
) -> int:
    """How many of ``partitions`` have no leader in ``placement`` or one that is not Ready."""
    return sum(
        1 for p in range(partitions) if (a := placement.get(p)) is None or states.get(a.leader) != "Ready"
    )


def export(
    namespace: str, name: str, partitions: int, placement: Mapping[int, Any], states: Mapping[int, str]
) -> None:
    """Set the gauges of one resource after a reconcile."""
    for state in SHARD_STATES:
        SHARDS.labels(namespace, name, state).set(sum(1 for s in states.values() if s == state))
    PARTITIONS_WITHOUT_LEADER.labels(namespace, name).set(
        partitions_without_leader(partitions, placement, states)
    )


def forget(namespace: str, name: str) -> None:
    """A deleted resource leaves no series behind."""
    for state in SHARD_STATES:
        with contextlib.suppress(KeyError):
            SHARDS.remove(namespace, name, state)
    with contextlib.suppress(KeyError):
        PARTITIONS_WITHOUT_LEADER.remove(namespace, name)
