"""The ``uniform`` server-side assignor: balanced and sticky (Kafka's UniformAssignor).

Two separate paths, because the common case is much cheaper than the general one:

* homogeneous (every member subscribes to the same topics): a quota per member
  (``P // N``, the first ``P % N`` members that already hold more get one more), each member
  keeps what it owns up to its quota, the rest is handed out in topic/partition order — so
  counts differ by at most one, and one member joining N moves at most ``ceil(P / (N+1))``
  partitions. Rack-aware: unassigned partitions first go to a member in one of the
  partition's racks that is still below quota, never beyond it, so balance is unchanged.
* heterogeneous: members keep every owned partition they still subscribe to, unassigned
  partitions go (most constrained topics first) to the least loaded subscriber — a
  same-rack one when it is among the least loaded — and then partitions move from the most to
  the least loaded subscriber of each topic while their counts differ by more than one, and
  along chains of members (A gives to B, B to C) where no single move helps.

Both are deterministic (members and topics are processed in sorted order), so recomputing an
unchanged group moves nothing. Partitions are plain ints in per-topic lists; nothing is
allocated per partition beyond the output lists.

Both are written as steps (:mod:`groupcoord.common.steps`): :meth:`UniformAssignor.assign_steps`
yields every few members or topics, so that a large assignment runs in short slices off the
loop, pausing between them for the loops (``runtime/timers.py``); :meth:`UniformAssignor.assign`
runs it to its end at once.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from groupcoord.common.steps import Steps, finish, stride
from groupcoord.coordinator.core.assignors.api import GroupSpec, SubscriptionType, rack_aware
from groupcoord.coordinator.core.topics_image import TopicsImage

Result = dict[str, dict[bytes, list[int]]]


class UniformAssignor:
    name = "uniform"

    def assign(self, group: GroupSpec, topics: TopicsImage) -> Result:
        return finish(self.assign_steps(group, topics))

    def assign_steps(self, group: GroupSpec, topics: TopicsImage) -> Steps[Result]:
        if not group.members:
            return {}
        if group.subscription_type is SubscriptionType.HOMOGENEOUS:
            return (yield from _assign_homogeneous(group, topics))
        return (yield from _assign_heterogeneous(group, topics))


def _existing_topics(
    topic_ids: frozenset[bytes] | set[bytes], topics: TopicsImage
) -> list[tuple[bytes, int]]:
    out = []
    for tid in sorted(topic_ids):
        n = topics.num_partitions(tid)
        if n > 0:
            out.append((tid, n))
    return out


def _assign_homogeneous(group: GroupSpec, topics: TopicsImage) -> Steps[Result]:
    per = stride()
    member_ids = sorted(group.members)
    subscribed = group.members[member_ids[0]].subscribed_topic_ids
    topic_list = _existing_topics(subscribed, topics)
    counts = dict(topic_list)
    out: dict[str, dict[bytes, list[int]]] = {m: {} for m in member_ids}
    if not topic_list:
        return out
    n = len(member_ids)
    total = sum(c for _, c in topic_list)
    base, extra = divmod(total, n)
    # Sets, not per-partition loops: membership tests and updates run in C.
    taken: dict[bytes, set[int]] = {tid: set() for tid, _ in topic_list}
    assigned = [0] * n
    leftover: list[tuple[bytes, int] | None] = [None] * n

    # 1. stickiness: keep owned partitions up to the base quota; remember one more candidate.
    for i, mid in enumerate(member_ids):
        if not i % per:
            yield
        have = 0
        mine = out[mid]
        for tid, parts in group.members[mid].assignment.items():
            c = counts.get(tid)
            if c is None or not parts:
                continue
            held = taken[tid]
            ordered = sorted(set(parts))  # a stale input may name a partition twice
            if ordered[-1] >= c:  # the topic shrank (or was recreated smaller)
                ordered = [p for p in ordered if p < c]
            if not held.isdisjoint(ordered):  # stale input: another member kept it already
                ordered = [p for p in ordered if p not in held]
            room = base - have
            if len(ordered) > room:
                if leftover[i] is None:
                    leftover[i] = (tid, ordered[max(room, 0)])
                ordered = ordered[: max(room, 0)]
            if ordered:
                held.update(ordered)
                mine[tid] = ordered
                have += len(ordered)
        assigned[i] = have

    # 2. members that held more than the base keep one more while extra slots remain.
    got_extra = [False] * n
    for i, cand in enumerate(leftover):
        if extra == 0:
            break
        if cand is not None and assigned[i] == base:
            tid, p = cand
            if p not in taken[tid]:
                taken[tid].add(p)
                out[member_ids[i]].setdefault(tid, []).append(p)
                assigned[i] += 1
                got_extra[i] = True
                extra -= 1

    # 3. rack-aware pass: unassigned partitions to a same-rack member below its base quota.
    if rack_aware(group, topics, counts):
        by_rack: dict[str, list[int]] = {}
        for i, mid in enumerate(member_ids):
            rack = group.members[mid].rack_id
            if rack is not None and assigned[i] < base:
                by_rack.setdefault(rack, []).append(i)
        cursor = dict.fromkeys(by_rack, 0)
        for tid, c in topic_list:
            yield
            t = topics.topic(tid)
            assert t is not None
            held = taken[tid]
            for p in range(c):
                if p in held:
                    continue
                for rack in t.racks(p):
                    candidates = by_rack.get(rack)
                    if candidates is None:
                        continue
                    k = cursor[rack]
                    while k < len(candidates) and assigned[candidates[k]] >= base:
                        k += 1
                    cursor[rack] = k
                    if k < len(candidates):
                        i = candidates[k]
                        held.add(p)
                        out[member_ids[i]].setdefault(tid, []).append(p)
                        assigned[i] += 1
                        break

    # 4. fill: everyone up to the base quota, then the remaining extra slots, in member order.
    stream = yield from _unassigned(topic_list, taken)
    for i, mid in enumerate(member_ids):
        if not i % per:
            yield
        need = base - assigned[i]
        if need > 0:
            _take(stream, need, out[mid])
            assigned[i] = base
    if extra:
        for i, mid in enumerate(member_ids):
            if extra == 0:
                break
            if not got_extra[i]:
                _take(stream, 1, out[mid])
                extra -= 1
    return out


class _Stream:
    """Unassigned partitions in topic/partition order, handed out in slices."""

    __slots__ = ("chunks", "index", "pos")

    def __init__(self, chunks: list[tuple[bytes, list[int]]]) -> None:
        self.chunks = chunks
        self.index = 0
        self.pos = 0


def _unassigned(topic_list: list[tuple[bytes, int]], taken: dict[bytes, set[int]]) -> Steps[_Stream]:
    per_topic = stride(cost=4)
    chunks = []
    for k, (tid, c) in enumerate(topic_list):
        if not k % per_topic:
            yield
        held = taken[tid]
        free = list(range(c)) if not held else sorted(set(range(c)).difference(held))
        if free:
            chunks.append((tid, free))
    return _Stream(chunks)


def _take(stream: _Stream, k: int, into: dict[bytes, list[int]]) -> None:
    chunks = stream.chunks
    while k > 0 and stream.index < len(chunks):
        tid, free = chunks[stream.index]
        end = min(stream.pos + k, len(free))
        piece = free[stream.pos : end]
        existing = into.get(tid)
        if existing is None:
            into[tid] = piece
        else:
            existing.extend(piece)
        k -= end - stream.pos
        if end == len(free):
            stream.index += 1
            stream.pos = 0
        else:
            stream.pos = end


def _assign_heterogeneous(group: GroupSpec, topics: TopicsImage) -> Steps[Result]:
    per, per_topic = stride(), stride(cost=4)
    member_ids = sorted(group.members)
    n = len(member_ids)
    specs = [group.members[m] for m in member_ids]
    all_topics: set[bytes] = set()
    for s in specs:
        all_topics |= s.subscribed_topic_ids
    topic_list = _existing_topics(all_topics, topics)
    counts = dict(topic_list)
    subscribers: dict[bytes, list[int]] = {tid: [] for tid, _ in topic_list}
    for i, s in enumerate(specs):
        if not i % per:
            yield
        for tid in s.subscribed_topic_ids:
            if tid in subscribers:
                subscribers[tid].append(i)
    owned: list[dict[bytes, list[int]]] = [{} for _ in range(n)]
    assigned = [0] * n
    taken = {tid: bytearray(c) for tid, c in topic_list}

    # 1. stickiness: keep every owned partition of a topic the member still subscribes to.
    for i, s in enumerate(specs):
        if not i % per:
            yield
        for tid, parts in s.assignment.items():
            c = counts.get(tid)
            if c is None or tid not in s.subscribed_topic_ids:
                continue
            flags = taken[tid]
            kept = []
            for p in sorted(parts):
                if p < c and not flags[p]:
                    flags[p] = 1
                    kept.append(p)
            if kept:
                owned[i][tid] = kept
                assigned[i] += len(kept)

    use_racks = rack_aware(group, topics, counts)
    racks = [s.rack_id for s in specs]

    # 2. unassigned partitions to the least loaded subscriber, most constrained topics first.
    for k, (tid, c) in enumerate(sorted(topic_list, key=lambda tc: (len(subscribers[tc[0]]), tc[0]))):
        if not k % per_topic:
            yield
        subs = subscribers[tid]
        if not subs:
            continue
        flags = taken[tid]
        free = [p for p in range(c) if not flags[p]]
        if not free:
            continue
        heap = [(assigned[i], i) for i in subs]
        heapq.heapify(heap)
        image = topics.topic(tid) if use_racks else None
        for p in free:
            load, i = heap[0]
            if image is not None:
                i = _same_rack_among_least_loaded(heap, load, image.racks(p), racks, i)
                heap.remove((load, i))
                heapq.heapify(heap)
            else:
                heapq.heappop(heap)
            owned[i].setdefault(tid, []).append(p)
            assigned[i] = load + 1
            heapq.heappush(heap, (load + 1, i))

    # 3. balance: within each topic's subscribers, move from the most to the least loaded.
    # ``subs`` is in ascending member order, and min/max return the first of equal keys: the
    # least loaded member with the lowest index, the most loaded holder with the lowest. The
    # keys are C calls, and a topic whose subscribers are within one of each other is passed
    # over before its holders are listed: most topics, in every pass (the last pass only checks).
    load = assigned.__getitem__
    for _ in range(n + 1):
        moved = False
        for k, (tid, _c) in enumerate(topic_list):
            if not k % per:
                yield
            subs = subscribers[tid]
            if len(subs) < 2:
                continue
            while True:
                lo = min(subs, key=load)
                if assigned[max(subs, key=load)] - assigned[lo] <= 1:
                    break  # no holder can be more loaded than the most loaded subscriber
                holders = [i for i in subs if owned[i].get(tid)]
                if not holders:
                    break
                hi = max(holders, key=load)
                if assigned[hi] - assigned[lo] <= 1:
                    break
                p = owned[hi][tid].pop()
                if not owned[hi][tid]:
                    del owned[hi][tid]
                owned[lo].setdefault(tid, []).append(p)
                assigned[hi] -= 1
                assigned[lo] += 1
                moved = True
        if not moved:
            break

    # 4. chains: a member may only be relieved through others (A gives to B, B to C); shift
    # one partition along the shortest such chain from a most to a least loaded member.
    for _ in range(2 * n):
        if not (yield from _shift_along_chain(owned, assigned, subscribers)):
            break
    return {member_ids[i]: owned[i] for i in range(n)}


def _shift_along_chain(
    owned: list[dict[bytes, list[int]]], assigned: list[int], subscribers: dict[bytes, list[int]]
) -> Steps[bool]:
    """One breadth-first search from the most loaded members; True if a partition moved."""
    per = stride()
    top = max(assigned)
    if top - min(assigned) <= 1:
        return False
    sources = [i for i, c in enumerate(assigned) if c == top]
    parent: dict[int, tuple[int, bytes] | None] = dict.fromkeys(sources)
    queue = list(sources)
    found = None
    for k, u in enumerate(queue):
        if not k % per:
            yield
        for t in sorted(owned[u]):
            for v in subscribers[t]:
                if v in parent:
                    continue
                parent[v] = (u, t)
                if assigned[v] <= top - 2:
                    found = v
                    break
                queue.append(v)
            if found is not None:
                break
        if found is not None:
            break
    if found is None:
        return False
    v = found
    edge = parent[v]
    while edge is not None:
        u, t = edge
        p = owned[u][t].pop()
        if not owned[u][t]:
            del owned[u][t]
        owned[v].setdefault(t, []).append(p)
        v = u
        edge = parent[v]
    assigned[found] += 1
    assigned[v] -= 1
    return True


def _same_rack_among_least_loaded(
    heap: list[tuple[int, int]],
    load: int,
    partition_racks: frozenset[str],
    racks: list[str | None],
    default: int,
) -> int:
    """A subscriber in one of the partition's racks with the minimum load, else ``default``."""
    if not partition_racks:
        return default
    best = None
    for entry_load, i in _entries_with_load(heap, load):
        if entry_load == load and racks[i] in partition_racks and (best is None or i < best):
            best = i
    return default if best is None else best


def _entries_with_load(heap: list[tuple[int, int]], load: int) -> Iterator[tuple[int, int]]:
    return (e for e in heap if e[0] == load)
