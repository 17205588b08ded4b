"""Wall time of the PySpark capacity job on one day of 10-second samples from 3 shards × 50
partitions (8,640 intervals × 150 partitions = 1,296,000 samples), local mode.

The history is the synthetic one of ``tests/spark/capacity/synthetic_history.py`` (its answer is known, so
the run also checks the plan), written as exported JSON-lines files before the clock starts;
the timed part is what ``groupcoord capacity --files ...`` does after its session is up:
read and parse the files, every aggregation, the Parquet tables, the plot, plan and report.
Session startup is reported separately. The baseline is the same job on a tenth of the history
(2.4 h), giving how the job scales with history length (fixed costs vs per-row cost).
The load average is reported because other work on the machine shares its cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SYNTHETIC_HISTORY_DIR = Path(__file__).resolve().parents[1] / "tests" / "spark" / "capacity"

NAME = "capacity"
DESCRIPTION = "PySpark capacity job wall time: one day of 10 s samples, 3 shards x 50 partitions (local mode)"


def _timed_job(spark: Any, files: Path, out: Path) -> tuple[float, dict[str, Any], list[str]]:
    import io  # noqa: PLC0415

    from groupcoord_spark.capacity.job import Progress, run  # noqa: PLC0415
    from groupcoord_spark.capacity.sizing import CapacityParams  # noqa: PLC0415
    from groupcoord_spark.sources import read_sample_files  # noqa: PLC0415

    log = io.StringIO()
    started = time.perf_counter()
    samples = read_sample_files(spark, [str(files)])
    result = run(spark, samples, CapacityParams(), out, progress=Progress(7, log))
    wall = time.perf_counter() - started
    return wall, result.plan, log.getvalue().splitlines()


def run(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="capacity")
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--partitions-per-shard", type=int, default=50)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # noqa: PLC0415

    sys.path.insert(0, str(SYNTHETIC_HISTORY_DIR))
    from synthetic_history import SyntheticHistory  # noqa: PLC0415 - a test fixture, found on the path above

    started = time.perf_counter()
    spark = (
        SparkSession.builder.master(args.master)
        .appName("bench-capacity")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(2 * (os.cpu_count() or 2)))  # as `groupcoord capacity`
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    session_s = time.perf_counter() - started
    work = Path(tempfile.mkdtemp(prefix="bench-capacity-"))
    try:
        runs: dict[str, dict[str, Any]] = {}
        for label, hours in (("baseline_tenth", args.hours / 10), ("full", args.hours)):
            history = SyntheticHistory(
                shards=args.shards,
                partitions_per_shard=args.partitions_per_shard,
                threads=2,
                intervals=int(hours * 360),
                hot_partition=7,
            )
            files = work / f"samples-{label}"
            t = time.perf_counter()
            history.dataframe(spark).write.json(str(files))
            generate_s = time.perf_counter() - t
            wall, plan, stages = _timed_job(spark, files, work / f"out-{label}")
            rows = history.intervals * history.partitions
            expected_p95 = (history.partitions - 1) * 0.15 + 0.15 * history.hot_factor
            rec = plan["recommendation"]
            if abs(rec["cluster_busy_cores_p95"] - expected_p95) > 1e-6 or plan["history"]["samples"] != rows:
                raise AssertionError(f"wrong plan: {rec} (expected p95 {expected_p95} cores, {rows} samples)")
            runs[label] = {
                "hours": hours,
                "samples": rows,
                "input_mb": round(sum(f.stat().st_size for f in files.glob("*")) / 1e6, 1),
                "generate_s": round(generate_s, 2),
                "job_wall_s": round(wall, 2),
                "samples_per_s": round(rows / wall),
                "stages": stages,
                "recommended_threads": rec["threads"],
                "recommended_shards": rec["shards"],
            }
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    full, base = runs["full"], runs["baseline_tenth"]
    return {
        "description": DESCRIPTION,
        "master": args.master,
        "cpu_count": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "session_start_s": round(session_s, 2),
        "job_wall_s": full["job_wall_s"],
        "full": full,
        "baseline_tenth": base,
        "ratio_full_vs_tenth_wall": round(full["job_wall_s"] / base["job_wall_s"], 2),
    }
