"""Kafka's connection bounds on the gateway's listeners: frame sizes before and after SASL,
requests in flight per connection, connection caps and the idle timeout. Each beside a
well-behaved client that must not notice."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from gateway.transport.raw_wire import read_correlation_ids, read_frame

from groupcoord.common.kafka_wire.framing import frame_bytes
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.gateway.messages.framed_request import Request
from groupcoord.gateway.security.listener_security import ListenerSecurity
from groupcoord.gateway.transport.connection_limits import ConnectionCounter, ConnectionLimits
from groupcoord.gateway.transport.protocol import ServerConnection
from groupcoord.local_cluster import ClusterOptions
from groupcoord_testing import BackgroundCluster


def request(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    return frame_bytes(struct.pack(">hhih", api_key, version, correlation_id, 1) + b"c" + body)


API_VERSIONS_V0 = 18, 0


# -- sans-IO ------------------------------------------------------------------------------


def test_reading_pauses_at_the_in_flight_bound_and_resumes_in_order() -> None:
    conn = ServerConnection(max_in_flight=3)
    events = conn.receive_data(b"".join(request(*API_VERSIONS_V0, i) for i in range(10)))
    assert [e.correlation_id for e in events if isinstance(e, Request)] == [0, 1, 2]
    assert conn.paused
    assert conn.receive_data() == []  # still no room
    conn.respond(1, b"late")  # an answer out of order frees nothing yet: 0 is still unanswered
    assert conn.paused and conn.receive_data() == []
    conn.respond(0, b"first")
    assert not conn.paused
    assert [e.correlation_id for e in conn.receive_data() if isinstance(e, Request)] == [3, 4]
    assert conn.paused


def test_the_frame_limit_applies_until_raised() -> None:
    conn = ServerConnection(max_frame=100)
    (violation,) = conn.receive_data(struct.pack(">i", 101))
    assert "impossible frame size 101" in violation.reason
    conn = ServerConnection(max_frame=100)
    conn.set_max_frame(1000)
    (event,) = conn.receive_data(request(*API_VERSIONS_V0, 7, b"x" * 500))
    assert isinstance(event, Request)


def test_connection_caps_count_per_address_and_release() -> None:
    counter = ConnectionCounter(ConnectionLimits(max_connections=3, max_connections_per_ip=2))
    assert counter.admit("10.0.0.1") is None
    assert counter.admit("10.0.0.1") is None
    assert "max.connections.per.ip (2)" in (counter.admit("10.0.0.1") or "")
    assert counter.admit("10.0.0.2") is None
    assert "max.connections (3)" in (counter.admit("10.0.0.3") or "")
    counter.release("10.0.0.1")
    assert counter.admit("10.0.0.3") is None
    assert counter.total == 3


def test_flags_are_kafkas_config_names() -> None:
    import argparse  # noqa: PLC0415

    from groupcoord.gateway.transport import connection_limits  # noqa: PLC0415

    parser = argparse.ArgumentParser()
    connection_limits.add_arguments(parser)
    args = parser.parse_args(["--sasl-server-max-receive-size", "1024", "--max-connections-per-ip", "5"])
    limits = connection_limits.from_arguments(args)
    assert limits == ConnectionLimits(sasl_server_max_receive_size=1024, max_connections_per_ip=5)
    assert ConnectionLimits().sasl_server_max_receive_size == 512 * 1024
    assert ConnectionLimits().socket_request_max_bytes == 100 * 1024 * 1024
    assert ConnectionLimits().connections_max_idle_ms == 600_000


# -- on a real gateway ------------------------------------------------------------------------


def _address(cluster: BackgroundCluster) -> tuple[str, int]:
    host, port = cluster.bootstrap.rsplit(":", 1)
    return host, int(port)



def _proxy(
    broker: EmbeddedBroker, limits: ConnectionLimits, security: ListenerSecurity | None = None
) -> BackgroundCluster:
    options = ClusterOptions(
        port=0, no_coordinator=True, metrics=False, listener_security=security, connection_limits=limits
    )
    return BackgroundCluster((broker.host, broker.port), options)


def _healthy(cluster: BackgroundCluster, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **(config or {})})
    assert admin.list_topics(timeout=10).brokers


@pytest.fixture(scope="module")
def sasl_proxy(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundCluster]:
    users = tmp_path_factory.mktemp("creds") / "users.json"
    users.write_text(json.dumps({"alice": "alice-secret"}))
    security = ListenerSecurity(sasl="credentials", sasl_credentials=str(users))
    with _proxy(broker, ConnectionLimits(), security) as gw:
        yield gw


SASL_CONFIG = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "alice",
    "sasl.password": "alice-secret",
}
BIG = 600 * 1024  # over sasl.server.max.receive.size (512 KiB), far under socket.request.max.bytes


@pytest.mark.broker
def test_a_frame_over_the_sasl_limit_before_authentication_closes_the_connection(
    sasl_proxy: BackgroundCluster,
) -> None:
    _healthy(sasl_proxy, SASL_CONFIG)
    with socket.create_connection(_address(sasl_proxy), timeout=10) as sock:
        sock.sendall(request(*API_VERSIONS_V0, 1, b"x" * BIG))
        assert read_frame(sock) is None
    # after SASL PLAIN the same frame is an ordinary (answered) request
    with socket.create_connection(_address(sasl_proxy), timeout=10) as sock:
        sock.sendall(request(17, 1, 2, struct.pack(">h", 5) + b"PLAIN"))
        assert struct.unpack(">ih", read_frame(sock)[:6]) == (2, 0)
        token = b"\0alice\0alice-secret"
        sock.sendall(request(36, 1, 3, struct.pack(">i", len(token)) + token))
        assert struct.unpack(">ih", read_frame(sock)[:6]) == (3, 0)
        sock.sendall(request(*API_VERSIONS_V0, 4, b"x" * BIG))
        answer = read_frame(sock)
        assert answer is not None and struct.unpack(">ih", answer[:6]) == (4, 0)
    _healthy(sasl_proxy, SASL_CONFIG)


@pytest.mark.broker
def test_without_sasl_socket_request_max_bytes_is_the_only_frame_limit(broker: EmbeddedBroker) -> None:
    """Kafka reads a plaintext listener's first frame with socket.request.max.bytes."""
    with _proxy(broker, ConnectionLimits(socket_request_max_bytes=BIG + 100)) as gw:
        with socket.create_connection(_address(gw), timeout=10) as sock:
            sock.sendall(request(*API_VERSIONS_V0, 1, b"x" * BIG))
            answer = read_frame(sock)
            assert answer is not None and struct.unpack(">ih", answer[:6]) == (1, 0)
            sock.sendall(request(*API_VERSIONS_V0, 2, b"x" * (BIG + 100)))
            assert read_frame(sock) is None
        _healthy(gw)


