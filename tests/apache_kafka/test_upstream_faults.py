"""Issue 22, upstream faults on real Kafka: three Kafka 4.4 brokers (replication factor 3, min ISR
2), groupcoord in front of them, and the broker leading the most state-topic partitions killed
with SIGKILL while a KIP-848 group and a classic group consume and commit.

What a crashed broker must not do: lose a commit the coordinator acknowledged (the log writer
waits for acks=all, so min ISR 2 of 3 replicas hold it before the client hears of it), make a
shard give up its partitions (the writes of the shards wait out the leader election: no
failover of ours, same leaders, same epochs), or show the applications an error other than the
retriable ones Kafka's own coordinator gives while the dead broker's partitions have no leader.
Brought back, the broker rejoins with nothing repaired by hand and the groups keep committing through it.

The gateway and the shards bootstrap from every broker (``kafka.bootstrap``), so a dead
bootstrap broker leaves them the others, as a Kafka client's ``bootstrap.servers`` does.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from real_parts import start_apache_kafka

from groupcoord.local_cluster import ClusterOptions
from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka
from tests.e2e.consumers import ConfluentConsumer, ConsumerThread, assert_acknowledged_commits_kept
from tests.e2e.failover import PARTITIONS, busy_group
from tests.e2e.test_consumer_groups import assert_no_double_ownership, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

STATE_PARTITIONS = 6


@pytest.fixture(scope="module")
def kafka3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """Kafka 4.4 on three combined nodes: a real controller quorum, RF 3, min ISR 2."""
    k = start_apache_kafka("kafka-4.4", tmp_path_factory.mktemp("kafka-4.4-x3"), nodes=3)
    try:
        yield k
    finally:
        k.stop()


def state_leaders(admin: AdminClient, topic: str) -> dict[int, int]:
    """State-topic partition -> the broker leading it (-1 while none does)."""
    meta = admin.list_topics(topic, timeout=10).topics[topic]
    assert meta.error is None, meta.error
    return {p: part.leader for p, part in meta.partitions.items()}


TRANSIENT = ("_TRANSPORT", "_TIMED_OUT", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "REQUEST_TIMED_OUT")


def transient(error: str) -> bool:
    """A commit error librdkafka reports when the coordinator or its log is briefly out of reach."""
    return any(f"code={code}," in error for code in TRANSIENT)


def committed_since(consumers: list[ConsumerThread], since: float) -> bool:
    return all(any(t > since for t, _ in c.history.commits) for c in consumers)


def test_killing_the_broker_leading_most_state_partitions_loses_no_acknowledged_commit(
    kafka3: ApacheKafka, tmp_path: Path
) -> None:
    options = ClusterOptions(
        port=0,
        partitions=STATE_PARTITIONS,
        shards=2,
        metrics=False,
        state_topic=f"__faults_{uuid.uuid4().hex[:6]}",
        bootstrap_servers=tuple((kafka3.host, node.client_port) for node in kafka3.members),
        log_dir=tmp_path,
    )
    admin = AdminClient({"bootstrap.servers": kafka3.bootstrap})
    with BackgroundCluster((kafka3.host, kafka3.port), options) as cluster:
        # the shards created their state topic as Kafka's offsets topic is: RF 3, min ISR 2
        configs = admin.describe_configs([ConfigResource("topic", options.state_topic)])
        (described,) = configs.values()
        assert described.result(15)["min.insync.replicas"].value == "2"
        topic_meta = admin.list_topics(options.state_topic, timeout=10).topics[options.state_topic]
        assert {len(p.replicas) for p in topic_meta.partitions.values()} == {3}

        topic = f"faults-{uuid.uuid4().hex[:6]}"
        admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(30)
        groups = {
            protocol: f"faults-{protocol}-{uuid.uuid4().hex[:6]}" for protocol in ("consumer", "classic")
        }
        consumers = {
            protocol: [
                ConfluentConsumer(
                    cluster.bootstrap,
                    topic,
                    group,
                    f"{protocol}-{i}",
                    **(
                        {"group.protocol": "consumer"}
                        if protocol == "consumer"
                        else {"partition.assignment.strategy": "cooperative-sticky"}
                    ),
                )
                for i in range(2)
            ]
            for protocol, group in groups.items()
        }
        everyone = [c for cs in consumers.values() for c in cs]
        control = cluster.cluster.control
        assert control is not None
        with busy_group(cluster.bootstrap, topic, everyone):
            wait_until(
                lambda: all(c.history.commits for c in everyone), timeout=90, what="every consumer committing"
            )
            placement_before = {p: (a.leader, a.epoch) for p, a in control.placement.items()}
            leaders = state_leaders(admin, options.state_topic)
            # the broker leading the most state partitions; among equals the bootstrap broker,
            # the one the gateway and the shards were told of first (the harder case)
            led_by = Counter(leaders.values())
            victim = max(led_by, key=lambda node: (led_by[node], node == 1))
            led = led_by[victim]
            print(
                f"killing broker {victim}, leader of {led} of {STATE_PARTITIONS} state partitions",
                file=sys.stderr,
            )
            # when the broker leading the most state partitions crashes
            kafka3.kill_node(victim)
            killed_at = time.monotonic()
            survivors = AdminClient({"bootstrap.servers": kafka3.bootstrap})
            # then Kafka elects new leaders among the in-sync followers
            wait_until(
                lambda: victim not in state_leaders(survivors, options.state_topic).values(),
                timeout=60,
                what=f"the {led} state partitions of broker {victim} led elsewhere",
            )
            # and both groups keep committing, acknowledged, through the leader change
            wait_until(
                lambda: committed_since(everyone, killed_at + 2),
                timeout=90,
                what="commits after the broker crashed",
            )
            recovered_at = time.monotonic()
            # (the shards rode it out: none was restarted and no partition changed hands)
            assert all(p.alive for p in control.processes.values())
            assert {p: (a.leader, a.epoch) for p, a in control.placement.items()} == placement_before
            # and when it comes back it rejoins as it is: nothing to repair by hand
            kafka3.start_node(victim)
            restarted_at = time.monotonic()
            wait_until(
                lambda: all(
                    len(p.isrs) == 3
                    for p in admin.list_topics(options.state_topic, timeout=10)
                    .topics[options.state_topic]
                    .partitions.values()
                ),
                timeout=90,
                what=f"broker {victim} back in every state partition's ISR",
            )
            wait_until(
                lambda: committed_since(everyone, restarted_at + 1),
                timeout=60,
                what="commits after the broker came back",
            )
        # every client error, with its time since the kill
        seen = {
            c.name: [(t - killed_at, e) for e, t in zip(c.history.errors, c.history.error_times, strict=True)]
            for c in everyone
        }
        print(
            f"client errors (s after the kill): "
            f"{ {name: [(round(t, 1), e) for t, e in errors] for name, errors in seen.items()} }; "
            f"commits resumed {recovered_at - killed_at:.1f} s after",
            file=sys.stderr,
        )
        # the applications saw no error but the retriable ones any Kafka client meets while a
        # dead broker's partitions wait for new leaders (Kafka fences a killed broker after
        # broker.session.timeout.ms, 9 s): a commit in flight then, or waiting longer than
        # offsets.commit.timeout.ms, fails as with Kafka's own coordinator, and the next succeeds
        assert [(name, e) for name, errors in seen.items() for _, e in errors if not transient(e)] == []
        assert [
            (name, e) for name, errors in seen.items() for t, e in errors if t > recovered_at - killed_at
        ] == []
        for protocol, group in groups.items():
            assert_acknowledged_commits_kept(cluster.bootstrap, topic, group, consumers[protocol])
            assert_no_double_ownership(consumers[protocol])
        assert {p: (a.leader, a.epoch) for p, a in control.placement.items()} == placement_before
