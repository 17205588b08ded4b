"""Writing the job's results: the tables as Parquet, the plan as JSON, the report as text."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame


def write_tables(out_dir: Path, tables: Mapping[str, DataFrame]) -> dict[str, str]:
    """Each table as ``<name>.parquet`` in one file (they are small: one row per partition,
    shard, group or sample time, and one file is what a notebook opens). Returns name → path."""
    files = {}
    for name, frame in tables.items():
        path = out_dir / f"{name}.parquet"
        frame.coalesce(1).write.mode("overwrite").parquet(str(path))
        files[name] = str(path)
    return files


def write_plan(out_dir: Path, plan: Mapping[str, Any], report: str) -> dict[str, str]:
    """``plan.json`` (for machines) and ``report.txt`` (for people). Returns kind → path."""
    plan_path, report_path = out_dir / "plan.json", out_dir / "report.txt"
    plan_path.write_text(json.dumps(plan, indent=2, default=str) + "\n")
    report_path.write_text(report)
    return {"plan": str(plan_path), "report": str(report_path)}
