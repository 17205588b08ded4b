"""`groupcoord up --kafka` against an upstream that only speaks mutual TLS, end to end.

The embedded tansu broker sits behind a stunnel TLS terminator that requires client
certificates, and advertises the terminator's port, so every hop the product makes (the
gateway's proxy connections and its own requests, the shards' state-topic producers and
loaders, topic-metadata readers, metric-sample producers) must go over TLS with the
certificate from the flags. Real clients then consume in a classic and a KIP-848 group.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from groupcoord.common.kafka_security import KafkaSecurity
from groupcoord.common.kafka_wire.exchange import ExchangeFailed, exchange
from groupcoord.embedded_broker import EmbeddedBroker, free_port, stop_process_group
from tests.security.tls import Stunnel, make_pki

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def start_groupcoord_up(*argv: str, log: Path, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """`groupcoord up ...` as a user runs it; returns the process and the gateway bootstrap."""
    out = open(log, "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "groupcoord.cli", "up", "--port", "0", *argv],
        stdout=subprocess.PIPE,
        stderr=out,
        text=True,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 90
    for line in proc.stdout:
        found = re.search(r"bootstrap (\S+?:\d+)", line)
        if found:
            return proc, found.group(1)
        assert time.monotonic() < deadline
    stop_process_group(proc)
    raise AssertionError(f"groupcoord up did not come up:\n{log.read_text()[-3000:]}")


def consume_all(bootstrap: str, topic: str, group: str, protocol: str, expected: int, **config: object) -> int:
    from confluent_kafka import Consumer  # noqa: PLC0415

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **config,
        }
    )
    try:
        consumer.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen += 1
        consumer.commit(asynchronous=False)
        committed = consumer.committed(consumer.assignment(), timeout=10)
        assert sum(tp.offset for tp in committed) == expected
        return seen
    finally:
        consumer.close()


def test_groupcoord_up_against_a_mutual_tls_upstream_serves_real_consumers(tmp_path: Path) -> None:
    from confluent_kafka import Producer  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    pki = make_pki(tmp_path / "pki")
    tls_port = free_port()
    broker = EmbeddedBroker(log_path=tmp_path / "tansu.log", advertised_port=tls_port).start()
    try:
        with Stunnel((broker.host, broker.port), pki, tmp_path, port=tls_port):
            proc, bootstrap = start_groupcoord_up(
                "--kafka",
                f"127.0.0.1:{tls_port}",
                "--partitions",
                "4",
                "--metric-samples-interval",
                "1",
                # its listeners relay no SASL, and tansu answers DescribeAcls as an authorizer
                # with no ACLs (it enforces none): the client certificate's identity is shared
                "--allow-shared-upstream-identity",
                "--kafka-security-protocol",
                "SSL",
                "--kafka-ssl-cafile",
                str(pki.ca),
                "--kafka-ssl-certfile",
                str(pki.client_cert),
                "--kafka-ssl-keyfile",
                str(pki.client_key),
                log=tmp_path / "up.log",
            )
            try:
                topic = f"secure-{uuid.uuid4().hex[:6]}"
                admin = AdminClient({"bootstrap.servers": bootstrap})
                admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(20)
                producer = Producer({"bootstrap.servers": bootstrap})
                for i in range(10):
                    producer.produce(topic, value=b"v%d" % i, partition=i % 2)
                assert producer.flush(20) == 0
                assert consume_all(bootstrap, topic, f"classic-{topic}", "classic", 10) == 10
                assert consume_all(bootstrap, topic, f"kip848-{topic}", "consumer", 10) == 10
                # the shards' metric samples reached the upstream over TLS as well
                listed = admin.list_topics(timeout=10).topics
                assert "__groupcoord_metrics" in listed
            finally:
                stop_process_group(proc)
            log = (tmp_path / "up.log").read_text()
            assert "Traceback" not in log, log[-3000:]
    finally:
        broker.stop()


def test_groupcoord_up_refuses_contradictory_upstream_security(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "groupcoord.cli", "up", "--kafka", "127.0.0.1:1", "--kafka-security-protocol", "SASL_SSL"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("GROUPCOORD_KAFKA_")},
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith("upstream security: SASL_SSL needs a SASL mechanism")


def start_gateway(*argv: str, log: Path) -> tuple[subprocess.Popen, str]:
    """`groupcoord gateway ...` (a plain proxy without --leadership); returns it and its bootstrap."""
    out = open(log, "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "groupcoord.cli", "gateway", "--host", "127.0.0.1", "--port", "0", *argv],
        stdout=subprocess.PIPE,
        stderr=out,
        text=True,
        start_new_session=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("GROUPCOORD_")},
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        found = re.search(r"bootstrap (\S+?:\d+)", line)
        if found:
            return proc, found.group(1)
    stop_process_group(proc)
    raise AssertionError(f"groupcoord gateway did not come up:\n{log.read_text()[-3000:]}")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_groupcoord_up_against_a_sasl_ssl_upstream_serves_real_consumers(
    broker: EmbeddedBroker, tmp_path: Path, mechanism: str
) -> None:
    """The SASL_SSL upstream is a groupcoord gateway checking SCRAM/PLAIN credentials over TLS
    in front of tansu (tansu 0.6.0 cannot hold SCRAM users with authentication on): every
    upstream hop of `groupcoord up` (aiokafka and our wire code) must authenticate to it."""
    from confluent_kafka import Producer  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    pki = make_pki(tmp_path / "pki")
    users = tmp_path / "users.json"
    users.write_text('{"groupcoord": "coordinator-secret"}')
    upstream, upstream_bootstrap = start_gateway(
        "--kafka",
        broker.bootstrap,
        "--listener-ssl-certfile",
        str(pki.server_cert),
        "--listener-ssl-keyfile",
        str(pki.server_key),
        "--listener-sasl",
        "credentials",
        "--listener-sasl-credentials",
        str(users),
        log=tmp_path / "upstream.log",
    )
    try:
        proc, bootstrap = start_groupcoord_up(
            "--kafka",
            upstream_bootstrap,
            "--partitions",
            "4",
            "--allow-shared-upstream-identity",  # tansu behind the checking gateway enforces no ACLs
            "--state-topic",  # not the session broker's default one: other clusters there use 8 partitions
            f"__sasl_{uuid.uuid4().hex[:6]}",
            "--kafka-security-protocol",
            "SASL_SSL",
            "--kafka-ssl-cafile",
            str(pki.ca),
            "--kafka-sasl-mechanism",
            mechanism,
            "--kafka-sasl-username",
            "groupcoord",
            log=tmp_path / "up.log",
            env={"GROUPCOORD_KAFKA_SASL_PASSWORD": "coordinator-secret"},
        )
        try:
            topic = f"sasl-{uuid.uuid4().hex[:6]}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(20)
            producer = Producer({"bootstrap.servers": bootstrap})
            for i in range(10):
                producer.produce(topic, value=b"v%d" % i, partition=i % 2)
            assert producer.flush(20) == 0
            assert consume_all(bootstrap, topic, f"classic-{topic}", "classic", 10) == 10
            assert consume_all(bootstrap, topic, f"kip848-{topic}", "consumer", 10) == 10
        finally:
            stop_process_group(proc)
        assert "Traceback" not in (tmp_path / "up.log").read_text()
        # the upstream checks the coordinator's own credentials: a wrong password is refused
        host, port = upstream_bootstrap.rsplit(":", 1)
        wrong = KafkaSecurity("SASL_SSL", str(pki.ca), sasl_mechanism=mechanism, sasl_username="groupcoord", sasl_password="wrong")
        with pytest.raises(ExchangeFailed, match="invalid credentials"):
            asyncio.run(exchange((host, int(port)), ApiVersionsRequest(client_software_name="t", client_software_version="1"), "t", 10, wrong))
        # and `groupcoord up` says so in one line instead of waiting for shards that cannot start
        bad = subprocess.run(
            [sys.executable, "-m", "groupcoord.cli", "up", "--port", "0", "--kafka", upstream_bootstrap,
             "--kafka-security-protocol", "SASL_SSL", "--kafka-ssl-cafile", str(pki.ca),
             "--kafka-sasl-mechanism", mechanism, "--kafka-sasl-username", "groupcoord"],
            capture_output=True, text=True, timeout=60,
            env={**os.environ, "GROUPCOORD_KAFKA_SASL_PASSWORD": "wrong"},
        )  # fmt: skip
        assert bad.returncode != 0
        assert "refused us" in bad.stderr.strip().splitlines()[-1] and "invalid credentials" in bad.stderr
    finally:
        stop_process_group(upstream)
