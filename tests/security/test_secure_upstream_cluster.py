"""`groupcoord up --kafka` against an upstream that only speaks mutual TLS, end to end.

The embedded tansu broker sits behind a stunnel TLS terminator that requires client
certificates, and advertises the terminator's port, so every hop the product makes (the
gateway's proxy connections and its own requests, the shards' state-topic producers and
loaders, topic-metadata readers, metric-sample producers) must go over TLS with the
certificate from the flags. Real clients then consume in a classic and a KIP-848 group.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

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
