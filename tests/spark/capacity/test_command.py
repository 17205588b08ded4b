"""The command line over a history published by real shards' sample publishers to the real
broker (through the metrics-topic reader and the command line's argument handling)."""

from __future__ import annotations

import argparse
import asyncio
import uuid
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from groupcoord.embedded_broker import EmbeddedBroker  # noqa: E402
from groupcoord.observability.metric_samples import MetricSamplePublisher  # noqa: E402
from groupcoord.observability.shard_metrics import ShardMetrics  # noqa: E402
from groupcoord_spark.capacity.command import add_arguments, run_from_args  # noqa: E402
from groupcoord_spark.sources import read_sample_files  # noqa: E402

from .png import assert_valid_png  # noqa: E402

pytestmark = pytest.mark.slow


async def publish_history(bootstrap: str, topic: str) -> dict[str, float]:
    """Two shards (partitions 0–3 and 4–7) publishing samples while a known workload runs:
    every partition gets 3 heartbeats per round from its own group, partition 6 also 20 from
    group ``hot`` and 5 ms of loop time per round (others 1 ms)."""
    shards = {sid: ShardMetrics(sid, CollectorRegistry()) for sid in ("0", "1")}
    for sid, m in shards.items():
        m.add_thread("0")
        m.set_partition_states({p: "active" for p in range(4 * int(sid), 4 * int(sid) + 4)})
    publishers = [MetricSamplePublisher(m, bootstrap, topic=topic, interval_s=0.25) for m in shards.values()]
    for pub in publishers:
        await pub.start()
    # The workload's loop time is declared, not spent: declared before a publisher's first tick,
    # it could fall in a first interval of a few milliseconds (its phase is the wall clock's)
    # and claim more cores than exist. From the first tick on every interval is a full one.
    while not all(pub.published for pub in publishers):
        await asyncio.sleep(0.01)
    requests = busy = 0.0
    for _ in range(12):
        for p in range(8):
            m = shards[str(p // 4)]
            for _ in range(3):
                m.observe_request("ConsumerGroupHeartbeat", 0.001, partition=p, group=f"g{p}")
            m.observe_event(0.0, 0.001, partition=p)
            requests += 3
            busy += 0.001
        for _ in range(20):
            shards["1"].observe_request("ConsumerGroupHeartbeat", 0.001, partition=6, group="hot")
        shards["1"].observe_event(0.0, 0.004, partition=6)
        requests += 20
        busy += 0.004
        await asyncio.sleep(0.1)
    for pub in publishers:
        await pub.stop()
    return {"requests": requests, "busy_s": busy, "published": sum(p.published for p in publishers)}


def test_capacity_over_samples_published_to_the_metrics_topic(
    spark: SparkSession, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    truth = asyncio.run(publish_history(broker.bootstrap, topic))
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        ["--bootstrap", broker.bootstrap, "--topic", topic, "--out", str(tmp_path / "out"), "--top", "3"]
        + ["--export-json", str(tmp_path / "export")]
    )
    result = run_from_args(args, spark)
    plan = result.plan
    assert plan["history"]["samples"] == truth["published"]
    assert plan["history"]["partitions"] == 8
    assert {s["shard"] for s in plan["shards"]} == {"0", "1"}
    span = plan["history"]["end"] - plan["history"]["start"]
    hottest = plan["hottest_partitions"]
    assert hottest[0]["partition"] == 6 and hottest[0]["shard"] == "1"
    assert hottest[0]["request_rate"] * span == pytest.approx(12 * 23)
    assert plan["hottest_groups"][0]["group"] == "hot"
    assert plan["hottest_groups"][0]["request_rate"] * span == pytest.approx(12 * 20)
    # Every request and every busy second of the workload is in the history, exactly once.
    parts = spark.read.parquet(str(tmp_path / "out" / "partitions.parquet")).collect()
    assert sum(r["request_rate"] for r in parts) * span == pytest.approx(truth["requests"])
    timeline = spark.read.parquet(str(tmp_path / "out" / "timeline.parquet")).collect()
    assert sum(r["busy_cores"] * r["interval_s"] for r in timeline) == pytest.approx(truth["busy_s"])
    assert plan["recommendation"]["threads"] == 1 and plan["recommendation"]["shards"] == 1
    assert_valid_png(tmp_path / "out" / "capacity.png")
    # The export is the exported-files input of a later run.
    again = read_sample_files(spark, [str(tmp_path / "export")])
    assert again.count() == truth["published"]
