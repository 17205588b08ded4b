"""The Spark schema of metric samples is derived from :class:`MetricSample`: a published sample
reads back whole, every field with its value (a field the schema typed wrongly would be null);
a metrics topic reads back whole whatever the broker's ListOffsets says."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import fields, replace

import pytest
from aiokafka import AIOKafkaProducer
from pyspark.sql import SparkSession  # the test extra installs pyspark: a missing one fails, never skips

from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.observability.metric_samples import MetricSample, TopGroup, ensure_metrics_topic
from groupcoord_spark.sources import SAMPLE_SCHEMA, parse_samples, read_metrics_topic, topic_offsets

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


async def publish_batches(bootstrap: str, topic: str, batches: int, per_batch: int) -> None:
    await ensure_metrics_topic(bootstrap, topic)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=1000)
    await producer.start()
    try:
        for b in range(batches):
            sent = [
                await producer.send(topic, replace(sample(), ts=1767225600.0 + b).to_json())
                for _ in range(per_batch)
            ]
            await producer.flush()  # one batch of ``per_batch`` records
            for f in sent:
                await f
    finally:
        await producer.stop()


def test_the_topic_reads_whole_where_list_offsets_answers_short(
    spark: SparkSession, broker: EmbeddedBroker
) -> None:
    """tansu answers ListOffsets ``latest`` with the last batch's base offset plus one (here 9 of
    12), and at times ``earliest`` past records it serves: read to those, the last batch's
    samples would be missing. The offsets come from Fetch, and every sample reads back."""
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    asyncio.run(publish_batches(broker.bootstrap, topic, batches=3, per_batch=4))
    assert asyncio.run(topic_offsets(broker.bootstrap, topic)) == {0: (0, 12)}
    samples, reader = read_metrics_topic(spark, broker.bootstrap, topic, prefer="python")
    assert (reader, samples.count()) == ("python", 12)
