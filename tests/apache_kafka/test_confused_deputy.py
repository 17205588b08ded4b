"""No confused deputy: through the gateway, Kafka judges a client's requests under the client's
own identity, never the coordinator's (issue 23).

Kafka 4.4 with SASL_SSL, SCRAM users and its StandardAuthorizer (``allow.everyone.if.no.acl.found``
false); the coordinator's principal is a super user, as it must be to write its state topic. The
gateway's listeners relay the client's SASL (``passthrough``) with no ACL policy of their own, so
the group APIs follow Kafka's ACLs. Every right below is a real ACL created with Kafka's
AdminClient; every refusal is compared with what Kafka answers the same client directly.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.types import GroupId, ProducerId, TransactionalId
from kio.static.primitive import i8, i16, i32
from real_parts import start_apache_kafka

from groupcoord.common.kafka_security import ENV, KafkaSecurity
from groupcoord.common.kafka_wire.exchange import exchange
from groupcoord.embedded_broker import stop_process_group
from groupcoord.gateway.assembly import GatewayOptions, build_gateway
from groupcoord.gateway.groups.group_apis import GroupApis
from groupcoord.gateway.groups.leadership import LeadershipTable
from groupcoord.gateway.security.listener_security import ListenerSecurity
from groupcoord.local_cluster import ClusterOptions
from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka
from tests.security.tls import Pki, make_pki

pytestmark = pytest.mark.slow

USERS = {
    "coordinator": "coordinator-secret",
    "admin": "admin-secret",
    "alice": "alice-secret",
    "bob": "bob-secret",
}
TRANSACTION_KEY = 1


@dataclass
class Secured:
    kafka: ApacheKafka
    cluster: BackgroundCluster
    pki: Pki
    topic: str  # alice may read it, not describe or alter its configs
    out: str  # alice's transactions write here
    group: str  # alice may read it and alter its configs
    suffix: str  # of this run's names (transactional ids: alice-tx-, bob-tx-)


def _admin(kafka: ApacheKafka) -> Any:
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    return AdminClient(kafka.client_config("admin"))


def _allow(kafka: ApacheKafka, principal: str, rtype: Any, name: str, *operations: Any) -> None:
    from confluent_kafka.admin import AclBinding, AclPermissionType, ResourcePatternType  # noqa: PLC0415

    bindings = [
        AclBinding(
            rtype, name, ResourcePatternType.LITERAL, f"User:{principal}", "*", op, AclPermissionType.ALLOW
        )
        for op in operations
    ]
    admin = _admin(kafka)  # alive until its futures are done
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    from confluent_kafka.admin import AclOperation, NewTopic, ResourceType  # noqa: PLC0415

    workdir = tmp_path_factory.mktemp("confused-deputy")
    pki = make_pki(workdir / "pki")
    kafka = start_apache_kafka(
        "kafka-4.4",
        workdir / "kafka",
        security="sasl_ssl",
        scram_users=USERS,
        super_users=("coordinator", "admin"),
        tls=(pki.server_cert, pki.server_key, pki.ca),
    )
    suffix = uuid.uuid4().hex[:6]
    topic, out, group = f"cd-in-{suffix}", f"cd-out-{suffix}", f"cd-alice-{suffix}"
    try:
        admin = _admin(kafka)
        for future in admin.create_topics([NewTopic(topic, 1, 1), NewTopic(out, 1, 1)]).values():
            future.result(30)
        _allow(kafka, "alice", ResourceType.TOPIC, topic, AclOperation.READ, AclOperation.DESCRIBE)
        _allow(kafka, "alice", ResourceType.TOPIC, out, AclOperation.WRITE, AclOperation.DESCRIBE)
        _allow(
            kafka,
            "alice",
            ResourceType.GROUP,
            group,
            AclOperation.READ,
            AclOperation.DESCRIBE,
            AclOperation.ALTER_CONFIGS,
            AclOperation.DESCRIBE_CONFIGS,
        )
        _allow(kafka, "alice", ResourceType.TRANSACTIONAL_ID, f"alice-tx-{suffix}", AclOperation.WRITE)
        _allow(kafka, "bob", ResourceType.GROUP, f"cd-bob-{suffix}", AclOperation.READ)
        with pytest.MonkeyPatch.context() as env:
            for name, value in {
                "protocol": "SASL_SSL",
                "ssl_cafile": str(pki.ca),
                "sasl_mechanism": "SCRAM-SHA-256",
                "sasl_username": "coordinator",
                "sasl_password": USERS["coordinator"],
            }.items():
                env.setenv(ENV[name], value)  # the gateway and the shard processes it starts
            options = ClusterOptions(
                port=0,
                partitions=4,
                metrics=False,
                state_topic=f"__cd_{suffix}",
                listener_security=ListenerSecurity(sasl="passthrough"),
            )
            with BackgroundCluster((kafka.host, kafka.port), options) as cluster:
                yield Secured(kafka, cluster, pki, topic, out, group, suffix)
    finally:
        kafka.stop()


def _through_gateway(secured: Secured, user: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": secured.cluster.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": USERS[user],
        **extra,
    }


def _error(future: Any) -> int:
    """The Kafka error code a confluent-kafka admin future failed with (0: it succeeded)."""
    from confluent_kafka import KafkaException  # noqa: PLC0415

    try:
        future.result(30)
    except KafkaException as exc:
        return exc.args[0].code()
    return 0


def _retention_ms(secured: Secured) -> str:
    from confluent_kafka.admin import ConfigResource, ResourceType  # noqa: PLC0415

    resource = ConfigResource(ResourceType.TOPIC, secured.topic)
    admin = _admin(secured.kafka)
    configs = admin.describe_configs([resource])[resource].result(30)
    return configs["retention.ms"].value


def test_a_client_cannot_alter_a_topic_config_it_has_no_rights_on_but_alters_its_group(
    secured: Secured,
) -> None:
    from confluent_kafka import KafkaError  # noqa: PLC0415
    from confluent_kafka.admin import (  # noqa: PLC0415
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    before = _retention_ms(secured)

    def resources() -> tuple[Any, Any]:
        topic = ConfigResource(
            ResourceType.TOPIC,
            secured.topic,
            incremental_configs=[
                ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        group = ConfigResource(
            ResourceType.GROUP,
            secured.group,
            incremental_configs=[
                ConfigEntry(
                    "consumer.session.timeout.ms", "50000", incremental_operation=AlterConfigOpType.SET
                )
            ],
        )
        return topic, group

    alice = AdminClient(_through_gateway(secured, "alice"))
    alice_direct = AdminClient(secured.kafka.client_config("alice"))
    bob = AdminClient(_through_gateway(secured, "bob"))
    topic, group = resources()
    answers = alice.incremental_alter_configs([topic, group])
    assert _error(answers[topic]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _error(answers[group]) == 0
    direct = alice_direct.incremental_alter_configs([resources()[0]])
    assert [_error(f) for f in direct.values()] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert _retention_ms(secured) == before != "1000"

    group_only = ConfigResource(ResourceType.GROUP, secured.group)
    described = alice.describe_configs([group_only])[group_only].result(30)
    assert described["consumer.session.timeout.ms"].value == "50000"
    # bob has no ALTER_CONFIGS on alice's group in Kafka's ACLs, which the group APIs follow
    _, group = resources()
    refused = bob.incremental_alter_configs([group])
    assert _error(refused[group]) == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_a_client_cannot_describe_a_topic_config_it_has_no_rights_on(secured: Secured) -> None:
    from confluent_kafka import KafkaError  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType  # noqa: PLC0415

    resource = ConfigResource(ResourceType.TOPIC, secured.topic)
    alice, alice_direct = (
        AdminClient(_through_gateway(secured, "alice")),
        AdminClient(secured.kafka.client_config("alice")),
    )
    through = alice.describe_configs([resource])[resource]
    direct = alice_direct.describe_configs([resource])[resource]
    assert _error(through) == _error(direct) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def _ask(secured: Secured, user: str, body: Any, *, direct: bool) -> Any:
    """``body``'s answer to ``user``, from Kafka itself or through the gateway."""
    if direct:
        address = (secured.kafka.host, secured.kafka.port)
        security = KafkaSecurity(
            "SASL_SSL",
            ssl_cafile=str(secured.pki.ca),
            sasl_mechanism="SCRAM-SHA-256",
            sasl_username=user,
            sasl_password=USERS[user],
        )
    else:
        host, port = secured.cluster.bootstrap.rsplit(":", 1)
        address = (host, int(port))
        security = KafkaSecurity(
            "SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256", sasl_username=user, sasl_password=USERS[user]
        )
    return asyncio.run(exchange(address, body, f"cd-{user}", 30, security))


