"""Who a connection is: client certificates (Kafka's ``User:<RFC 2253 subject>``) and SASL
relayed to the upstream (``passthrough``: the upstream checks the credentials).

The upstream of the relaying gateway is a second gateway that authenticates SASL itself, the
only SASL-enforcing Kafka endpoint available here (tansu 0.6.0 cannot hold SCRAM users in
memory storage with authentication on).
"""

from __future__ import annotations

import json
import socket
import ssl
import time
import uuid
from pathlib import Path

import pytest

from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.gateway.security.listener_security import ListenerSecurity, certificate_principal
from groupcoord_testing import BackgroundCluster
from tests.security.test_listener_security import USERS, _frame, _read_frame
from tests.security.tls import Pki, make_pki

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_certificate_principal_is_kafkas_rfc2253_subject() -> None:
    subject = ((("organizationName", "groupcoord"),), (("organizationalUnitName", "apps"),), (("commonName", "a,b"),))
    assert certificate_principal({"subject": subject}) == "User:CN=a\\,b,OU=apps,O=groupcoord"
    assert certificate_principal({}) is None


def _connect(address: tuple[str, int], pki: Pki, cert: Path | None, key: Path | None) -> bytes | None:
    context = ssl.create_default_context(cafile=str(pki.ca))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key))
    try:
        with context.wrap_socket(socket.create_connection(address, timeout=10), server_hostname=address[0]) as sock:
            sock.sendall(_frame(18, 0, 1, b""))
            return _read_frame(sock)
    except (ssl.SSLError, OSError):
        return None


def test_required_client_certificates_give_the_principal_and_refuse_the_rest(
    broker: EmbeddedBroker, pki: Pki
) -> None:
    security = ListenerSecurity(
        ssl_certfile=str(pki.server_cert),
        ssl_keyfile=str(pki.server_key),
        ssl_cafile=str(pki.ca),
        ssl_client_auth="required",
    )
    with BackgroundCluster.proxy((broker.host, broker.port), listener_security=security) as gw:
        host, port = gw.bootstrap.rsplit(":", 1)
        address = (host, int(port))
        assert _connect(address, pki, None, None) is None  # no certificate
        assert _connect(address, pki, pki.expired_client_cert, pki.expired_client_key) is None
        context = ssl.create_default_context(cafile=str(pki.ca))
        context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
        with context.wrap_socket(socket.create_connection(address, timeout=10), server_hostname=host) as sock:
            sock.sendall(_frame(18, 0, 1, b""))
            assert _read_frame(sock) is not None
            principals = {s.principal for s in gw.gateway.sessions}
        assert principals == {"User:CN=client-1,OU=apps,O=groupcoord"}


def test_passthrough_relays_the_clients_sasl_to_the_upstream_and_learns_the_principal(
    broker: EmbeddedBroker, pki: Pki, tmp_path: Path
) -> None:
    from confluent_kafka import Consumer, KafkaError, Producer  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    users = tmp_path / "users"
    users.mkdir()
    for user, password in USERS.items():  # a Kubernetes Secret mounted as a directory
        (users / user).write_text(password + "\n")
    checking = ListenerSecurity(sasl="credentials", sasl_credentials=str(users))
    relaying = ListenerSecurity(
        ssl_certfile=str(pki.server_cert), ssl_keyfile=str(pki.server_key), sasl="passthrough"
    )
    with BackgroundCluster.proxy((broker.host, broker.port), listener_security=checking) as upstream:
        host, port = upstream.bootstrap.rsplit(":", 1)
        with BackgroundCluster.proxy((host, int(port)), listener_security=relaying) as gw:
            config = {
                "bootstrap.servers": gw.bootstrap,
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "bob",
                "sasl.password": USERS["bob"],
                "ssl.ca.location": str(pki.ca),
            }
            topic = f"relay-{uuid.uuid4().hex[:6]}"
            admin = AdminClient(config)
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(20)
            producer = Producer(config)
            producer.produce(topic, b"x")
            assert producer.flush(20) == 0
            assert {s.principal for s in gw.gateway.sessions} == {"User:bob"}
            assert {s.principal for s in upstream.gateway.sessions} == {"User:bob"}

            errors: list[KafkaError] = []
            consumer = Consumer({**config, "group.id": "g", "sasl.password": "wrong", "error_cb": errors.append})
            try:
                consumer.subscribe([topic])
                deadline = time.monotonic() + 20
                while not errors and time.monotonic() < deadline:
                    consumer.poll(0.3)
            finally:
                consumer.close()
            assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


@pytest.mark.slow
def test_passthrough_in_front_of_the_coordinator_serves_groups_as_the_upstream_user(
    broker: EmbeddedBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole cluster with passthrough listeners: clients authenticate against the upstream
    (a credential-checking gateway), the coordinator itself uses its own upstream credentials
    from the environment, and both consumer protocols work."""
    from groupcoord.authorization.upstream_acls import UpstreamAclSource  # noqa: PLC0415
    from groupcoord.common.kafka_security import ENV  # noqa: PLC0415
    from groupcoord.local_cluster import ClusterOptions  # noqa: PLC0415
    from tests.security.test_listener_security import confluent_consume  # noqa: PLC0415

    users = tmp_path / "users.json"
    users.write_text(json.dumps({**USERS, "coordinator": "coordinator-secret"}))
    checking = ListenerSecurity(sasl="credentials", sasl_credentials=str(users))
    with BackgroundCluster.proxy((broker.host, broker.port), listener_security=checking) as upstream:
        host, port = upstream.bootstrap.rsplit(":", 1)
        for name, value in {
            "protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_username": "coordinator",
            "sasl_password": "coordinator-secret",
        }.items():
            monkeypatch.setenv(ENV[name], value)  # the shard processes inherit it
        options = ClusterOptions(
            port=0,
            partitions=4,
            metrics=False,
            state_topic=f"__pt_{uuid.uuid4().hex[:6]}",
            listener_security=ListenerSecurity(sasl="passthrough"),
            # the upstream's ACLs are the default policy; tansu holds none and enforces none,
            # which Kafka's allow.everyone.if.no.acl.found says
            acl_policy=UpstreamAclSource(allow_everyone_if_no_acl_found=True),
        )
        with BackgroundCluster((host, int(port)), options) as cluster:
            config = {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "alice",
                "sasl.password": USERS["alice"],
            }
            from confluent_kafka import Producer  # noqa: PLC0415
            from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

            topic = f"pt-{uuid.uuid4().hex[:6]}"
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **config})
            admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(20)
            producer = Producer({"bootstrap.servers": cluster.bootstrap, **config})
            for i in range(6):
                producer.produce(topic, b"%d" % i, partition=i % 2)
            assert producer.flush(20) == 0
            for protocol in ("classic", "consumer"):
                assert confluent_consume(cluster.bootstrap, config, topic, f"pt-{protocol}", protocol, 6) == 6
            principals = {s.principal for s in upstream.gateway.sessions}
            assert "User:alice" in principals and "User:coordinator" in principals
            wrong = {**config, "sasl.password": "wrong"}
            from confluent_kafka import Consumer, KafkaError  # noqa: PLC0415

            errors: list[KafkaError] = []
            consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "pt-wrong", "error_cb": errors.append, **wrong})
            try:
                consumer.subscribe([topic])
                deadline = time.monotonic() + 20
                while not errors and time.monotonic() < deadline:
                    consumer.poll(0.3)
            finally:
                consumer.close()
            assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
