"""``groupcoord capacity``: the PySpark capacity-planning job in local mode (see
:mod:`groupcoord_spark.capacity`; the same job runs on a cluster with ``spark-submit``)."""

from __future__ import annotations

import argparse

from groupcoord_spark import capacity

HELP = "capacity plan from the metrics history (PySpark, local mode by default)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    capacity.add_arguments(parser)


def main(args: argparse.Namespace) -> int:
    spark = capacity.session(args.master)
    try:
        capacity.run_from_args(args, spark)
    finally:
        spark.stop()
    return 0
