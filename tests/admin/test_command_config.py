"""``--command-config``: Kafka client properties as kafka-consumer-groups.sh reads them, mapped
onto the security of groupcoord's admin client (no network: the files and the TLS contexts they
make are checked directly)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from groupcoord.admin.client_config import (
    CommandConfigError,
    client_config,
    load_client_config,
    parse_jaas_config,
    parse_properties,
)
from tests.security.tls import Pki, make_pki

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_java_properties_syntax() -> None:
    text = (
        "# a comment\n"
        "! another\n"
        "security.protocol = SASL_SSL\n"
        "sasl.mechanism:SCRAM-SHA-512\n"
        "client.id   admin-tool\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="alice" \\\n'
        '    password="s3cr=t";\n'
        "path=C\\:\\\\certs\\\\ca.pem\n"
        "empty=\n"
    )
    assert parse_properties(text) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "client.id": "admin-tool",
        "sasl.jaas.config": f'{SCRAM} required username="alice" password="s3cr=t";',
        "path": "C:\\certs\\ca.pem",
        "empty": "",
    }


def test_jaas_line_gives_username_and_password() -> None:
    login = parse_jaas_config(f'{PLAIN} required username="bob" password="p a\\"ss;word";')
    assert (login.module, login.flag) == (PLAIN, "required")
    assert login.options == {"username": "bob", "password": 'p a"ss;word'}
    assert parse_jaas_config(f"{SCRAM} required username=carol password=x;").options == {
        "username": "carol",
        "password": "x",
    }
    for bad in (
        f'{PLAIN} username="a" password="b";',
        f'{PLAIN} required username="a"',
        f"{PLAIN} required user;",
    ):
        with pytest.raises(CommandConfigError):
            parse_jaas_config(bad)


@pytest.mark.parametrize(
    ("mechanism", "module"), [("PLAIN", PLAIN), ("SCRAM-SHA-256", SCRAM), ("SCRAM-SHA-512", SCRAM)]
)
def test_sasl_ssl_with_a_pem_truststore(pki: Pki, mechanism: str, module: str) -> None:
    config = client_config(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'{module} required username="alice" password="alice-secret";',
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca),
        }
    )
    options = config.security.aiokafka_options()
    assert options["security_protocol"] == "SASL_SSL"
    assert options["sasl_mechanism"] == mechanism
    assert (options["sasl_plain_username"], options["sasl_plain_password"]) == ("alice", "alice-secret")
    context = options["ssl_context"]
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert len(context.get_ca_certs()) == 1  # the truststore's CA only, not the system's
    assert config.unused == () and config.warning() is None


def test_librdkafka_names_mutual_tls_and_no_hostname_check(pki: Pki) -> None:
    config = client_config(
        {
            "security.protocol": "ssl",
            "ssl.ca.location": str(pki.ca),
            "ssl.certificate.location": str(pki.client_cert),
            "ssl.key.location": str(pki.client_key),
            "ssl.endpoint.identification.algorithm": "",
            "client.id": "ops",
        }
    )
    security = config.security
    assert (security.protocol, security.ssl_cafile, security.ssl_certfile, security.ssl_keyfile) == (
        "SSL",
        str(pki.ca),
        str(pki.client_cert),
        str(pki.client_key),
    )
    assert not security.uses_sasl and config.client_id == "ops"
    context = security.ssl_context()
    assert context is not None and not context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED


def test_pem_keystore_with_key_and_chain_in_one_file(pki: Pki, tmp_path: Path) -> None:
    keystore = tmp_path / "client.pem"
    keystore.write_text(pki.client_key.read_text() + pki.client_cert.read_text())
    config = client_config(
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
        }
    )
    assert config.security.ssl_certfile == config.security.ssl_keyfile == str(keystore)
    assert config.security.ssl_context() is not None  # the key and certificate load together
    inline = client_config({"security.protocol": "SSL", "ssl.truststore.certificates": pki.ca.read_text()})
    assert inline.security.ssl_cafile is None
    assert len(inline.security.ssl_context().get_ca_certs()) == 1  # type: ignore[union-attr]


def test_unknown_properties_are_ignored_with_one_warning_line() -> None:
    config = client_config({"security.protocol": "PLAINTEXT", "request.timeout.ms": "5000", "acks": "all"})
    assert config.security.protocol == "PLAINTEXT" and config.security.ssl_context() is None
    assert config.unused == ("acks", "request.timeout.ms")
    assert (
        config.warning()
        == "WARN: These configurations '[acks, request.timeout.ms]' were supplied but are not used."
    )


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"security.protocol": "SASL_PLAINTEXTT"}, "is not one of"),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.jaas.config": f'{PLAIN} required username="a" password="b";',
            },
            "GSSAPI is not supported",
        ),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"},
            "OAUTHBEARER is not supported",
        ),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "needs username and password"),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.jaas.config": f'{PLAIN} required username="a" password="b";',
            },
            "needs org.apache.kafka.common.security.scram.ScramLoginModule",
        ),
        (
            {"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent/ca.pem"},
            "no such file /nonexistent/ca.pem",
        ),
        ({"security.protocol": "SSL", "ssl.certificate.location": "/etc/hostname"}, "go together"),
    ],
)
def test_what_cannot_be_honoured_is_one_line(props: dict[str, str], message: str) -> None:
    with pytest.raises(CommandConfigError, match=message):
        client_config(props)


def test_jks_stores_are_refused_not_misread(pki: Pki, tmp_path: Path) -> None:
    jks = tmp_path / "truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02binary")
    with pytest.raises(CommandConfigError, match="ssl.truststore.type=JKS is not supported"):
        client_config({"security.protocol": "SSL", "ssl.truststore.location": str(jks)})
    with pytest.raises(CommandConfigError, match="ssl.keystore.type=PKCS12 is not supported"):
        client_config(
            {
                "security.protocol": "SSL",
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": str(pki.client_key),
            }
        )
    # a PEM file named without its type is read as PEM
    assert client_config(
        {"security.protocol": "SSL", "ssl.truststore.location": str(pki.ca)}
    ).security.ssl_cafile == str(pki.ca)


def test_load_from_a_file_and_a_missing_file(pki: Pki, tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f'sasl.jaas.config={SCRAM} required username="alice" password="alice-secret";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca}\n"
    )
    config = load_client_config(str(path))
    assert (config.security.sasl_username, config.security.sasl_password) == ("alice", "alice-secret")
    assert load_client_config(None).security.protocol == "PLAINTEXT"
    with pytest.raises(CommandConfigError, match="No such file"):
        load_client_config(str(tmp_path / "missing.properties"))
