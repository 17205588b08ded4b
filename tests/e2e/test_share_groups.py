"""Share consumers through the gateway (KIP-932, "queues for Kafka"): librdkafka's share
consumer (confluent-kafka's ``ShareConsumer``) reads a topic cooperatively through groupcoord in
front of an upstream that serves the records only — tansu and Kafka 3.9 have no share groups
at all, Kafka 4.4's own are not used.

Scenarios, as KIP-932 tells them: more members than partitions all receive records, and every
record produced is delivered to exactly one of them (none acquired by two members); a released
record is delivered again with its delivery count one higher, a rejected one never; a member
that hangs while it holds records (its connection open) gives them to another once their locks
run out (one killed gives them back at once: ``tests/apache_kafka/test_share_session_end.py``); a
read_committed share group never gets an aborted transaction's records.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from groupcoord_testing import BackgroundCluster

pytestmark = [pytest.mark.broker, pytest.mark.upstreams("tansu", "kafka-4.4", "kafka-3.9")]


def produce(bootstrap: str, topic: str, count: int, partitions: int, batch_records: int | None = None) -> None:
    """``count`` records round-robin over ``partitions``; ``batch_records`` caps the records of
    one producer batch (librdkafka's ``batch.num.messages``)."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap}
    if batch_records is not None:
        config.update({"batch.num.messages": batch_records, "linger.ms": 0})
    producer = Producer(config)
    for i in range(count):
        producer.produce(topic, str(i).encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def share_consumer(bootstrap: str, group: str, **extra: Any) -> ShareConsumer:
    return ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **extra})


def earliest(bootstrap: str, group: str, **configs: str) -> None:
    """share.auto.offset.reset=earliest for ``group``, and any other ``configs`` (group configs,
    as Kafka's tools set them)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group)
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry  # noqa: PLC0415

    for name, value in {"share.auto.offset.reset": "earliest", **configs}.items():
        resource.add_incremental_config(ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET))
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result(30)


def share_metrics(cluster: BackgroundCluster) -> dict[tuple[str, str], float]:
    """The shards' share-record counters, summed over the cluster's /metrics endpoints."""
    from tests.e2e.test_exactly_once import scraped  # noqa: PLC0415

    families = {
        "acquired": ("groupcoord_share_records_acquired", "delivery", ("first", "redelivery")),
        "acknowledged": ("groupcoord_share_record_acknowledgements", "type", ("accept", "release", "reject")),
        "lock_timeouts": ("groupcoord_share_acquisition_lock_timeouts", "", ("",)),
        "archived": ("groupcoord_share_records_archived", "", ("",)),
    }
    return {
        (what, value): scraped(cluster, family, f"{family}_total", **({label: value} if label else {}))
        for what, (family, label, values) in families.items()
        for value in values
    }


def assigned_members(cluster: BackgroundCluster, group: str) -> int:
    """How many of ``group``'s members ShareGroupDescribe shows with partitions assigned."""
    from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest  # noqa: PLC0415

    from groupcoord.common.kafka_wire.exchange import exchange  # noqa: PLC0415

    host, port = cluster.bootstrap.rsplit(":", 1)
    request = ShareGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False)
    [described] = cluster.run(exchange((host, int(port)), request, "share-e2e", 10), 15).groups
    return sum(1 for m in described.members if any(t.partitions for t in m.assignment.topic_partitions))


