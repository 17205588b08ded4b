"""The address the gateway gives clients: bound to 0.0.0.0 without ``--advertised-host``, the
machine's host name as Kafka advertises a listener without a host (never 127.0.0.1, which sends
every client to its own machine); with it, exactly that name. Checked through the real
``groupcoord gateway`` and ``groupcoord up`` commands and the Metadata answer a client gets when it
bootstraps (read with one raw request: a client library would go on to connect to the advertised
name, which need not resolve on the test machine)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from kio.schema.metadata.v12.request import MetadataRequest

from groupcoord.common.kafka_wire.exchange import exchange
from groupcoord.embedded_broker import EmbeddedBroker, stop_process_group
from groupcoord.gateway.proxy.advertised_host import advertised_host, machine_host_name

pytestmark = pytest.mark.broker


@contextmanager
def command(*argv: str, ready: str) -> Iterator[tuple[str, int]]:
    """Run ``groupcoord ARGV``; yields the host and port of the bootstrap address it prints."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "groupcoord.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(ready):
                host, _, port = line[len(ready) :].split()[0].rpartition(":")
                yield host, int(port)
                return
        pytest.fail(f"groupcoord {argv[0]} exited {proc.wait()} before it was ready")
    finally:
        stop_process_group(proc)


def metadata_brokers(port: int) -> set[str]:
    """The brokers a client bootstrapping to the local port is told to use: the gateway's
    Metadata answer itself, so nothing depends on the advertised name resolving here."""
    request = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    response = asyncio.run(exchange(("127.0.0.1", port), request, "advertised-host-test", timeout_s=30))
    return {b.host for b in response.brokers}


def test_the_rule() -> None:
    assert advertised_host("10.1.2.3") == "10.1.2.3"
    assert advertised_host("0.0.0.0", "gc-gateway-0.gc.kafka.svc") == "gc-gateway-0.gc.kafka.svc"
    for wildcard in ("0.0.0.0", "::", ""):
        assert advertised_host(wildcard) == machine_host_name()
    assert machine_host_name() not in {"127.0.0.1", "::1", "0.0.0.0"}
    assert machine_host_name() in {socket.getfqdn(), socket.gethostname()}


def test_gateway_on_every_interface_advertises_the_machine_host_name(broker: EmbeddedBroker) -> None:
    args = ["gateway", "--kafka", broker.bootstrap, "--host", "0.0.0.0", "--port", "0"]
    with command(*args, ready="gateway ready: bootstrap ") as (host, port):
        assert host == machine_host_name() != "127.0.0.1"
        assert metadata_brokers(port) == {machine_host_name()}


def test_gateway_and_up_advertise_the_given_host(broker: EmbeddedBroker) -> None:
    name = "gc-gateway-0.gc-gateway.kafka.svc"
    gateway = ["gateway", "--kafka", broker.bootstrap, "--host", "0.0.0.0", "--port", "0"]
    with command(*gateway, "--advertised-host", name, ready="gateway ready: bootstrap ") as (host, port):
        assert host == name
        assert metadata_brokers(port) == {name}
    up = ["up", "--kafka", broker.bootstrap, "--host", "0.0.0.0", "--port", "0", "--no-coordinator"]
    with command(*up, "--advertised-host", name, ready="groupcoord is up: bootstrap ") as (host, port):
        assert host == name
        assert metadata_brokers(port) == {name}
