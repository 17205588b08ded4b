"""The plan as text for a person (``report.txt``, and what the command prints)."""

from __future__ import annotations

from typing import Any


def report_text(plan: dict[str, Any]) -> str:
    rec = plan["recommendation"]
    lines = [
        "groupcoord capacity plan",
        f"history: {plan['history']['samples']} samples, {plan['history']['hours']:.2f} h, "
        f"{len(plan['shards'])} shards, {plan['history']['partitions']} partitions",
        f"cluster busy cores: p95 {rec['cluster_busy_cores_p95']:.3f}, "
        f"projected ×{rec['growth_factor']:.2f} growth → {rec['projected_busy_cores']:.3f}",
        f"recommended: {rec['threads']} threads = {rec['shards']} shards × {rec['threads_per_shard']} threads "
        f"(target utilisation {plan['params']['target_utilisation']:.0%})",
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
