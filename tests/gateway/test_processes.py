"""``groupcoord up --gateway-processes 2``: two gateway processes behind one bootstrap port.

The kernel spreads connections over the processes (``SO_REUSEPORT``); each serves whole clients
(groups of both protocols through the shards whose layout the first process passes on), the
first serves the metrics of both, starts the other again when it dies, and stopping the first
stops the other.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from groupcoord.embedded_broker import EmbeddedBroker, free_port
from tests.gateway.process_metrics import requests_by_process

pytestmark = pytest.mark.broker


def _start(kafka: str, port: int) -> tuple[subprocess.Popen[str], str]:
    """``groupcoord up`` with two gateway processes; returns it and its metrics URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "groupcoord.cli", "--log-level", "WARNING", "up", "--kafka", kafka]
        + ["--port", str(port), "--partitions", "8", "--gateway-processes", "2"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    up = proc.stdout.readline()
    assert up.startswith("groupcoord is up") and "2 gateway processes" in up, up
    metrics = proc.stdout.readline().split()[1]  # the gateway's: the first target
    return proc, metrics


def _process_up(url: str) -> float | None:
    """``groupcoord_gateway_process_up`` of the further process: were its metrics read?"""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "groupcoord_gateway_process_up" and s.labels.get("gateway_process") == "1":
                return s.value
    return None


def _further_gateway(up_pid: int) -> int | None:
    """The pid of the further gateway process under ``groupcoord up`` (a spawned child that is
    neither a shard nor multiprocessing's resource tracker)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid, rest = stat.read_text().split(" ", 1)
            if int(rest.rsplit(")", 1)[1].split()[1]) != up_pid:
                continue
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if b"multiprocessing" in cmdline and b"resource_tracker" not in cmdline:
            return int(pid)
    return None


def _eventually(what: str, check: Callable[[], object], timeout_s: float = 60) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {timeout_s:.0f} s")


def _consume_all(bootstrap: str, topic: str, records: int, name: str) -> int:
    members = [
        Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"{protocol}-{name}-{topic}",
                "group.protocol": protocol,
                "auto.offset.reset": "earliest",
            }
        )
        for protocol in ("consumer", "classic")
        for _ in range(3)
    ]
    for member in members:
        member.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 60
    try:
        while got < 2 * records and time.monotonic() < deadline:
            for member in members:
                message = member.poll(0.05)
                if message is not None and not message.error():
                    got += 1
    finally:
        for member in members:
            member.close()
    return got


def test_two_gateway_processes_share_the_port_serve_whole_clients_and_stop_together(
    broker: EmbeddedBroker,
) -> None:
    port = free_port()
    proc, metrics = _start(broker.bootstrap, port)
    try:
        bootstrap = f"127.0.0.1:{port}"
        topic = f"spread-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(30)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(200):
            producer.produce(topic, b"r", partition=i % 4)
        assert producer.flush(30) == 0
        # a KIP-848 group and a classic one, 3 members each, their connections on both processes
        assert _consume_all(bootstrap, topic, 200, "first") == 400
        served = requests_by_process(metrics)
        assert set(served) == {"0", "1"} and min(served.values()) > 0, served

        # kill -9 of the further process: it is started again, and clients are served throughout
        killed = _further_gateway(proc.pid)
        assert killed is not None
        os.kill(killed, signal.SIGKILL)
        again = _eventually(
            "the further gateway process started again",
            lambda: (pid := _further_gateway(proc.pid)) not in (None, killed) and pid,
        )
        assert _consume_all(bootstrap, topic, 200, "after-the-kill") == 400
        _eventually("its metrics read again", lambda: _process_up(metrics) == 1.0)
        assert _further_gateway(proc.pid) == again
    finally:
        os.kill(proc.pid, signal.SIGTERM)  # the first process only: it stops the other
        assert proc.wait(60) == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_groupcoord_gateway_processes_are_copies_of_one_gateway_on_one_port(broker: EmbeddedBroker) -> None:
    """``groupcoord gateway --processes 2``: two whole gateways on one port (a pod per core, in
    one container); the first serves the metrics of both and starts the other again after a
    kill -9; a SIGTERM to the first stops both."""
    port, metrics_port = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "groupcoord.cli", "--log-level", "WARNING", "gateway", "--kafka", broker.bootstrap]
        + ["--host", "127.0.0.1", "--port", str(port), "--processes", "2", "--metrics-port", str(metrics_port)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(f"gateway ready: bootstrap 127.0.0.1:{port}")
        bootstrap = f"127.0.0.1:{port}"
        topic = f"copies-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        for _ in range(12):  # twelve connections: the kernel puts some on each process
            assert topic in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics
        served = requests_by_process(metrics)
        assert set(served) == {"0", "1"} and min(served.values()) > 0, served

        killed = _further_gateway(proc.pid)
        assert killed is not None
        os.kill(killed, signal.SIGKILL)
        _eventually(
            "the further gateway process started again",
            lambda: (pid := _further_gateway(proc.pid)) not in (None, killed) and pid,
        )
        _eventually("its metrics read again", lambda: _process_up(metrics) == 1.0)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(50):
            producer.produce(topic, b"r", partition=i % 2)
        assert producer.flush(30) == 0
    finally:
        os.kill(proc.pid, signal.SIGTERM)  # the first process only: it stops the other
        assert proc.wait(60) == 0
    assert _further_gateway(proc.pid) is None
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--port", "0", "--processes", "2"], "--processes above 1 needs a --port other than 0: the processes share one port"),
        (["--port", "9", "--processes", "0"], "--processes 0: at least 1"),
    ],
)
def test_groupcoord_gateway_processes_that_cannot_share_a_port_are_one_line(flags: list[str], says: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "groupcoord.cli", "gateway", "--kafka", "127.0.0.1:1", *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and done.stderr.strip() == says, done.stderr
