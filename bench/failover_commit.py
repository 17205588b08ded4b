"""failover-commit: how long a commit waits when the shard leading its group is killed.

Starts the embedded broker and ``groupcoord up`` (2 shards, as a user starts it). A committer
thread (confluent-kafka, the group's only client, committing synchronously back to back)
records when each commit was sent and acknowledged. Baseline: commit latency with no kill.
Failover: ``--kills`` times, kill -9 the shard process leading the group's state partition
(found in the cluster's state file, as ``groupcoord status`` reads it) and measure, from the
kill, until the first commit sent after the kill is acknowledged — the latency an application
sees for a commit issued during a failover (the gateway holds it until the new leader has
loaded). Prints p50/p99 of both, their ratio, and the errors the application saw (goal: none).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import threading
import time
import uuid

NAME = "failover-commit"
DESCRIPTION = "commit latency from a leader kill -9 to the ack (p50/p99) against no kill"


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


class Committer(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Consumer  # noqa: PLC0415

        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        self.topic = topic
        self.done: list[tuple[float, float]] = []  # (sent, acknowledged), monotonic seconds
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        from confluent_kafka import KafkaException, TopicPartition  # noqa: PLC0415

        offset = 0
        while not self.stop.is_set():
            offset += 1
            sent = time.monotonic()
            try:
                (tp,) = self.consumer.commit(
                    offsets=[TopicPartition(self.topic, 0, offset)], asynchronous=False
                )
            except KafkaException as exc:
                self.errors.append(str(exc))
                continue
            if tp.error is not None:
                self.errors.append(str(tp.error))
                continue
            self.done.append((sent, time.monotonic()))
        self.consumer.close()


def _leader_pid(state_path: str, partition: int) -> int | None:
    with open(state_path) as f:
        state = json.load(f)
    leader = state["placement"].get(str(partition), {}).get("leader")
    shard = state["shards"].get(str(leader)) if leader is not None else None
    return shard["pid"] if shard and shard["alive"] else None


def run(args: list[str]) -> dict[str, object]:
    from _up_process import UpProcess  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    from groupcoord.common.partitioning import partition_for  # noqa: PLC0415
    from groupcoord.embedded_broker import EmbeddedBroker, free_port  # noqa: PLC0415
    from groupcoord.local_cluster import state_file  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog=NAME)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--baseline-seconds", type=float, default=10.0)
    parser.add_argument("--settle-seconds", type=float, default=6.0, help="between kills")
    parser.add_argument("--partitions", type=int, default=50)
    opts = parser.parse_args(args)
    load_before = os.getloadavg()
    port = free_port()
    with EmbeddedBroker() as broker, UpProcess(broker.bootstrap, port, 2, 1, opts.partitions) as up:
        topic, group = f"fc-{uuid.uuid4().hex[:6]}", f"fc-g-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": up.bootstrap})
        for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            fut.result(15)
        committer = Committer(up.bootstrap, topic, group)
        committer.start()
        time.sleep(2)  # warm up: coordinator found, connections open
        start = time.monotonic()
        time.sleep(opts.baseline_seconds)
        baseline = [ack - sent for sent, ack in committer.done if sent >= start]
        partition = partition_for(group, opts.partitions)
        to_ack: list[float] = []
        for _ in range(opts.kills):
            pid = None
            while pid is None:  # both shards up again (the killed one restarts)
                pid = _leader_pid(str(state_file(port)), partition)
                time.sleep(0.1)
            killed_at = time.monotonic()
            os.killpg(pid, signal.SIGKILL)
            time.sleep(opts.settle_seconds)
            acks = [ack for sent, ack in committer.done if sent >= killed_at]
            if acks:
                to_ack.append(min(acks) - killed_at)
        committer.stop.set()
        committer.join(30)
    base_p50, base_p99 = _pct(baseline, 0.5), _pct(baseline, 0.99)
    fo_p50, fo_p99 = _pct(to_ack, 0.5), _pct(to_ack, 0.99)
    return {
        "baseline_commits": len(baseline),
        "baseline_commits_per_s": round(len(baseline) / opts.baseline_seconds, 1),
        "baseline_p50_ms": round(base_p50 * 1000, 2),
        "baseline_p99_ms": round(base_p99 * 1000, 2),
        "kills": opts.kills,
        "failovers_measured": len(to_ack),
        "kill_to_ack_p50_ms": round(fo_p50 * 1000, 1),
        "kill_to_ack_p99_ms": round(fo_p99 * 1000, 1),
        "kill_to_ack_max_ms": round(max(to_ack) * 1000, 1) if to_ack else None,
        "kill_to_ack_mean_ms": round(statistics.fmean(to_ack) * 1000, 1) if to_ack else None,
        "ratio_p50_failover_vs_baseline": round(fo_p50 / base_p50, 1) if base_p50 else None,
        "application_errors": committer.errors,
        "load_average_before_after": [
            [round(x, 2) for x in load_before],
            [round(x, 2) for x in os.getloadavg()],
        ],
    }
