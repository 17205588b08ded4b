"""The capacity job in local mode on a synthetic history with a known answer (through exported
files and the job's outputs, as a real run would)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession  # noqa: E402

from groupcoord_spark.capacity.job import CapacityResult, run  # noqa: E402
from groupcoord_spark.capacity.sizing import CapacityParams, recommend  # noqa: E402
from groupcoord_spark.sources import read_sample_files  # noqa: E402

from .png import assert_valid_png  # noqa: E402
from .synthetic_history import SyntheticHistory  # noqa: E402

pytestmark = pytest.mark.slow


def synthetic_plan(spark: SparkSession, tmp_path: Path, scale: int) -> CapacityResult:
    """The synthetic history at ``scale`` 1 goes through exported JSON files and the job's
    outputs (as a real run would); the doubled one straight from its DataFrame."""
    samples = SyntheticHistory(scale=scale).dataframe(spark)
    params = CapacityParams(target_utilisation=0.6)
    if scale != 1:
        return run(spark, samples, params)
    files = tmp_path / "samples"
    samples.write.json(str(files))
    return run(spark, read_sample_files(spark, [str(files)]), params, tmp_path / "out")


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
    grown = recommend(
        rec["cluster_busy_cores_p95"],
        base.plan["hottest_partitions"],
        2,
        CapacityParams(growth_per_month=0.1, horizon_months=6),
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
