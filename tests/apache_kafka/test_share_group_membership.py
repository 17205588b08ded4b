"""Share-group membership side by side: the same raw requests (kio) to Kafka 4.4's own share
groups and to groupcoord in front of the same Kafka, and the same answers.

The same sequence through groupcoord in front of Kafka 3.9, which has no share groups of its
own, gets the same answers too.

Two share consumers join a share group on a 2-partition topic and settle on the simple
assignor's assignment; the group is described (ShareGroupDescribe), listed (ListGroups v5 with
the "share" type), left and deleted. On the way, every kind of wrong request a client or tool
can send about it is asked of both sides: an unknown group or member, a fenced epoch, an empty
member id, a share member on a consumer group's id and the other protocols on the share group's
id (ConsumerGroupHeartbeat, JoinGroup, OffsetFetch, DescribeGroups v5 and v6,
ShareGroupDescribe of a consumer group). Kafka's own ``kafka-share-groups.sh``
(ShareGroupCommand: --list, --describe --members, --describe --state) reads the live group.
Member ids, coordinator addresses and epochs differ by nature and are left out; everything else
must be equal.
"""

from __future__ import annotations

import datetime
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest as DescribeGroupsV5
from kio.schema.describe_groups.v6.request import DescribeGroupsRequest as DescribeGroupsV6
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.offset_fetch.v9.request import OffsetFetchRequest, OffsetFetchRequestGroup
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.static.primitive import i8, i32, i32Timedelta

from groupcoord.common.kafka_wire.exchange import exchange
from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

from .conftest import run_tool

SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"

PARTITIONS = 2
RETRIABLE = {"not_coordinator", "coordinator_not_available", "coordinator_load_in_progress"}


def ask(cluster: BackgroundCluster, address: tuple[str, int], body: Any, timeout_s: float = 15) -> Any:
    return cluster.run(exchange(address, body, "share-membership", timeout_s), timeout_s + 5)


def seconds(s: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(seconds=s))


