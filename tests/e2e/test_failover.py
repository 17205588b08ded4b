"""Issue 5 acceptance: kill -9 the shard leading a busy group's state partition while its
consumers consume and commit. The partition moves, the consumers carry on, and every commit
that was acknowledged is still there afterwards (history check); no partition is ever owned
by two members."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.common.partitioning import partition_for
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.local_cluster import ClusterOptions
from groupcoord.testing import BackgroundCluster

from .consumers import ConfluentConsumer, assert_acknowledged_commits_kept
from .test_consumer_groups import assert_no_double_ownership, wait_until

pytestmark = pytest.mark.broker
PARTITIONS = 6


class KeepProducing(threading.Thread):
    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic = topic
        self.stop = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            self.producer.produce(self.topic, str(i).encode(), partition=i % PARTITIONS)
            self.producer.poll(0)
            i += 1
            if i % 50 == 0:
                time.sleep(0.02)
        self.producer.flush(30)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_killing_the_leading_shard_loses_no_acknowledged_commit(
    broker: EmbeddedBroker, tmp_path, protocol: str
) -> None:
    options = ClusterOptions(
        port=0,
        partitions=4,
        shards=2,
        metrics=False,
        state_topic=f"__fo_{uuid.uuid4().hex[:6]}",
        log_dir=tmp_path,
    )
    with BackgroundCluster((broker.host, broker.port), options) as cluster:
        bootstrap = cluster.bootstrap
        topic, group = f"fo-{uuid.uuid4().hex[:6]}", f"fo-g-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
            fut.result(15)
        producer = KeepProducing(bootstrap, topic)
        producer.start()
        consumers = [
            ConfluentConsumer(bootstrap, topic, group, f"c{i}", **{"group.protocol": protocol})
            for i in range(2)
        ]
        for c in consumers:
            c.start()
        control = cluster.cluster.control
        state_partition = partition_for(group, options.partitions)
        try:
            wait_until(lambda: all(c.history.commits for c in consumers), what="both consumers committing")
            # when the shard leading the group's state partition is killed with SIGKILL
            before = control.placement[state_partition]
            victim = control.processes[before.leader]
            os.killpg(victim.process.pid, signal.SIGKILL)
            # then the partition moves to the other shard with a new epoch
            wait_until(lambda: control.placement[state_partition].leader != before.leader, what="failover")
            assert control.placement[state_partition].epoch > before.epoch
            # and the consumers carry on committing after the failover
            after_failover = time.monotonic()
            wait_until(
                lambda: all(any(t > after_failover + 1 for t, _ in c.history.commits) for c in consumers),
                timeout=90,
                what="commits after failover",
            )
        finally:
            producer.stop.set()
            producer.join(30)
            for c in consumers:
                c.stop()
        # every acknowledged commit is still visible (offsets only move forward here, so the
        # latest acknowledged value per partition is what OffsetFetch must return)
        assert_acknowledged_commits_kept(bootstrap, topic, group, consumers)
        assert_no_double_ownership(consumers)
