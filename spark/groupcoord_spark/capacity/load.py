"""The load in a metric-sample history, per partition, per shard and for the cluster.

The unit of load is the **core**: busy seconds of event-loop time per second of wall time. A
partition's busy ratio is how much of one thread its loop takes; a shard's utilisation is its
partitions' busy time over ``threads × interval``. Request rates say where load comes from,
busy time says what it costs (a heartbeat and a rebalance differ by orders of magnitude).

Functions take and return DataFrames so they compose under ``spark-submit``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


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


def utilisation_series(timeline: DataFrame, bucket_s: float) -> dict[str, list[tuple[float, float]]]:
    """Per shard, (time, mean utilisation) per ``bucket_s``: the timeline downsampled for a plot."""
    rows = (
        timeline.groupBy("shard", (F.floor(F.col("ts") / bucket_s) * bucket_s).alias("t"))
        .agg(F.avg("utilisation").alias("u"))
        .orderBy("shard", "t")
        .collect()
    )
    series: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        series.setdefault(r["shard"], []).append((float(r["t"]), float(r["u"])))
    return series