def sequence(
    cluster: BackgroundCluster, address: tuple[str, int], bootstrap: str, topic: str
) -> dict[str, Any]:
    suffix = uuid.uuid4().hex[:6]
    group, consumer_group = f"share-{suffix}", f"kip848-{suffix}"
    out: dict[str, Any] = {}

    def beat(member: str, epoch: int, topics: tuple[str, ...] | None = None, group_id: str = group) -> Any:
        return ask(
            cluster,
            address,
            ShareGroupHeartbeatRequest(
                group_id=group_id, member_id=member, member_epoch=i32(epoch), subscribed_topic_names=topics
            ),
        )

    def scrub(message: str | None) -> str | None:
        """``message`` without this run's names."""
        for name, placeholder in ((group, "<group>"), (consumer_group, "<consumer group>"), *members.items()):
            message = message.replace(name, placeholder) if message else message
        return message

    def error(response: Any) -> tuple[str, str | None]:
        return response.error_code.name, scrub(response.error_message)

    def partitions(response: Any) -> list[int] | None:
        if response.assignment is None:
            return None
        return sorted(p for t in response.assignment.topic_partitions for p in t.partitions)

    a, b = uuid.uuid4().hex[:22], uuid.uuid4().hex[:22]
    stranger = uuid.uuid4().hex[:22]
    members = {a: "<a>", b: "<b>", stranger: "<stranger>"}
    deadline = time.monotonic() + 60
    while True:  # a new Kafka creates __consumer_offsets at the first FindCoordinator
        found = ask(cluster, address, FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,)))
        joined = beat(a, 0, (topic,))
        if joined.error_code.name not in RETRIABLE or time.monotonic() > deadline:
            out["find coordinator"] = found.coordinators[0].error_code.name
            break
        time.sleep(0.5)
    out["a joins"] = error(joined)
    epochs = {a: int(joined.member_epoch)}
    told: dict[str, list[int] | None] = {a: partitions(joined)}
    joined = beat(b, 0, (topic,))
    out["b joins"] = error(joined)
    epochs[b], told[b] = int(joined.member_epoch), partitions(joined)
    # Each member moves to the latest target at its own heartbeats. Kafka assigns a partition
    # only once its share coordinator has initialized the share-partition's state (seconds, the
    # first time); groupcoord's shards need no such step and assign at once.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for member in (a, b):
            response = beat(member, epochs[member])
            assert response.error_code.value == 0, (out, response)
            epochs[member] = int(response.member_epoch)
            if response.assignment is not None:
                told[member] = partitions(response)
        covered = set(told[a] or []) | set(told[b] or [])
        if covered == set(range(PARTITIONS)) and all(told.values()):
            break
        time.sleep(0.5)
    out["settled"] = (
        sorted(len(told[m] or []) for m in (a, b)),
        sorted(set(told[a] or []) | set(told[b] or [])),
    )

    def describe(group_id: str = group) -> Any:
        [described] = ask(
            cluster,
            address,
            ShareGroupDescribeRequest(group_ids=(group_id,), include_authorized_operations=False),
        ).groups
        return described

    described = describe()
    out["describe"] = (
        error(described),
        described.group_state,
        described.assignor_name,
        described.group_epoch == described.assignment_epoch,
        sorted((list(m.subscribed_topic_names), m.client_id) for m in described.members),
        sorted(
            sorted(p for t in m.assignment.topic_partitions for p in t.partitions) for m in described.members
        ),
        sorted({t.topic_name for m in described.members for t in m.assignment.topic_partitions}),
    )
    listed = ask(cluster, address, ListGroupsRequest(states_filter=(), types_filter=("share",))).groups
    out["list share groups"] = [
        (g.protocol_type, g.group_state, g.group_type) for g in listed if g.group_id == group
    ]

    # kafka-share-groups.sh (ShareGroupCommand) on the live group
    for args in (
        ["--list"],
        ["--describe", "--group", group, "--members"],
        ["--describe", "--group", group, "--state"],
    ):
        done = run_tool(SHARE_GROUP_COMMAND, "--bootstrap-server", bootstrap, *args, timeout=60)
        lines = [scrub(line) or "" for line in done.stdout.splitlines() if line.strip()]
        if args == ["--list"]:
            lines = [line for line in lines if line == "<group>"]
        # The coordinator's address differs by nature, and which member reads which partition
        # is the assignor's choice (Kafka's hashes member ids): rows without member ids, sorted.
        lines = [re.sub(r"\S+:\d+\s+\(\d+\)", "<coordinator>", line) for line in lines]
        lines = lines[:1] + sorted(re.sub(r"<[ab]>", "<member>", line) for line in lines[1:])
        out[f"kafka-share-groups {' '.join(a for a in args if a != group)}"] = (
            done.returncode,
            [" ".join(line.split()) for line in lines],
            [line for line in done.stderr.splitlines() if "Exception" in line or "Error" in line],
        )

    out["unknown group"] = error(beat(a, 3, group_id=f"{group}-none"))
    out["unknown member"] = error(beat(stranger, 3))
    fenced = beat(a, epochs[a] + 7)
    out["fenced epoch"] = fenced.error_code.name, int(fenced.member_epoch)
    out["empty member id"] = error(beat("", 0, (topic,)))
    out["join without topics"] = error(beat(uuid.uuid4().hex[:22], 0))

    kip848 = ask(
        cluster,
        address,
        ConsumerGroupHeartbeatRequest(
            group_id=consumer_group,
            member_id=uuid.uuid4().hex[:22],
            member_epoch=i32(0),
            rebalance_timeout=seconds(30),
            subscribed_topic_names=(topic,),
            server_assignor=None,
            topic_partitions=(),
        ),
    )
    out["consumer group joins"] = kip848.error_code.name
    out["share member on a consumer group"] = error(beat(uuid.uuid4().hex[:22], 0, (topic,), consumer_group))
    out["share describe of a consumer group"] = error(describe(consumer_group))
    out["consumer member on the share group"] = error(
        ask(
            cluster,
            address,
            ConsumerGroupHeartbeatRequest(
                group_id=group,
                member_id=uuid.uuid4().hex[:22],
                member_epoch=i32(0),
                rebalance_timeout=seconds(30),
                subscribed_topic_names=(topic,),
                server_assignor=None,
                topic_partitions=(),
            ),
        )
    )
    out["classic join on the share group"] = ask(
        cluster,
        address,
        JoinGroupRequest(
            group_id=group,
            session_timeout=seconds(10),
            rebalance_timeout=seconds(10),
            member_id="",
            protocol_type="consumer",
            protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),),
        ),
    ).error_code.name
    [fetched] = ask(
        cluster, address, OffsetFetchRequest(groups=(OffsetFetchRequestGroup(group_id=group, topics=None),))
    ).groups
    out["offset fetch of the share group"] = fetched.error_code.name
    for name, request in (
        ("v5", DescribeGroupsV5(groups=(group,), include_authorized_operations=False)),
        ("v6", DescribeGroupsV6(groups=(group,), include_authorized_operations=False)),
    ):
        [classic] = ask(cluster, address, request).groups
        out[f"describe groups {name}"] = (
            classic.error_code.name,
            scrub(getattr(classic, "error_message", None)),
            classic.group_state,
            classic.protocol_type,
        )

    out["delete while members remain"] = (
        ask(cluster, address, DeleteGroupsRequest(groups_names=(group,))).results[0].error_code.name
    )
    for member in (a, b):
        left = beat(member, -1)
        out[f"leaves {'a' if member == a else 'b'}"] = error(left), int(left.member_epoch)
    out["describe after leaving"] = describe().group_state
    # Kafka's share coordinator deletes the group's share-partition state first (its
    # __share_group_state topic is created on first use): slow the first time
    out["delete"] = (
        ask(cluster, address, DeleteGroupsRequest(groups_names=(group,)), 30).results[0].error_code.name
    )
    out["describe after delete"] = error(describe())[0]
    return out


