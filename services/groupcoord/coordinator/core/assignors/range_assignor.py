"""The ``range`` server-side assignor: co-partitioning and sticky (Kafka's server-side RangeAssignor).

Per topic, its subscribers in member id order each get a contiguous quota of
``P // n`` partitions, the first ``P % n`` of them one more. Members that subscribe to the
same topics with the same partition counts are processed identically for every such topic,
so they get the same partition numbers across topics (co-partitioning: partition i of
``orders`` and of ``payments`` go to the same member — what joins across topics need).

Sticky: a member first keeps the partitions it owns that fit in its quota; only the rest are
redistributed in ascending order. Rack-aware when members and partitions carry racks: a free
partition first goes to the first member in one of its racks that has room in its quota (so
balance is unchanged). Every decision depends only on the per-topic state (owned partitions,
partition racks), so co-partitioned topics stay co-partitioned as long as their partitions'
racks agree — as with Kafka's rack-aware RangeAssignor (KIP-881).
"""

from __future__ import annotations

from groupcoord.coordinator.core.assignors.api import GroupSpec, rack_aware
from groupcoord.coordinator.core.topics_image import TopicImage, TopicsImage


class RangeAssignor:
    name = "range"

    def assign(self, group: GroupSpec, topics: TopicsImage) -> dict[str, dict[bytes, list[int]]]:
        member_ids = sorted(group.members)
        out: dict[str, dict[bytes, list[int]]] = {m: {} for m in member_ids}
        subscribers: dict[bytes, list[str]] = {}
        for m in member_ids:
            for tid in group.members[m].subscribed_topic_ids:
                subscribers.setdefault(tid, []).append(m)
        use_racks = rack_aware(group, topics, subscribers)
        for tid in sorted(subscribers):
            c = topics.num_partitions(tid)
            if c <= 0:
                continue
            topic = topics.topic(tid) if use_racks else None
            _assign_topic(tid, c, subscribers[tid], group, out, topic if topic and topic.has_racks else None)
        return out


def _assign_topic(
    tid: bytes,
    c: int,
    subs: list[str],
    group: GroupSpec,
    out: dict[str, dict[bytes, list[int]]],
    racks: TopicImage | None,
) -> None:
    n = len(subs)
    rack_of = [group.members[m].rack_id for m in subs]
    base, extra = divmod(c, n)
    taken = bytearray(c)
    kept: list[list[int]] = []
    wants_extra: list[bool] = []
    # 1. each subscriber keeps owned partitions up to the base quota.
    for m in subs:
        owned = sorted(p for p in group.members[m].assignment.get(tid, ()) if p < c)
        mine = []
        more = False
        for p in owned:
            if taken[p]:
                continue
            if len(mine) < base:
                taken[p] = 1
                mine.append(p)
            else:
                more = True
                break
        kept.append(mine)
        wants_extra.append(more)
    # 2. those that owned more keep one more while extra slots remain (in member order).
    has_extra = [False] * n
    for i, m in enumerate(subs):
        if extra == 0:
            break
        if wants_extra[i]:
            for p in sorted(group.members[m].assignment.get(tid, ())):
                if p < c and not taken[p]:
                    taken[p] = 1
                    kept[i].append(p)
                    has_extra[i] = True
                    extra -= 1
                    break
    # 3. quotas: the remaining extra slots go to the first members without one.
    quotas = []
    for i in range(n):
        quota = base + (1 if has_extra[i] else 0)
        if not has_extra[i] and extra > 0:
            quota += 1
            extra -= 1
        quotas.append(quota)
    free = [p for p in range(c) if not taken[p]]
    # 4. rack-aware: a free partition goes to the first member in one of its racks with room.
    if racks is not None and any(rack_of):
        by_rack: dict[str, list[int]] = {}
        for i, rack in enumerate(rack_of):
            if rack is not None:
                by_rack.setdefault(rack, []).append(i)
        cursor = dict.fromkeys(by_rack, 0)
        rest = []
        for p in free:
            best = None
            for rack in racks.racks(p):
                members = by_rack.get(rack)
                if members is None:
                    continue
                k = cursor[rack]
                while k < len(members) and len(kept[members[k]]) >= quotas[members[k]]:
                    k += 1
                cursor[rack] = k
                if k < len(members) and (best is None or members[k] < best):
                    best = members[k]
            if best is None:
                rest.append(p)
            else:
                kept[best].append(p)
        free = rest
    # 5. the rest, ascending, up to each quota, in member order.
    pos = 0
    for i in range(n):
        need = quotas[i] - len(kept[i])
        if need > 0:
            kept[i].extend(free[pos : pos + need])
            pos += need
    for i, m in enumerate(subs):
        if kept[i]:
            kept[i].sort()
            out[m][tid] = kept[i]
