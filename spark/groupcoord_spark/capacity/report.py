"""The plan as text for a person (``report.txt``, and what the command prints)."""

from __future__ import annotations

import datetime
import math
from typing import Any


def _utc(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def state_partitions(plan: dict[str, Any]) -> int:
    """State-topic partitions to run: as now, or enough that the hottest partition's projected
    load fits the target (a partition's groups run on one thread: only more partitions split
    them)."""
    current = int(plan["history"]["partitions"])
    target = float(plan["params"]["target_utilisation"])
    over = [float(p["projected_busy_ratio"]) for p in plan["recommendation"]["partitions_over_target"]]
    return current if not over else current * math.ceil(max(over) / target)


def report_text(plan: dict[str, Any]) -> str:
    rec = plan["recommendation"]
    history = plan["history"]
    target = plan["params"]["target_utilisation"]
    partitions = state_partitions(plan)
    shards, per_shard = rec["shards"], rec["threads_per_shard"]
    lines = [
        "groupcoord capacity plan",
        f"history: {history['samples']} samples from shard(s) "
        f"{', '.join(str(s['shard']) for s in plan['shards'])}, {history['hours']:.2f} h "
        f"({_utc(history['start'])} to {_utc(history['end'])}), {history['partitions']} partitions",
        f"cluster busy cores: p95 {rec['cluster_busy_cores_p95']:.3f}, "
        f"projected ×{rec['growth_factor']:.2f} growth → {rec['projected_busy_cores']:.3f}",
        f"recommended: {rec['threads']} threads = {shards} shards × {per_shard} threads "
        f"(target utilisation {target:.0%})",
        f"  because: {rec['projected_busy_cores']:.3f} busy cores / {target:.0%} target = "
        f"{rec['required_threads_exact']:.3f} threads, rounded up to {rec['threads']} "
        f"({per_shard} per shard → {shards} shards)",
        f"  state-topic partitions: {partitions}"
        + (" (as now)" if partitions == history["partitions"] else " (the hottest partition is over target)"),
        "apply with:",
        f"  kubectl patch groupcoordinator NAME --type merge "
        f"-p '{{\"spec\":{{\"shards\":{shards},\"threadsPerShard\":{per_shard}}}}}'",
        f"  helm upgrade RELEASE groupcoord --reuse-values --set coordinator.shards={shards} "
        f"--set coordinator.threadsPerShard={per_shard}"
        + (f" --set coordinator.stateTopic.partitions={partitions}" if partitions != history["partitions"] else ""),
    ]
    trend = plan["observed_growth_per_day"]
    if trend is not None:
        lines.append(f"observed load trend: {trend:+.1%} per day")
    lines.append("shards (utilisation p95 / headroom):")
    for s in plan["shards"]:
        lines.append(
            f"  shard {s['shard']}: {s['utilisation_p95']:.1%} / {s['headroom']:.1%} "
            f"({s['threads']} threads, {s['request_rate']:.1f} req/s)"
        )
    lines.append("hottest partitions (req/s, busy p95):")
    for p in plan["hottest_partitions"][:5]:
        lines.append(
            f"  partition {p['partition']} (shard {p['shard']}): {p['request_rate']:.1f}, {p['busy_ratio_p95']:.1%}"
        )
    if plan["hottest_groups"]:
        lines.append("hottest groups (req/s):")
        for g in plan["hottest_groups"][:5]:
            lines.append(f"  {g['group']}: {g['request_rate']:.2f}")
    for p in rec["partitions_over_target"]:
        lines.append(
            f"WARNING: partition {p['partition']} alone would run at {p['projected_busy_ratio']:.0%} of a thread; "
            "more threads cannot help — add state-topic partitions to spread its groups"
        )
    return "\n".join(lines) + "\n"
