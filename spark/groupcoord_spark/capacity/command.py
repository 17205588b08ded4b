"""The capacity job's command line: ``groupcoord capacity`` and the ``spark-submit`` entry point.

``groupcoord capacity --files ...`` (or ``--bootstrap ...``) runs the job in local mode;
on a cluster the same arguments follow ``spark-submit spark/groupcoord_spark/capacity/command.py``,
whose master then wins over local mode.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from groupcoord.observability.metric_samples import DEFAULT_TOPIC
from groupcoord_spark.capacity.job import CapacityResult, Progress, run
from groupcoord_spark.capacity.report import report_text
from groupcoord_spark.capacity.sizing import DEFAULT_PARAMS, CapacityParams
from groupcoord_spark.sources import read_metrics_topic, read_sample_files, topic_offsets

HELP = "capacity plan from the metrics history (PySpark, local mode by default)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_argument_group("input (one of)")
    src.add_argument("--bootstrap", help="Kafka bootstrap servers of the metrics topic")
    src.add_argument("--topic", default=DEFAULT_TOPIC, help="metrics topic (default %(default)s)")
    src.add_argument("--files", nargs="+", help="exported sample files (JSON lines) instead of the topic")
    src.add_argument(
        "--reader", choices=("auto", "kafka", "python"), default="auto", help="topic reader (default: auto)"
    )
    parser.add_argument("--out", default="capacity-out", help="output directory (default %(default)s)")
    parser.add_argument("--export-json", metavar="DIR", help="also write the samples read as JSON lines here")
    parser.add_argument(
        "--target-utilisation",
        type=float,
        default=DEFAULT_PARAMS.target_utilisation,
        help="default %(default)s",
    )
    parser.add_argument(
        "--growth-per-month",
        type=float,
        default=DEFAULT_PARAMS.growth_per_month,
        help="e.g. 0.1 for +10%%/month",
    )
    parser.add_argument(
        "--horizon-months", type=float, default=DEFAULT_PARAMS.horizon_months, help="default %(default)s"
    )
    parser.add_argument("--threads-per-shard", type=int, help="default: as observed")
    parser.add_argument(
        "--top", type=int, default=DEFAULT_PARAMS.top_n, help="hottest partitions/groups to list"
    )
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


def check_inputs(args: argparse.Namespace) -> None:
    """One line and a non-zero exit, before Spark starts, for what would otherwise end in a
    JVM or reader traceback: no Java, no metrics topic, an empty one."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise SystemExit(
            "groupcoord capacity needs Java 17+ for Spark: install a JRE "
            "(Debian: openjdk-17-jre-headless) or set JAVA_HOME"
        )
    if args.files or not args.bootstrap:
        return
    # the reading consumer's INFO lines (its assignment) would come before the one line
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    try:
        offsets = asyncio.run(topic_offsets(args.bootstrap, args.topic))
    except Exception as exc:  # noqa: BLE001 - any failure to reach the cluster: say it in one line
        raise SystemExit(f"capacity: cannot read {args.topic!r} at {args.bootstrap}: {exc}") from None
    if not offsets:
        raise SystemExit(
            f"capacity: no metrics topic {args.topic!r} at {args.bootstrap} "
            "(shards publish it when metric samples are on, the default)"
        )
    if all(end <= first for first, end in offsets.values()):
        raise SystemExit(
            f"capacity: the metrics topic {args.topic!r} at {args.bootstrap} is empty "
            "(let the shards run for at least one sample interval)"
        )


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
    if samples.limit(1).count() == 0:
        raise SystemExit("capacity: no metric samples in the input")
    if args.export_json:
        samples.write.mode("overwrite").json(args.export_json)
    result = run(spark, samples, params_from(args), Path(args.out), progress=progress)
    print(report_text(result.plan), end="")
    return result


def main(args: argparse.Namespace) -> int:
    """``groupcoord capacity``: one job in its own session."""
    check_inputs(args)
    spark = session(args.master)
    try:
        run_from_args(args, spark)
    finally:
        spark.stop()
    return 0


def submit(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark/groupcoord_spark/capacity/command.py --bootstrap ... --out ...``"""
    parser = argparse.ArgumentParser(prog="capacity", description=HELP)
    add_arguments(parser)
    return main(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(submit())