def test_four_share_consumers_on_two_partitions_each_record_once(cluster: BackgroundCluster) -> None:
    """The records are produced once all four members hold partitions: produced first, the
    first two members to join could drain them before the others are assigned any. And in
    batches of at most 100: a share fetch acquires whole batches (Kafka's batch_optimized mode),
    and librdkafka's default batches hold up to 10,000 records, more of them the longer its
    sender waits; a CI run on a loaded machine saw each partition's 5,000 records go to one
    member ("only 2 of 4 members received records: [5000, 5000]")."""
    topic, group = f"queue-{uuid.uuid4().hex[:6]}", f"sg-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    total = 10_000
    earliest(cluster.bootstrap, group)
    consumers = [share_consumer(cluster.bootstrap, group) for _ in range(4)]
    seen: dict[int, list[tuple[int, int]]] = {}  # consumer -> (partition, offset)

    def poll_each() -> None:
        for n, c in enumerate(consumers):
            for m in c.poll(0.2):
                assert m.error() is None, m.error()
                seen.setdefault(n, []).append((m.partition(), m.offset()))

    try:
        for c in consumers:
            c.subscribe([topic])
        deadline = time.monotonic() + 60
        while assigned_members(cluster, group) < len(consumers):
            assert time.monotonic() < deadline, "the four members were not all assigned partitions in 60 s"
            poll_each()
        produce(cluster.bootstrap, topic, total, 2, batch_records=100)
        deadline = time.monotonic() + 90
        while sum(len(v) for v in seen.values()) < total and time.monotonic() < deadline:
            poll_each()
    finally:
        for c in consumers:
            c.close()
    delivered = [x for v in seen.values() for x in v]
    assert len(delivered) == len(set(delivered)), "a record was delivered twice"
    assert len(delivered) == total, f"{len(delivered)} of {total} delivered"
    assert len(seen) >= 3, f"only {len(seen)} of 4 members received records: {[len(v) for v in seen.values()]}"


def test_a_share_group_at_kafkas_default_latest_gets_only_what_is_produced_after_it_started(
    cluster: BackgroundCluster,
) -> None:
    """``share.auto.offset.reset=latest`` (Kafka's default) starts a share-partition at the log
    end, as Kafka does: of 1,000 records produced before the member joined, none is delivered.
    tansu answers ListOffsets "latest" inside its last batch; starting there delivered 998."""
    topic, group = f"queue-{uuid.uuid4().hex[:6]}", f"sg-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    produce(cluster.bootstrap, topic, 1_000, 1)
    consumer = share_consumer(cluster.bootstrap, group)
    received: list[bytes] = []

    def poll(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for m in consumer.poll(0.2):
                assert m.error() is None, m.error()
                received.append(m.value())

    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while assigned_members(cluster, group) < 1:
            assert time.monotonic() < deadline, "the member was not assigned the partition in 60 s"
            poll(0.2)
        poll(3)  # its share fetches started the share-partition
        assert received == [], f"{len(received)} of the 1,000 records produced before it started"
        producer = Producer({"bootstrap.servers": cluster.bootstrap})
        for i in range(10):
            producer.produce(topic, f"after-{i}".encode())
        assert producer.flush(30) == 0
        deadline = time.monotonic() + 30
        while len(received) < 10 and time.monotonic() < deadline:
            poll(0.2)
        poll(1)
    finally:
        consumer.close()
    assert sorted(received) == sorted(f"after-{i}".encode() for i in range(10))
    # the lag is counted from the same log end: five more records in one batch are five
    produce(cluster.bootstrap, topic, 5, 1)
    assert share_lag(cluster, group) == 5


def share_lag(cluster: BackgroundCluster, group: str) -> int:
    """The group's lag summed over its partitions, as DescribeShareGroupOffsets v1 answers it."""
    from kio.schema.describe_share_group_offsets.v1.request import (  # noqa: PLC0415
        DescribeShareGroupOffsetsRequest,
        DescribeShareGroupOffsetsRequestGroup,
    )

    from groupcoord.common.kafka_wire.exchange import exchange  # noqa: PLC0415

    request = DescribeShareGroupOffsetsRequest(groups=(DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None),))
    [described] = cluster.run(exchange(cluster.gateway.bootstrap_address, request, "share-e2e", 10), 15).groups
    return sum(int(p.lag) for t in described.topics for p in t.partitions)