def test_share_group_membership_is_answered_as_kafka_answers(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster
) -> None:
    topic = f"share-in-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    theirs = sequence(kafka_cluster, (kafka.host, kafka.port), kafka.bootstrap, topic)
    ours = sequence(kafka_cluster, kafka_cluster.gateway.bootstrap_address, kafka_cluster.bootstrap, topic)
    print("Kafka 4.4:", json.dumps(theirs, indent=1, default=str))
    print("groupcoord:", json.dumps(ours, indent=1, default=str))
    assert theirs["settled"] == ([1, 1], [0, 1]), "each of 2 members reads one of 2 partitions"
    assert ours == theirs


def test_share_groups_in_front_of_kafka_3_9(kafka: ApacheKafka, tmp_path: Path) -> None:
    """The reason groupcoord exists: Kafka 3.9 has no share groups, yet through the gateway in
    front of it the same requests and Kafka's own tool get Kafka 4.4's answers."""
    from real_parts import start_apache_kafka  # noqa: PLC0415

    old = start_apache_kafka("kafka-3.9", tmp_path / "kafka-3.9")
    try:
        with BackgroundCluster((old.host, old.port)) as cluster:
            topic = f"share-in-{uuid.uuid4().hex[:6]}"
            for k in (kafka, old):
                admin = AdminClient({"bootstrap.servers": k.bootstrap})
                admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
            theirs = sequence(cluster, (kafka.host, kafka.port), kafka.bootstrap, topic)
            ours = sequence(cluster, cluster.gateway.bootstrap_address, cluster.bootstrap, topic)
    finally:
        old.stop()
    print("Kafka 4.4:", json.dumps(theirs, indent=1, default=str))
    print("groupcoord in front of Kafka 3.9:", json.dumps(ours, indent=1, default=str))
    assert ours == theirs
