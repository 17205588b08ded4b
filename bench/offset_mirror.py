"""offset-mirror: what adoption and the way back cost (issue 40).

Two figures, each against its baseline in the same run, `groupcoord up` in front of the
embedded broker (or --upstream kafka-4.4):

* **commits**: W workers, each a group of its own committing synchronously (librdkafka
  ``commit(asynchronous=False)``, P partitions a commit) for D seconds, through a gateway
  without the mirror and through one with ``--mirror-offsets-to-upstream``: commits/s and
  p50/p99 per commit, and how many of the last commits the upstream's own coordinator shows at
  the end (the mirror's interval later).
* **first touch**: the OffsetFetch that adopts a group from the upstream's coordinator (its
  offsets committed on the brokers) against the same fetch of a group already ours: p50/p99.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from typing import Any

NAME = "offset-mirror"
DESCRIPTION = "sync commits/s and p99 with --mirror-offsets-to-upstream off vs on; first-touch adoption vs a group already ours"


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _commit_load(bootstrap: str, topic: str, opts: argparse.Namespace) -> dict[str, Any]:
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    latencies: list[float] = []
    lock = threading.Lock()
    groups = [f"mirror-bench-{uuid.uuid4().hex[:6]}-{w}" for w in range(opts.workers)]
    last: dict[str, int] = {}

    def worker(group: str) -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        mine: list[float] = []
        offset = 0
        deadline = time.monotonic() + opts.duration
        try:
            while time.monotonic() < deadline:
                offset += 1
                started = time.perf_counter()
                consumer.commit(
                    offsets=[TopicPartition(topic, p, offset) for p in range(opts.partitions)], asynchronous=False
                )
                mine.append(time.perf_counter() - started)
        finally:
            consumer.close()
        with lock:
            latencies.extend(mine[len(mine) // 10 :])  # the first tenth warms up
            last[group] = offset

    threads = [threading.Thread(target=worker, args=(g,)) for g in groups]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    measured_s = opts.duration * 0.9
    return {
        "commits_per_s": round(len(latencies) / measured_s, 1),
        "p50_ms": round(_quantile(latencies, 0.5) * 1000, 3),
        "p99_ms": round(_quantile(latencies, 0.99) * 1000, 3),
        "groups": groups,
        "last_offsets": last,
    }


def _upstream_shows(bootstrap: str, topic: str, last: dict[str, int], partitions: int) -> int:
    """How many of the workers' groups the upstream's coordinator shows at their last offset."""
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    shown = 0
    for group, offset in last.items():
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            seen = reader.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
        finally:
            reader.close()
        shown += all(tp.offset == offset for tp in seen)
    return shown


def _first_touch(bootstrap: str, upstream: str, topic: str, opts: argparse.Namespace) -> dict[str, Any]:
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    adopting: list[float] = []
    ours: list[float] = []
    partitions = [TopicPartition(topic, p) for p in range(opts.partitions)]
    for i in range(opts.touches):
        group = f"touch-{uuid.uuid4().hex[:6]}-{i}"
        owner = Consumer({"bootstrap.servers": upstream, "group.id": group, "enable.auto.commit": False})
        owner.commit(offsets=[TopicPartition(topic, p, 5) for p in range(opts.partitions)], asynchronous=False)
        owner.close()
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            reader.list_topics(topic, timeout=20)  # connected: not measured (FindCoordinator is)
            for sample in (adopting, ours):
                started = time.perf_counter()
                seen = reader.committed(partitions, timeout=20)
                sample.append(time.perf_counter() - started)
                assert all(tp.offset == 5 for tp in seen), seen
        finally:
            reader.close()
    return {
        "adopting_p50_ms": round(statistics.median(adopting) * 1000, 3),
        "adopting_p99_ms": round(_quantile(adopting, 0.99) * 1000, 3),
        "ours_p50_ms": round(statistics.median(ours) * 1000, 3),
        "ours_p99_ms": round(_quantile(ours, 0.99) * 1000, 3),
    }


def run(args: list[str]) -> dict[str, object]:
    from _up_process import UpProcess  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    from groupcoord.embedded_broker import EmbeddedBroker, free_port  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog=NAME)
    parser.add_argument("--workers", type=int, default=4, help="groups committing at once")
    parser.add_argument("--partitions", type=int, default=4, help="partitions per commit")
    parser.add_argument("--duration", type=float, default=15.0, help="seconds of commits per mode")
    parser.add_argument("--interval-ms", type=int, default=1000, help="--mirror-offsets-interval-ms")
    parser.add_argument("--touches", type=int, default=30, help="groups adopted for the first-touch figure")
    parser.add_argument(
        "--commits-only",
        action="store_true",
        help="the commit load without the mirror only (A/B against a build that has neither mirror nor adoption)",
    )
    opts = parser.parse_args(args)
    out: dict[str, Any] = {"workers": opts.workers, "partitions_per_commit": opts.partitions}
    with EmbeddedBroker() as broker:
        topic = f"mirror-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for fut in admin.create_topics([NewTopic(topic, opts.partitions, 1)]).values():
            fut.result(15)
        modes = [("mirror_off", [])]
        if not opts.commits_only:
            modes.append(
                ("mirror_on", ["--mirror-offsets-to-upstream", "--mirror-offsets-interval-ms", str(opts.interval_ms)])
            )
        for mode, extra in modes:
            with UpProcess(broker.bootstrap, free_port(), extra=extra) as up:
                result = _commit_load(up.bootstrap, topic, opts)
                if mode == "mirror_off" and not opts.commits_only:
                    out["first_touch"] = _first_touch(up.bootstrap, broker.bootstrap, topic, opts)
                time.sleep(2 * opts.interval_ms / 1000)
                last = result.pop("last_offsets")
                result.pop("groups")
                result["groups_upstream_shows_at_last_offset"] = _upstream_shows(
                    broker.bootstrap, topic, last, opts.partitions
                )
                out[mode] = result
    if opts.commits_only:
        return out
    off, on = out["mirror_off"], out["mirror_on"]
    out["ratios"] = {
        "commits_per_s_on_vs_off": round(on["commits_per_s"] / off["commits_per_s"], 3),
        "p99_on_vs_off": round(on["p99_ms"] / off["p99_ms"], 3) if off["p99_ms"] else None,
        "first_touch_p50_adopting_vs_ours": round(
            out["first_touch"]["adopting_p50_ms"] / out["first_touch"]["ours_p50_ms"], 2
        ),
    }
    return out
