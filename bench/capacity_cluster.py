"""Wall time of `groupcoord capacity` over the metrics topic, both ways it runs: on a Spark
standalone cluster (one master, two workers, from the installed PySpark) via ``spark-submit`` with
Spark's own Kafka connector, against the baseline of local mode with the Python data source
(aiokafka), the no-Java-on-a-cluster fallback. Both read the same topic of a real Apache Kafka 4.4:
one day of 10-second samples from 3 shards × 50 partitions (1,296,000 samples, the synthetic history
of ``tests/spark/capacity/synthetic_history.py``, whose answer is known: both plans are checked).

Each figure is the whole command as a user runs it (JVM start, reading, every aggregation, the
Parquet tables, plot, plan, report). The samples are written to the topic before the clocks start,
by Spark's Kafka sink. Needs Java, the Kafka jars and the connector jars that ``scripts/test``
resolves (``GROUPCOORD_KAFKA_JARS``, ``GROUPCOORD_SPARK_KAFKA_JARS``). Load average printed before
and after: nothing else may run beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NAME = "capacity-cluster"
DESCRIPTION = (
    "capacity job over the metrics topic: Spark standalone + Kafka connector vs local mode + "
    "Python source (baseline), one day of 3 x 50 partitions"
)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _publish(jars: list[Path], bootstrap: str, topic: str, hours: float) -> tuple[int, float]:
    """The synthetic history written to ``topic`` (one JSON sample per record) by Spark's Kafka
    sink in a local session; returns (samples, expected cluster p95 busy cores)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # noqa: PLC0415
    from pyspark.sql import functions as F  # noqa: PLC0415

    sys.path.insert(0, str(ROOT / "tests" / "spark" / "capacity"))
    from synthetic_history import SyntheticHistory  # noqa: PLC0415 - a test fixture, found on the path above

    spark = (
        SparkSession.builder.master("local[*]")
        .appName("bench-capacity-cluster-publish")
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        history = SyntheticHistory(
            shards=3, partitions_per_shard=50, threads=2, intervals=int(hours * 360), hot_partition=7
        )
        history.dataframe(spark).select(F.to_json(F.struct("*")).alias("value")).write.format("kafka").option(
            "kafka.bootstrap.servers", bootstrap
        ).option("topic", topic).save()
        p95 = (history.partitions - 1) * 0.15 + 0.15 * history.hot_factor
        return history.intervals * history.partitions, p95
    finally:
        spark.stop()


def _check(plan_path: Path, samples: int, p95: float) -> dict[str, Any]:
    plan = json.loads(plan_path.read_text())
    rec = plan["recommendation"]
    if plan["history"]["samples"] != samples or abs(rec["cluster_busy_cores_p95"] - p95) > 1e-6:
        raise AssertionError(f"wrong plan: {plan['history']} {rec} (expected {samples} samples, p95 {p95})")
    return rec


def run(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog=NAME)
    parser.add_argument("--hours", type=float, default=24.0)
    args = parser.parse_args(argv)

    import pyspark  # noqa: PLC0415

    sys.path.insert(0, str(ROOT))
    from groupcoord_testing.apache_kafka import VERSIONS, ApacheKafka  # noqa: PLC0415
    from tests.spark.test_standalone_cluster import (  # noqa: PLC0415 - the suite's cluster fixture
        connector_jars,
        local_command,
        spark_env,
        standalone_cluster,
        submit_command,
    )

    load_before = _load()
    jars = connector_jars()
    work = Path(tempfile.mkdtemp(prefix="bench-capacity-cluster-"))
    env = spark_env()
    try:
        with ApacheKafka(work / "kafka", version=VERSIONS["kafka-4.4"]) as kafka:
            topic = f"metrics-{uuid.uuid4().hex[:8]}"
            t = time.perf_counter()
            samples, p95 = _publish(jars, kafka.bootstrap, topic, args.hours)
            publish_s = time.perf_counter() - t
            common = ["--bootstrap", kafka.bootstrap, "--topic", topic, "--top", "5"]

            t = time.perf_counter()
            subprocess.run(
                local_command("local[*]", "--reader", "python", "--out", str(work / "local"), *common),
                env=env, check=True, capture_output=True, timeout=3600,
            )  # fmt: skip
            local_s = time.perf_counter() - t
            local_rec = _check(work / "local" / "plan.json", samples, p95)

            (work / "spark").mkdir()
            with standalone_cluster(work / "spark") as master:
                t = time.perf_counter()
                subprocess.run(
                    submit_command(
                        master, jars, {"spark.executor.memory": "1g"},
                        "--reader", "kafka", "--out", str(work / "cluster"), *common,
                    ),
                    env=env, check=True, capture_output=True, timeout=3600,
                )  # fmt: skip
                cluster_s = time.perf_counter() - t
            cluster_rec = _check(work / "cluster" / "plan.json", samples, p95)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "description": DESCRIPTION,
        "pyspark": pyspark.__version__,
        "cpu_count": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": _load(),
        "hours": args.hours,
        "samples": samples,
        "publish_s": round(publish_s, 1),
        "baseline_local_python_source_s": round(local_s, 1),
        "standalone_2_workers_kafka_connector_s": round(cluster_s, 1),
        "ratio_cluster_vs_local": round(cluster_s / local_s, 2),
        "same_recommendation": local_rec == cluster_rec,
        "recommendation": cluster_rec,
    }
