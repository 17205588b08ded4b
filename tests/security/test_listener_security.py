"""Client-facing security: TLS listeners, client certificates and SASL with Kafka's handshake.

The whole local cluster (shards, control plane, gateway) runs in front of the session broker
with TLS on its listeners and SASL from a credential store; real clients (confluent-kafka in
a classic and a KIP-848 group, kafka-python and aiokafka in classic groups) consume over
SASL_SSL with SCRAM-SHA-512 and PLAIN. A wrong password is an authentication error and joins
no group; plaintext is refused; anything before authentication closes the connection.
"""

from __future__ import annotations

import json
import socket
import ssl
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.gateway.security.listener_security import ListenerSecurity
from groupcoord.local_cluster import ClusterOptions
from groupcoord_testing import BackgroundCluster
from tests.security.tls import Pki, make_pki

pytestmark = pytest.mark.broker

USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def credentials(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("creds") / "users.json"
    path.write_text(json.dumps(USERS))
    return path


@pytest.fixture(scope="module")
def secure_cluster(broker: EmbeddedBroker, pki: Pki, credentials: Path) -> Iterator[BackgroundCluster]:
    security = ListenerSecurity(
        ssl_certfile=str(pki.server_cert),
        ssl_keyfile=str(pki.server_key),
        sasl="credentials",
        sasl_credentials=str(credentials),
    )
    options = ClusterOptions(
        port=0,
        partitions=8,
        metrics=False,
        state_topic=f"__sec_{uuid.uuid4().hex[:6]}",
        listener_security=security,
    )
    with BackgroundCluster((broker.host, broker.port), options) as cluster:
        yield cluster


def confluent_config(pki: Pki, mechanism: str, user: str = "alice", password: str | None = None) -> dict:
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": USERS.get(user, "") if password is None else password,
        "ssl.ca.location": str(pki.ca),
    }


def make_topic(bootstrap: str, config: dict, partitions: int = 2, messages: int = 6) -> str:
    from confluent_kafka import Producer  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    topic = f"sec-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, **config})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(20)
    producer = Producer({"bootstrap.servers": bootstrap, **config})
    for i in range(messages):
        producer.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert producer.flush(20) == 0
    return topic


def confluent_consume(bootstrap: str, config: dict, topic: str, group: str, protocol: str, expected: int) -> int:
    from confluent_kafka import Consumer  # noqa: PLC0415

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **config,
        }
    )
    try:
        consumer.subscribe([topic])
        seen, deadline = 0, time.monotonic() + 60
        while seen < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen += 1
        consumer.commit(asynchronous=False)
        return seen
    finally:
        consumer.close()


@pytest.mark.parametrize(
    ("mechanism", "protocol"),
    [("SCRAM-SHA-512", "classic"), ("SCRAM-SHA-512", "consumer"), ("PLAIN", "classic"), ("PLAIN", "consumer")],
)
def test_confluent_kafka_consumes_over_sasl_ssl(
    secure_cluster: BackgroundCluster, pki: Pki, mechanism: str, protocol: str
) -> None:
    config = confluent_config(pki, mechanism)
    topic = make_topic(secure_cluster.bootstrap, config)
    assert confluent_consume(secure_cluster.bootstrap, config, topic, f"g-{topic}", protocol, 6) == 6


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_kafka_python_consumes_over_sasl_ssl(secure_cluster: BackgroundCluster, pki: Pki, mechanism: str) -> None:
    from kafka import KafkaConsumer  # noqa: PLC0415

    topic = make_topic(secure_cluster.bootstrap, confluent_config(pki, "SCRAM-SHA-256", "bob"))
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=secure_cluster.bootstrap,
        group_id=f"kp-{topic}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        security_protocol="SASL_SSL",
        sasl_mechanism=mechanism,
        sasl_plain_username="alice",
        sasl_plain_password=USERS["alice"],
        ssl_cafile=str(pki.ca),
        consumer_timeout_ms=30000,
    )
    try:
        seen = 0
        for _ in consumer:
            seen += 1
            if seen == 6:
                break
        consumer.commit()
        assert seen == 6
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
async def test_aiokafka_consumes_over_sasl_ssl(secure_cluster: BackgroundCluster, pki: Pki, mechanism: str) -> None:
    import asyncio  # noqa: PLC0415

    from aiokafka import AIOKafkaConsumer  # noqa: PLC0415
    from aiokafka.helpers import create_ssl_context  # noqa: PLC0415

    topic = await asyncio.to_thread(make_topic, secure_cluster.bootstrap, confluent_config(pki, "PLAIN"))
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=secure_cluster.bootstrap,
        group_id=f"aio-{topic}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        security_protocol="SASL_SSL",
        sasl_mechanism=mechanism,
        sasl_plain_username="alice",
        sasl_plain_password=USERS["alice"],
        ssl_context=create_ssl_context(cafile=str(pki.ca)),
    )
    await consumer.start()
    try:
        seen = 0
        async with asyncio.timeout(60):
            while seen < 6:
                batch = await consumer.getmany(timeout_ms=500)
                seen += sum(len(v) for v in batch.values())
        await consumer.commit()
        assert seen == 6
    finally:
        await consumer.stop()


