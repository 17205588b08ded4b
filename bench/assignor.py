"""assignor: server-side assignor latency (uniform homogeneous/heterogeneous, range), p50/p99 ms.

Each case builds the group spec once and runs the assignor repeatedly: a first run from
scratch (nobody owns anything) and then steady recomputations with every member's current
target as input (the sticky path a group takes on every epoch bump), plus one run with a
member joining. Targets from the issue: <= 100 ms for 10,000 members x 100,000 partitions
homogeneous, <= 250 ms for 1,000 members / 1,000 topics / 50,000 partitions heterogeneous.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import uuid
from collections.abc import Callable

from groupcoord.coordinator.core.assignors.api import GroupSpec, MemberSpec, PartitionAssignor
from groupcoord.coordinator.core.assignors.range_assignor import RangeAssignor
from groupcoord.coordinator.core.assignors.uniform_assignor import UniformAssignor
from groupcoord.coordinator.core.topics_image import TopicImage, TopicsImage

NAME = "assignor"
DESCRIPTION = "uniform (homogeneous, heterogeneous) and range assignors: p50/p99 ms per assignment"


def _image(topics: int, partitions_per_topic: int) -> TopicsImage:
    return TopicsImage.of(
        TopicImage(uuid.uuid5(uuid.NAMESPACE_OID, f"t{i}").bytes, f"t{i}", partitions_per_topic)
        for i in range(topics)
    )


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {"p50_ms": round(statistics.median(ordered), 2), "p99_ms": round(p99, 2), "runs": len(samples)}


def _case(
    assignor: PartitionAssignor,
    image: TopicsImage,
    subscriptions: Callable[[int], frozenset[bytes]],
    members: int,
    runs: int,
) -> dict[str, object]:
    ids = [f"member-{i:06d}" for i in range(members)]
    spec = GroupSpec({m: MemberSpec(None, subscriptions(i), {}) for i, m in enumerate(ids)})
    t0 = time.perf_counter()
    result = assignor.assign(spec, image)
    scratch_ms = (time.perf_counter() - t0) * 1000
    sticky = GroupSpec({m: MemberSpec(None, spec.members[m].subscribed_topic_ids, result[m]) for m in ids})
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        again = assignor.assign(sticky, image)
        samples.append((time.perf_counter() - t0) * 1000)
    moved = sum(
        1 for m in ids for t, ps in again[m].items() for p in ps if p not in set(result[m].get(t, ()))
    )
    joined = dict(sticky.members)
    joined["member-zzzzzz"] = MemberSpec(None, subscriptions(0), {})
    t0 = time.perf_counter()
    assignor.assign(GroupSpec(joined), image)
    join_ms = (time.perf_counter() - t0) * 1000
    counts = [sum(len(ps) for ps in result[m].values()) for m in ids]
    return {
        "members": members,
        "partitions": sum(t.num_partitions for t in image.by_id.values()),
        "topics": len(image.by_id),
        "from_scratch_ms": round(scratch_ms, 2),
        "recompute": _percentiles(samples),
        "member_join_ms": round(join_ms, 2),
        "moved_on_recompute": moved,
        "min_max_per_member": [min(counts), max(counts)],
    }


def run(args: list[str]) -> dict[str, object]:
    parser = argparse.ArgumentParser(prog=NAME)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="smaller groups (CI smoke run)")
    opts = parser.parse_args(args)
    scale = 10 if opts.quick else 1
    uniform, rng = UniformAssignor(), random.Random(7)
    out: dict[str, object] = {}

    img = _image(10, 1_000 // scale)
    everything = frozenset(img.by_id)
    out["uniform_homogeneous_1000x10000"] = _case(
        uniform, img, lambda _i: everything, 1_000 // scale, opts.runs
    )

    img = _image(10, 10_000 // scale)
    everything = frozenset(img.by_id)
    out["uniform_homogeneous_10000x100000"] = _case(
        uniform, img, lambda _i: everything, 10_000 // scale, opts.runs
    )

    img = _image(1_000 // scale, 50)
    topic_ids = sorted(img.by_id)
    subs = [frozenset(rng.sample(topic_ids, 20)) for _ in range(1_000 // scale)]
    out["uniform_heterogeneous_1000m_1000t_50000p"] = _case(
        uniform, img, lambda i: subs[i], len(subs), opts.runs
    )

    img = _image(10, 1_000 // scale)
    everything = frozenset(img.by_id)
    out["range_1000x10000"] = _case(RangeAssignor(), img, lambda _i: everything, 1_000 // scale, opts.runs)
    out["targets_ms"] = {"uniform_homogeneous_10000x100000": 100, "uniform_heterogeneous": 250}
    return out
