"""A SASL-authenticated user with READ on groups prefixed ``app-`` consumes as ``app-1`` and
gets GROUP_AUTHORIZATION_FAILED as ``other`` (confluent-kafka, classic and KIP-848), with the
policy read from an ACL file as ``groupcoord up --acl-file`` reads it."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest

from groupcoord.authorization.acl_file import AclFile
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.gateway.security.listener_security import ListenerSecurity
from groupcoord.local_cluster import ClusterOptions
from groupcoord_testing import BackgroundCluster

pytestmark = pytest.mark.broker

POLICY = {
    "superUsers": ["User:admin"],
    "acls": [
        {"principal": "User:alice", "operation": "READ", "resourceType": "GROUP", "patternType": "PREFIXED", "resourceName": "app-"},
        {"principal": "User:alice", "operation": "READ", "resourceType": "TOPIC", "resourceName": "*"},
        {"principal": "User:alice", "operation": "ALL", "resourceType": "GROUP", "resourceName": "app-secret"},
        {"principal": "User:alice", "operation": "READ", "permissionType": "DENY", "resourceType": "GROUP", "resourceName": "app-secret"},
    ],
}


@pytest.fixture(scope="module")
def cluster(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundCluster]:
    directory = tmp_path_factory.mktemp("acl")
    (directory / "users.json").write_text(json.dumps({"alice": "alice-secret", "admin": "admin-secret"}))
    (directory / "acls.json").write_text(json.dumps(POLICY))
    options = ClusterOptions(
        port=0,
        partitions=4,
        metrics=False,
        state_topic=f"__aclrc_{uuid.uuid4().hex[:6]}",
        listener_security=ListenerSecurity(sasl="credentials", sasl_credentials=str(directory / "users.json")),
        acl_policy=AclFile(directory / "acls.json"),
    )
    with BackgroundCluster((broker.host, broker.port), options) as c:
        yield c


def config(user: str) -> dict:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
    }


@pytest.fixture(scope="module")
def topic(cluster: BackgroundCluster) -> str:
    from confluent_kafka import Producer  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    name = f"acl-rc-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **config("admin")})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(20)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, **config("admin")})
    for i in range(3):
        producer.produce(name, b"%d" % i)
    assert producer.flush(20) == 0
    return name


def consume(
    bootstrap: str, topic: str, group: str, protocol: str, settings: dict | None = None
) -> tuple[int, set[str]]:
    """(records seen, errors seen) within a bounded time. An error is the code's name; with
    KIP-848 librdkafka raises a refused heartbeat as a fatal error naming the broker's error."""
    from confluent_kafka import Consumer  # noqa: PLC0415

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            **(config("alice") if settings is None else settings),
        }
    )
    seen, errors = 0, set()
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while seen < 3 and not errors and time.monotonic() < deadline:
            message = consumer.poll(0.3)
            if message is None:
                continue
            if message.error() is not None:
                error = message.error()
                errors.add("GROUP_AUTHORIZATION_FAILED" if "Group authorization failed" in error.str() else error.name())
            else:
                seen += 1
    finally:
        consumer.close()
    return seen, errors


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_prefixed_read_lets_app_groups_consume_and_refuses_others(
    cluster: BackgroundCluster, topic: str, protocol: str
) -> None:
    assert consume(cluster.bootstrap, topic, f"app-{protocol}-1", protocol) == (3, set())
    seen, errors = consume(cluster.bootstrap, topic, f"other-{protocol}", protocol)
    assert seen == 0 and errors == {"GROUP_AUTHORIZATION_FAILED"}
    seen, errors = consume(cluster.bootstrap, topic, "app-secret", protocol)  # DENY READ beats ALLOW ALL
    assert seen == 0 and errors == {"GROUP_AUTHORIZATION_FAILED"}


def test_admin_describe_and_delete_follow_the_acls(cluster: BackgroundCluster, topic: str) -> None:
    from confluent_kafka import KafkaError  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    consume(cluster.bootstrap, topic, "app-listed", "classic")
    alice = AdminClient({"bootstrap.servers": cluster.bootstrap, **config("alice")})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **config("admin")})
    listed = {g.group_id for g in alice.list_consumer_groups().result(20).valid}
    assert "app-listed" in listed and not any(g.startswith("other-") for g in listed)
    everything = {x.group_id for x in admin.list_consumer_groups().result(20).valid}  # a super user
    assert "app-listed" in everything and not any(g.startswith("other-") for g in everything)  # refused joins made none
    with pytest.raises(Exception) as refused:  # READ does not grant DELETE
        alice.delete_consumer_groups(["app-listed"])["app-listed"].result(20)
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert "app-listed" in {g.group_id for g in admin.list_consumer_groups().result(20).valid}


