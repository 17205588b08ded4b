"""Which shard leads which state-topic partition: one pure, deterministic function.

Both control planes use it — the Kubernetes operator (``groupcoord_operator``) and the
in-process control plane of ``groupcoord up`` — so it has no Kubernetes (or any I/O) imports.

The rules, and why:

* **exactly one leader per partition** — a partition is a single-writer event loop; two
  leaders would write conflicting records to the same state-topic partition.
* **balanced** — leader counts per live shard differ by at most one, so no shard carries
  more event loops than the rest.
* **sticky / minimal moves** — moving a partition costs a full reload (replay of the
  partition) and a short window of ``COORDINATOR_LOAD_IN_PROGRESS`` for its groups, so a
  re-placement keeps every leader that is still alive unless balance forces it off; only the
  surplus of over-full shards moves.
* **epochs** — every leader change bumps the partition's leadership epoch by exactly one; an
  unchanged leader keeps its epoch. Shards stamp writes with the epoch, so a deposed leader's
  late writes are fenced. Epochs never go down, which is also why the partition count may
  only grow (Kafka cannot shrink a topic either).
* **standbys on other shards** — hot standbys tail a partition so a failover is fast; they
  are never the leader itself, stay sticky, and are spread evenly. An orphaned partition
  prefers one of its standbys as new leader when that shard has room, since it is warm.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Assignment",
    "Placement",
    "PlacementError",
    "balance_quotas",
    "moved_partitions",
    "place",
    "placement_from_status",
    "placement_to_status",
]


class PlacementError(ValueError):
    """The request cannot be placed (no live shards, shrinking partitions, bad numbers)."""


@dataclass(frozen=True, slots=True)
class Assignment:
    """One partition's leadership: the leading shard, its epoch, and the standby shards."""

    leader: int
    epoch: int
    standbys: tuple[int, ...] = ()


Placement = Mapping[int, Assignment]
"""partition → :class:`Assignment`, for partitions ``0 .. P-1``."""


def balance_quotas(loads: Mapping[int, int], total: int) -> dict[int, int]:
    """How many leaders each shard should have so the counts differ by at most one.

    ``total // n`` each, and the ``total % n`` extra slots go to the shards that already
    hold the most (ties: lower id) — handing the extra slot to a full shard is what keeps
    the number of moves minimal.
    """
    shards = sorted(loads)
    base, extra = divmod(total, len(shards))
    by_load = sorted(shards, key=lambda s: (-loads[s], s))
    bonus = set(by_load[:extra])
    return {s: base + (1 if s in bonus else 0) for s in shards}


def place(
    partitions: int,
    shards: Iterable[int],
    previous: Placement | None = None,
    standbys: int = 0,
) -> dict[int, Assignment]:
    """Place ``partitions`` state-topic partitions on the live ``shards``.

    ``previous`` is the placement in force (from the resource status); partitions whose
    leader is still live stay put unless their shard is over its balanced quota. ``standbys``
    is the wished number of standbys per partition, capped at ``live shards - 1``.
    Deterministic: the same inputs always give the same placement.
    """
    live = sorted(set(shards))
    if partitions < 1:
        raise PlacementError(f"partitions must be at least 1, got {partitions}")
    if standbys < 0:
        raise PlacementError(f"standbys must not be negative, got {standbys}")
    if not live:
        raise PlacementError("no live shard to place partitions on")
    if any(s < 0 for s in live):
        raise PlacementError(f"shard ids must not be negative, got {live}")
    previous = dict(previous or {})
    if previous and max(previous) >= partitions:
        raise PlacementError(
            f"partitions cannot shrink from {max(previous) + 1} to {partitions}: "
            "a Kafka topic cannot lose partitions and epochs must never go back"
        )
    alive = set(live)

    # 1. keep every leader that is still alive
    owned: dict[int, list[int]] = {s: [] for s in live}
    orphans: list[int] = []
    for p in range(partitions):
        prev = previous.get(p)
        if prev is not None and prev.leader in alive:
            owned[prev.leader].append(p)
        else:
            orphans.append(p)

    # 2. over-full shards give up their surplus (highest partition ids first: deterministic)
    quotas = balance_quotas({s: len(ps) for s, ps in owned.items()}, partitions)
    for s in live:
        surplus = len(owned[s]) - quotas[s]
        if surplus > 0:
            owned[s].sort()
            orphans.extend(owned[s][-surplus:])
            del owned[s][-surplus:]

    # 3. orphans go to shards with room, a warm standby first, else the emptiest shard
    leader_of: dict[int, int] = {p: s for s, ps in owned.items() for p in ps}
    load = {s: len(owned[s]) for s in live}
    for p in sorted(orphans):
        room = [s for s in live if load[s] < quotas[s]]
        prev = previous.get(p)
        warm = [s for s in (prev.standbys if prev else ()) if s in room]
        target = warm[0] if warm else min(room, key=lambda s: (load[s] - quotas[s], load[s], s))
        leader_of[p] = target
        load[target] += 1

    # 4. epochs and standbys
    k = min(standbys, len(live) - 1)
    standby_load = dict.fromkeys(live, 0)
    result: dict[int, Assignment] = {}
    # sticky standbys are counted first so fresh ones fill the least loaded shards
    kept_standbys: dict[int, list[int]] = {}
    for p in range(partitions):
        prev = previous.get(p)
        keep: list[int] = []
        for s in prev.standbys if prev else ():
            if s in alive and s != leader_of[p] and s not in keep and len(keep) < k:
                keep.append(s)
                standby_load[s] += 1
        kept_standbys[p] = keep
    for p in range(partitions):
        chosen = kept_standbys[p]
        while len(chosen) < k:
            candidates = [s for s in live if s != leader_of[p] and s not in chosen]
            # prefer the shard with fewest standbys, then the one "after" the leader in ring
            # order so a shard's standby duties are spread over different peers
            s = min(candidates, key=lambda c: (standby_load[c], (c - leader_of[p]) % (max(live) + 1)))
            chosen.append(s)
            standby_load[s] += 1
        prev = previous.get(p)
        if prev is None:
            epoch = 1
        elif prev.leader == leader_of[p]:
            epoch = prev.epoch
        else:
            epoch = prev.epoch + 1
        result[p] = Assignment(leader=leader_of[p], epoch=epoch, standbys=tuple(chosen))
    return result


def moved_partitions(previous: Placement, current: Placement) -> list[int]:
    """Partitions whose leader differs between two placements (new partitions excluded)."""
    return sorted(p for p, a in current.items() if p in previous and previous[p].leader != a.leader)


def placement_to_status(placement: Placement) -> list[dict[str, Any]]:
    """The ``status.partitions`` list of a GroupCoordinator resource, sorted by partition."""
    return [
        {"partition": p, "leader": a.leader, "epoch": a.epoch, "standbys": list(a.standbys)}
        for p, a in sorted(placement.items())
    ]


def placement_from_status(items: Sequence[Mapping[str, Any]] | None) -> dict[int, Assignment]:
    """Parse ``status.partitions`` back; tolerant of a missing or empty status (a new resource)."""
    out: dict[int, Assignment] = {}
    for item in items or ():
        p = int(item["partition"])
        out[p] = Assignment(
            leader=int(item["leader"]),
            epoch=int(item["epoch"]),
            standbys=tuple(int(s) for s in item.get("standbys") or ()),
        )
    return out
