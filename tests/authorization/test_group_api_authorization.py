"""Every group API x the operation Kafka requires x allowed / denied, over the wire.

The whole local cluster runs in front of the session broker with an ACL policy the test
swaps per case. Each request goes to the gateway as a client sends it; an allowed request is
answered with anything but an authorization error (it reached its shard), a denied one with
Kafka's GROUP_AUTHORIZATION_FAILED / TOPIC_AUTHORIZATION_FAILED where that API carries it.
The denied principal holds every other operation on the group (and topic), so each API is
shown to require exactly its own operation, with Kafka's implied operations.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from groupcoord.authorization.acls import (
    GRANTED_BY,
    AclBinding,
    Authorizer,
    Operation,
    Permission,
    ResourceType,
)
from groupcoord.common.kafka_security import KafkaSecurity
from groupcoord.common.kafka_wire import codec
from groupcoord.common.kafka_wire.exchange import exchange
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.local_cluster import ClusterOptions
from groupcoord_testing import BackgroundCluster

pytestmark = pytest.mark.broker

PRINCIPAL = "User:ANONYMOUS"  # a plaintext listener without SASL
GROUP_DENIED, TOPIC_DENIED = 30, 29
G, T = ResourceType.GROUP, ResourceType.TOPIC


def build(api_key: int, version: int, values: dict[str, Any]) -> Any:
    """A kio request from plain values (nested dicts/lists for entries)."""
    return _build(codec.request_type(api_key, version), values)


def _build(entity: type[Any], values: dict[str, Any]) -> Any:
    kwargs = {}
    for name, f in entity.__dataclass_fields__.items():
        if name.startswith("__") or name not in values:
            continue
        value = values[name]
        field_type = f.type
        if type(None) in getattr(field_type, "__args__", ()):  # X | None
            field_type = next(a for a in field_type.__args__ if a is not type(None))
        args = getattr(field_type, "__args__", None)
        element = args[0] if args else None
        if isinstance(value, dict) and hasattr(field_type, "__dataclass_fields__"):
            value = _build(field_type, value)
        elif isinstance(value, list) and element is not None and hasattr(element, "__dataclass_fields__"):
            value = tuple(_build(element, v) for v in value)
        elif isinstance(value, list):
            value = tuple(value)
        elif isinstance(value, datetime.timedelta):
            value = i32Timedelta.parse(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            kafka_type = f.metadata.get("kafka_type")
            value = {"int8": i8, "int16": i16, "int32": i32, "int64": i64}.get(kafka_type, lambda v: v)(value)
        kwargs[name] = value
    return entity(**kwargs)


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    api_key: int
    version: int
    request: Callable[[str, str], dict]  # (group, topic) -> values
    errors: Callable[[Any], list[int]]  # error codes of the response that carry authorization
    group_op: Operation | None
    topic_op: Operation | None = None
    denied_code: int = GROUP_DENIED
    with_offsets: bool = False  # the group has committed offsets first (else the answer is GROUP_ID_NOT_FOUND)
    share_group: bool = False  # the group is an empty share group that has read the topic first


def _partition_errors(resp: Any) -> list[int]:
    return [int(p.error_code) for t in resp.topics for p in t.partitions]


SECONDS = datetime.timedelta(seconds=30)


def _streams_join(group: str, topic: str) -> dict[str, Any]:
    """A streams member joining with a topology that reads ``topic``."""
    subtopology = {"subtopology_id": "0", "source_topics": [topic], "source_topic_regex": [],
                   "state_changelog_topics": [], "repartition_sink_topics": [], "repartition_source_topics": [],
                   "copartition_groups": []}  # fmt: skip
    return {"group_id": group, "member_id": uuid.uuid4().hex[:22], "member_epoch": 0, "endpoint_information_epoch": -1,
            "rebalance_timeout": SECONDS, "topology": {"epoch": 0, "subtopologies": [subtopology]},
            "active_tasks": [], "standby_tasks": [], "warmup_tasks": [], "process_id": "p", "client_tags": [],
            "task_offsets": None, "task_end_offsets": None}  # fmt: skip


CASES = [
    Case("JoinGroup", 11, 9, lambda g, t: {"group_id": g, "session_timeout": SECONDS, "rebalance_timeout": SECONDS,
         "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
         "protocols": [{"name": "range", "metadata": b""}], "reason": None},
         lambda r: [int(r.error_code)], Operation.READ),
    Case("SyncGroup", 14, 5, lambda g, t: {"group_id": g, "generation_id": 1, "member_id": "m", "group_instance_id": None,
         "protocol_type": None, "protocol_name": None, "assignments": []}, lambda r: [int(r.error_code)], Operation.READ),
    Case("Heartbeat", 12, 4, lambda g, t: {"group_id": g, "generation_id": 1, "member_id": "m", "group_instance_id": None},
         lambda r: [int(r.error_code)], Operation.READ),
    Case("LeaveGroup", 13, 5, lambda g, t: {"group_id": g, "members": [{"member_id": "m", "group_instance_id": None, "reason": None}]},
         lambda r: [int(r.error_code)], Operation.READ),
    Case("ConsumerGroupHeartbeat", 68, 0, lambda g, t: {"group_id": g, "member_id": uuid.uuid4().hex[:22], "member_epoch": 0,
         "instance_id": None, "rack_id": None, "rebalance_timeout": SECONDS, "subscribed_topic_names": [t],
         "server_assignor": None, "topic_partitions": []}, lambda r: [int(r.error_code)], Operation.READ),
    Case("ConsumerGroupHeartbeat-topic", 68, 0, lambda g, t: {"group_id": g, "member_id": uuid.uuid4().hex[:22], "member_epoch": 0,
         "instance_id": None, "rack_id": None, "rebalance_timeout": SECONDS, "subscribed_topic_names": [t],
         "server_assignor": None, "topic_partitions": []}, lambda r: [int(r.error_code)], None, Operation.DESCRIBE, TOPIC_DENIED),
    Case("OffsetCommit", 8, 8, lambda g, t: {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": "",
         "group_instance_id": None, "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 1,
         "committed_leader_epoch": -1, "committed_metadata": None}]}]}, _partition_errors, Operation.READ),
    Case("OffsetCommit-topic", 8, 8, lambda g, t: {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": "",
         "group_instance_id": None, "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 1,
         "committed_leader_epoch": -1, "committed_metadata": None}]}]}, _partition_errors, None, Operation.READ, TOPIC_DENIED),
    Case("OffsetFetch", 9, 8, lambda g, t: {"groups": [{"group_id": g, "topics": None}], "require_stable": False},
         lambda r: [int(g.error_code) for g in r.groups], Operation.DESCRIBE),
    Case("OffsetFetch-v7", 9, 7, lambda g, t: {"group_id": g, "topics": [{"name": t, "partition_indexes": [0]}],
         "require_stable": False}, lambda r: [int(r.error_code)], Operation.DESCRIBE),
    Case("OffsetFetch-topic", 9, 8, lambda g, t: {"groups": [{"group_id": g, "topics": [{"name": t, "partition_indexes": [0]}]}],
         "require_stable": False}, lambda r: [int(p.error_code) for g in r.groups for t in g.topics for p in t.partitions],
         None, Operation.DESCRIBE, TOPIC_DENIED),
    Case("DescribeGroups", 15, 5, lambda g, t: {"groups": [g], "include_authorized_operations": False},
         lambda r: [int(g.error_code) for g in r.groups], Operation.DESCRIBE),
    Case("ConsumerGroupDescribe", 69, 0, lambda g, t: {"group_ids": [g], "include_authorized_operations": False},
         lambda r: [int(g.error_code) for g in r.groups], Operation.DESCRIBE),
    Case("ShareGroupHeartbeat", 76, 1, lambda g, t: {"group_id": g, "member_id": uuid.uuid4().hex[:22], "member_epoch": 0,
         "subscribed_topic_names": [t]}, lambda r: [int(r.error_code)], Operation.READ),
    Case("ShareGroupHeartbeat-topic", 76, 1, lambda g, t: {"group_id": g, "member_id": uuid.uuid4().hex[:22],
         "member_epoch": 0, "subscribed_topic_names": [t]}, lambda r: [int(r.error_code)], None, Operation.DESCRIBE,
         TOPIC_DENIED),
    Case("StreamsGroupHeartbeat", 88, 0, lambda g, t: _streams_join(g, t), lambda r: [int(r.error_code)], Operation.READ),
    Case("StreamsGroupHeartbeat-topic", 88, 0, lambda g, t: _streams_join(g, t), lambda r: [int(r.error_code)], None,
         Operation.DESCRIBE, TOPIC_DENIED),
    Case("StreamsGroupDescribe", 89, 0, lambda g, t: {"group_ids": [g], "include_authorized_operations": False},
         lambda r: [int(g.error_code) for g in r.groups], Operation.DESCRIBE),
    Case("ShareGroupDescribe", 77, 1, lambda g, t: {"group_ids": [g], "include_authorized_operations": False},
         lambda r: [int(g.error_code) for g in r.groups], Operation.DESCRIBE),
    Case("ShareFetch", 78, 1, lambda g, t: {"group_id": g, "member_id": uuid.uuid4().hex[:22], "share_session_epoch": 0,
         "max_wait": datetime.timedelta(milliseconds=100), "min_bytes": 1, "max_records": 10, "batch_size": 10,
         "topics": [], "forgotten_topics_data": []}, lambda r: [int(r.error_code)], Operation.READ),
    Case("ShareAcknowledge", 79, 1, lambda g, t: {"group_id": g, "member_id": uuid.uuid4().hex[:22],
         "share_session_epoch": 1, "topics": []}, lambda r: [int(r.error_code)], Operation.READ),
    Case("DescribeShareGroupOffsets", 90, 1, lambda g, t: {"groups": [{"group_id": g, "topics": None}]},
         lambda r: [int(g.error_code) for g in r.groups], Operation.DESCRIBE),
    Case("AlterShareGroupOffsets", 91, 0, lambda g, t: {"group_id": g, "topics": [{"topic_name": t,
         "partitions": [{"partition_index": 0, "start_offset": 0}]}]}, lambda r: [int(r.error_code)], Operation.READ),
    Case("DeleteShareGroupOffsets", 92, 0, lambda g, t: {"group_id": g, "topics": [{"topic_name": t}]},
         lambda r: [int(r.error_code)], Operation.DELETE),
    Case("DescribeShareGroupOffsets-topic", 90, 1, lambda g, t: {"groups": [{"group_id": g, "topics": [{"topic_name": t,
         "partitions": [0]}]}]}, lambda r: [int(p.error_code) for g in r.groups for t in g.topics for p in t.partitions],
         None, Operation.DESCRIBE, TOPIC_DENIED, share_group=True),
    Case("AlterShareGroupOffsets-topic", 91, 0, lambda g, t: {"group_id": g, "topics": [{"topic_name": t,
         "partitions": [{"partition_index": 0, "start_offset": 0}]}]},
         lambda r: [int(p.error_code) for t in r.responses for p in t.partitions], None, Operation.READ, TOPIC_DENIED,
         share_group=True),
    Case("DeleteShareGroupOffsets-topic", 92, 0, lambda g, t: {"group_id": g, "topics": [{"topic_name": t}]},
         lambda r: [int(t.error_code) for t in r.responses], None, Operation.READ, TOPIC_DENIED, share_group=True),
    Case("DeleteGroups", 42, 2, lambda g, t: {"groups_names": [g]}, lambda r: [int(x.error_code) for x in r.results],
         Operation.DELETE),
    Case("OffsetDelete", 47, 0, lambda g, t: {"group_id": g, "topics": [{"name": t, "partitions": [{"partition_index": 0}]}]},
         lambda r: [int(r.error_code)], Operation.DELETE),
    Case("OffsetDelete-topic", 47, 0, lambda g, t: {"group_id": g, "topics": [{"name": t, "partitions": [{"partition_index": 0}]}]},
         _partition_errors, None, Operation.READ, TOPIC_DENIED, with_offsets=True),
    Case("FindCoordinator", 10, 4, lambda g, t: {"key_type": 0, "coordinator_keys": [g]},
         lambda r: [int(c.error_code) for c in r.coordinators], Operation.DESCRIBE),
    Case("DescribeConfigs", 32, 4, lambda g, t: {"resources": [{"resource_type": 32, "resource_name": g,
         "configuration_keys": None}], "include_synonyms": False, "include_documentation": False},
         lambda r: [int(x.error_code) for x in r.results], Operation.DESCRIBE_CONFIGS),
    Case("IncrementalAlterConfigs", 44, 1, lambda g, t: {"resources": [{"resource_type": 32, "resource_name": g,
         "configs": [{"name": "consumer.session.timeout.ms", "config_operation": 0, "value": "45000"}]}],
         "validate_only": True}, lambda r: [int(x.error_code) for x in r.responses], Operation.ALTER_CONFIGS),
]


class Policy:
    def __init__(self) -> None:
        self.current = Authorizer.of([])

    def __call__(self) -> Authorizer:
        return self.current


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy()


@pytest.fixture(scope="module")
def acl_cluster(broker: EmbeddedBroker, policy: Policy) -> Iterator[BackgroundCluster]:
    options = ClusterOptions(port=0, partitions=4, metrics=False, state_topic=f"__acl_{uuid.uuid4().hex[:6]}", acl_policy=policy)
    with BackgroundCluster((broker.host, broker.port), options) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def topic(acl_cluster: BackgroundCluster) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    name = f"acl-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": acl_cluster.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(20)
    return name


def bindings(rtype: ResourceType, name: str, ops: set[Operation]) -> list[AclBinding]:
    return [AclBinding(PRINCIPAL, op, Permission.ALLOW, rtype, name) for op in ops]


def everything_but(operation: Operation) -> set[Operation]:
    """Every operation that does not grant ``operation`` (Kafka's implications included)."""
    return set(Operation) - GRANTED_BY[operation]


def ask(cluster: BackgroundCluster, case: Case, group: str, topic: str) -> Any:
    host, port = cluster.bootstrap.rsplit(":", 1)
    body = build(case.api_key, case.version, case.request(group, topic))
    return asyncio.run(exchange((host, int(port)), body, "acl-test", 20, KafkaSecurity()))


def ask_as_a_client_retries(cluster: BackgroundCluster, case: Case, group: str, topic: str) -> Any:
    """``ask``, retried while the answer is COORDINATOR_LOAD_IN_PROGRESS (a shard that has not
    loaded the topic metadata yet), as every Kafka client retries it, for at most 30 s."""
    deadline = time.monotonic() + 30
    while True:
        answer = ask(cluster, case, group, topic)
        if int(getattr(answer, "error_code", 0)) != 14 or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def empty_share_group(cluster: BackgroundCluster, group: str, topic: str) -> None:
    """``group`` made an empty share group: a member joins, subscribed to ``topic``, and leaves."""
    join = next(c for c in CASES if c.name == "ShareGroupHeartbeat")
    joined = ask_as_a_client_retries(cluster, join, group, topic)
    assert int(joined.error_code) == 0, joined
    leave = dataclasses.replace(
        join,
        request=lambda g, t: {"group_id": g, "member_id": joined.member_id, "member_epoch": -1,
                              "subscribed_topic_names": None},
    )  # fmt: skip
    assert int(ask(cluster, leave, group, topic).error_code) == 0


@pytest.mark.parametrize("allowed", [True, False], ids=["allowed", "denied"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_group_api_requires_its_operation(
    acl_cluster: BackgroundCluster, policy: Policy, topic: str, case: Case, allowed: bool
) -> None:
    group = f"{case.name.lower()}-{uuid.uuid4().hex[:6]}"
    if case.group_op is not None:  # the group is the subject: topics are all allowed
        group_ops = {case.group_op} if allowed else everything_but(case.group_op)
        topic_ops = {Operation.ALL}
    else:  # the topic is the subject: the group is all allowed
        assert case.topic_op is not None
        group_ops = {Operation.ALL}
        topic_ops = {case.topic_op} if allowed else everything_but(case.topic_op)
    if case.with_offsets:
        commit = next(c for c in CASES if c.name == "OffsetCommit")
        policy.current = Authorizer.of(bindings(G, group, {Operation.ALL}) + bindings(T, topic, {Operation.ALL}))
        assert _partition_errors(ask(acl_cluster, commit, group, topic)) == [0]
    if case.share_group:
        policy.current = Authorizer.of(bindings(G, group, {Operation.ALL}) + bindings(T, topic, {Operation.ALL}))
        empty_share_group(acl_cluster, group, topic)
    policy.current = Authorizer.of(bindings(G, group, group_ops) + bindings(T, topic, topic_ops))
    codes = case.errors(ask_as_a_client_retries(acl_cluster, case, group, topic))
    assert codes, "the response carries no error codes to check"
    if allowed:
        assert not {GROUP_DENIED, TOPIC_DENIED} & set(codes), codes
    else:
        assert set(codes) == {case.denied_code}, codes


def test_list_groups_shows_only_described_groups_unless_cluster_describe(
    acl_cluster: BackgroundCluster, policy: Policy, topic: str
) -> None:
    join = next(c for c in CASES if c.name == "ConsumerGroupHeartbeat")
    mine, other = f"mine-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"
    policy.current = Authorizer.of([AclBinding("User:*", Operation.ALL, Permission.ALLOW, ResourceType.GROUP, "*"),
                                    AclBinding("User:*", Operation.ALL, Permission.ALLOW, ResourceType.TOPIC, "*")])
    for g in (mine, other):
        assert ask_as_a_client_retries(acl_cluster, join, g, topic).error_code == 0
    list_groups = Case("ListGroups", 16, 4, lambda g, t: {"states_filter": []}, lambda r: [int(r.error_code)], None)

    def listed() -> set[str]:
        return {g.group_id for g in ask(acl_cluster, list_groups, "", topic).groups}

    policy.current = Authorizer.of(bindings(G, mine, {Operation.READ}))  # READ implies DESCRIBE
    assert mine in listed() and other not in listed()
    policy.current = Authorizer.of(bindings(ResourceType.CLUSTER, "kafka-cluster", {Operation.DESCRIBE}))
    assert {mine, other} <= listed()
    # DENY before ALLOW: the group is hidden again
    policy.current = Authorizer.of(
        bindings(ResourceType.CLUSTER, "kafka-cluster", {Operation.DESCRIBE})
        + bindings(G, "*", {Operation.DESCRIBE})
        + [AclBinding(PRINCIPAL, Operation.DESCRIBE, Permission.DENY, G, "other-", pattern_type=_prefixed())]
    )
    assert mine in listed()  # cluster DESCRIBE lists everything, as Kafka does
    policy.current = Authorizer.of(
        bindings(G, "*", {Operation.DESCRIBE})
        + [AclBinding(PRINCIPAL, Operation.DESCRIBE, Permission.DENY, G, "other-", pattern_type=_prefixed())]
    )
    assert mine in listed() and other not in listed()


def _prefixed() -> Any:
    from groupcoord.authorization.acls import PatternType  # noqa: PLC0415

    return PatternType.PREFIXED


def test_denied_delete_groups_deletes_nothing_and_allowed_ones_still_go(
    acl_cluster: BackgroundCluster, policy: Policy, topic: str
) -> None:
    commit = next(c for c in CASES if c.name == "OffsetCommit")
    fetch = next(c for c in CASES if c.name == "OffsetFetch")
    keep, drop = f"keep-{uuid.uuid4().hex[:6]}", f"drop-{uuid.uuid4().hex[:6]}"
    policy.current = Authorizer.of([AclBinding(PRINCIPAL, Operation.ALL, Permission.ALLOW, ResourceType.GROUP, "*"),
                                    AclBinding(PRINCIPAL, Operation.ALL, Permission.ALLOW, ResourceType.TOPIC, "*")])
    for g in (keep, drop):
        assert _partition_errors(ask(acl_cluster, commit, g, topic)) == [0]
    policy.current = Authorizer.of(
        bindings(G, "*", {Operation.READ}) + bindings(G, drop, {Operation.DELETE}) + bindings(T, "*", {Operation.READ})
    )
    delete = Case("DeleteGroups", 42, 2, lambda g, t: {"groups_names": [keep, drop]}, lambda r: [], None)
    results = {r.group_id: int(r.error_code) for r in ask(acl_cluster, delete, "", topic).results}
    assert results == {keep: GROUP_DENIED, drop: 0}
    committed = ask(acl_cluster, fetch, keep, topic).groups[0]
    assert [int(p.committed_offset) for t in committed.topics for p in t.partitions] == [1]


def test_authorized_operations_are_the_callers(acl_cluster: BackgroundCluster, policy: Policy, topic: str) -> None:
    join = next(c for c in CASES if c.name == "ConsumerGroupHeartbeat")
    group = f"ops-{uuid.uuid4().hex[:6]}"
    policy.current = Authorizer.of(bindings(G, group, {Operation.ALL}) + bindings(T, topic, {Operation.ALL}))
    assert ask_as_a_client_retries(acl_cluster, join, group, topic).error_code == 0
    # DESCRIBE on the topic too: once the shard has the topic's metadata the member is assigned
    # its partitions, and a caller who may not describe them would be refused the whole group
    # (KAFKA-18813, its own test below), whatever its group operations
    policy.current = Authorizer.of(
        bindings(G, group, {Operation.READ, Operation.ALTER_CONFIGS}) + bindings(T, topic, {Operation.DESCRIBE})
    )
    expected = (1 << 3) | (1 << 8) | (1 << 10) | (1 << 11)  # READ, DESCRIBE (implied), ALTER/DESCRIBE_CONFIGS
    describe = Case("DescribeGroups", 15, 5, lambda g, t: {"groups": [g], "include_authorized_operations": True}, lambda r: [], None)
    cg_describe = Case("ConsumerGroupDescribe", 69, 0, lambda g, t: {"group_ids": [g], "include_authorized_operations": True}, lambda r: [], None)
    for case in (describe, cg_describe):
        (described,) = ask(acl_cluster, case, group, topic).groups
        assert int(described.error_code) == 0 and int(described.authorized_operations) == expected, case.name


def test_an_authorizing_gateway_advertises_only_versions_naming_topics(acl_cluster: BackgroundCluster) -> None:
    """OffsetCommit/OffsetFetch v10 name topics by id only; topic ACLs are checked by name, so
    an authorizing gateway advertises at most v9 and clients choose one it can check."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest  # noqa: PLC0415

    host, port = acl_cluster.bootstrap.rsplit(":", 1)
    body = asyncio.run(
        exchange((host, int(port)), ApiVersionsRequest(client_software_name="t", client_software_version="1"), "t", 10, KafkaSecurity())
    )
    versions = {int(a.api_key): int(a.max_version) for a in body.api_keys}
    assert versions[8] == 9 and versions[9] == 9


def test_consumer_group_describe_hides_a_group_assigned_topics_the_caller_cannot_describe(
    acl_cluster: BackgroundCluster, policy: Policy, topic: str
) -> None:
    """KAFKA-18813 (Kafka 4.0 ``handleConsumerGroupDescribe``): a group whose members' assignment
    or target assignment names a topic the caller may not DESCRIBE is answered
    TOPIC_AUTHORIZATION_FAILED with Kafka's message and no members, whatever its group ACLs."""
    describe = Case("ConsumerGroupDescribe", 69, 0, lambda g, t: {"group_ids": [g], "include_authorized_operations": False},
                    lambda r: [], None)
    group = f"leak-{uuid.uuid4().hex[:6]}"
    from confluent_kafka import Consumer  # noqa: PLC0415

    policy.current = Authorizer.of(bindings(G, group, {Operation.ALL}) + bindings(T, topic, {Operation.ALL}))
    member = Consumer({"bootstrap.servers": acl_cluster.bootstrap, "group.id": group, "group.protocol": "consumer"})
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + 30
        while True:  # until the member's assignment names the topic
            member.poll(0.2)
            (described,) = ask(acl_cluster, describe, group, topic).groups
            named = {tp.topic_name for m in described.members for tp in m.assignment.topic_partitions}
            if topic in named or time.monotonic() > deadline:
                break
        assert int(described.error_code) == 0 and topic in named
        policy.current = Authorizer.of(
            bindings(G, group, {Operation.ALL}) + bindings(T, topic, everything_but(Operation.DESCRIBE))
        )
        (hidden,) = ask(acl_cluster, describe, group, topic).groups
        assert (hidden.group_id, int(hidden.error_code), hidden.members) == (group, TOPIC_DENIED, ())
        assert hidden.error_message == "The group has described topic(s) that the client is not authorized to describe."
        policy.current = Authorizer.of(bindings(G, group, {Operation.DESCRIBE}) + bindings(T, topic, {Operation.DESCRIBE}))
        (shown,) = ask(acl_cluster, describe, group, topic).groups
        assert int(shown.error_code) == 0 and [m.member_id for m in shown.members] == [m.member_id for m in described.members]
    finally:
        member.close()


def test_a_regex_subscription_never_resolves_to_a_topic_the_member_cannot_describe(
    acl_cluster: BackgroundCluster, policy: Policy
) -> None:
    """KAFKA-18813 (Kafka 4.0): a regex is resolved with the rights of the member whose heartbeat
    refreshes it; a matching topic it may not DESCRIBE is never resolved, so never assigned."""
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    prefix = f"rx-{uuid.uuid4().hex[:6]}"
    open_topic, secret = f"{prefix}-open", f"{prefix}-secret"
    admin = AdminClient({"bootstrap.servers": acl_cluster.bootstrap})
    for fut in admin.create_topics([NewTopic(open_topic, 1, 1), NewTopic(secret, 1, 1)]).values():
        fut.result(20)
    group, member = f"rx-g-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex[:22]
    epoch = 0
    heartbeat = Case("ConsumerGroupHeartbeat-regex", 68, 1, lambda g, t: {
        "group_id": g, "member_id": member, "member_epoch": epoch, "instance_id": None, "rack_id": None,
        "rebalance_timeout": SECONDS, "subscribed_topic_names": None, "subscribed_topic_regex": f"{prefix}-.*",
        "server_assignor": None, "topic_partitions": []}, lambda r: [int(r.error_code)], None)
    describe = Case("ConsumerGroupDescribe", 69, 0, lambda g, t: {"group_ids": [g], "include_authorized_operations": False},
                    lambda r: [], None)
    # the member may DESCRIBE the open topic only; so may whoever describes the group, which
    # would be refused if the group were assigned the secret topic
    policy.current = Authorizer.of(bindings(G, group, {Operation.ALL}) + bindings(T, open_topic, {Operation.ALL}))
    deadline = time.monotonic() + 30
    while True:  # heartbeats until the shards know both topics and the target is computed
        answer = ask_as_a_client_retries(acl_cluster, heartbeat, group, open_topic)
        assert answer.error_code == 0, answer
        epoch = int(answer.member_epoch)
        (described,) = ask(acl_cluster, describe, group, open_topic).groups
        assert int(described.error_code) == 0, described
        targets = {tp.topic_name for m in described.members for tp in m.target_assignment.topic_partitions}
        if targets or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert targets == {open_topic}


def test_an_all_topics_share_offsets_description_leaves_out_topics_the_caller_cannot_describe(
    acl_cluster: BackgroundCluster, policy: Policy, topic: str
) -> None:
    """DescribeShareGroupOffsets with no topics named (kafka-share-groups.sh --describe): a
    share-partition of a topic the caller may not DESCRIBE is left out, not even named."""
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    hidden, group = f"acl-hidden-{uuid.uuid4().hex[:6]}", f"sg-all-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": acl_cluster.bootstrap})
    admin.create_topics([NewTopic(hidden, 1, 1)])[hidden].result(20)
    everything = bindings(G, group, {Operation.ALL}) + bindings(T, topic, {Operation.ALL})
    policy.current = Authorizer.of(everything + bindings(T, hidden, {Operation.ALL}))
    empty_share_group(acl_cluster, group, topic)
    alter = next(c for c in CASES if c.name == "AlterShareGroupOffsets")
    both = dataclasses.replace(
        alter,
        request=lambda g, t: {"group_id": g, "topics": [
            {"topic_name": name, "partitions": [{"partition_index": 0, "start_offset": 0}]} for name in (t, hidden)]},
    )  # fmt: skip
    deadline = time.monotonic() + 30  # until the shard's topics image has both new topics
    while True:
        altered = ask(acl_cluster, both, group, topic)
        if [int(p.error_code) for t in altered.responses for p in t.partitions] == [0, 0]:
            break
        assert time.monotonic() < deadline, altered
        time.sleep(0.5)
    describe = next(c for c in CASES if c.name == "DescribeShareGroupOffsets")

    def described() -> list[str]:
        return sorted(t.topic_name for g in ask(acl_cluster, describe, group, topic).groups for t in g.topics)

    assert described() == sorted([topic, hidden])
    policy.current = Authorizer.of(everything)  # nothing on the hidden topic
    assert described() == [topic]


def test_a_streams_member_without_create_hears_which_internal_topics_it_may_not_create(
    acl_cluster: BackgroundCluster, policy: Policy, topic: str
) -> None:
    """KIP-1071: the internal topics are created with the member's rights; a member that may
    read its group and describe every topic but not CREATE the changelog gets
    MISSING_INTERNAL_TOPICS naming it, and the topic is not created."""
    group = f"streams-create-{uuid.uuid4().hex[:6]}"
    changelog = f"{group}-store-changelog"
    policy.current = Authorizer.of(
        [*bindings(G, group, {Operation.READ}), *bindings(T, topic, {Operation.DESCRIBE}),
         *bindings(T, changelog, {Operation.DESCRIBE})]
    )  # fmt: skip

    def join(g: str, t: str) -> dict[str, Any]:
        values = _streams_join(g, t)
        values["topology"]["subtopologies"][0]["state_changelog_topics"] = [
            {"name": changelog, "partitions": 0, "replication_factor": 0, "topic_configs": []}
        ]
        return values

    case = Case("StreamsGroupHeartbeat-create", 88, 0, join, lambda r: [int(r.error_code)], Operation.READ)
    answer = ask_as_a_client_retries(acl_cluster, case, group, topic)
    assert int(answer.error_code) == 0, answer
    details = {(int(s.status_code), s.status_detail) for s in answer.status}
    assert (3, f"Unauthorized to CREATE on topics {changelog}.") in details, details
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    assert changelog not in AdminClient({"bootstrap.servers": acl_cluster.bootstrap}).list_topics(timeout=10).topics