def release_one_and_reject_one(bootstrap: str) -> None:
    """Ten records read with explicit acknowledgements: offset 3 released, 4 rejected, the rest
    accepted; offset 3 comes once more (delivery count 2) and is accepted, 4 never comes again."""
    from confluent_kafka import AcknowledgeType  # noqa: PLC0415

    topic, group = f"queue-{uuid.uuid4().hex[:6]}", f"sg-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    produce(bootstrap, topic, 10, 1)
    earliest(bootstrap, group)
    consumer = share_consumer(bootstrap, group, **{"share.acknowledgement.mode": "explicit"})
    try:
        consumer.subscribe([topic])
        first: list[Any] = []
        deadline = time.monotonic() + 60
        while len(first) < 10 and time.monotonic() < deadline:
            batch = list(consumer.poll(0.5))
            for m in batch:
                assert m.error() is None, m.error()
                assert m.delivery_count() == 1
                kind = {3: AcknowledgeType.RELEASE, 4: AcknowledgeType.REJECT}.get(m.offset(), AcknowledgeType.ACCEPT)
                consumer.acknowledge(m, kind)
            first += batch
            consumer.commit_sync()
        assert sorted(m.offset() for m in first) == list(range(10))
        again: list[Any] = []
        deadline = time.monotonic() + 30
        while not again and time.monotonic() < deadline:
            again = [m for m in consumer.poll(0.5) if m.error() is None]
            for m in again:
                consumer.acknowledge(m)
            consumer.commit_sync()
        assert [(m.offset(), m.delivery_count()) for m in again] == [(3, 2)], "only the released record, once more"
        for _ in range(4):  # nothing else comes: offset 4 was rejected (archived)
            assert [m.offset() for m in consumer.poll(0.5) if m.error() is None] == []
    finally:
        consumer.close()


def test_released_records_come_again_with_one_more_delivery_and_rejected_ones_never(
    cluster: BackgroundCluster,
) -> None:
    release_one_and_reject_one(cluster.bootstrap)


@pytest.mark.upstreams("tansu")
def test_the_shards_count_what_happened_to_share_records(broker: Any, tmp_path: Any) -> None:
    """``groupcoord up`` with metrics: after the release-and-reject scenario, the shards' counters
    (summed over every /metrics endpoint) say ten first deliveries and one redelivery, nine
    records accepted, one released, one rejected and archived, no lock run out; and one share
    group, empty once its member left, with a new group epoch as it joined and as it left."""
    from groupcoord.local_cluster import ClusterOptions  # noqa: PLC0415

    options = ClusterOptions(port=0, metrics=True, state_topic=f"__sgm_{uuid.uuid4().hex[:6]}", log_dir=tmp_path)
    with BackgroundCluster((broker.host, broker.port), options) as cluster:
        before = share_metrics(cluster)
        assert not any(before.values()), f"nothing counted yet: {before}"
        release_one_and_reject_one(cluster.bootstrap)
        assert {k: v for k, v in share_metrics(cluster).items() if v} == {
            ("acquired", "first"): 10, ("acquired", "redelivery"): 1,
            ("acknowledged", "accept"): 9, ("acknowledged", "release"): 1, ("acknowledged", "reject"): 1,
            ("archived", ""): 1,
        }  # fmt: skip
        from tests.e2e.test_exactly_once import scraped  # noqa: PLC0415

        deadline = time.monotonic() + 15  # the shards publish their group gauges every second
        while not ((seen := (
            scraped(cluster, "groupcoord_share_group_count", "groupcoord_share_group_count", state="empty"),
            scraped(cluster, "groupcoord_group_count", "groupcoord_group_count", protocol="share"),
            scraped(cluster, "groupcoord_rebalance", "groupcoord_rebalance_total", protocol="share"),
        ))[:2] == (1, 1) and seen[2] >= 2):  # new epochs as the member joined and as it left: empty
            assert time.monotonic() < deadline, f"the share group is not counted: {seen}"
            time.sleep(0.2)
        # a member holding ten records: its share-partition's own series says so
        topic, group = f"queue-held-{uuid.uuid4().hex[:6]}", f"sg-held-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        produce(cluster.bootstrap, topic, 10, 1)
        earliest(cluster.bootstrap, group)
        holder, held = start_holder(cluster.bootstrap, group, topic)
        try:
            assert len(held) == 10, held
            name = "groupcoord_share_partition_records_in_flight"
            deadline = time.monotonic() + 5
            while scraped(cluster, name, name, group=group, topic=topic, partition="0") != 10:
                assert time.monotonic() < deadline, "no series for the share-partition the member holds"
                time.sleep(0.2)
        finally:
            holder.kill()
            holder.wait(10)


