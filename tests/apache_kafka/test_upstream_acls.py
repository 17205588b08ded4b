"""Issue 22, security end to end for real: Kafka 4.4 with SCRAM users and ``StandardAuthorizer``
(only the brokers and the coordinator's principal are super users), real ACLs created with
confluent-kafka's AdminClient, and groupcoord's gateway in front of it with a SASL_SSL listener
in ``passthrough`` (the client's SCRAM exchange is relayed to Kafka, which checks it) and the
group ACLs read from Kafka itself (``--acl-source upstream``).

alice may READ topics and groups prefixed ``app-``: she consumes as ``app-1``, is refused group
``other`` with the error Kafka's own coordinator gives her for it, and cannot produce to a topic
she may only read, refused by Kafka itself: the gateway forwards her Produce under her own
identity and relays Kafka's answer, the same answer she gets from Kafka directly.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from real_parts import start_apache_kafka

from groupcoord.authorization.upstream_acls import UpstreamAclSource
from groupcoord.common.kafka_security import ENV
from groupcoord.gateway.security.listener_security import ListenerSecurity
from groupcoord.local_cluster import ClusterOptions
from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka
from tests.security.tls import make_pki

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

USERS = {"coordinator": "coordinator-secret", "alice": "alice-secret"}
RECORDS = 3


@pytest.fixture(scope="module")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    directory = tmp_path_factory.mktemp("kafka-4.4-sasl")
    pki = make_pki(directory / "pki")
    k = start_apache_kafka(
        "kafka-4.4",
        directory / "kafka",
        security="sasl_ssl",
        scram_users=USERS,
        super_users=("coordinator",),
        tls=(pki.server_cert, pki.server_key, pki.ca),
    )
    try:
        yield k
    finally:
        k.stop()


@pytest.fixture(scope="module")
def app_topic(secure_kafka: ApacheKafka) -> str:
    """A topic of ``app-`` records, and alice's ACLs, made by the coordinator (a super user)."""
    admin = AdminClient(secure_kafka.client_config("coordinator"))
    name = f"app-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    bindings = [
        AclBinding(rtype, "app-", ResourcePatternType.PREFIXED, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
        for rtype in (ResourceType.TOPIC, ResourceType.GROUP)
    ]
    for fut in admin.create_acls(bindings).values():
        fut.result(30)
    producer = Producer(secure_kafka.client_config("coordinator"))
    for i in range(RECORDS):
        producer.produce(name, b"%d" % i)
    assert producer.flush(30) == 0
    return name


@pytest.fixture(scope="module")
def secure_cluster(
    secure_kafka: ApacheKafka, app_topic: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BackgroundCluster]:
    """groupcoord in front of ``secure_kafka``: its shards and gateway reach Kafka as the
    coordinator (SASL_SSL, from the environment as on a pod), clients meet a SASL_SSL listener
    whose SCRAM exchanges are relayed to Kafka, and the group ACLs are Kafka's."""
    cert, key, ca = secure_kafka.tls or (None, None, None)
    upstream = {
        "protocol": "SASL_SSL",
        "ssl_cafile": str(ca),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "coordinator",
        "sasl_password": USERS["coordinator"],
    }
    with pytest.MonkeyPatch.context() as env:
        for name, value in upstream.items():
            env.setenv(ENV[name], value)  # the shard processes inherit it
        options = ClusterOptions(
            port=0,
            partitions=4,
            metrics=False,
            state_topic=f"__acl_{uuid.uuid4().hex[:6]}",
            listener_security=ListenerSecurity(ssl_certfile=str(cert), ssl_keyfile=str(key), sasl="passthrough"),
            acl_policy=UpstreamAclSource(super_users=("User:coordinator",)),
        )
        with BackgroundCluster((secure_kafka.host, secure_kafka.port), options) as cluster:
            yield cluster


def alice(kafka: ApacheKafka, bootstrap: str, **extra: Any) -> dict[str, Any]:
    return kafka.client_config("alice", **{"bootstrap.servers": bootstrap, **extra})


def consume(config: dict[str, Any], topic: str, group: str, protocol: str) -> tuple[int, set[str]]:
    """(records seen, names of the errors seen) within a bounded time."""
    consumer = Consumer(
        {**config, "group.id": group, "group.protocol": protocol, "auto.offset.reset": "earliest"}
    )
    seen, errors = 0, set()
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while seen < RECORDS and not errors and time.monotonic() < deadline:
            message = consumer.poll(0.3)
            if message is None:
                continue
            if message.error() is not None:
                errors.add(message.error().name())
            else:
                seen += 1
    finally:
        consumer.close()
    return seen, errors


def produce_error(config: dict[str, Any], topic: str) -> str | None:
    """The name of the error alice's one record was refused with (None: it was written)."""
    outcome: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": 20000, "retries": 0})
    producer.produce(topic, b"not hers", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(30)
    assert len(outcome) == 1, "the delivery report never came"
    return None if outcome[0] is None else outcome[0].name()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_alice_consumes_as_app_1_and_kafka_refuses_her_group_other_as_its_own_coordinator_does(
    secure_kafka: ApacheKafka, secure_cluster: BackgroundCluster, app_topic: str, protocol: str
) -> None:
    through_gateway = alice(secure_kafka, secure_cluster.bootstrap)
    assert consume(through_gateway, app_topic, f"app-1-{protocol}", protocol) == (RECORDS, set())
    refused = consume(through_gateway, app_topic, f"other-{protocol}", protocol)
    # Kafka's own coordinator, asked by the same client for the same group, answers the same
    assert refused == consume(alice(secure_kafka, secure_kafka.bootstrap), app_topic, f"other-{protocol}", protocol)
    assert refused == (0, {"GROUP_AUTHORIZATION_FAILED"})


def test_kafka_refuses_alice_writing_a_topic_she_may_only_read(
    secure_kafka: ApacheKafka, secure_cluster: BackgroundCluster, app_topic: str
) -> None:
    refused = produce_error(alice(secure_kafka, secure_cluster.bootstrap), app_topic)
    assert refused == "TOPIC_AUTHORIZATION_FAILED"
    assert produce_error(alice(secure_kafka, secure_kafka.bootstrap), app_topic) == refused
    # (and the gateway relayed her own identity: the coordinator, a super user, may write there)
    assert produce_error(secure_kafka.client_config("coordinator", **{"bootstrap.servers": secure_cluster.bootstrap}), app_topic) is None
