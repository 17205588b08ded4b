"""Issues 7 and 15 acceptance (and one metrics port per shard process): a real Prometheus scrapes a running local cluster (gateway and
shard workers, as `groupcoord up` starts them, on a broker of its own) through a known workload
of real clients — one KIP-848 group stable, one empty after a known number of commits, one
classic group stable — and its HTTP API answers group counts by protocol and state, rebalance
and commit rates, partition loads and consumer lag exactly as the clients left them; then
`groupcoord capacity` plans from the metric samples this cluster's shards wrote."""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.cli import main as groupcoord
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.local_cluster import ClusterOptions
from groupcoord.observability.metric_samples import DEFAULT_TOPIC
from groupcoord_testing import BackgroundCluster

from .prometheus import PrometheusServer

pytestmark = [
    pytest.mark.broker,
    pytest.mark.slow,
    pytest.mark.usefixtures("prometheus_installed"),
]
COMMIT_ROUNDS, PARTITIONS, RECORDS = 4, 3, 10  # RECORDS per partition


def until(check: Callable[[], bool], timeout: float = 60, what: str | Callable[[], str] = "condition") -> None:
    """Waits for ``check``; ``what`` (or what it returns, read when the wait fails) says what
    was awaited and what was last seen."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what() if callable(what) else what}"
        time.sleep(0.3)


def member(bootstrap: str, group: str, topic: str, protocol: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    until(
        lambda: bool(consumer.poll(0.2) or True) and len(consumer.assignment()) == PARTITIONS,
        what="assignment",
    )
    return consumer


def describe_state(bootstrap: str, group: str) -> str:
    """The group's state and members as Kafka's admin client describes it (for failure messages)."""
    try:
        described = AdminClient({"bootstrap.servers": bootstrap}).describe_consumer_groups([group])[group].result(10)
    except Exception as e:  # a failure message must not hide the failure it explains
        return repr(e)
    return f"{described.state} with {len(described.members)} member(s)"


class Polling(threading.Thread):
    """A running application: polls its consumer (so rebalances complete) until stopped, then
    closes it."""

    def __init__(self, consumer: Consumer) -> None:
        super().__init__(daemon=True)
        self.consumer = consumer
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.consumer.poll(0.2)
        self.consumer.close()

    def stop(self) -> None:
        self.done.set()
        self.join(30)


def test_prometheus_and_capacity_read_what_a_running_cluster_did(
    fresh_broker: EmbeddedBroker, spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    options = ClusterOptions(
        port=0, partitions=8, threads=2, metric_samples_interval_s=1.0, lag_interval_s=1.0
    )
    with (
        BackgroundCluster((fresh_broker.host, fresh_broker.port), options) as cluster,
        PrometheusServer(
            cluster.cluster.metrics_targets(),
            tmp_path,  # from the start: partition loads are in the window
        ) as prom,
    ):
        def by(promql: str) -> dict[str, float]:
            return {next(iter(r["metric"].values()), ""): float(r["value"][1]) for r in prom.query(promql)}

        def scalar(promql: str) -> float | None:
            result = prom.query(promql)
            return float(result[0]["value"][1]) if result else None

        # rate() counts only what rises between two samples: a rebalance that happens before a
        # shard's first scrape is in its counter's first sample and in no rate. Joins are
        # answered at once (a new topic is fetched on demand), so the workload starts only
        # once every target has been scraped.
        targets = len(cluster.cluster.metrics_targets())
        until(
            lambda: scalar("count(up == 1)") == targets,
            timeout=30,
            what=lambda: f"a first scrape of all {targets} targets: {prom.query('up')}",
        )
        bootstrap = cluster.bootstrap
        topic = f"prom-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
            fut.result(15)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(RECORDS * PARTITIONS):
            producer.produce(topic, str(i).encode(), partition=i % PARTITIONS)
        producer.flush(15)

        stable_group, classic_group = f"stable-{uuid.uuid4().hex[:6]}", f"classic-{uuid.uuid4().hex[:6]}"
        empty_group = f"empty-{uuid.uuid4().hex[:6]}"
        stable = Polling(member(bootstrap, stable_group, topic, "consumer"))
        classic = Polling(member(bootstrap, classic_group, topic, "classic"))
        stable.start()
        classic.start()
        # the group that ends up empty makes the known commits, then its member leaves
        leaving = member(bootstrap, empty_group, topic, "consumer")
        for round_ in range(COMMIT_ROUNDS):
            offsets = [TopicPartition(topic, p, round_ + 1) for p in range(PARTITIONS)]
            assert all(tp.error is None for tp in leaving.commit(offsets=offsets, asynchronous=False))
        leaving.close()
        expected_lag = (RECORDS - COMMIT_ROUNDS) * PARTITIONS
        try:

            heartbeats_by_shard = (
                "sum by (shard) (groupcoord_request_latency_seconds_count"
                '{component="gateway",api="consumer_group_heartbeat"})'
            )

            def figures() -> dict[str, Any]:
                return {
                    "groups": by("sum by (protocol) (groupcoord_group_count)"),
                    "consumer": by('sum by (state) (groupcoord_consumer_group_count{state=~"stable|empty"})'),
                    "classic": {
                        s: v for s, v in by("sum by (state) (groupcoord_classic_group_count)").items() if v
                    },
                    "commits": scalar("sum(groupcoord_offset_commit_total)"),
                    "lag": by(f'sum by (group) (groupcoord_consumer_group_lag{{topic="{topic}"}})'),
                    "heartbeats": bool(prom.query(heartbeats_by_shard)),
                }

            wanted = {
                "groups": {"consumer": 2.0, "classic": 1.0, "share": 0.0, "streams": 0.0},
                "consumer": {"stable": 1.0, "empty": 1.0},
                # two CI runs caught the classic group in PreparingRebalance at one scrape, cause not
                # found (the failure message below says more): it must be Stable, and only there
                "classic": {"stable": 1.0},
                "commits": COMMIT_ROUNDS * PARTITIONS,
                "lag": {empty_group: float(expected_lag)},
                "heartbeats": True,
            }
            seen: list[dict[str, Any]] = []

            def settled() -> bool:
                # every target scraped at least once after the workload (scrapes are per target)
                seen.append(figures())
                return seen[-1] == wanted

            until(
                settled,
                timeout=90,
                what=lambda: f"the workload's figures in Prometheus: wanted {wanted}, last seen {seen[-1]}, "
                f"the classic group as described: {describe_state(bootstrap, classic_group)}, "
                f"rebalances: {by('sum by (protocol) (groupcoord_rebalance_total)')}",
            )
            # rates, as dashboards and the alert rules read them
            rebalances = by("sum by (protocol) (groupcoord_rebalance_total)")
            assert rebalances.get("consumer", 0) >= 2 and rebalances.get("classic", 0) >= 1
            assert (scalar("sum by (protocol) (rate(groupcoord_rebalance_total[1m]))") or 0) > 0
            assert (scalar("sum(rate(groupcoord_offset_commit_total[1m]))") or 0) > 0
            # partition loads: every partition once, load time in the window
            assert by("sum by (state) (groupcoord_partition_count)").get("active") == options.partitions
            assert scalar("sum(groupcoord_partition_loads_total)") == options.partitions
            load_max = scalar("max(max_over_time(groupcoord_partition_load_time_seconds_max[5m]))")
            assert load_max is not None and load_max > 0
            assert scalar("max(groupcoord_gateway_partitions_without_leader)") == 0
            # one metrics port per shard process, every worker's series behind it
            assert len(cluster.cluster.metrics_targets()) == 1 + options.shards
            up = prom.query("groupcoord_shard_worker_up == 1")
            assert sorted((r["metric"]["shard"], r["metric"]["worker"]) for r in up) == [
                (str(s), str(w)) for s in range(options.shards) for w in range(options.threads)
            ]
            per_worker = prom.query('sum by (shard, worker) (groupcoord_partition_count{state="active"})')
            assert len(per_worker) == options.shards * options.threads
            # the gateway says which shard served each group request
            assert set(by(heartbeats_by_shard)) <= {"0", "1"}
            # the partition view of the lag, and `groupcoord groups describe`, say the same
            per_partition = by(
                f'sum by (partition) (groupcoord_consumer_group_partition_lag{{group="{empty_group}"}})'
            )
            assert per_partition == {str(p): float(RECORDS - COMMIT_ROUNDS) for p in range(PARTITIONS)}
            assert groupcoord(["groups", "describe", empty_group, "--bootstrap", bootstrap]) == 0
            described = capsys.readouterr().out
            lags = [line.split()[5] for line in described.splitlines() if line.startswith(empty_group)]
            assert lags == [str(RECORDS - COMMIT_ROUNDS)] * PARTITIONS
        finally:
            stable.stop()
            classic.stop()

        # `groupcoord capacity` over what this cluster's shards published (a few more samples)
        time.sleep(3)
        out = tmp_path / "capacity"
        parser = argparse.ArgumentParser()
        from groupcoord_spark.capacity.command import add_arguments, check_inputs, run_from_args

        add_arguments(parser)
        args = parser.parse_args(["--bootstrap", fresh_broker.bootstrap, "--out", str(out), "--top", "5"])
        check_inputs(args)
        result = run_from_args(args, spark)
    plan = result.plan
    assert args.topic == DEFAULT_TOPIC
    assert {s["shard"] for s in plan["shards"]} == {"0", "1"}
    assert plan["history"]["samples"] > 0 and plan["history"]["partitions"] == options.partitions
    hot = {g["group"] for g in plan["hottest_groups"]}
    assert {stable_group, classic_group} & hot, plan["hottest_groups"]
    report = capsys.readouterr().out
    assert "groupcoord capacity plan" in report and "kubectl patch groupcoordinator" in report
    assert "from shard(s) 0, 1" in report
    png = out / "capacity.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