def test_the_client_certificate_subject_is_the_principal_acls_name(
    broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Mutual TLS without SASL: the ACLs name Kafka's certificate principal."""
    from confluent_kafka import Producer  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    from tests.security.tls import make_pki  # noqa: PLC0415

    directory = tmp_path_factory.mktemp("mtls-acl")
    pki = make_pki(directory / "pki")
    principal = "User:CN=client-1,OU=apps,O=groupcoord"
    policy = {
        "acls": [
            {"principal": principal, "operation": "READ", "resourceType": "GROUP", "patternType": "PREFIXED", "resourceName": "app-"},
            {"principal": principal, "operation": "READ", "resourceType": "TOPIC", "resourceName": "*"},
        ]
    }
    (directory / "acls.json").write_text(json.dumps(policy))
    options = ClusterOptions(
        port=0,
        partitions=4,
        metrics=False,
        state_topic=f"__mtls_{uuid.uuid4().hex[:6]}",
        listener_security=ListenerSecurity(
            ssl_certfile=str(pki.server_cert),
            ssl_keyfile=str(pki.server_key),
            ssl_cafile=str(pki.ca),
            ssl_client_auth="required",
        ),
        acl_policy=AclFile(directory / "acls.json"),
    )
    tls = {
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki.ca),
        "ssl.certificate.location": str(pki.client_cert),
        "ssl.key.location": str(pki.client_key),
    }
    with BackgroundCluster((broker.host, broker.port), options) as c:
        topic = f"mtls-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": c.bootstrap, **tls})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(20)
        producer = Producer({"bootstrap.servers": c.bootstrap, **tls})
        for i in range(3):
            producer.produce(topic, b"%d" % i)
        assert producer.flush(20) == 0
        assert consume(c.bootstrap, topic, "app-mtls", "classic", tls) == (3, set())
        assert consume(c.bootstrap, topic, "other-mtls", "classic", tls) == (0, {"GROUP_AUTHORIZATION_FAILED"})


def test_kafka_python_and_aiokafka_consume_app_groups_and_are_refused_others(
    cluster: BackgroundCluster, topic: str
) -> None:
    """The other client libraries, authenticated as alice (SCRAM-SHA-512): they consume as an
    ``app-`` group and raise Kafka's GroupAuthorizationFailedError for ``other``."""
    import asyncio  # noqa: PLC0415

    import aiokafka  # noqa: PLC0415
    import aiokafka.errors  # noqa: PLC0415
    import kafka  # noqa: PLC0415
    import kafka.errors  # noqa: PLC0415

    sasl = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "alice-secret",
    }

    def with_kafka_python(group: str) -> int:
        consumer = kafka.KafkaConsumer(
            topic, bootstrap_servers=cluster.bootstrap, group_id=group, auto_offset_reset="earliest",
            enable_auto_commit=False, **sasl,
        )  # fmt: skip
        try:
            seen, deadline = 0, time.monotonic() + 30
            while seen < 3 and time.monotonic() < deadline:
                seen += sum(len(v) for v in consumer.poll(timeout_ms=500).values())
            return seen
        finally:
            consumer.close()

    assert with_kafka_python("app-kafka-python") == 3
    with pytest.raises(kafka.errors.GroupAuthorizationFailedError):
        with_kafka_python("other-kafka-python")

    async def with_aiokafka(group: str) -> int:
        consumer = aiokafka.AIOKafkaConsumer(
            topic, bootstrap_servers=cluster.bootstrap, group_id=group, auto_offset_reset="earliest",
            enable_auto_commit=False, **sasl,
        )  # fmt: skip
        await consumer.start()
        try:
            seen, deadline = 0, time.monotonic() + 30
            while seen < 3 and time.monotonic() < deadline:
                seen += sum(len(v) for v in (await consumer.getmany(timeout_ms=1000)).values())
            return seen
        finally:
            await consumer.stop()

    assert asyncio.run(with_aiokafka("app-aiokafka")) == 3
    with pytest.raises(aiokafka.errors.GroupAuthorizationFailedError):
        asyncio.run(with_aiokafka("other-aiokafka"))
