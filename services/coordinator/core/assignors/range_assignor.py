"""The ``range`` server-side assignor: co-partitioning and sticky (Kafka's server-side RangeAssignor).

Per topic, its subscribers in member id order each get a contiguous quota of
``P // n`` partitions, the first ``P % n`` of them one more. Members that subscribe to the
same topics with the same partition counts are processed identically for every such topic,
so they get the same partition numbers across topics (co-partitioning: partition i of
``orders`` and of ``payments`` go to the same member — what joins across topics need).

Sticky: a member first keeps the partitions it owns that fit in its quota; only the rest are
redistributed in ascending order. Since the decision depends only on the per-topic state,
co-partitioned owned assignments stay co-partitioned. Not rack-aware: placing partitions by
rack would break co-partitioning, which is the reason to choose this assignor.
"""

from __future__ import annotations

from groupcoord.coordinator.core.assignors.api import GroupSpec
from groupcoord.coordinator.core.topics_image import TopicsImage


class RangeAssignor:
    name = "range"

    def assign(self, group: GroupSpec, topics: TopicsImage) -> dict[str, dict[bytes, list[int]]]:
        member_ids = sorted(group.members)
        out: dict[str, dict[bytes, list[int]]] = {m: {} for m in member_ids}
        subscribers: dict[bytes, list[str]] = {}
        for m in member_ids:
            for tid in group.members[m].subscribed_topic_ids:
                subscribers.setdefault(tid, []).append(m)
        for tid in sorted(subscribers):
            c = topics.num_partitions(tid)
            if c <= 0:
                continue
            _assign_topic(tid, c, subscribers[tid], group, out)
        return out


def _assign_topic(
    tid: bytes, c: int, subs: list[str], group: GroupSpec, out: dict[str, dict[bytes, list[int]]]
) -> None:
    n = len(subs)
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
    # 3. the rest, ascending, up to each quota; the remaining extra slots in member order.
    free = [p for p in range(c) if not taken[p]]
    pos = 0
    for i in range(n):
        quota = base
        if not has_extra[i] and extra > 0:
            quota += 1
            extra -= 1
            has_extra[i] = True
        need = quota - len(kept[i])
        if need > 0:
            kept[i].extend(free[pos : pos + need])
            pos += need
    for i, m in enumerate(subs):
        if kept[i]:
            kept[i].sort()
            out[m][tid] = kept[i]
