"""Upstream security: one configuration (environment, flags) for every hop to Kafka.

The operator sets ``GROUPCOORD_KAFKA_*`` variables on every pod; the code must read exactly
those. The wire-level TLS client is checked against a real TLS endpoint (stunnel in front of
tansu, mutual TLS), and the SCRAM client against scramp's server side.
"""

from __future__ import annotations

import argparse
import ssl
from pathlib import Path

import pytest

from groupcoord.common import kafka_security
from groupcoord.common.kafka_security import ENV, KafkaSecurity, SecurityConfigError
from groupcoord.common.kafka_wire.exchange import ExchangeFailed, exchange
from groupcoord.common.kafka_wire.secure_connection import SaslAuthenticationFailed, SaslClient
from groupcoord.embedded_broker import EmbeddedBroker
from tests.security.tls import Pki, Stunnel, make_pki

FULL_SECURITY = {
    "bootstrapServers": "b1:9093",
    "tls": {
        "enabled": True,
        "caSecret": {"name": "kafka-ca", "key": "ca.crt"},
        "certSecret": {"name": "client", "key": "tls.crt"},
        "keySecret": {"name": "client", "key": "tls.key"},
    },
    "sasl": {
        "mechanism": "SCRAM-SHA-512",
        "usernameSecret": {"name": "kafka-user", "key": "username"},
        "passwordSecret": {"name": "kafka-user", "key": "password"},
    },
}


def test_the_operator_sets_exactly_the_variables_the_code_reads() -> None:
    build = pytest.importorskip("groupcoord_operator.build")
    from groupcoord_operator.spec import parse_spec  # noqa: PLC0415

    spec = parse_spec({"kafka": FULL_SECURITY, "stateTopic": {"partitions": 3}, "shards": 1})
    set_by_operator = {e["name"] for e in build.kafka_env(spec)}
    assert set_by_operator == set(ENV.values())
    for workload in (
        build.build_shard_statefulset("gc", "kafka", spec),
        build.build_gateway_deployment("gc", "kafka", spec),
    ):
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        assert set(ENV.values()) <= {e["name"] for e in container["env"]}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_settings_from_the_environment_as_the_operator_writes_them(pki: Pki) -> None:
    environ = {
        ENV["protocol"]: "sasl_ssl",
        ENV["ssl_cafile"]: str(pki.ca),
        ENV["ssl_certfile"]: str(pki.client_cert),
        ENV["ssl_keyfile"]: str(pki.client_key),
        ENV["sasl_mechanism"]: "scram-sha-512",
        ENV["sasl_username"]: "alice",
        ENV["sasl_password"]: "s3cret",
    }
    security = KafkaSecurity.from_environment(environ)
    assert (security.protocol, security.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    context = security.ssl_context()
    assert context is not None and context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    options = security.aiokafka_options()
    assert options["security_protocol"] == "SASL_SSL"
    assert (options["sasl_plain_username"], options["sasl_plain_password"]) == ("alice", "s3cret")
    assert KafkaSecurity.from_environment(security.environment()) == security
    assert KafkaSecurity.from_environment({}) == KafkaSecurity()


def test_flags_override_the_environment_and_are_exported_to_child_processes(pki: Pki) -> None:
    parser = argparse.ArgumentParser()
    kafka_security.add_arguments(parser)
    args = parser.parse_args(["--kafka-security-protocol", "ssl", "--kafka-ssl-cafile", str(pki.ca)])
    environ = {ENV["protocol"]: "PLAINTEXT", ENV["sasl_username"]: "left-over"}
    security = kafka_security.from_arguments(args, environ)
    assert (security.protocol, security.ssl_cafile) == ("SSL", str(pki.ca))
    kafka_security.export_to_environment(security, environ)
    assert environ == {ENV["protocol"]: "SSL", ENV["ssl_cafile"]: str(pki.ca), ENV["sasl_username"]: "left-over"}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"protocol": "TLS"}, "is not one of"),
        ({"protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI", "sasl_username": "u", "sasl_password": "p"}, "GSSAPI"),
        ({"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"}, "needs a SASL username"),
        ({"protocol": "SSL", "ssl_certfile": "/nowhere.crt"}, "needs its key"),
        ({"protocol": "SSL", "ssl_cafile": "/nowhere/ca.crt"}, "no such file"),
    ],
)
def test_contradictory_settings_are_one_clear_error(settings: dict, message: str) -> None:
    with pytest.raises(SecurityConfigError, match=message):
        KafkaSecurity(**settings)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_scram_client_authenticates_to_a_scram_server_and_checks_its_proof(mechanism: str) -> None:
    from scramp import ScramMechanism  # noqa: PLC0415

    server_mechanism = ScramMechanism(mechanism)
    stored = server_mechanism.make_auth_info("s3cret", iteration_count=4096)

    def exchange_with(password: str) -> None:
        server = server_mechanism.make_server(lambda _user: stored)
        client = SaslClient(mechanism, "alice", password)
        server.set_client_first(client.first().decode())
        final = client.respond(server.get_server_first().encode())
        assert final is not None
        server.set_client_final(final.decode())
        assert client.respond(server.get_server_final().encode()) is None

    exchange_with("s3cret")
    from scramp.utils import ScramException  # noqa: PLC0415

    with pytest.raises(ScramException):
        exchange_with("wrong")


def test_a_forged_server_signature_fails_the_client() -> None:
    client = SaslClient("SCRAM-SHA-256", "alice", "s3cret")
    nonce = client.first().decode().split("r=")[1]
    client.respond(f"r={nonce}xyz,s=c2FsdHNhbHRzYWx0c2FsdA==,i=4096".encode())
    with pytest.raises(SaslAuthenticationFailed):
        client.respond(b"v=Zm9yZ2Vk")


def _api_versions() -> object:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest  # noqa: PLC0415

    return ApiVersionsRequest(client_software_name="t", client_software_version="1")


@pytest.mark.broker
async def test_wire_requests_go_over_mutual_tls_with_the_host_name_verified(
    broker: EmbeddedBroker, pki: Pki, tmp_path: Path
) -> None:
    with Stunnel((broker.host, broker.port), pki, tmp_path) as tls:
        address = ("localhost", tls.port)
        mtls = KafkaSecurity("SSL", str(pki.ca), str(pki.client_cert), str(pki.client_key))
        body = await exchange(address, _api_versions(), "t", 10, mtls)
        assert int(body.error_code) == 0 and body.api_keys

        for refused in (
            KafkaSecurity("SSL", str(pki.other_ca), str(pki.client_cert), str(pki.client_key)),  # untrusted server
            KafkaSecurity("SSL", str(pki.ca)),  # no client certificate: the terminator closes
            KafkaSecurity("SSL", str(pki.ca), str(pki.expired_client_cert), str(pki.expired_client_key)),
        ):
            with pytest.raises(ExchangeFailed):
                await exchange(address, _api_versions(), "t", 10, refused)
    # the certificate names localhost and 127.0.0.1, not 127.0.0.2: host names are verified
    with Stunnel((broker.host, broker.port), pki, tmp_path, host="127.0.0.2") as elsewhere:
        with pytest.raises(ExchangeFailed, match="(?i)hostname|match"):
            await exchange(("127.0.0.2", elsewhere.port), _api_versions(), "t", 10, mtls)
        # plaintext Kafka to a TLS port gets nothing back
        with pytest.raises(ExchangeFailed):
            await exchange(("127.0.0.2", elsewhere.port), _api_versions(), "t", 3, KafkaSecurity())


