"""A topic deleted under its consumers, side by side: the same sequence against Kafka 4.4's own
coordinator and against groupcoord in front of the same Kafka, and the same answers.

librdkafka 2.15 crashed (segfault) a moment after a topic it was assigned was deleted through
the gateway, in both protocols. The sequence: a KIP-848 consumer and a classic cooperative
consumer (confluent-kafka, each in a process of its own so a crash is an exit status) consume and
commit a topic; the topic is deleted with the AdminClient; they poll on. Then the answers a
client gets about it are read with raw requests (kio) from both sides and compared: Metadata by
name and by topic id, OffsetFetch of both groups (all topics and the deleted partitions), the
consumer group's members' assignments (ConsumerGroupDescribe), a new member's
ConsumerGroupHeartbeat subscribing to it, the classic group's state (DescribeGroups). The Java
client (VerifiableConsumer) goes through the same deletion in both protocols and must shut down
cleanly.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.offset_fetch.v9.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kio.static.primitive import i32, i32Timedelta

from groupcoord.common.kafka_wire.exchange import exchange
from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

from .conftest import VERIFIABLE_CONSUMER, start_tool

PARTITIONS = 2
RECORDS = 20
CLIENT = Path(__file__).with_name("deleted_topic_consumer.py")


def ask(cluster: BackgroundCluster, address: tuple[str, int], body: Any) -> Any:
    return cluster.run(exchange(address, body, "deleted-topics", 15))


def metadata(
    cluster: BackgroundCluster, address: tuple[str, int], name: str | None, topic_id: Any = None
) -> Any:
    body = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=topic_id, name=name),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return ask(cluster, address, body).topics[0]


def answers(
    cluster: BackgroundCluster, address: tuple[str, int], topic: str, topic_id: Any, groups: dict[str, str]
) -> dict[str, Any]:
    """What a client is told about the deleted ``topic`` and the groups that consumed it,
    without the parts that differ by nature (member ids, topic ids, hosts)."""
    out: dict[str, Any] = {}
    by_name = metadata(cluster, address, topic)
    out["metadata by name"] = (by_name.error_code.name, len(by_name.partitions))
    by_id = metadata(cluster, address, None, topic_id)
    out["metadata by id"] = (by_id.error_code.name, len(by_id.partitions))
    for protocol, group in groups.items():
        for scope, topics in (
            ("all", None),
            (
                "deleted",
                (
                    OffsetFetchRequestTopics(
                        name=topic, partition_indexes=tuple(i32(p) for p in range(PARTITIONS))
                    ),
                ),
            ),
        ):
            fetched = ask(
                cluster,
                address,
                OffsetFetchRequest(groups=(OffsetFetchRequestGroup(group_id=group, topics=topics),)),
            ).groups[0]
            out[f"offset fetch {protocol} {scope}"] = (
                fetched.error_code.name,
                sorted(
                    (t.name == topic, p.partition_index, int(p.committed_offset), p.error_code.name)
                    for t in fetched.topics
                    for p in t.partitions
                ),
            )
    [described] = ask(
        cluster,
        address,
        ConsumerGroupDescribeRequest(group_ids=(groups["consumer"],), include_authorized_operations=False),
    ).groups
    named = {topic: "<deleted>"}
    out["consumer group"] = (
        described.error_code.name,
        described.group_state,
        [
            (
                [named.get(n, n) for n in m.subscribed_topic_names],
                sorted(
                    (named.get(t.topic_name, t.topic_name), sorted(t.partitions))
                    for t in m.assignment.topic_partitions
                ),
                sorted(
                    (named.get(t.topic_name, t.topic_name), sorted(t.partitions))
                    for t in m.target_assignment.topic_partitions
                ),
            )
            for m in described.members
        ],
    )
    joined = ask(
        cluster,
        address,
        ConsumerGroupHeartbeatRequest(
            group_id=f"{groups['consumer']}-new",
            member_id=uuid.uuid4().hex[:22],
            member_epoch=i32(0),
            rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            subscribed_topic_names=(topic,),
            server_assignor=None,
            topic_partitions=(),
        ),
    )
    # Not the member epoch: Kafka 4.4 gives a new member subscribing to any topic epoch 2 (1
    # without a subscription), groupcoord 1; clients only echo it back.
    out["new member heartbeat"] = (
        joined.error_code.name,
        None
        if joined.assignment is None
        else [list(t.partitions) for t in joined.assignment.topic_partitions],
    )
    [classic] = ask(
        cluster,
        address,
        DescribeGroupsRequest(groups=(groups["classic"],), include_authorized_operations=False),
    ).groups
    out["classic group"] = (
        classic.error_code.name,
        classic.group_state,
        classic.protocol_type,
        len(classic.members),
    )
    return out


def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def sequence(
    kafka: ApacheKafka, cluster: BackgroundCluster, bootstrap: str, address: tuple[str, int]
) -> dict[str, Any]:
    """Consume and commit a topic with a KIP-848 and a classic cooperative librdkafka consumer
    through ``bootstrap``, delete it, poll on, and return the answers of ``address``."""
    suffix = uuid.uuid4().hex[:6]
    topic = f"doomed-{suffix}"
    groups = {"consumer": f"doomed-kip848-{suffix}", "classic": f"doomed-classic-{suffix}"}
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(RECORDS):
        producer.produce(topic, str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    topic_id = metadata(cluster, (kafka.host, kafka.port), topic).topic_id

    clients = {
        protocol: subprocess.Popen(
            [sys.executable, str(CLIENT), bootstrap, topic, group, protocol, str(RECORDS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for protocol, group in groups.items()
    }
    try:
        for client in clients.values():
            assert client.stdout is not None
            assert client.stdout.readline().strip() == "ready"
        admin.delete_topics([topic])[topic].result(30)
        wait_until(
            lambda: metadata(cluster, (kafka.host, kafka.port), topic).error_code.value != 0, 30, "deleted"
        )
        time.sleep(8)  # clients poll on: metadata refreshes, heartbeats, rebalances
        assert all(c.poll() is None for c in clients.values()), "a consumer died after the deletion"
        seen = answers(cluster, address, topic, topic_id, groups)
    finally:
        outputs = {}
        for protocol, client in clients.items():
            out, _ = client.communicate("", timeout=60)
            outputs[protocol] = out
    for protocol, client in clients.items():
        assert client.returncode == 0, f"{protocol} consumer exited {client.returncode}: {outputs[protocol]}"
        assert outputs[protocol].rstrip().endswith("closed"), outputs[protocol]
    seen["client errors"] = {
        p: sorted({line for line in o.splitlines() if line.startswith("error")}) for p, o in outputs.items()
    }
    return seen


def test_a_deleted_topic_is_answered_as_kafka_answers(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster
) -> None:
    theirs = sequence(kafka, kafka_cluster, kafka.bootstrap, (kafka.host, kafka.port))
    ours = sequence(kafka, kafka_cluster, kafka_cluster.bootstrap, kafka_cluster.gateway.bootstrap_address)
    print("Kafka 4.4:", json.dumps(theirs, indent=1, default=str))
    print("groupcoord:", json.dumps(ours, indent=1, default=str))
    assert ours == theirs


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_java_consumer_rides_out_a_deleted_topic(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster, protocol: str, tmp_path: Path
) -> None:
    """Kafka's VerifiableConsumer through the gateway: its partitions of the deleted topic are
    taken away (revoked or lost), it keeps running, and shuts down cleanly."""
    suffix = uuid.uuid4().hex[:6]
    topic, group = f"doomed-java-{suffix}", f"doomed-java-{protocol}-{suffix}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(RECORDS):
        producer.produce(topic, str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    args = ["--topic", topic, "--group-id", group, "--bootstrap-server", kafka_cluster.bootstrap]
    args += ["--group-protocol", protocol, "--reset-policy", "earliest", "--verbose"]
    if protocol == "classic":
        args += ["--assignment-strategy", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"]
    consumer = start_tool(VERIFIABLE_CONSUMER, *args, log=tmp_path / "consumer.log")
    events = VerifiableEvents(consumer, tmp_path / "consumer.log")
    try:
        events.until(lambda e: e["name"] == "partitions_assigned" and e["partitions"], 60)
        events.until(lambda _: events.consumed() >= RECORDS, 60)
        admin.delete_topics([topic])[topic].result(30)
        taken = events.until(lambda e: e["name"] == "partitions_revoked" and e["partitions"], 60)
        assert {p["topic"] for p in taken["partitions"]} == {topic}
        time.sleep(3)
        assert consumer.poll() is None, events.log_tail()
        consumer.terminate()
        events.until(lambda e: e["name"] == "shutdown_complete", 60)
        assert consumer.wait(30) in (0, 143), events.log_tail()  # 143: Exit.exit after SIGTERM
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait(10)


class VerifiableEvents:
    """The JSON events a VerifiableConsumer prints, read as they come."""

    def __init__(self, process: subprocess.Popen[str], log: Path) -> None:
        self.process, self.log = process, log
        self.events: list[dict[str, Any]] = []

    def until(self, predicate: Any, timeout: float) -> dict[str, Any]:
        """The first event from now on for which ``predicate`` holds (or which comes after it
        held, for a predicate on the events so far)."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            if line.startswith("{"):
                self.events.append(json.loads(line))
                if predicate(self.events[-1]):
                    return self.events[-1]
        raise AssertionError(f"no such event: {self.events[-5:]}\n{self.log_tail()}")

    def consumed(self) -> int:
        return sum(e.get("count", 0) for e in self.events if e["name"] == "records_consumed")

    def log_tail(self) -> str:
        return self.log.read_text()[-3000:]
