"""Issue 7 acceptance: a real Prometheus scrapes a running local cluster (gateway + shard
workers, as `groupcoord up` starts them) after a known workload — one KIP-848 group stable,
one empty, one classic group stable, and a known number of offset commits — and its HTTP API
returns exactly those values."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.background_cluster import BackgroundCluster
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.local_cluster import ClusterOptions

from .prometheus import PrometheusServer, prometheus_binary

pytestmark = [
    pytest.mark.broker,
    pytest.mark.skipif(prometheus_binary() is None, reason="prometheus binary not installed"),
]
COMMIT_ROUNDS, PARTITIONS = 4, 3


def until(check: Callable[[], bool], timeout: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
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


def test_prometheus_reads_group_and_commit_metrics_from_a_running_cluster(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    options = ClusterOptions(
        port=0, partitions=8, threads=2, metrics=True, state_topic=f"__prom_{uuid.uuid4().hex[:6]}"
    )
    with BackgroundCluster((broker.host, broker.port), options) as cluster:
        bootstrap = cluster.bootstrap
        topic = f"prom-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
            fut.result(15)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(30):
            producer.produce(topic, str(i).encode(), partition=i % PARTITIONS)
        producer.flush(15)

        stable = member(bootstrap, f"stable-{uuid.uuid4().hex[:6]}", topic, "consumer")
        classic = member(bootstrap, f"classic-{uuid.uuid4().hex[:6]}", topic, "classic")
        # the group that ends up empty makes the known commits, then its member leaves
        leaving = member(bootstrap, f"empty-{uuid.uuid4().hex[:6]}", topic, "consumer")
        for round_ in range(COMMIT_ROUNDS):
            offsets = [TopicPartition(topic, p, round_ + 1) for p in range(PARTITIONS)]
            assert all(tp.error is None for tp in leaving.commit(offsets=offsets, asynchronous=False))
        leaving.close()
        try:
            with PrometheusServer(cluster.cluster.metrics_targets(), tmp_path) as prom:

                def total(promql: str) -> dict[str, float]:
                    return {
                        next(iter(r["metric"].values()), ""): float(r["value"][1]) for r in prom.query(promql)
                    }

                heartbeat_count = (
                    "sum(groupcoord_request_latency_seconds_count"
                    '{component="gateway",api="consumer_group_heartbeat"})'
                )

                def settled() -> bool:
                    # every target scraped at least once after the workload (scrapes are per target)
                    groups = total("sum by (protocol) (groupcoord_group_count)")
                    states = total('sum by (state) (groupcoord_consumer_group_count{state=~"stable|empty"})')
                    return (
                        groups == {"consumer": 2.0, "classic": 1.0}
                        and states == {"stable": 1.0, "empty": 1.0}
                        and bool(prom.query(heartbeat_count))
                        and bool(prom.query("sum(groupcoord_offset_commit_total) > 0"))
                    )

                until(settled, timeout=60, what="group counts in Prometheus")
                classic_states = total("sum by (state) (groupcoord_classic_group_count)")
                assert classic_states.get("stable") == 1.0
                assert sum(classic_states.values()) == 1.0
                commits = prom.query("sum(groupcoord_offset_commit_total)")
                assert float(commits[0]["value"][1]) == COMMIT_ROUNDS * PARTITIONS
                rebalances = total("sum by (protocol) (groupcoord_rebalance_total)")
                assert rebalances.get("consumer", 0) >= 2 and rebalances.get("classic", 0) >= 1
                assert float(prom.query(heartbeat_count)[0]["value"][1]) > 0
                partitions = total("sum by (state) (groupcoord_partition_count)")
                assert partitions.get("active") == options.partitions
                # one metrics port per shard process, every worker's series behind it
                assert len(cluster.cluster.metrics_targets()) == 1 + options.shards
                up = prom.query("groupcoord_shard_worker_up == 1")
                assert sorted((r["metric"]["shard"], r["metric"]["worker"]) for r in up) == [
                    (str(s), str(w)) for s in range(options.shards) for w in range(options.threads)
                ]
                per_worker = prom.query('sum by (shard, worker) (groupcoord_partition_count{state="active"})')
                assert len(per_worker) == options.shards * options.threads
        finally:
            stable.close()
            classic.close()