RETRIABLE = {
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.concurrent_transactions,
}


def _settled(secured: Secured, user: str, body: Any, *, direct: bool) -> ErrorCode:
    """The error code of ``body``'s answer once Kafka's transaction log is there (the first
    transactional request creates ``__transaction_state``; until loaded: retriable errors)."""
    deadline = time.monotonic() + 60
    while (
        code := _ask(secured, user, body, direct=direct).error_code
    ) in RETRIABLE and time.monotonic() < deadline:
        time.sleep(0.5)
    return code


def test_kafka_refuses_transactional_requests_of_a_client_without_rights_on_its_transactional_id(
    secured: Secured,
) -> None:
    suffix = secured.suffix
    find = FindCoordinatorRequest(key_type=i8(TRANSACTION_KEY), coordinator_keys=(f"bob-tx-{suffix}",))
    add = AddOffsetsToTxnRequest(
        transactional_id=TransactionalId(f"bob-tx-{suffix}"),
        producer_id=ProducerId(0),
        producer_epoch=i16(0),
        group_id=GroupId(f"cd-bob-{suffix}"),
    )
    for direct in (True, False):
        found = _ask(secured, "bob", find, direct=direct)
        assert [c.error_code for c in found.coordinators] == [ErrorCode.transactional_id_authorization_failed]
        assert (
            _ask(secured, "bob", add, direct=direct).error_code
            == ErrorCode.transactional_id_authorization_failed
        )
    # alice may write her transactional id, but holds no producer for it: Kafka's own answer
    bogus = AddOffsetsToTxnRequest(
        transactional_id=TransactionalId(f"alice-tx-{suffix}"),
        producer_id=ProducerId(4242),
        producer_epoch=i16(0),
        group_id=GroupId(secured.group),
    )
    mine = FindCoordinatorRequest(key_type=i8(TRANSACTION_KEY), coordinator_keys=(f"alice-tx-{suffix}",))
    deadline = time.monotonic() + 60  # her FindCoordinator creates Kafka's transaction log
    while _ask(secured, "alice", mine, direct=False).coordinators[0].error_code != ErrorCode.none:
        assert time.monotonic() < deadline
        time.sleep(0.5)
    answers = {direct: _settled(secured, "alice", bogus, direct=direct) for direct in (True, False)}
    assert answers == {
        True: ErrorCode.invalid_producer_id_mapping,
        False: ErrorCode.invalid_producer_id_mapping,
    }


