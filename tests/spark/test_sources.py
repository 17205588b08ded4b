"""The Spark schema of metric samples is derived from :class:`MetricSample`: a published sample
reads back whole, every field with its value (a field the schema typed wrongly would be null)."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest
from pyspark.sql import SparkSession  # the test extra installs pyspark: a missing one fails, never skips

from groupcoord.observability.metric_samples import MetricSample, TopGroup
from groupcoord_spark.sources import SAMPLE_SCHEMA, parse_samples

pytestmark = pytest.mark.slow


def sample() -> MetricSample:
    return MetricSample(
        ts=1767225600.0,
        interval_s=10.0,
        shard="1",
        threads=2,
        partition=7,
        state="active",
        groups={"consumer": {"stable": 3, "reconciling": 1}, "classic": {"empty": 1}},
        requests={"ConsumerGroupHeartbeat": 120, "OffsetCommit": 30},
        events=150,
        busy_s=0.8,
        busy_ratio=0.08,
        queue_size=2,
        offset_commits=40,
        commit_rate=4.0,
        rebalances=1,
        top_groups=[TopGroup(group="g1", requests=100), TopGroup(group="g2", requests=20)],
    )


def test_one_column_per_sample_field() -> None:
    assert SAMPLE_SCHEMA.fieldNames() == [f.name for f in fields(MetricSample)]


def test_a_published_sample_reads_back_whole(spark: SparkSession) -> None:
    raw = spark.createDataFrame([(sample().to_json(),)], "value binary")
    (row,) = parse_samples(raw).collect()
    assert row.asDict(recursive=True) == json.loads(sample().to_json())
