"""Capacity planning from the coordinator's metric-sample history (PySpark).

Input: the samples shards publish to the metrics topic every 10 s (schema in
:mod:`groupcoord.observability.metric_samples`), read by :mod:`groupcoord_spark.sources`.
Output (in ``out_dir``): ``partitions.parquet``, ``shards.parquet``, ``timeline.parquet``,
``hot_groups.parquet``, ``plan.json``, ``capacity.png`` and ``report.txt``.

The model, and why:

* The unit of load is the **core**: busy seconds of event-loop time per second of wall time.
  A partition's busy ratio is how much of one thread its loop takes; a shard's utilisation is its
  partitions' busy time over ``threads × interval``. Request rates say where load comes from,
  busy time says what it costs (a heartbeat and a rebalance differ by orders of magnitude).
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

Functions take and return DataFrames so they compose under ``spark-submit``; :func:`run` ties
them together with progress output, and :func:`main` is the ``spark-submit`` entry point.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from groupcoord_spark.sources import read_metrics_topic, read_sample_files

ROUNDING_SLACK = 1e-6  # 1.8 / 0.6 is 3.0000000000000004 in floating point; that is 3 threads


@dataclass(frozen=True, slots=True)
class CapacityParams:
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
    plan: dict[str, Any]
    out_dir: Path | None = None
    files: dict[str, str] = field(default_factory=dict)


# -- DataFrame functions ------------------------------------------------------------------------


def with_derived(samples: DataFrame) -> DataFrame:
    """Adds ``requests_total`` (all APIs) and ``busy_cores`` (busy_s / interval_s)."""
    total = F.aggregate(
        F.map_values(F.coalesce("requests", F.create_map())), F.lit(0).cast("long"), lambda a, b: a + b
    )
    return samples.withColumn("requests_total", total).withColumn(
        "busy_cores", F.col("busy_s") / F.greatest(F.col("interval_s"), F.lit(1e-9))
    )


def history_span(samples: DataFrame) -> tuple[float, float, float, int]:
    """(first ts, last ts, median interval, sample count); the first interval counts in full."""
    row = samples.agg(
        F.min(F.col("ts") - F.col("interval_s")).alias("start"),
        F.max("ts").alias("end"),
        F.percentile_approx("interval_s", 0.5).alias("interval"),
        F.count("*").alias("count"),
    ).first()
    if row is None or row["end"] is None:
        raise ValueError("no metric samples in the input")
    return float(row["start"]), float(row["end"]), float(row["interval"]), int(row["count"])


def partition_load(samples: DataFrame, span_s: float, percentile: float = 0.95) -> DataFrame:
    """Per state-topic partition: request and commit rates over the history, busy ratio
    (mean, p95, max), queue size, groups now, and the shard that leads it now."""
    return (
        samples.groupBy("partition")
        .agg(
            F.max_by("shard", "ts").alias("shard"),
            (F.sum("requests_total") / F.lit(span_s)).alias("request_rate"),
            (F.sum("offset_commits") / F.lit(span_s)).alias("commit_rate"),
            F.avg("busy_ratio").alias("busy_ratio_avg"),
            F.percentile_approx("busy_ratio", percentile).alias("busy_ratio_p95"),
            F.max("busy_ratio").alias("busy_ratio_max"),
            F.max("queue_size").alias("queue_size_max"),
            F.max_by(
                F.aggregate(
                    F.flatten(F.transform(F.map_values("groups"), lambda m: F.map_values(m))),
                    F.lit(0).cast("long"),
                    lambda a, b: a + b,
                ),
                "ts",
            ).alias("groups"),
            F.sum("rebalances").alias("rebalances"),
        )
        .orderBy(F.desc("request_rate"), "partition")
    )


def shard_timeline(samples: DataFrame) -> DataFrame:
    """Per shard and sample time: busy cores, utilisation of its threads, request rate.

    All partitions of one shard share a sample's ``ts`` (one drain), so (shard, ts) is exact."""
    return (
        samples.groupBy("shard", "ts")
        .agg(
            F.sum("busy_s").alias("busy_s"),
            F.sum("requests_total").alias("requests"),
            F.max("threads").alias("threads"),
            F.max("interval_s").alias("interval_s"),
            F.count("*").alias("partitions"),
        )
        .withColumn("busy_cores", F.col("busy_s") / F.col("interval_s"))
        .withColumn("utilisation", F.col("busy_cores") / F.col("threads"))
        .withColumn("request_rate", F.col("requests") / F.col("interval_s"))
        .drop("busy_s", "requests")
    )


