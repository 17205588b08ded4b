"""Subscriptions answered as Kafka 4.4 answers them, asked the same heartbeats on Kafka's own
coordinator and through the gateway in front of it (issue 42).

A member that subscribes to a topic created a moment ago: Kafka's group coordinator reads the
broker's metadata image, which has a topic once its creation is acknowledged, so the join's
own answer assigns the new topic's partitions. The shards poll the cluster's topics every 3 s;
without fetching at once for a subscription naming a topic they do not know, the member got
an empty assignment and its partitions only with a later heartbeat (1.6-2.6 s after the join
with librdkafka, 0.6 s against Kafka). KIP-848's and KIP-932's heartbeats must answer the same
assignment.

A regular expression subscription: Kafka 4.4 resolves it over every topic, its internal ones
(``__consumer_offsets``, ...) too; ours matched none of them. The coordinator's own topics
stay hidden, as the gateway marks them internal.
"""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.static.primitive import i8, i32, i32Timedelta

from groupcoord.common.kafka_wire.exchange import exchange
from groupcoord.common.partitioning import DEFAULT_METRICS_TOPIC
from groupcoord.coordinator.runtime.topic_metadata import fetch_topics
from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

pytestmark = pytest.mark.broker

PARTITIONS = 3


def assigned(response: Any) -> list[int]:
    if response.assignment is None:
        return []
    return sorted(int(p) for t in response.assignment.topic_partitions for p in t.partitions)


def ready(cluster: BackgroundCluster, address: tuple[str, int], group: str) -> None:
    """The coordinator of ``group`` is there (Kafka creates ``__consumer_offsets`` on the first
    FindCoordinator; a new cluster's partitions may still be loading)."""
    deadline = time.monotonic() + 60
    while True:
        found = cluster.run(exchange(address, FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,)), "fresh-topic", 15), 20)
        if found.coordinators[0].error_code.value == 0 or time.monotonic() > deadline:
            return
        time.sleep(0.5)


def consumer_heartbeat(
    group: str, member: str, epoch: int, names: tuple[str, ...] | None = None, regex: str | None = None
) -> ConsumerGroupHeartbeatRequest:
    """A KIP-848 heartbeat as a client sends it: the subscription only when it changes, the
    owned partitions (none) only when joining."""
    return ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=member,
        member_epoch=i32(epoch),
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        subscribed_topic_names=names,
        subscribed_topic_regex=regex,
        server_assignor=None,
        topic_partitions=() if epoch == 0 else None,
    )


def join_right_after_creating(
    cluster: BackgroundCluster, kafka: ApacheKafka, address: tuple[str, int], share: bool
) -> tuple[list[list[int]], float]:
    """Create a topic on Kafka, join a new group subscribed to it at once and heartbeat every
    0.1 s, as a member at that epoch, until the partitions are assigned: (what each answer
    assigned, seconds from the creation's acknowledgement to the assignment)."""
    topic = f"fresh-{uuid.uuid4().hex[:6]}"
    group, member = f"fresh-g-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex[:22]
    ready(cluster, address, group)
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    created = time.monotonic()
    answers: list[list[int]] = []
    epoch, names = 0, (topic,)
    while time.monotonic() < created + 10:
        if share:
            request: Any = ShareGroupHeartbeatRequest(
                group_id=group, member_id=member, member_epoch=i32(epoch), rack_id=None, subscribed_topic_names=names
            )
        else:
            request = consumer_heartbeat(group, member, epoch, names=names)
        response = cluster.run(exchange(address, request, "fresh-topic", 15), 20)
        assert response.error_code.value == 0, response
        answers.append(assigned(response))
        if answers[-1]:
            break
        epoch, names = int(response.member_epoch), None  # as a client: the subscription once
        time.sleep(0.1)
    return answers, time.monotonic() - created


@pytest.mark.parametrize("share", [False, True], ids=["consumer-group", "share-group"])
def test_a_member_subscribing_to_a_new_topic_is_assigned_it_no_later_than_on_kafka(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster, share: bool
) -> None:
    theirs, kafka_s = join_right_after_creating(kafka_cluster, kafka, (kafka.host, kafka.port), share)
    ours, our_s = join_right_after_creating(kafka_cluster, kafka, kafka_cluster.gateway.bootstrap_address, share)
    kind = "share" if share else "consumer"
    print(f"{kind} group: Kafka {theirs} in {kafka_s:.3f} s, groupcoord {ours} in {our_s:.3f} s")
    assert theirs[-1] == ours[-1] == list(range(PARTITIONS))
    # no more heartbeats than Kafka's member needed, and none of the 3 s poll's (Kafka's share
    # groups take 2-3 s here, so that alone would not tell)
    assert len(ours) <= min(len(theirs), 5)


def assigned_by_regex(cluster: BackgroundCluster, address: tuple[str, int], regex: str) -> set[uuid.UUID]:
    """The topics a new group's one member subscribed to ``regex`` is assigned: Kafka resolves
    a regex after the heartbeat that brings it, so a member heartbeats until it has them."""
    group, member = f"regex-g-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex[:22]
    ready(cluster, address, group)
    epoch, deadline = 0, time.monotonic() + 20
    while True:
        request = consumer_heartbeat(group, member, epoch, regex=regex if epoch == 0 else None)
        response = cluster.run(exchange(address, request, "regex-subscriber", 15), 20)
        assert response.error_code.value == 0, response
        epoch = int(response.member_epoch)
        if response.assignment is not None and response.assignment.topic_partitions:
            return {t.topic_id for t in response.assignment.topic_partitions}
        assert time.monotonic() < deadline, f"no assignment for {regex!r} from {address}"
        time.sleep(0.2)


def test_a_regex_subscription_matches_kafkas_internal_topics_as_on_kafka_but_not_the_coordinators(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster
) -> None:
    regex = "__.*"  # Kafka's internal topics, and the coordinator's state topic on the same Kafka
    theirs = assigned_by_regex(kafka_cluster, (kafka.host, kafka.port), regex)
    ours = assigned_by_regex(kafka_cluster, kafka_cluster.gateway.bootstrap_address, regex)
    by_id = {t.topic_id: t.name for t in kafka_cluster.run(fetch_topics(kafka.bootstrap))}
    coordinators = {kafka_cluster.options.state_topic, DEFAULT_METRICS_TOPIC}  # local clusters': the default
    print(f"Kafka assigns {sorted(by_id[i] for i in theirs)}, groupcoord {sorted(by_id[i] for i in ours)}")
    assert "__consumer_offsets" in {by_id[i] for i in ours}
    assert {by_id[i] for i in ours} == {by_id[i] for i in theirs} - coordinators