def test_a_transactional_client_commits_offsets_without_rights_on_the_state_topic(secured: Secured) -> None:
    """Kafka checks WRITE on every topic AddPartitionsToTxn names; alice has none on the
    coordinator's state topic (no client may write it), yet AddOffsetsToTxn adds it for her, as
    Kafka's transaction coordinator adds ``__consumer_offsets``."""
    from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: PLC0415

    suffix = secured.suffix
    consumer = Consumer(
        _through_gateway(secured, "alice", **{"group.id": secured.group, "enable.auto.commit": False})
    )
    producer = Producer(_through_gateway(secured, "alice", **{"transactional.id": f"alice-tx-{suffix}"}))
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(secured.out, b"copied")
        producer.send_offsets_to_transaction(
            [TopicPartition(secured.topic, 0, 7)], consumer.consumer_group_metadata(), 30
        )
        producer.commit_transaction(30)
        deadline = time.monotonic() + 30
        committed = -1
        while committed != 7 and time.monotonic() < deadline:
            committed = consumer.committed([TopicPartition(secured.topic, 0)], timeout=10)[0].offset
        assert committed == 7
    finally:
        consumer.close()


def _committed(
    secured: Secured, user: str, group: str, partitions: list[tuple[str, int]], *, direct: bool
) -> dict[Any, int]:
    """OffsetFetch v8 of ``group`` as ``user``: (topic, partition) -> offset or error code, or
    {"group": code} when the group is refused."""
    from kio.schema.offset_fetch.v8.request import (  # noqa: PLC0415
        OffsetFetchRequest,
        OffsetFetchRequestGroup,
        OffsetFetchRequestTopics,
    )

    topics = tuple(OffsetFetchRequestTopics(name=t, partition_indexes=(i32(p),)) for t, p in partitions)
    body = OffsetFetchRequest(groups=(OffsetFetchRequestGroup(group_id=GroupId(group), topics=topics),))
    (answer,) = _ask(secured, user, body, direct=direct).groups
    if answer.error_code != ErrorCode.none:
        return {"group": answer.error_code.value}
    return {
        (t.name, p.partition_index): p.error_code.value if p.error_code != ErrorCode.none else p.committed_offset
        for t in answer.topics
        for p in t.partitions
    }


