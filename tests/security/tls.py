"""Test PKI and a real TLS endpoint, made at test time.

:func:`make_pki` issues a CA, a server certificate for localhost/127.0.0.1 and client
certificates with the ``cryptography`` package. :class:`Stunnel` runs Debian's ``stunnel4``
as a TLS terminator in front of a plaintext endpoint (the embedded tansu broker: its own
``--cert``/``--key`` cannot be used together in tansu 0.6.0, and ``--cert`` alone leaves the
listener plaintext), optionally requiring client certificates (mutual TLS).
"""

from __future__ import annotations

import datetime
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from real_parts import require_binary

from groupcoord.embedded_broker import free_port, stop_process_group, wait_for_port


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA nobody's certificate is signed by
    expired_client_cert: Path
    expired_client_key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write(path: Path, key: ec.EllipticCurvePrivateKey | None, cert: x509.Certificate) -> None:
    path.with_suffix(".crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        path.with_suffix(".key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )


def _ca(name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    subject: x509.Name,
    server: bool,
    expired: bool = False,
    more_ips: tuple[str, ...] = (),
    more_names: tuple[str, ...] = (),
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    import ipaddress  # noqa: PLC0415

    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    start, end = (
        (now - datetime.timedelta(days=3), now - datetime.timedelta(days=1))
        if expired
        else (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1))
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [
                    *(x509.DNSName(name) for name in ("localhost", *more_names)),
                    *(x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", *more_ips)),
                ]
            ),
            critical=False,
        )
    return key, builder.sign(ca_key, hashes.SHA256())


def client_subject(common_name: str) -> x509.Name:
    # ASN.1 order O, OU, CN: Kafka's principal (RFC 2253, last RDN first) is CN=...,OU=apps,O=groupcoord
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "groupcoord"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "apps"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _ca("groupcoord test CA")
    _write(directory / "ca", None, ca_cert)
    _, other = _ca("some other CA")
    _write(directory / "other-ca", None, other)
    key, cert = _leaf(ca_key, ca_cert, x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]), True)
    _write(directory / "server", key, cert)
    key, cert = _leaf(ca_key, ca_cert, client_subject("client-1"), False)
    _write(directory / "client", key, cert)
    key, cert = _leaf(ca_key, ca_cert, client_subject("expired"), False, expired=True)
    _write(directory / "expired", key, cert)
    return Pki(
        directory / "ca.crt",
        directory / "server.crt",
        directory / "server.key",
        directory / "client.crt",
        directory / "client.key",
        directory / "other-ca.crt",
        directory / "expired.crt",
        directory / "expired.key",
    )


def issue_server_pems(names: tuple[str, ...], ips: tuple[str, ...]) -> dict[str, bytes]:
    """A CA and a server certificate for ``names`` and ``ips``, as the keys of a TLS Secret
    (``ca.crt``, ``tls.crt``, ``tls.key``): what cert-manager would issue for a listener."""
    ca_key, ca_cert = _ca("listener test CA")
    key, cert = _leaf(
        ca_key, ca_cert, x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]), True, False, ips, names
    )
    pem = serialization.Encoding.PEM
    return {
        "ca.crt": ca_cert.public_bytes(pem),
        "tls.crt": cert.public_bytes(pem),
        "tls.key": key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    }


def stunnel_binary() -> str:
    return shutil.which("stunnel") or require_binary("stunnel4", "stunnel4")


@dataclass
class Stunnel:
    """TLS on ``port`` (a free one) in front of the plaintext ``target``."""

    target: tuple[str, int]
    pki: Pki
    directory: Path
    require_client_cert: bool = True
    host: str = "127.0.0.1"
    port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> Stunnel:
        self.port = self.port or free_port(self.host)
        conf = self.directory / f"stunnel-{self.port}.conf"
        verify = f"verifyChain = yes\nCAfile = {self.pki.ca}\n" if self.require_client_cert else ""
        conf.write_text(
            f"foreground = yes\npid =\noutput = {self.directory / f'stunnel-{self.port}.log'}\n"
            f"[kafka]\naccept = {self.host}:{self.port}\nconnect = {self.target[0]}:{self.target[1]}\n"
            f"cert = {self.pki.server_cert}\nkey = {self.pki.server_key}\n{verify}"
        )
        self.process = subprocess.Popen(
            [stunnel_binary(), str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for_port(self.host, self.port)
        return self

    def stop(self) -> None:
        proc, self.process = self.process, None
        stop_process_group(proc)

    def __enter__(self) -> Stunnel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(frozen=True)
class KubePki:
    """What a Kubernetes API server needs: its CA (also the client CA), its serving pair, an
    administrator's client pair (group ``system:masters``) and the service-account signing pair."""

    ca: Path
    server_cert: Path
    server_key: Path
    admin_cert: Path
    admin_key: Path
    service_account_key: Path
    service_account_public: Path


def make_kube_pki(directory: Path, more_ips: tuple[str, ...] = ()) -> KubePki:
    """``more_ips``: addresses besides 127.0.0.1 the server is reached at (from containers)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _ca("kubernetes test CA")
    _write(directory / "ca", None, ca_cert)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")])
    key, cert = _leaf(ca_key, ca_cert, name, True, more_ips=more_ips)
    _write(directory / "server", key, cert)
    admin = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
            x509.NameAttribute(NameOID.COMMON_NAME, "admin"),
        ]
    )
    key, cert = _leaf(ca_key, ca_cert, admin, False)
    _write(directory / "admin", key, cert)
    signing = _key()
    (directory / "service-account.key").write_bytes(
        signing.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    (directory / "service-account.pub").write_bytes(
        signing.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return KubePki(
        directory / "ca.crt",
        directory / "server.crt",
        directory / "server.key",
        directory / "admin.crt",
        directory / "admin.key",
        directory / "service-account.key",
        directory / "service-account.pub",
    )