def shard_summary(timeline: DataFrame, target: float, percentile: float = 0.95) -> DataFrame:
    """Per shard: utilisation (mean, p95, max), headroom at p95, request rate, threads."""
    return (
        timeline.groupBy("shard")
        .agg(
            F.max("threads").alias("threads"),
            F.max("partitions").alias("partitions"),
            F.avg("request_rate").alias("request_rate"),
            F.avg("busy_cores").alias("busy_cores_avg"),
            F.avg("utilisation").alias("utilisation_avg"),
            F.percentile_approx("utilisation", percentile).alias("utilisation_p95"),
            F.max("utilisation").alias("utilisation_max"),
        )
        .withColumn("headroom", 1.0 - F.col("utilisation_p95"))
        .withColumn("headroom_to_target", F.lit(target) - F.col("utilisation_p95"))
        .orderBy("shard")
    )


def cluster_timeline(timeline: DataFrame, bucket_s: float) -> DataFrame:
    """Cluster busy cores and request rate per time bucket: each shard's mean over the samples
    in the bucket, summed over shards (shards' sample times need not align)."""
    bucket = (F.floor(F.col("ts") / bucket_s) * bucket_s).alias("bucket")
    per_shard = timeline.groupBy("shard", bucket).agg(
        F.avg("busy_cores").alias("busy_cores"),
        F.avg("request_rate").alias("request_rate"),
        F.max("threads").alias("threads"),
    )
    return (
        per_shard.groupBy("bucket")
        .agg(
            F.sum("busy_cores").alias("busy_cores"),
            F.sum("request_rate").alias("request_rate"),
            F.sum("threads").alias("threads"),
            F.count("*").alias("shards"),
        )
        .orderBy("bucket")
    )


def hot_groups(samples: DataFrame, span_s: float, n: int) -> DataFrame:
    """Hottest groups by request rate, from the per-interval top-N lists (lower bounds for
    groups that were not always in their partition's top-N; exact for the hottest)."""
    exploded = samples.select("partition", F.explode("top_groups").alias("g"))
    return (
        exploded.groupBy(F.col("g.group").alias("group"))
        .agg(
            (F.sum("g.requests") / F.lit(span_s)).alias("request_rate"),
            F.max("partition").alias("partition"),
        )
        .orderBy(F.desc("request_rate"), "group")
        .limit(n)
    )


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


# -- outputs ------------------------------------------------------------------------------------


def plot(shard_points: dict[str, list[tuple[float, float]]], target: float, path: Path) -> None:
    """Load (utilisation of the shard's threads) and headroom over time, one panel per shard."""
    import matplotlib  # noqa: PLC0415 - only the job needs it

    matplotlib.use("Agg")
    import datetime as dt  # noqa: PLC0415

    import matplotlib.pyplot as plt  # noqa: PLC0415

    shards = sorted(shard_points, key=lambda s: (len(s), s))
    fig, axes = plt.subplots(
        len(shards), 1, figsize=(10, 2.4 * len(shards) + 0.8), sharex=True, squeeze=False
    )
    for ax, shard in zip(axes[:, 0], shards, strict=True):
        pts = shard_points[shard]
        xs = [dt.datetime.fromtimestamp(t, tz=dt.UTC) for t, _ in pts]
        ys = [u for _, u in pts]
        ax.plot(xs, ys, color="tab:blue", linewidth=1, label="load (utilisation)")
        ax.fill_between(xs, ys, [1.0] * len(ys), color="tab:green", alpha=0.15, label="headroom")
        ax.axhline(target, color="tab:red", linestyle="--", linewidth=1, label=f"target {target:.0%}")
        ax.set_ylim(0, max(1.0, max(ys, default=0) * 1.1))
        ax.set_ylabel(f"shard {shard}")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize="small")
    axes[0, 0].set_title("Event-loop load and headroom per shard")
    axes[-1, 0].set_xlabel("time (UTC)")
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)


