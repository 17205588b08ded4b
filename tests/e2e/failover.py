"""The set-up every failover scenario shares: a local cluster of its own (two shard processes,
four state partitions, its own state topic, metrics off) in front of the session broker, a
topic kept busy by a producer while a group's consumers consume and commit, and the SIGKILL of
the shard process leading the group's state partition.

The scenarios differ in what they do to the cluster and what they check afterwards; the
cluster, the traffic and the kill are the same, so they live here once.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.common.partitioning import partition_for
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.local_cluster import ClusterOptions
from groupcoord_testing import BackgroundCluster

from .consumers import ConsumerThread
from .test_consumer_groups import wait_until

PARTITIONS = 6  # of the consumed topic


class KeepProducing(threading.Thread):
    """Produces to every partition of ``topic`` until stopped, so consumers always have records
    to consume and offsets to commit."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic = topic
        self.stop = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(self.topic, str(i).encode(), partition=i % PARTITIONS)
            except BufferError:  # a full queue while the upstream elects leaders: wait, as applications do
                self.producer.poll(0.1)
                continue
            self.producer.poll(0)
            i += 1
            if i % 50 == 0:
                time.sleep(0.02)
        self.producer.flush(30)


@dataclass
class FailoverCluster:
    """A running local cluster and the handles a failover scenario needs."""

    cluster: BackgroundCluster
    options: ClusterOptions

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    @property
    def control(self) -> Any:
        """The in-process control plane: placement, shard processes, scaling."""
        control = self.cluster.cluster.control
        assert control is not None
        return control

    def state_partition(self, group: str) -> int:
        return partition_for(group, self.options.partitions)

    def create_topics(self, *topics: str, partitions: int = PARTITIONS) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for fut in admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).values():
            fut.result(15)

    def kill_leader(self, state_partition: int) -> Any:
        """SIGKILL the shard process leading ``state_partition`` once every shard process is up
        (a kill while the other is still restarting would leave the partition nowhere to go);
        returns the placement it had."""
        control = self.control
        wait_until(lambda: all(p.alive for p in control.processes.values()), what="both shards up")
        before = control.placement[state_partition]
        os.killpg(control.processes[before.leader].process.pid, signal.SIGKILL)
        return before


@contextmanager
def failover_cluster(
    broker: EmbeddedBroker, tmp_path: Path, name: str, **options: Any
) -> Iterator[FailoverCluster]:
    """A cluster of two shard processes over four state partitions (``options`` override any
    :class:`ClusterOptions` field); its state topic is ``__<name>_<random>``."""
    settings: dict[str, Any] = {"partitions": 4, "shards": 2, "metrics": False, **options}
    cluster_options = ClusterOptions(
        port=0, state_topic=f"__{name}_{uuid.uuid4().hex[:6]}", log_dir=tmp_path, **settings
    )
    with BackgroundCluster((broker.host, broker.port), cluster_options) as cluster:
        yield FailoverCluster(cluster, cluster_options)


@contextmanager
def busy_group(bootstrap: str, topic: str, consumers: Sequence[ConsumerThread]) -> Iterator[None]:
    """A producer keeps ``topic`` busy and the ``consumers`` consume and commit it for the
    duration; all are stopped at the end, whatever happened."""
    producer = KeepProducing(bootstrap, topic)
    producer.start()
    for c in consumers:
        c.start()
    try:
        yield
    finally:
        producer.stop.set()
        producer.join(30)
        for c in consumers:
            c.stop()