@pytest.mark.broker
def test_pipelined_requests_are_all_answered_in_order_and_reading_stops_at_the_bound(
    broker: EmbeddedBroker,
) -> None:
    """50,000 requests sent at once (18 MB of answers), the client reading nothing: the
    gateway holds at most queued.max.requests of them and a bounded backlog of answers; then
    every one is answered, in order."""
    bound, count = 50, 50_000
    with _proxy(broker, ConnectionLimits(queued_max_requests=bound)) as gw:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)  # before connect: a small window
        sock.settimeout(30)
        sock.connect(_address(gw))
        with sock:
            sender = threading.Thread(
                target=sock.sendall, args=(b"".join(request(*API_VERSIONS_V0, i) for i in range(count)),)
            )
            sender.start()  # the requests may not all fit in the socket buffers while nobody reads
            time.sleep(2.0)

            async def held() -> tuple[int, int]:
                (session,) = gw.gateway.sessions
                return session.conn.pending, session.writer.transport.get_write_buffer_size()

            pending, unsent = gw.run(held())
            assert pending <= bound
            # answers the client has not read stay bounded too (asyncio's write high-water mark)
            assert unsent < 1024 * 1024
            ids = read_correlation_ids(sock, count)
            sender.join(30)
            assert ids == list(range(count))
        _healthy(gw)


@pytest.mark.broker
def test_connections_over_the_per_ip_cap_are_closed(broker: EmbeddedBroker) -> None:
    with _proxy(broker, ConnectionLimits(max_connections_per_ip=3)) as gw:
        held = [socket.create_connection(_address(gw), timeout=10) for _ in range(3)]
        for i, sock in enumerate(held):
            sock.sendall(request(*API_VERSIONS_V0, i))
            assert read_frame(sock) is not None
        with socket.create_connection(_address(gw), timeout=10) as extra:
            assert read_frame(extra) is None  # closed without a request
        held.pop().close()
        deadline = time.monotonic() + 5
        while gw.run(_count(gw)) >= 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        _healthy(gw)  # a slot is free again
        for sock in held:
            sock.close()


async def _count(gw: BackgroundCluster) -> int:
    return gw.gateway.connections.total


@pytest.mark.broker
def test_an_idle_connection_is_closed_and_a_busy_one_is_not(broker: EmbeddedBroker) -> None:
    with _proxy(broker, ConnectionLimits(connections_max_idle_ms=500)) as gw:
        idle = socket.create_connection(_address(gw), timeout=10)
        busy = socket.create_connection(_address(gw), timeout=10)
        with idle, busy:
            start = time.monotonic()
            for i in range(12):  # 1.2 s of traffic, every 100 ms
                busy.sendall(request(*API_VERSIONS_V0, i))
                assert read_frame(busy) is not None
                time.sleep(0.1)
            assert read_frame(idle) is None  # closed by now
            assert time.monotonic() - start < 5
            busy.sendall(request(*API_VERSIONS_V0, 99))
            assert read_frame(busy) is not None


def test_options_reach_the_gateway(tmp_path: Path) -> None:
    from groupcoord.gateway import assembly  # noqa: PLC0415

    limits = ConnectionLimits(max_connections=7)
    options = ClusterOptions(connection_limits=limits).gateway_options(("h", 1))
    assert options.connection_limits is limits
    assert isinstance(options, assembly.GatewayOptions)


@pytest.mark.broker
def test_an_acks_0_produce_does_not_hold_back_the_answers_after_it(gateway: BackgroundCluster) -> None:
    """Kafka never answers Produce with acks=0; the requests after it on the connection are
    still answered (they waited for an answer that never comes, and counted in flight)."""
    produce_v3_acks_0 = struct.pack(">hhii", -1, 0, 1000, 0)  # no transactional id, acks 0, no topics
    with socket.create_connection(_address(gateway), timeout=10) as sock:
        sock.sendall(request(0, 3, 1, produce_v3_acks_0) + request(*API_VERSIONS_V0, 2))
        answer = read_frame(sock)
        assert answer is not None and struct.unpack(">i", answer[:4]) == (2,)
