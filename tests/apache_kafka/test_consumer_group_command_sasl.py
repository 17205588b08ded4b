"""``kafka-consumer-groups.sh --command-config`` over SASL_SSL: Kafka 4.4 with SCRAM users and
its StandardAuthorizer, groupcoord's gateway in front of it with a SASL_SSL listener in
``passthrough`` (the client's SCRAM exchange relayed to Kafka, one credential store) and Kafka's
ACLs as the policy of the group APIs (``--acl-source upstream``). The tool runs as ``app``, a user
with rights on the ``cgc`` prefix only, with the same properties file against both; the same
group shape as tests/apache_kafka/test_consumer_group_command.py, built over SASL_SSL too, and
the outputs compared the same way."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
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

from .group_shape import Shape, assert_same, group_shape

COORDINATOR = ("coordinator", "coordinator-secret")  # groupcoord's own principal: Kafka's super user
APP = ("app", "app-secret")  # the tool's and the members' principal: rights on "cgc*" only


def _grant_prefix(kafka: ApacheKafka, prefix: str) -> None:
    """ALL on the groups and topics named ``prefix*`` for ``User:app``, created on Kafka."""
    admin = AdminClient(kafka.client_config(COORDINATOR[0]))
    bindings = [
        AclBinding(
            kind,
            prefix,
            ResourcePatternType.PREFIXED,
            f"User:{APP[0]}",
            "*",
            AclOperation.ALL,
            AclPermissionType.ALLOW,
        )
        for kind in (ResourceType.GROUP, ResourceType.TOPIC)
    ]
    for future in admin.create_acls(bindings).values():
        future.result(30)


@pytest.fixture(scope="module")
def shape(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shape]:
    workdir = tmp_path_factory.mktemp("cgc-sasl")
    pki = make_pki(workdir / "pki")
    kafka = start_apache_kafka(
        "kafka-4.4",
        workdir / "kafka",
        security="sasl_ssl",
        scram_users=dict([COORDINATOR, APP]),
        super_users=(COORDINATOR[0],),
        tls=(pki.server_cert, pki.server_key, pki.ca),
    )
    try:
        _grant_prefix(kafka, "cgc")
        # groupcoord's own connections (the gateway's requests, the shards' state topic) go as
        # the coordinator's principal, read from the environment when the cluster starts (the
        # shards are processes of their own, started with it)
        with pytest.MonkeyPatch.context() as env:
            for name, value in {
                "protocol": "SASL_SSL",
                "ssl_cafile": str(pki.ca),
                "sasl_mechanism": "SCRAM-SHA-256",
                "sasl_username": COORDINATOR[0],
                "sasl_password": COORDINATOR[1],
            }.items():
                env.setenv(ENV[name], value)
            options = ClusterOptions(
                port=0,
                partitions=4,
                metrics=False,
                listener_security=ListenerSecurity(
                    ssl_certfile=str(pki.server_cert), ssl_keyfile=str(pki.server_key), sasl="passthrough"
                ),
                acl_policy=UpstreamAclSource(super_users=(f"User:{COORDINATOR[0]}",)),
                adopt_upstream_groups=False,  # the same groups on both sides, as kafka_cluster's
            )
            cluster = BackgroundCluster((kafka.host, kafka.port), options).start()
        try:
            client = {k: v for k, v in kafka.client_config(APP[0]).items() if k != "bootstrap.servers"}
            with group_shape(
                kafka.bootstrap, cluster.bootstrap, workdir, client, _command_config(workdir, pki.ca)
            ) as built:
                yield built
        finally:
            cluster.stop()
    finally:
        kafka.stop()


def _command_config(workdir: Path, ca: Path) -> tuple[str, ...]:
    """``--command-config`` with the Java client's SASL_SSL properties for ``app``."""
    properties = workdir / "app.properties"
    properties.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{APP[0]}" password="{APP[1]}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca}\n"
    )
    return ("--command-config", str(properties))


def test_list_over_sasl_ssl(shape: Shape) -> None:
    listed = assert_same(shape, "--list", "--state", "--type", listing=True)
    for role in ("empty", "classic", "consumer"):
        assert shape.group(role) in listed, listed


@pytest.mark.parametrize("role", ["classic", "consumer"])
def test_describe_over_sasl_ssl(shape: Shape, role: str) -> None:
    group = shape.group(role)
    offsets = assert_same(shape, "--describe", "--group", group)
    assert f"<{role}-member>" in offsets and "/127.0.0.1" in offsets, offsets
    members = assert_same(shape, "--describe", "--group", group, "--members", "--verbose")
    assert f"{shape.topic('orders')}:0,1,2" in members, members
    state = assert_same(shape, "--describe", "--group", group, "--state", "--verbose")
    assert "Stable" in state, state


def test_describe_a_group_app_may_not_see(shape: Shape) -> None:
    """Outside its prefix ``app`` gets Kafka's authorization error from both."""
    refused = assert_same(shape, "--describe", "--group", "other-group")
    assert "GroupAuthorizationException" in refused, refused


@pytest.mark.parametrize("role", ["classic", "consumer"])
def test_groupcoord_groups_with_the_same_properties_file(shape: Shape, role: str) -> None:
    """``groupcoord groups --command-config`` takes the very file Kafka's tool took (SCRAM in
    ``sasl.jaas.config``, a PEM trust store) and its JSON says what Kafka's table says."""
    import json  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    group = shape.group(role)
    kafka = assert_same(shape, "--describe", "--group", group)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "groupcoord.cli",
            "groups",
            "describe",
            group,
            "--output",
            "json",
            "--bootstrap",
            shape.sides[1].bootstrap,
            *shape.tool,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (doc,) = json.loads(done.stdout)["groups"]
    assert doc["state"] == "Stable"

    def cell(value: object) -> str:
        return "-" if value is None else str(value)

    ours = [
        [group, o["topic"], *(cell(o[k]) for k in ("partition", "current_offset", "log_end_offset", "lag"))]
        for o in doc["offsets"]
    ]
    theirs = [line.split()[:6] for line in kafka.splitlines() if line.startswith(group)]
    assert ours == theirs and ours, kafka
