import socket

from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord import embedded_broker
from groupcoord.embedded_broker import EmbeddedBroker


def test_embedded_broker_serves_admin_requests(broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic("embedded-smoke", 2, 1)]).values():
        fut.result(timeout=10)
    md = admin.list_topics(timeout=10)
    assert md.topics["embedded-smoke"].partitions.keys() == {0, 1}
    assert [f"{b.host}:{b.port}" for b in md.brokers.values()] == [broker.bootstrap]


def test_stop_leaves_no_process(tmp_path) -> None:
    b = EmbeddedBroker(log_path=tmp_path / "t.log").start()
    proc = b.process
    b.stop()
    assert proc is not None and proc.poll() is not None


def test_a_free_port_is_one_outgoing_connections_are_never_given(monkeypatch, tmp_path) -> None:
    """Ports picked for servers lie below the kernel's ephemeral range, the ports it gives the
    local ends of outgoing connections (one of which once took a Kafka node's port between the
    pick and the node's bind); where that range leaves no room below it, the OS picks."""
    low, _ = embedded_broker._ephemeral_range()
    ports = {embedded_broker.free_port() for _ in range(50)}
    assert all(low - embedded_broker.EXPLICIT_PORTS <= p < low for p in ports)
    assert len(ports) > 40  # random, so parallel pickers rarely meet
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))

    crowded = tmp_path / "ip_local_port_range"
    crowded.write_text("1024\t65535\n")
    monkeypatch.setattr(embedded_broker, "EPHEMERAL_RANGE", crowded)
    assert embedded_broker._ephemeral_range() == (1024, 65535)
    assert embedded_broker.free_port() >= 1024
