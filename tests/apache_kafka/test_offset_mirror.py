"""Issue 40: the way back, continuously. With ``--mirror-offsets-to-upstream`` Kafka 4.4's own
``kafka-consumer-groups.sh --describe`` against the brokers shows what it shows against the
gateway — every partition's committed offset, log end and lag — within the mirror's interval,
and an application sent back to the brokers resumes exactly where it committed through the
gateway, with no export.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.local_cluster import ClusterOptions
from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

from .conftest import CONSUMER_GROUP_COMMAND, run_tool

INTERVAL_MS = 500


@pytest.fixture(scope="module")
def mirrored(kafka: ApacheKafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundCluster]:
    options = ClusterOptions(
        port=0,
        partitions=4,
        state_topic=f"__mirror_{uuid.uuid4().hex[:6]}",
        log_dir=Path(tmp_path_factory.mktemp("mirror")),
        metrics=False,
        mirror_offsets_interval_ms=INTERVAL_MS,
    )
    with BackgroundCluster((kafka.host, kafka.port), options) as cluster:
        yield cluster


def offsets_table(bootstrap: str, group: str) -> set[tuple[str, ...]]:
    """(TOPIC, PARTITION, CURRENT-OFFSET, LOG-END-OFFSET, LAG) rows of Kafka's tool."""
    done = run_tool(CONSUMER_GROUP_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--group", group)
    lines = [line.split() for line in done.stdout.splitlines() if line.strip()]
    header = next(i for i, cells in enumerate(lines) if cells[:1] == ["GROUP"])
    names = lines[header]
    wanted = [names.index(c) for c in ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")]
    return {tuple(cells[i] for i in wanted) for cells in lines[header + 1 :] if cells[0] == group}


def test_the_brokers_see_the_offsets_committed_through_the_gateway(
    kafka: ApacheKafka, mirrored: BackgroundCluster
) -> None:
    topic, group = f"mirror-{uuid.uuid4().hex[:6]}", f"mirror-g-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(40):
        producer.produce(topic, str(i).encode(), partition=i % 2)
    assert producer.flush(30) == 0

    member = Consumer(
        {
            "bootstrap.servers": mirrored.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    member.subscribe([topic])
    consumed = 0
    deadline = time.monotonic() + 60
    while consumed < 25:  # the application, through the gateway: 25 records consumed and committed
        assert time.monotonic() < deadline
        for m in member.consume(25 - consumed, timeout=1):
            if m.error() is None:
                consumed += 1
                member.commit(message=m, asynchronous=False)
    try:
        through_gateway = offsets_table(mirrored.bootstrap, group)
        assert len(through_gateway) == 2 and all(row[2] != "-" for row in through_gateway)
        time.sleep(3 * INTERVAL_MS / 1000)
        assert offsets_table(kafka.bootstrap, group) == through_gateway  # the brokers' own view
    finally:
        member.close()

    # back to the brokers directly, with no export: it resumes where it committed
    committed = {int(row[1]): int(row[2]) for row in through_gateway}
    back = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    back.subscribe([topic])
    try:
        first: dict[int, int] = {}
        deadline = time.monotonic() + 60
        while len(first) < len([p for p, o in committed.items() if o < 20]):
            assert time.monotonic() < deadline
            for m in back.consume(10, timeout=1):
                if m.error() is None:
                    first.setdefault(m.partition(), m.offset())
        assert first == {p: o for p, o in committed.items() if o < 20}
        seen = back.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=10)
        assert {tp.partition: tp.offset for tp in seen} == committed
    finally:
        back.close()
