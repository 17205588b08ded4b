"""The ``simple`` assignor of share groups (KIP-932's ``SimpleAssignor``).

Share groups consume cooperatively: several members may read one partition (the share-partition
hands each record to one of them), so the rules differ from a consumer group's.

Per topic, among the members subscribing to it (in member id order):

- **as many partitions as members or more**: each partition goes to exactly one member, and
  every member gets ``P // n`` partitions or one more — as a consumer group would;
- **more members than partitions**: every member gets exactly one partition, and each partition
  is shared by ``n // P`` members or one more — no member sits idle, as KIP-932 wants.

Sticky: a member first keeps what it has, as far as the balance allows; what is left is dealt
out in order to whoever has room. Members that keep the most get the "one more" slots, so
fewer partitions move. Deterministic (no hashing), so recomputing after a failover moves
nothing. Topic ids unknown to the image are skipped (no partitions to give).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from groupcoord.coordinator.core.assignors.api import GroupSpec
from groupcoord.coordinator.core.topics_image import TopicsImage


def _partitions_to_members(
    partitions: Sequence[int], members: Sequence[str], current: Mapping[str, Collection[int]]
) -> dict[str, list[int]]:
    """Fewer members than partitions (or as many): each partition to one member, balanced."""
    base, extra = divmod(len(partitions), len(members))
    valid = set(partitions)
    kept = {m: sorted(p for p in current.get(m, ()) if p in valid) for m in members}
    order = sorted(members, key=lambda m: (-len(kept[m]), m))
    cap = {m: base + (1 if i < extra else 0) for i, m in enumerate(order)}
    out: dict[str, list[int]] = {m: [] for m in members}
    owned: set[int] = set()
    for m in order:
        for p in kept[m]:
            if len(out[m]) < cap[m] and p not in owned:
                out[m].append(p)
                owned.add(p)
    room = iter([m for m in order for _ in range(cap[m] - len(out[m]))])
    for p in partitions:
        if p not in owned:
            out[next(room)].append(p)
    return out


def _members_to_partitions(
    partitions: Sequence[int], members: Sequence[str], current: Mapping[str, Collection[int]]
) -> dict[str, list[int]]:
    """More members than partitions: each member to one partition, partitions shared evenly."""
    base, extra = divmod(len(members), len(partitions))
    valid = set(partitions)
    sharers: dict[int, int] = {p: 0 for p in partitions}
    for m in members:
        for p in current.get(m, ()):
            if p in valid:
                sharers[p] += 1
    order = sorted(partitions, key=lambda p: (-sharers[p], p))
    cap = {p: base + (1 if i < extra else 0) for i, p in enumerate(order)}
    out: dict[str, list[int]] = {}
    load: dict[int, int] = {p: 0 for p in partitions}
    for m in members:
        for p in sorted(current.get(m, ())):
            if p in valid and load[p] < cap[p]:
                out[m] = [p]
                load[p] += 1
                break
    room = iter([p for p in order for _ in range(cap[p] - load[p])])
    for m in members:
        if m not in out:
            p = next(room)
            out[m] = [p]
    return out


class SimpleAssignor:
    name = "simple"

    def assign(self, group: GroupSpec, topics: TopicsImage) -> dict[str, dict[bytes, list[int]]]:
        member_ids = sorted(group.members)
        out: dict[str, dict[bytes, list[int]]] = {m: {} for m in member_ids}
        subscribers: dict[bytes, list[str]] = {}
        for m in member_ids:
            for topic_id in group.members[m].subscribed_topic_ids:
                subscribers.setdefault(topic_id, []).append(m)
        for topic_id in sorted(subscribers):
            count = topics.num_partitions(topic_id)
            if count <= 0:
                continue
            members = subscribers[topic_id]
            partitions = list(range(count))
            current = {m: group.members[m].assignment.get(topic_id, ()) for m in members}
            deal = _partitions_to_members if len(members) <= count else _members_to_partitions
            for m, assigned in deal(partitions, members, current).items():
                if assigned:
                    out[m][topic_id] = sorted(assigned)
        return out
