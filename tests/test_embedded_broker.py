from confluent_kafka.admin import AdminClient, NewTopic

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
