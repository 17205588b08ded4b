"""Issue 12: a threadsPerShard change reaches the gateway without a restart.

A local cluster (2 shards x 1 worker, as `groupcoord up` starts it) serves real consumers that
consume and commit; the control plane rolls both shards to 2 workers, one at a time, the way
the operator rolls pods (partitions moved away first, then the shard restarts with the new
worker count and takes its share back). The gateway routes on the layout the shards report:
the group's state partition ends up on worker 1 of its shard, which only a gateway that
followed the change can reach. The consumers see no error at all (the gateway holds the
retriable ones), keep committing, and every acknowledged commit is still there.
"""

from __future__ import annotations

import time
import uuid

import pytest

from groupcoord.common.partitioning import partition_for, worker_for
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.rpc.v1 import shard_control_pb2 as sc

from .consumers import ConfluentConsumer, assert_acknowledged_commits_kept
from .failover import busy_group, failover_cluster
from .test_consumer_groups import assert_no_double_ownership, wait_until

pytestmark = [pytest.mark.broker, pytest.mark.slow]
STATE_PARTITIONS, NEW_THREADS = 4, 2


def odd_partition_group() -> str:
    """A group whose state partition is odd: worker 1's once shards run two workers."""
    while True:
        group = f"tc-g-{uuid.uuid4().hex[:6]}"
        if partition_for(group, STATE_PARTITIONS) % 2 == 1:
            return group


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_rolling_shards_to_more_workers_keeps_clients_committing(
    broker: EmbeddedBroker, tmp_path, protocol: str
) -> None:
    with failover_cluster(broker, tmp_path, "tc", partitions=STATE_PARTITIONS, threads=1) as fo:
        cluster, bootstrap = fo.cluster, fo.bootstrap
        topic, group = f"tc-{uuid.uuid4().hex[:6]}", odd_partition_group()
        state_partition = fo.state_partition(group)
        fo.create_topics(topic)
        consumers = [
            ConfluentConsumer(bootstrap, topic, group, f"c{i}", **{"group.protocol": protocol})
            for i in range(2)
        ]
        control = fo.control
        table = cluster.cluster.gateway.group_handler.leadership
        with busy_group(bootstrap, topic, consumers):
            wait_until(lambda: all(c.history.commits for c in consumers), what="both consumers committing")
            assert {s: e.workers for s, e in table.shards.items()} == {0: 1, 1: 1}

            for shard in (0, 1):  # the operator's rolling replacement, one shard at a time
                cluster.run(control.set_threads(shard, NEW_THREADS), timeout=90)
                rolled = time.monotonic()
                wait_until(
                    lambda rolled=rolled: all(
                        any(t > rolled for t, _ in c.history.commits) for c in consumers
                    ),
                    timeout=60,
                    what=f"commits after shard {shard} restarted with {NEW_THREADS} workers",
                )

            # The gateway routes on the live layout: both shards, two workers each ...
            assert {s: e.workers for s, e in table.shards.items()} == {0: NEW_THREADS, 1: NEW_THREADS}
            leader = control.placement[state_partition].leader
            assert table.address_of(state_partition) == (
                control.processes[leader].host,
                control.processes[leader].grpc_port + worker_for(state_partition, NEW_THREADS),
            )
            # ... and the group's partition is served by worker 1 of its shard
            statuses = cluster.run(control.status())
            served = [
                (st.shard_id, p.worker)
                for st in statuses
                for p in st.partitions
                if p.partition == state_partition and p.state == sc.PARTITION_STATE_ACTIVE
            ]
            assert served == [(str(leader), 1)]
            after_roll = time.monotonic()
            wait_until(
                lambda: all(any(t > after_roll + 1 for t, _ in c.history.commits) for c in consumers),
                timeout=60,
                what="commits through worker 1",
            )
        assert [e for c in consumers for e in c.history.errors] == []
        assert_acknowledged_commits_kept(bootstrap, topic, group, consumers)
        assert_no_double_ownership(consumers)
