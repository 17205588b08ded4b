"""From measured load to threads and shards: the capacity model, and why.

* Capacity is sized for the **p95** of the cluster's busy cores over time, not the average:
  coordinators must absorb rebalance storms, and the max is a single outlier.
* Needed threads = ``ceil(p95 cores × growth / target utilisation)`` with
  ``growth = (1 + growth_per_month) ** horizon_months``; needed shards = threads spread over
  ``threads_per_shard`` (the observed value unless given).
* A partition runs on one thread at a time, so no number of threads helps a partition whose own
  projected p95 busy ratio exceeds the target: such partitions are named as needing more
  state-topic partitions (their groups spread out) rather than more threads.
* Headroom of a shard = ``1 − p95 utilisation`` (what is left); ``target − p95`` says how far
  it is from the planning target (negative: over target).

Plain Python over the few numbers :mod:`groupcoord_spark.capacity.load` collected: no Spark here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

ROUNDING_SLACK = 1e-6  # 1.8 / 0.6 is 3.0000000000000004 in floating point; that is 3 threads


@dataclass(frozen=True, slots=True)
class CapacityParams:
    """The planning choices: the utilisation to size for, expected growth, the percentile of
    load to absorb, and how much of the history to list and plot."""

    target_utilisation: float = 0.6
    growth_per_month: float = 0.0
    horizon_months: float = 6.0
    threads_per_shard: int | None = None
    percentile: float = 0.95
    top_n: int = 10
    bucket_s: float | None = None  # cluster timeline resolution; default: the sample interval

    @property
    def growth_factor(self) -> float:
        return float((1.0 + self.growth_per_month) ** self.horizon_months)


DEFAULT_PARAMS = CapacityParams()


def recommend(
    cluster_p95_cores: float,
    partitions: list[dict[str, Any]],
    threads_per_shard: int,
    params: CapacityParams,
) -> dict[str, Any]:
    """Threads and shards for the target utilisation after growth; partitions that no thread
    count can fix (a single loop above target)."""
    growth = params.growth_factor
    projected = cluster_p95_cores * growth
    exact_threads = projected / params.target_utilisation
    threads = max(1, math.ceil(exact_threads - ROUNDING_SLACK))
    shards = max(1, math.ceil(threads / threads_per_shard - ROUNDING_SLACK))
    too_hot = [
        {"partition": p["partition"], "projected_busy_ratio": p["busy_ratio_p95"] * growth}
        for p in partitions
        if p["busy_ratio_p95"] * growth > params.target_utilisation + ROUNDING_SLACK
    ]
    return {
        "growth_factor": growth,
        "cluster_busy_cores_p95": cluster_p95_cores,
        "projected_busy_cores": projected,
        "required_threads_exact": exact_threads,
        "threads": threads,
        "threads_per_shard": threads_per_shard,
        "shards": min(shards, max(1, len(partitions))) if partitions else shards,
        "partitions_over_target": sorted(too_hot, key=lambda x: -x["projected_busy_ratio"]),
    }


def observed_growth_per_day(cluster: list[dict[str, Any]], bucket_s: float) -> float | None:
    """Least-squares slope of the cluster's busy cores over time, relative to its mean, per day
    (None for less than a day of history: daily cycles would pass for a trend)."""
    pts = [(float(r["bucket"]), float(r["busy_cores"])) for r in cluster]
    if len(pts) < 2 or pts[-1][0] - pts[0][0] + bucket_s < 86400:
        return None
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    var = sum((x - mx) ** 2 for x, _ in pts)
    if var == 0 or my == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in pts) / var
    return slope * 86400 / my
