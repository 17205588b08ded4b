"""The plan's picture: each shard's load and headroom over time (``capacity.png``)."""

from __future__ import annotations

from pathlib import Path


def projection_factor(plan: dict) -> float:
    """How a shard's utilisation scales under the recommendation: the load grows by the
    planned growth and spreads over the recommended threads instead of today's."""
    rec = plan["recommendation"]
    current_threads = sum(int(s["threads"]) for s in plan["shards"]) or 1
    return float(rec["growth_factor"]) * current_threads / max(1, int(rec["threads"]))


def plot_utilisation(
    shard_points: dict[str, list[tuple[float, float]]],
    target: float,
    path: Path,
    projection: tuple[float, str] | None = None,
) -> None:
    """Load (utilisation of the shard's threads) and headroom over time, one panel per shard,
    against the target line; ``projection`` — (factor, label) — adds the same load as it would
    be under the recommended sizing after the planned growth (see :func:`projection_factor`)."""
    import matplotlib  # noqa: PLC0415 - only the job needs it

    matplotlib.use("Agg")
    import datetime as dt  # noqa: PLC0415

    import matplotlib.pyplot as plt  # noqa: PLC0415

    shards = sorted(shard_points, key=lambda s: (len(s), s))
    fig, axes = plt.subplots(
        len(shards), 1, figsize=(10, 2.4 * len(shards) + 0.8), sharex=True, squeeze=False
    )
    for ax, shard in zip(axes[:, 0], shards, strict=True):
        pts = shard_points[shard]
        xs = [dt.datetime.fromtimestamp(t, tz=dt.UTC) for t, _ in pts]
        ys = [u for _, u in pts]
        ax.plot(xs, ys, color="tab:blue", linewidth=1, label="load (utilisation)")
        ax.fill_between(xs, ys, [1.0] * len(ys), color="tab:green", alpha=0.15, label="headroom")
        ax.axhline(target, color="tab:red", linestyle="--", linewidth=1, label=f"target {target:.0%}")
        top = max(ys, default=0)
        if projection is not None:
            factor, label = projection
            projected = [u * factor for u in ys]
            ax.plot(xs, projected, color="tab:purple", linestyle=":", linewidth=1.5, label=label)
            top = max(top, max(projected, default=0))
        ax.set_ylim(0, max(1.0, top * 1.1))
        ax.set_ylabel(f"shard {shard}")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize="small")
    axes[0, 0].set_title("Event-loop load and headroom per shard")
    axes[-1, 0].set_xlabel("time (UTC)")
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