def test_a_group_adopted_from_kafka_shows_a_client_only_what_kafka_would(secured: Secured) -> None:
    """Issue 40, no confused deputy: the gateway imports a group's offsets from Kafka's own
    coordinator under the coordinator's identity, but a client learns of them only what Kafka
    itself would tell that client. Bob, with no right on the group, is refused as Kafka refuses
    him, and his touch imports nothing; alice, who may describe the group and one of its two
    topics, gets exactly Kafka's answer: the offset of her topic, TOPIC_AUTHORIZATION_FAILED for
    the other."""
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415
    from confluent_kafka.admin import AclOperation, NewTopic, ResourceType  # noqa: PLC0415

    group, secret = f"cd-adopt-{uuid.uuid4().hex[:6]}", f"cd-secret-{uuid.uuid4().hex[:6]}"
    kafka_admin = _admin(secured.kafka)  # alive until its futures are done
    for future in kafka_admin.create_topics([NewTopic(secret, 1, 1)]).values():
        future.result(30)
    _allow(secured.kafka, "alice", ResourceType.GROUP, group, AclOperation.DESCRIBE)
    owner = Consumer({**secured.kafka.client_config("admin"), "group.id": group, "enable.auto.commit": False})
    owner.commit(offsets=[TopicPartition(secured.topic, 0, 3), TopicPartition(secret, 0, 5)], asynchronous=False)
    owner.close()
    partitions = [(secured.topic, 0), (secret, 0)]
    adoption = secured.cluster.gateway.group_handler.adoption
    assert adoption is not None

    bob_direct = _committed(secured, "bob", group, partitions, direct=True)
    assert bob_direct == {"group": ErrorCode.group_authorization_failed.value}
    assert _committed(secured, "bob", group, partitions, direct=False) == bob_direct
    assert group not in adoption.ours  # refused before the gateway looked upstream

    alice_direct = _committed(secured, "alice", group, partitions, direct=True)
    assert alice_direct == {(secured.topic, 0): 3, (secret, 0): ErrorCode.topic_authorization_failed.value}
    deadline = time.monotonic() + 45  # the gateway reads Kafka's ACLs every 30 s: alice's is new
    while (through := _committed(secured, "alice", group, partitions, direct=False)) == bob_direct:
        assert time.monotonic() < deadline, "the gateway never learnt alice's ACL"
        assert group not in adoption.ours
        time.sleep(1)
    assert through == alice_direct
    assert group in adoption.ours


def test_a_gateway_without_sasl_relay_refuses_to_start_in_front_of_kafkas_acls_unless_allowed(
    secured: Secured, tmp_path: Path
) -> None:
    """Credentials mode: the gateway checks the clients' passwords itself, so their requests
    would reach Kafka as the coordinator, a super user."""
    users = tmp_path / "users.json"
    users.write_text('{"mallory": "mallory-secret"}')
    env = {
        **os.environ,
        ENV["protocol"]: "SASL_SSL",
        ENV["ssl_cafile"]: str(secured.pki.ca),
        ENV["sasl_mechanism"]: "SCRAM-SHA-256",
        ENV["sasl_username"]: "coordinator",
        ENV["sasl_password"]: USERS["coordinator"],
    }
    command = [
        sys.executable, "-m", "groupcoord.cli", "gateway", "--host", "127.0.0.1", "--port", "0",
        "--kafka", f"{secured.kafka.host}:{secured.kafka.port}",
        "--listener-sasl", "credentials", "--listener-sasl-credentials", str(users),
    ]  # fmt: skip
    refused = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode != 0
    last = refused.stderr.strip().splitlines()[-1]
    assert (
        "refusing to start" in last
        and "User:coordinator" in last
        and "--allow-shared-upstream-identity" in last
    )

    allowed = subprocess.Popen(
        [*command, "--allow-shared-upstream-identity"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert allowed.stdout is not None
        assert re.search(r"gateway ready: bootstrap \S+:\d+", allowed.stdout.readline())
    finally:
        stop_process_group(allowed)


async def test_passthrough_in_front_of_kafka_without_an_authorizer_authorizes_no_group_api(
    kafka: ApacheKafka, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka without ``authorizer.class.name`` answers DescribeAcls SECURITY_DISABLED: the
    default policy of a passthrough gateway is then none, as Kafka's own."""
    options = GatewayOptions(
        (kafka.host, kafka.port),
        port=0,
        upstream_security=KafkaSecurity(),
        listener_security=ListenerSecurity(sasl="passthrough"),
    )
    with caplog.at_level(logging.INFO, logger="groupcoord.gateway.assembly"):
        gateway = await build_gateway(options, LeadershipTable(partitions=4))
    try:
        assert isinstance(gateway.group_handler, GroupApis) and gateway.group_handler.authorization is None
        assert "the upstream has no authorizer" in caplog.text
    finally:
        await gateway.stop()
