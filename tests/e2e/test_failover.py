"""Issue 5 acceptance: kill -9 the shard leading a busy group's state partition while its
consumers consume and commit. The partition moves, the consumers carry on, and every commit
that was acknowledged is still there afterwards (history check); no partition is ever owned
by two members."""

from __future__ import annotations

import time
import uuid

import pytest

from groupcoord.embedded_broker import EmbeddedBroker

from .consumers import ConfluentConsumer, assert_acknowledged_commits_kept
from .failover import busy_group, failover_cluster
from .test_consumer_groups import assert_no_double_ownership, wait_until

pytestmark = pytest.mark.broker


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_killing_the_leading_shard_loses_no_acknowledged_commit(
    broker: EmbeddedBroker, tmp_path, protocol: str
) -> None:
    with failover_cluster(broker, tmp_path, "fo") as fo:
        bootstrap = fo.bootstrap
        topic, group = f"fo-{uuid.uuid4().hex[:6]}", f"fo-g-{uuid.uuid4().hex[:6]}"
        fo.create_topics(topic)
        consumers = [
            ConfluentConsumer(bootstrap, topic, group, f"c{i}", **{"group.protocol": protocol})
            for i in range(2)
        ]
        control = fo.control
        state_partition = fo.state_partition(group)
        with busy_group(bootstrap, topic, consumers):
            wait_until(lambda: all(c.history.commits for c in consumers), what="both consumers committing")
            # when the shard leading the group's state partition is killed with SIGKILL
            before = fo.kill_leader(state_partition)
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
        # every acknowledged commit is still visible (offsets only move forward here, so the
        # latest acknowledged value per partition is what OffsetFetch must return)
        assert_acknowledged_commits_kept(bootstrap, topic, group, consumers)
        assert_no_double_ownership(consumers)