def list_group_ids(bootstrap: str, config: dict) -> set[str]:
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    admin = AdminClient({"bootstrap.servers": bootstrap, **config})
    result = admin.list_consumer_groups().result(20)
    return {g.group_id for g in result.valid}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_a_wrong_password_is_an_authentication_error_and_joins_no_group(
    secure_cluster: BackgroundCluster, pki: Pki, mechanism: str
) -> None:
    from confluent_kafka import Consumer, KafkaError  # noqa: PLC0415

    errors: list[KafkaError] = []
    group = f"wrong-{uuid.uuid4().hex[:6]}"
    consumer = Consumer(
        {
            "bootstrap.servers": secure_cluster.bootstrap,
            "group.id": group,
            "error_cb": errors.append,
            **confluent_config(pki, mechanism, password="not-it"),
        }
    )
    try:
        consumer.subscribe(["anything"])
        deadline = time.monotonic() + 20
        while not errors and time.monotonic() < deadline:
            consumer.poll(0.3)
    finally:
        consumer.close()
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert group not in list_group_ids(secure_cluster.bootstrap, confluent_config(pki, "PLAIN"))


def _frame(api_key: int, version: int, correlation_id: int, body: bytes, client_id: bytes = b"raw") -> bytes:
    payload = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id + body
    return struct.pack(">i", len(payload)) + payload


def _tls_socket(address: tuple[str, int], pki: Pki) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(pki.ca))
    return context.wrap_socket(socket.create_connection(address, timeout=10), server_hostname=address[0])


def _read_frame(sock: socket.socket) -> bytes | None:
    """A response frame, or None when the gateway closed the connection."""
    try:
        head = sock.recv(4)
        if len(head) < 4:
            return None
        (size,) = struct.unpack(">i", head)
        data = b""
        while len(data) < size:
            chunk = sock.recv(size - len(data))
            if not chunk:
                return None
            data += chunk
        return data
    except (ConnectionError, ssl.SSLError, OSError):
        return None


def _address(cluster: BackgroundCluster) -> tuple[str, int]:
    host, port = cluster.bootstrap.rsplit(":", 1)
    return host, int(port)


def test_plaintext_to_a_tls_listener_is_refused(secure_cluster: BackgroundCluster) -> None:
    with socket.create_connection(_address(secure_cluster), timeout=10) as sock:
        sock.sendall(_frame(18, 0, 1, b""))  # ApiVersions v0, in the clear
        assert _read_frame(sock) is None