def report_text(plan: dict[str, Any]) -> str:
    rec = plan["recommendation"]
    lines = [
        "groupcoord capacity plan",
        f"history: {plan['history']['samples']} samples, {plan['history']['hours']:.2f} h, "
        f"{len(plan['shards'])} shards, {plan['history']['partitions']} partitions",
        f"cluster busy cores: p95 {rec['cluster_busy_cores_p95']:.3f}, "
        f"projected ×{rec['growth_factor']:.2f} growth → {rec['projected_busy_cores']:.3f}",
        f"recommended: {rec['threads']} threads = {rec['shards']} shards × {rec['threads_per_shard']} threads "
        f"(target utilisation {plan['params']['target_utilisation']:.0%})",
    ]
    trend = plan["observed_growth_per_day"]
    if trend is not None:
        lines.append(f"observed load trend: {trend:+.1%} per day")
    lines.append("shards (utilisation p95 / headroom):")
    for s in plan["shards"]:
        lines.append(
            f"  shard {s['shard']}: {s['utilisation_p95']:.1%} / {s['headroom']:.1%} "
            f"({s['threads']} threads, {s['request_rate']:.1f} req/s)"
        )
    lines.append("hottest partitions (req/s, busy p95):")
    for p in plan["hottest_partitions"][:5]:
        lines.append(
            f"  partition {p['partition']} (shard {p['shard']}): {p['request_rate']:.1f}, {p['busy_ratio_p95']:.1%}"
        )
    if plan["hottest_groups"]:
        lines.append("hottest groups (req/s):")
        for g in plan["hottest_groups"][:5]:
            lines.append(f"  {g['group']}: {g['request_rate']:.2f}")
    for p in rec["partitions_over_target"]:
        lines.append(
            f"WARNING: partition {p['partition']} alone would run at {p['projected_busy_ratio']:.0%} of a thread; "
            "more threads cannot help — add state-topic partitions to spread its groups"
        )
    return "\n".join(lines) + "\n"


# -- the job ------------------------------------------------------------------------------------


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


