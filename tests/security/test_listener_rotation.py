"""Listener certificates and credentials rotate on disk without a restart (issue 23).

Both are mounted the way Kubernetes mounts a Secret: files that are symlinks into a ``..data``
link, which an update swaps atomically to a new folder. After the swap, the next new TLS
connection is served the new certificate and the next authentication checks the new
password, while connections established before keep working. Real TLS sockets, and
confluent-kafka clients for what a user sees.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import struct
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.gateway.security.listener_security import ListenerSecurity
from groupcoord_testing import BackgroundCluster
from tests.security.tls import make_pki

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]
API_VERSIONS_V0 = struct.pack(">i", 12) + struct.pack(">hhih", 18, 0, 7, 2) + b"rt"


class SecretVolume:
    """A folder laid out as a mounted Secret: ``<key> -> ..data/<key>``, ``..data -> ..<n>``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.generation = 0
        root.mkdir(parents=True)

    def write(self, files: dict[str, bytes]) -> None:
        self.generation += 1
        folder = self.root / f"..{self.generation}"
        folder.mkdir()
        for name, content in files.items():
            (folder / name).write_bytes(content)
        link = self.root / "..data_tmp"
        link.symlink_to(folder.name)
        os.replace(link, self.root / "..data")  # the atomic swap the kubelet makes
        for name in files:
            if not (self.root / name).is_symlink():
                (self.root / name).symlink_to(f"..data/{name}")

    def path(self, name: str) -> str:
        return str(self.root / name)


def within(seconds: float, predicate: Callable[[], bool], what: str) -> float:
    """Seconds until ``predicate`` held (it must within ``seconds``)."""
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < seconds, f"timed out waiting for {what}"
        time.sleep(0.1)
    return time.monotonic() - start


def address(cluster: BackgroundCluster) -> tuple[str, int]:
    host, port = cluster.bootstrap.rsplit(":", 1)
    return host, int(port)


def api_versions(sock: ssl.SSLSocket) -> bool:
    """One ApiVersions v0 on ``sock``: answered?"""
    sock.sendall(API_VERSIONS_V0)
    head = sock.recv(4)
    if len(head) < 4:
        return False
    (size,) = struct.unpack(">i", head)
    data = b""
    while len(data) < size:
        data += sock.recv(size - len(data))
    return struct.unpack(">i", data[:4])[0] == 7


def der(pem_path: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem_path.read_text())


def test_a_rotated_listener_certificate_is_served_to_the_next_connection(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    old, new = make_pki(tmp_path / "old"), make_pki(tmp_path / "new")
    volume = SecretVolume(tmp_path / "secret")
    volume.write({"tls.crt": old.server_cert.read_bytes(), "tls.key": old.server_key.read_bytes()})
    security = ListenerSecurity(ssl_certfile=volume.path("tls.crt"), ssl_keyfile=volume.path("tls.key"))

    def connect(ca: Path) -> ssl.SSLSocket:
        """A TLS connection of a client trusting ``ca`` only (the handshake fails otherwise)."""
        context = ssl.create_default_context(cafile=str(ca))
        return context.wrap_socket(socket.create_connection(address(cluster), timeout=10), server_hostname="localhost")

    with BackgroundCluster.proxy((broker.host, broker.port), security) as cluster:
        established = connect(old.ca)
        assert established.getpeercert(binary_form=True) == der(old.server_cert)
        assert api_versions(established)

        volume.write({"tls.crt": new.server_cert.read_bytes(), "tls.key": new.server_key.read_bytes()})

        def served_new() -> bool:
            try:
                with connect(new.ca) as sock:
                    return sock.getpeercert(binary_form=True) == der(new.server_cert)
            except ssl.SSLCertVerificationError:
                return False  # still the old certificate

        took = within(15, served_new, "the new certificate on a new connection")
        print(f"\nrotated certificate served to a new connection after {took:.2f} s")
        assert api_versions(established)  # the connection made before still works
        assert established.getpeercert(binary_form=True) == der(old.server_cert)
        established.close()
        admin = AdminClient(
            {"bootstrap.servers": cluster.bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(new.ca)}
        )
        assert admin.list_topics(timeout=10).topics is not None  # a client trusting only the new CA


def test_a_certificate_that_does_not_match_its_key_is_kept_out_until_whole(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    old, new = make_pki(tmp_path / "old"), make_pki(tmp_path / "new")
    volume = SecretVolume(tmp_path / "secret")
    volume.write({"tls.crt": old.server_cert.read_bytes(), "tls.key": old.server_key.read_bytes()})
    security = ListenerSecurity(ssl_certfile=volume.path("tls.crt"), ssl_keyfile=volume.path("tls.key"))
    context = ssl.create_default_context(cafile=str(old.ca))
    with BackgroundCluster.proxy((broker.host, broker.port), security) as cluster:
        volume.write({"tls.crt": new.server_cert.read_bytes(), "tls.key": old.server_key.read_bytes()})
        time.sleep(5)  # two checks later: still the old, whole pair
        with context.wrap_socket(
            socket.create_connection(address(cluster), timeout=10), server_hostname="localhost"
        ) as sock:
            assert sock.getpeercert(binary_form=True) == der(old.server_cert)
            assert api_versions(sock)


def sasl(cluster: BackgroundCluster, password: str) -> dict[str, str]:
    return {
        "bootstrap.servers": cluster.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": password,
    }


def authenticates(config: dict[str, str]) -> bool:
    try:
        AdminClient(config).list_topics(timeout=5)
    except KafkaException as exc:
        assert exc.args[0].code() in (KafkaError._AUTHENTICATION, KafkaError._TRANSPORT, KafkaError._TIMED_OUT)
        return False
    return True


def test_rotated_credentials_apply_to_the_next_authentication(broker: EmbeddedBroker, tmp_path: Path) -> None:
    volume = SecretVolume(tmp_path / "users")
    volume.write({"alice": b"first-secret"})
    security = ListenerSecurity(sasl="credentials", sasl_credentials=str(volume.root))
    with BackgroundCluster.proxy((broker.host, broker.port), security) as cluster:
        established = AdminClient(sasl(cluster, "first-secret"))
        assert established.list_topics(timeout=10).topics is not None

        volume.write({"alice": b"second-secret"})
        took = within(15, lambda: authenticates(sasl(cluster, "second-secret")), "the new password")
        print(f"\nrotated credentials accepted after {took:.2f} s")
        assert not authenticates(sasl(cluster, "first-secret"))
        assert established.list_topics(timeout=10).topics is not None  # authenticated before: still served


def test_a_json_credential_file_rewritten_in_place_is_reloaded(broker: EmbeddedBroker, tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    users.write_text(json.dumps({"alice": "first-secret"}))
    security = ListenerSecurity(sasl="credentials", sasl_credentials=str(users))
    with BackgroundCluster.proxy((broker.host, broker.port), security) as cluster:
        assert authenticates(sasl(cluster, "first-secret"))
        users.write_text(json.dumps({"alice": "second-secret", "bob": "x"}))
        within(15, lambda: authenticates(sasl(cluster, "second-secret")), "the rewritten password")