# A JoinGroup v0 body: group "g", session 10 s, no member id, protocol type "consumer", no protocols.
JOIN_GROUP_V0 = struct.pack(">h", 1) + b"g" + struct.pack(">i", 10000) + struct.pack(">h", 0)
JOIN_GROUP_V0 += struct.pack(">h", 8) + b"consumer" + struct.pack(">i", 0)


def _handshake_v1(mechanism: bytes) -> bytes:
    return _frame(17, 1, 2, struct.pack(">h", len(mechanism)) + mechanism)


def _authenticate_v1(token: bytes, correlation_id: int = 3) -> bytes:
    return _frame(36, 1, correlation_id, struct.pack(">i", len(token)) + token)


@pytest.mark.parametrize(
    "exchange",
    [
        pytest.param([_frame(11, 0, 1, JOIN_GROUP_V0)], id="JoinGroup-before-handshake"),
        pytest.param([_handshake_v1(b"PLAIN"), _frame(11, 0, 5, JOIN_GROUP_V0)], id="JoinGroup-mid-handshake"),
        pytest.param([_handshake_v1(b"GSSAPI")], id="wrong-mechanism"),
        pytest.param([_authenticate_v1(b"\0alice\0alice-secret")], id="authenticate-before-handshake"),
        pytest.param([_handshake_v1(b"SCRAM-SHA-512"), _authenticate_v1(b"n,,n=alice")], id="truncated-scram"),
        pytest.param([_handshake_v1(b"SCRAM-SHA-512"), _authenticate_v1(b"\xff" * 300_000)], id="oversized-garbage"),
        pytest.param(
            [_handshake_v1(b"SCRAM-SHA-256"), _authenticate_v1(b"n,,n=alice,r=abc"), _authenticate_v1(b"c=biws,r=abc,p=AAAA", 4)],
            id="replayed-nonce",
        ),
        pytest.param([_handshake_v1(b"PLAIN"), _frame(36, 1, 3, b"\x00\x00")], id="truncated-frame-body"),
    ],
)
def test_a_bad_sasl_exchange_closes_that_connection_only(
    secure_cluster: BackgroundCluster, pki: Pki, exchange: list[bytes]
) -> None:
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    good = AdminClient({"bootstrap.servers": secure_cluster.bootstrap, **confluent_config(pki, "SCRAM-SHA-512")})
    assert good.list_topics(timeout=10).topics is not None
    with _tls_socket(_address(secure_cluster), pki) as sock:
        answers = []
        for message in exchange:
            try:
                sock.sendall(message)
            except OSError:
                break
            answers.append(_read_frame(sock))
        # the connection ends: nothing more is answered
        with pytest.raises((OSError, AssertionError)):
            sock.sendall(_frame(18, 0, 9, b""))
            assert _read_frame(sock) is not None
    # the other client, mid-session, is untouched
    assert good.list_topics(timeout=10).topics is not None


def test_handshake_answers_are_kafkas(secure_cluster: BackgroundCluster, pki: Pki) -> None:
    with _tls_socket(_address(secure_cluster), pki) as sock:
        sock.sendall(_handshake_v1(b"GSSAPI"))
        answer = _read_frame(sock)
        assert answer is not None
        correlation_id, error_code = struct.unpack(">ih", answer[:6])
        assert (correlation_id, error_code) == (2, 33)  # UNSUPPORTED_SASL_MECHANISM
        assert b"SCRAM-SHA-512" in answer and b"PLAIN" in answer
        assert _read_frame(sock) is None  # and the connection closes
    with _tls_socket(_address(secure_cluster), pki) as sock:
        sock.sendall(_handshake_v1(b"PLAIN"))
        assert struct.unpack(">ih", _read_frame(sock)[:6]) == (2, 0)
        sock.sendall(_authenticate_v1(b"\0alice\0wrong"))
        answer = _read_frame(sock)
        assert answer is not None and struct.unpack(">ih", answer[:6]) == (3, 58)  # SASL_AUTHENTICATION_FAILED
        assert b"invalid credentials" in answer
        assert _read_frame(sock) is None


