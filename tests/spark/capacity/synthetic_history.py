"""A synthetic metric-sample history with a known answer, generated inside Spark.

A test fixture, not product code: used by the tests (known-answer checks of the capacity
model) and by ``bench/capacity.py`` (a
day of 10-second samples from 3 shards × 50 partitions is 1.3 M rows: generating them with
``spark.range`` takes seconds, building them as Python dicts would dominate the benchmark).

The shape: ``shards × partitions_per_shard`` partitions (partition ``k`` on shard
``k // partitions_per_shard``), every partition busy ``base_busy`` of a thread, ``spike_factor``
times that in every ``spike_every``-th interval (rebalance storms), the ``hot_partition``
``hot_factor`` times busier and with ``hot_factor`` times the requests, most of them from the
group ``hot-group``. ``scale`` multiplies all load (busy time and request counts).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from groupcoord_spark.sources import SAMPLE_SCHEMA


@dataclass(frozen=True, slots=True)
class SyntheticHistory:
    shards: int = 2
    partitions_per_shard: int = 4
    threads: int = 2
    intervals: int = 360
    interval_s: float = 10.0
    start_ts: float = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    base_busy: float = 0.1
    spike_every: int = 10
    spike_factor: float = 1.5
    hot_partition: int | None = 5
    hot_factor: int = 5
    heartbeats_per_s: int = 10
    commits_per_s: int = 2
    scale: int = 1

    @property
    def partitions(self) -> int:
        return self.shards * self.partitions_per_shard

    def dataframe(self, spark: SparkSession) -> DataFrame:
        n = self.intervals * self.partitions
        ids = spark.range(n)
        i = (F.col("id") / F.lit(self.partitions)).cast("long")
        k = (F.col("id") % F.lit(self.partitions)).cast("int")
        hot: Column = (
            F.when(k == F.lit(self.hot_partition), F.lit(self.hot_factor)).otherwise(F.lit(1))
            if self.hot_partition is not None
            else F.lit(1)
        )
        spike = F.when(i % F.lit(self.spike_every) == 0, F.lit(self.spike_factor)).otherwise(F.lit(1.0))
        busy_ratio = F.lit(float(self.scale)) * F.lit(self.base_busy) * hot * spike
        per_interval = F.lit(int(self.interval_s)) * F.lit(self.scale) * hot
        heartbeats = (per_interval * F.lit(self.heartbeats_per_s)).cast("long")
        commits = (per_interval * F.lit(self.commits_per_s)).cast("long")
        is_hot = k == F.lit(-1 if self.hot_partition is None else self.hot_partition)
        top_group = F.when(is_hot, F.lit("hot-group")).otherwise(F.concat(F.lit("g"), k.cast("string")))
        top_groups = F.array(
            F.struct(
                top_group.alias("group"), ((heartbeats + commits) * 4 / 5).cast("long").alias("requests")
            ),
            F.struct(
                F.concat(F.lit("g"), k.cast("string"), F.lit("-small")).alias("group"),
                ((heartbeats + commits) / 5).cast("long").alias("requests"),
            ),
        )
        df = ids.select(
            F.lit(1).alias("version"),
            (F.lit(self.start_ts) + (i + 1) * F.lit(self.interval_s)).alias("ts"),
            F.lit(self.interval_s).alias("interval_s"),
            (k / F.lit(self.partitions_per_shard)).cast("int").cast("string").alias("shard"),
            F.lit(self.threads).alias("threads"),
            k.alias("partition"),
            F.lit("active").alias("state"),
            F.create_map(
                F.lit("consumer"),
                F.create_map(F.lit("stable"), F.lit(5).cast("long")),
                F.lit("classic"),
                F.create_map(F.lit("empty"), F.lit(1).cast("long")),
            ).alias("groups"),
            F.create_map(F.lit("ConsumerGroupHeartbeat"), heartbeats, F.lit("OffsetCommit"), commits).alias(
                "requests"
            ),
            (heartbeats + commits).alias("events"),
            (busy_ratio * F.lit(self.interval_s)).alias("busy_s"),
            busy_ratio.alias("busy_ratio"),
            F.lit(0).cast("long").alias("queue_size"),
            commits.alias("offset_commits"),
            (commits / F.lit(self.interval_s)).alias("commit_rate"),
            F.when(spike > 1, F.lit(1)).otherwise(F.lit(0)).cast("long").alias("rebalances"),
            top_groups.alias("top_groups"),
        )
        return df.select(*[F.col(f.name).cast(f.dataType) for f in SAMPLE_SCHEMA.fields])