def test_a_read_committed_share_group_never_gets_an_aborted_transactions_records(
    cluster: BackgroundCluster, broker: Any, request: pytest.FixtureRequest
) -> None:
    """The gateway archives what the upstream's read_committed Fetch names as aborted, and the
    transaction markers, as gaps: Kafka 4.4 and 3.9 name them; tansu 0.6.0 does not."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry  # noqa: PLC0415

    from groupcoord.embedded_broker import EmbeddedBroker  # noqa: PLC0415

    if isinstance(broker, EmbeddedBroker):
        request.applymarker(
            pytest.mark.xfail(
                strict=True,
                reason="tansu 0.6.0 sends no aborted_transactions in read_committed Fetch responses "
                "(as tests/e2e/test_exactly_once.py measured): nothing tells the gateway what was aborted",
            )
        )

    topic, group = f"queue-txn-{uuid.uuid4().hex[:6]}", f"sg-txn-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(30)
    for outcome in ("abort", "commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, f"{outcome}-{i}".encode(), partition=0)
        producer.flush(30)
        (producer.abort_transaction if outcome == "abort" else producer.commit_transaction)(30)
    earliest(cluster.bootstrap, group)
    resource = ConfigResource(ResourceType.GROUP, group)
    resource.add_incremental_config(
        ConfigEntry("share.isolation.level", "read_committed", incremental_operation=AlterConfigOpType.SET)
    )
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result(30)
    consumer = share_consumer(cluster.bootstrap, group)
    values: list[str] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(values) < 10 and time.monotonic() < deadline:
            values += [m.value().decode() for m in consumer.poll(0.5) if m.error() is None]
        for _ in range(4):  # and nothing more comes: the aborted records and the markers are gaps
            values += [m.value().decode() for m in consumer.poll(0.5) if m.error() is None]
    finally:
        consumer.close()
    assert sorted(values) == sorted(f"commit-{i}" for i in range(5) for _ in range(2)), values


# A share consumer in a process of its own: it prints what its first poll acquired, then holds
# it (an implicit acknowledgement goes out only with the next poll, which never comes).
HOLDER = """
import json, sys, time
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2]})
c.subscribe([sys.argv[3]])
while True:
    got = [(m.offset(), m.delivery_count()) for m in c.poll(0.5) if m.error() is None]
    if got:
        print(json.dumps(got), flush=True)
        time.sleep(3600)
"""


def start_holder(bootstrap: str, group: str, topic: str) -> tuple[subprocess.Popen[str], list[list[int]]]:
    """A share consumer in a process of its own (:data:`HOLDER`), and what its first poll
    acquired: (offset, delivery count) pairs it holds from then on."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, bootstrap, group, topic],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert holder.stdout is not None
    try:
        return holder, json.loads(holder.stdout.readline())
    except BaseException:
        holder.kill()
        raise


def test_a_member_that_hangs_holding_records_gives_them_to_another_after_the_lock_duration(
    cluster: BackgroundCluster,
) -> None:
    """KIP-932: records acquired by a member that stops (its process frozen, its connections
    open, so its share session lives on) stay locked for ``share.record.lock.duration.ms``
    (here the shortest Kafka allows, 15 s), then another member acquires them with their
    delivery count one higher — long before the frozen member's session in the group (45 s)
    would have run out and given them back."""
    topic, group = f"queue-hang-{uuid.uuid4().hex[:6]}", f"sg-hang-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    produce(cluster.bootstrap, topic, 10, 1)
    earliest(cluster.bootstrap, group, **{"share.record.lock.duration.ms": "15000"})
    holder, held = start_holder(cluster.bootstrap, group, topic)
    try:
        acquired_at = time.monotonic()
        assert held == [[o, 1] for o in range(10)], held
        holder.send_signal(signal.SIGSTOP)
        _next_member_gets_them_after_the_lock(cluster, group, topic, acquired_at)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)


def _next_member_gets_them_after_the_lock(
    cluster: BackgroundCluster, group: str, topic: str, acquired_at: float
) -> None:
    consumer = share_consumer(cluster.bootstrap, group)
    again: dict[int, int] = {}
    try:
        consumer.subscribe([topic])
        while len(again) < 10 and time.monotonic() < acquired_at + 40:
            for m in consumer.poll(0.5):
                assert m.error() is None, m.error()
                again.setdefault(m.offset(), m.delivery_count())
                if len(again) == 1:
                    waited = time.monotonic() - acquired_at
        for _ in range(2):  # and they stay accepted: nothing comes a third time
            assert [m.offset() for m in consumer.poll(0.5) if m.error() is None] == []
    finally:
        consumer.close()
    assert again == {o: 2 for o in range(10)}, again
    assert 14 <= waited < 40, f"redelivered {waited:.1f} s after the frozen member acquired them"