def _scram_round(sock: ssl.SSLSocket, message: bytes, correlation_id: int) -> tuple[int, bytes]:
    """(error code, server message) of one SaslAuthenticate v1 round."""
    sock.sendall(_authenticate_v1(message, correlation_id))
    answer = _read_frame(sock)
    assert answer is not None
    (_, error) = struct.unpack(">ih", answer[:6])
    message_len = struct.unpack(">h", answer[6:8])[0]
    offset = 8 + max(message_len, 0)
    (size,) = struct.unpack(">i", answer[offset : offset + 4])
    return error, answer[offset + 4 : offset + 4 + size]


def test_a_replayed_scram_exchange_is_refused(secure_cluster: BackgroundCluster, pki: Pki) -> None:
    """An eavesdropper replaying a successful exchange meets a new server nonce: its old
    proof does not verify, and only that connection closes."""
    from scramp import ScramClient  # noqa: PLC0415

    client = ScramClient(["SCRAM-SHA-512"], "alice", USERS["alice"])
    first = client.get_client_first().encode()
    with _tls_socket(_address(secure_cluster), pki) as sock:
        sock.sendall(_handshake_v1(b"SCRAM-SHA-512"))
        assert struct.unpack(">ih", _read_frame(sock)[:6]) == (2, 0)
        error, server_first = _scram_round(sock, first, 3)
        assert error == 0
        client.set_server_first(server_first.decode())
        final = client.get_client_final().encode()
        error, server_final = _scram_round(sock, final, 4)
        assert error == 0
        client.set_server_final(server_final.decode())  # the server proved itself too
    with _tls_socket(_address(secure_cluster), pki) as sock:
        sock.sendall(_handshake_v1(b"SCRAM-SHA-512"))
        assert struct.unpack(">ih", _read_frame(sock)[:6]) == (2, 0)
        error, _ = _scram_round(sock, first, 3)
        assert error == 0
        error, _ = _scram_round(sock, final, 4)  # the old nonce and proof
        assert error == 58  # SASL_AUTHENTICATION_FAILED
        assert _read_frame(sock) is None


def test_sasl_outcomes_are_counted(secure_cluster: BackgroundCluster, pki: Pki) -> None:
    from prometheus_client import REGISTRY  # noqa: PLC0415

    def count(result: str) -> float:
        return REGISTRY.get_sample_value(
            "groupcoord_sasl_authentications_total", {"mechanism": "PLAIN", "result": result}
        ) or 0.0

    before = count("succeeded"), count("failed")
    for password in (b"alice-secret", b"wrong"):
        with _tls_socket(_address(secure_cluster), pki) as sock:
            sock.sendall(_handshake_v1(b"PLAIN"))
            _read_frame(sock)
            sock.sendall(_authenticate_v1(b"\0alice\0" + password))
            _read_frame(sock)
    assert (count("succeeded"), count("failed")) == (before[0] + 1, before[1] + 1)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--listener-sasl", "credentials"], "needs GROUPCOORD_LISTENER_SASL_CREDENTIALS"),
        (["--listener-ssl-certfile", "/nowhere.crt"], "both a certificate and its key"),
        (["--listener-sasl", "credentials", "--listener-sasl-credentials", "{bad}"], "credentials"),
        (["--listener-sasl-mechanisms", "GSSAPI", "--listener-sasl", "passthrough"], "GSSAPI"),
        (["--acl-file", "{bad}"], "authorization: ACL file"),
    ],
)
def test_bad_listener_and_acl_settings_stop_groupcoord_up_with_one_line(
    tmp_path: Path, flags: list[str], message: str
) -> None:
    import os  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    argv = [f if f != "{bad}" else str(bad) for f in flags]
    done = subprocess.run(
        [sys.executable, "-m", "groupcoord.cli", "up", "--port", "0", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("GROUPCOORD_")},
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert message in last and "Traceback" not in done.stderr, done.stderr[-2000:]
