"""The capacity job in local mode: a synthetic history with a known answer (through exported
files), and a history published by real shards' sample publishers to the real broker (through
the metrics-topic reader and the command line's argument handling)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import struct
import sys
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

from prometheus_client import CollectorRegistry  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from groupcoord.embedded_broker import EmbeddedBroker  # noqa: E402
from groupcoord.observability.metric_samples import MetricSamplePublisher  # noqa: E402
from groupcoord.observability.metrics import ShardMetrics  # noqa: E402
from groupcoord_spark import capacity  # noqa: E402
from groupcoord_spark.sources import read_sample_files  # noqa: E402
from groupcoord_spark.synthetic import SyntheticHistory  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local session for every Spark test (starting one takes 5–15 s)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    s = (
        SparkSession.builder.master("local[2]")
        .appName("groupcoord-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


def assert_valid_png(path: Path) -> None:
    """Signature, then every chunk's CRC, IHDR first and IEND last: a complete, uncorrupted PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, kind
        chunks.append(kind)
        pos += 12 + length
    assert chunks[0] == b"IHDR" and chunks[-1] == b"IEND" and b"IDAT" in chunks
    width, height = struct.unpack(">II", data[16:24])
    assert width > 100 and height > 100


def synthetic_plan(spark: SparkSession, tmp_path: Path, scale: int) -> capacity.CapacityResult:
    """The synthetic history at ``scale`` 1 goes through exported JSON files and the job's
    outputs (as a real run would); the doubled one straight from its DataFrame."""
    samples = SyntheticHistory(scale=scale).dataframe(spark)
    params = capacity.CapacityParams(target_utilisation=0.6)
    if scale != 1:
        return capacity.run(spark, samples, params)
    files = tmp_path / "samples"
    samples.write.json(str(files))
    return capacity.run(spark, read_sample_files(spark, [str(files)]), params, tmp_path / "out")


def test_known_answer_and_load_doubling_doubles_capacity(spark: SparkSession, tmp_path: Path) -> None:
    # 2 shards × 4 partitions × 2 threads, one hour of 10 s samples. Partitions run at 0.1 of a
    # thread, 0.15 in every 10th interval; partition 5 (shard 1) five times that, with five
    # times the requests. p95 of the cluster = the spike: 7 × 0.15 + 0.75 = 1.8 cores.
    base = synthetic_plan(spark, tmp_path, scale=1)
    rec = base.plan["recommendation"]
    assert base.plan["history"]["samples"] == 360 * 8
    assert base.plan["history"]["hours"] == pytest.approx(1.0)
    assert rec["cluster_busy_cores_p95"] == pytest.approx(1.8)
    assert rec["required_threads_exact"] == pytest.approx(3.0)
    assert (rec["threads"], rec["threads_per_shard"], rec["shards"]) == (3, 2, 2)
    shards = {s["shard"]: s for s in base.plan["shards"]}
    assert shards["0"]["utilisation_p95"] == pytest.approx(0.3)  # 4 × 0.15 / 2 threads
    assert shards["0"]["headroom"] == pytest.approx(0.7)
    assert shards["1"]["utilisation_p95"] == pytest.approx(0.6)  # (3 × 0.15 + 0.75) / 2
    assert shards["1"]["headroom"] == pytest.approx(0.4)
    assert shards["1"]["headroom_to_target"] == pytest.approx(0.0)
    hottest = base.plan["hottest_partitions"]
    assert hottest[0]["partition"] == 5 and hottest[0]["shard"] == "1"
    assert hottest[0]["request_rate"] == pytest.approx(60.0)  # (10 + 2) req/s × 5
    assert hottest[1]["request_rate"] == pytest.approx(12.0)
    assert hottest[0]["busy_ratio_p95"] == pytest.approx(0.75)
    assert hottest[0]["groups"] == 6
    assert base.plan["hottest_groups"][0]["group"] == "hot-group"
    assert base.plan["hottest_groups"][0]["request_rate"] == pytest.approx(48.0)  # 4/5 of 60
    # Partition 5 alone is above the 60 % target: more threads cannot fix that.
    assert [p["partition"] for p in rec["partitions_over_target"]] == [5]
    assert base.plan["observed_growth_per_day"] is None  # an hour is too short for a trend

    doubled = synthetic_plan(spark, tmp_path, scale=2)
    rec2 = doubled.plan["recommendation"]
    assert rec2["cluster_busy_cores_p95"] == pytest.approx(2 * rec["cluster_busy_cores_p95"])
    assert rec2["required_threads_exact"] == pytest.approx(2 * rec["required_threads_exact"])
    assert rec2["threads"] == 2 * rec["threads"] == 6
    assert rec2["shards"] == 3
    assert doubled.plan["hottest_partitions"][0]["request_rate"] == pytest.approx(120.0)

    # Growth: +10 %/month over 6 months on the base history.
    grown = capacity.recommend(
        rec["cluster_busy_cores_p95"],
        base.plan["hottest_partitions"],
        2,
        capacity.CapacityParams(growth_per_month=0.1, horizon_months=6),
    )
    assert grown["projected_busy_cores"] == pytest.approx(1.8 * 1.1**6)
    assert grown["threads"] == 6  # 3.189 cores / 0.6 = 5.3 → 6

    out = base.out_dir
    assert out is not None
    assert_valid_png(out / "capacity.png")
    assert json.loads((out / "plan.json").read_text())["recommendation"]["threads"] == 3
    report = (out / "report.txt").read_text()
    assert "recommended: 3 threads = 2 shards × 2 threads" in report
    assert "partition 5 (shard 1)" in report and "hot-group" in report
    parts = spark.read.parquet(str(out / "partitions.parquet"))
    assert parts.count() == 8
    assert spark.read.parquet(str(out / "timeline.parquet")).count() == 360 * 2


def test_observed_growth_is_the_relative_slope_per_day() -> None:
    # Busy cores 1.0 at t=0 rising linearly to 3.0 after two days: slope 1.0/day, mean 2.0.
    cluster = [{"bucket": t, "busy_cores": 1.0 + t / 86400} for t in range(0, 2 * 86400 + 1, 600)]
    assert capacity.observed_growth_per_day(cluster, 600) == pytest.approx(1.0 / 2.0)
    assert capacity.observed_growth_per_day(cluster[:100], 600) is None  # under a day


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
    capacity.add_arguments(parser)
    args = parser.parse_args(
        ["--bootstrap", broker.bootstrap, "--topic", topic, "--out", str(tmp_path / "out"), "--top", "3"]
        + ["--export-json", str(tmp_path / "export")]
    )
    result = capacity.run_from_args(args, spark)
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
