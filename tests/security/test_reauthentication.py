"""KIP-368 re-authentication on a SASL listener with a session lifetime (Kafka's
connections.max.reauth.ms): librdkafka re-authenticates on its open connections and keeps
working; a client that does not is cut off at its next request after expiry."""

from __future__ import annotations

import json
import socket
import struct
import time
import uuid
from pathlib import Path

import pytest

from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.gateway.security.listener_security import ListenerSecurity
from groupcoord_testing import BackgroundCluster
from tests.security.test_listener_security import _frame, _handshake_v1, _read_frame

pytestmark = pytest.mark.broker
LIFETIME_MS = 1500


@pytest.fixture
def gateway(broker: EmbeddedBroker, tmp_path: Path) -> BackgroundCluster:
    users = tmp_path / "users.json"
    users.write_text(json.dumps({"alice": "alice-secret"}))
    security = ListenerSecurity(
        sasl="credentials", sasl_credentials=str(users), sasl_session_lifetime_ms=LIFETIME_MS
    )
    with BackgroundCluster.proxy((broker.host, broker.port), listener_security=security) as gw:
        yield gw


def test_librdkafka_reauthenticates_and_keeps_producing(gateway: BackgroundCluster) -> None:
    from confluent_kafka import Producer  # noqa: PLC0415

    errors: list[object] = []
    producer = Producer(
        {
            "bootstrap.servers": gateway.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
            "error_cb": errors.append,
        }
    )
    topic = f"reauth-{uuid.uuid4().hex[:6]}"
    delivered: list[object] = []
    deadline = time.monotonic() + 3 * LIFETIME_MS / 1000
    while time.monotonic() < deadline:
        producer.produce(topic, b"x", on_delivery=lambda err, msg: delivered.append(err))
        producer.poll(0.2)
    assert producer.flush(20) == 0
    assert delivered and all(err is None for err in delivered), delivered[:3]
    assert not errors, errors
    assert max(s.sasl.reauthentications for s in gateway.gateway.sessions) >= 1


def test_a_request_after_expiry_without_reauthentication_closes_the_connection(gateway: BackgroundCluster) -> None:
    host, port = gateway.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(_handshake_v1(b"PLAIN"))
        assert struct.unpack(">ih", _read_frame(sock)[:6]) == (2, 0)
        token = b"\0alice\0alice-secret"
        sock.sendall(_frame(36, 1, 3, struct.pack(">i", len(token)) + token))
        answer = _read_frame(sock)
        assert answer is not None and struct.unpack(">ih", answer[:6]) == (3, 0)
        assert struct.unpack(">q", answer[-8:])[0] == LIFETIME_MS  # session_lifetime_ms (v1)
        sock.sendall(_frame(18, 0, 4, b""))
        assert _read_frame(sock) is not None  # within the session
        time.sleep(LIFETIME_MS / 1000 + 0.3)
        sock.sendall(_frame(18, 0, 5, b""))
        assert _read_frame(sock) is None


def test_reauthentication_keeps_mechanism_and_principal() -> None:
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest  # noqa: PLC0415
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest  # noqa: PLC0415

    from groupcoord.gateway.security.sasl_server import CredentialStore, SaslServer  # noqa: PLC0415

    store = CredentialStore()
    store.add_password("alice", "a")
    store.add_password("bob", "b")
    now = [0.0]

    def session() -> SaslServer:
        server = SaslServer(("PLAIN", "SCRAM-SHA-256"), store, 1000, clock=lambda: now[0])
        assert not server.handshake(1, SaslHandshakeRequest(mechanism="PLAIN")).close
        assert not server.authenticate(2, SaslAuthenticateRequest(auth_bytes=b"\0alice\0a")).close
        return server

    server = session()
    assert not server.expired()
    now[0] = 1.5
    assert server.expired()
    assert not server.handshake(1, SaslHandshakeRequest(mechanism="PLAIN")).close
    assert not server.authenticate(2, SaslAuthenticateRequest(auth_bytes=b"\0alice\0a")).close
    assert not server.expired() and server.reauthentications == 1
    # another principal, or another mechanism, ends the connection
    server = session()
    server.handshake(1, SaslHandshakeRequest(mechanism="PLAIN"))
    assert server.authenticate(2, SaslAuthenticateRequest(auth_bytes=b"\0bob\0b")).close
    server = session()
    assert server.handshake(1, SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).close
    # without a session lifetime there is no re-authentication
    plain = SaslServer(("PLAIN",), store)
    plain.handshake(1, SaslHandshakeRequest(mechanism="PLAIN"))
    plain.authenticate(2, SaslAuthenticateRequest(auth_bytes=b"\0alice\0a"))
    assert plain.handshake(1, SaslHandshakeRequest(mechanism="PLAIN")).close and not plain.expired()