def run(
    spark: SparkSession,
    samples: DataFrame,
    params: CapacityParams = CapacityParams(),
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
    shards = _rows(shard_summary(timeline, params.target_utilisation, params.percentile))
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
        for name, frame in (
            ("partitions", parts_df),
            ("shards", shard_summary(timeline, params.target_utilisation, params.percentile)),
            ("timeline", timeline),
            ("hot_groups", groups_df),
        ):
            path = out_dir / f"{name}.parquet"
            frame.coalesce(1).write.mode("overwrite").parquet(str(path))
            result.files[name] = str(path)
        progress.step("wrote Parquet tables")

        # Downsample per shard for the plot: mean utilisation per plot bucket.
        plot_bucket = max(interval, span / max_plot_points)
        pts = (
            timeline.groupBy("shard", (F.floor(F.col("ts") / plot_bucket) * plot_bucket).alias("t"))
            .agg(F.avg("utilisation").alias("u"))
            .orderBy("shard", "t")
            .collect()
        )
        series: dict[str, list[tuple[float, float]]] = {}
        for r in pts:
            series.setdefault(r["shard"], []).append((float(r["t"]), float(r["u"])))
        plot(series, params.target_utilisation, out_dir / "capacity.png")
        (out_dir / "plan.json").write_text(json.dumps(plan, indent=2, default=str) + "\n")
        (out_dir / "report.txt").write_text(report_text(plan))
        result.files.update(
            plot=str(out_dir / "capacity.png"),
            plan=str(out_dir / "plan.json"),
            report=str(out_dir / "report.txt"),
        )
        progress.step(f"wrote plot, plan and report to {out_dir}")
    for frame in (df, parts_df, timeline, cluster_df):
        frame.unpersist()
    return result


# -- command line (spark-submit and ``groupcoord capacity``) ------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_argument_group("input (one of)")
    src.add_argument("--bootstrap", help="Kafka bootstrap servers of the metrics topic")
    src.add_argument("--topic", default="__groupcoord_metrics", help="metrics topic (default %(default)s)")
    src.add_argument("--files", nargs="+", help="exported sample files (JSON lines) instead of the topic")
    src.add_argument(
        "--reader", choices=("auto", "kafka", "python"), default="auto", help="topic reader (default: auto)"
    )
    parser.add_argument("--out", default="capacity-out", help="output directory (default %(default)s)")
    parser.add_argument("--export-json", metavar="DIR", help="also write the samples read as JSON lines here")
    parser.add_argument("--target-utilisation", type=float, default=0.6, help="default %(default)s")
    parser.add_argument("--growth-per-month", type=float, default=0.0, help="e.g. 0.1 for +10%%/month")
    parser.add_argument("--horizon-months", type=float, default=6.0, help="default %(default)s")
    parser.add_argument("--threads-per-shard", type=int, help="default: as observed")
    parser.add_argument("--top", type=int, default=10, help="hottest partitions/groups to list")
    parser.add_argument("--master", help="Spark master (default: local[*] unless spark-submit set one)")


def params_from(args: argparse.Namespace) -> CapacityParams:
    return CapacityParams(
        target_utilisation=args.target_utilisation,
        growth_per_month=args.growth_per_month,
        horizon_months=args.horizon_months,
        threads_per_shard=args.threads_per_shard,
        top_n=args.top,
    )


def session(master: str | None = None, app: str = "groupcoord-capacity") -> SparkSession:
    """A SparkSession: under spark-submit its master wins; otherwise local mode. Python data
    sources run in worker processes, which must use this interpreter (and its packages)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app).config("spark.ui.showConsoleProgress", "true")
    if master:  # else spark-submit's --master, or its default local[*] when run by plain python
        builder = builder.master(master)
    if "PYSPARK_GATEWAY_PORT" not in os.environ and (master is None or master.startswith("local")):
        # Our own local JVM (not spark-submit's): Spark's 200 shuffle partitions cost far more
        # in task overhead than they bring on a few cores (measured: 119 s vs ~30 s, 1 h history).
        builder = builder.config("spark.sql.shuffle.partitions", str(2 * (os.cpu_count() or 2)))
    return builder.getOrCreate()


def run_from_args(args: argparse.Namespace, spark: SparkSession) -> CapacityResult:
    progress = Progress(7)
    if args.files:
        samples = read_sample_files(spark, list(args.files))
        print(f"[capacity] reading {len(args.files)} file(s)", file=sys.stderr)
    elif args.bootstrap:
        samples, how = read_metrics_topic(spark, args.bootstrap, args.topic, prefer=args.reader)
        print(f"[capacity] reading topic {args.topic} ({how} reader)", file=sys.stderr)
    else:
        raise SystemExit("capacity: give --bootstrap (metrics topic) or --files")
    if args.export_json:
        samples.write.mode("overwrite").json(args.export_json)
    result = run(spark, samples, params_from(args), Path(args.out), progress=progress)
    print(report_text(result.plan), end="")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark/groupcoord_spark/capacity.py --bootstrap ... --out ...``"""
    parser = argparse.ArgumentParser(prog="capacity", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    spark = session(args.master)
    try:
        run_from_args(args, spark)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
