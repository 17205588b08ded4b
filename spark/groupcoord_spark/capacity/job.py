"""The capacity job: the history's load, the plan, and (given a directory) its files.

:func:`run` ties the steps of :mod:`groupcoord_spark.capacity` together over a samples
DataFrame, with stage-by-stage progress; the command line and the benchmark call it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from groupcoord_spark.capacity.load import (
    cluster_timeline,
    history_span,
    hot_groups,
    partition_load,
    shard_summary,
    shard_timeline,
    utilisation_series,
    with_derived,
)
from groupcoord_spark.capacity.output import write_plan, write_tables
from groupcoord_spark.capacity.plot import plot_utilisation, projection_factor
from groupcoord_spark.capacity.report import report_text
from groupcoord_spark.capacity.sizing import (
    DEFAULT_PARAMS,
    CapacityParams,
    observed_growth_per_day,
    recommend,
)


class Progress:
    """Stage-by-stage progress on stderr (Spark's console progress bar shows within a stage)."""

    def __init__(self, stages: int, out: TextIO | None = sys.stderr) -> None:
        self.stages = stages
        self.out = out
        self.done = 0
        self.started = time.monotonic()

    def step(self, what: str) -> None:
        self.done += 1
        if self.out is not None:
            elapsed = time.monotonic() - self.started
            print(f"[capacity {self.done}/{self.stages} +{elapsed:.1f}s] {what}", file=self.out, flush=True)


@dataclass(slots=True)
class CapacityResult:
    """The plan (what ``plan.json`` holds) and, when the job wrote them, its files by kind."""

    plan: dict[str, Any]
    out_dir: Path | None = None
    files: dict[str, str] = field(default_factory=dict)


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


def run(
    spark: SparkSession,
    samples: DataFrame,
    params: CapacityParams = DEFAULT_PARAMS,
    out_dir: Path | None = None,
    *,
    progress: Progress | None = None,
    max_plot_points: int = 1500,
) -> CapacityResult:
    """The whole job over a samples DataFrame; writes outputs when ``out_dir`` is given."""
    progress = progress or Progress(7, out=None)
    df = with_derived(samples).cache()
    start, end, interval, count = history_span(df)
    span = end - start
    progress.step(f"read {count} samples over {span / 3600:.2f} h")

    parts_df = partition_load(df, span, params.percentile).cache()
    partitions = _rows(parts_df)
    progress.step(f"per-partition load ({len(partitions)} partitions)")

    timeline = shard_timeline(df).cache()
    shards_df = shard_summary(timeline, params.target_utilisation, params.percentile)
    shards = _rows(shards_df)
    progress.step(f"per-shard load ({len(shards)} shards)")

    bucket_s = params.bucket_s or max(1.0, round(interval))
    cluster_df = cluster_timeline(timeline, bucket_s).cache()
    p95 = cluster_df.agg(F.percentile_approx("busy_cores", params.percentile)).first()[0]  # type: ignore[index]
    cluster = _rows(cluster_df.select("bucket", "busy_cores"))
    groups_df = hot_groups(df, span, params.top_n)
    groups = _rows(groups_df)
    progress.step("cluster timeline and hottest groups")

    threads_per_shard = params.threads_per_shard or max(int(s["threads"]) for s in shards)
    rec = recommend(float(p95), partitions, threads_per_shard, params)
    plan: dict[str, Any] = {
        "params": asdict(params),
        "history": {
            "samples": count,
            "start": start,
            "end": end,
            "hours": span / 3600,
            "interval_s": interval,
            "partitions": len(partitions),
        },
        "recommendation": rec,
        "observed_growth_per_day": observed_growth_per_day(cluster, bucket_s),
        "shards": shards,
        "hottest_partitions": partitions[: params.top_n],
        "hottest_groups": groups,
    }
    result = CapacityResult(plan)
    progress.step(f"plan: {rec['threads']} threads, {rec['shards']} shards")

    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        result.out_dir = out_dir
        tables = {"partitions": parts_df, "shards": shards_df, "timeline": timeline, "hot_groups": groups_df}
        result.files.update(write_tables(out_dir, tables))
        progress.step("wrote Parquet tables")

        series = utilisation_series(timeline, max(interval, span / max_plot_points))
        projection = (
            projection_factor(plan),
            f"projected: {rec['shards']} shards × {rec['threads_per_shard']} threads, ×{rec['growth_factor']:.2f} growth",
        )
        plot_utilisation(series, params.target_utilisation, out_dir / "capacity.png", projection)
        result.files["plot"] = str(out_dir / "capacity.png")
        result.files.update(write_plan(out_dir, plan, report_text(plan)))
        progress.step(f"wrote plot, plan and report to {out_dir}")
    for frame in (df, parts_df, timeline, cluster_df):
        frame.unpersist()
    return result
