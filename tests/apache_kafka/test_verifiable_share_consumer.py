"""Kafka's own share consumer (the Java ``KafkaShareConsumer``, in Kafka 4.4's
``VerifiableShareConsumer`` tool) through the gateway in front of Kafka 4.4: two consumers of
one share group read a 2-partition topic, acknowledging synchronously, and every record
produced is consumed and acknowledged exactly once between them; ``kafka-share-groups.sh``
describes the group meanwhile."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from queue import Empty, Queue
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

from .conftest import start_tool

VERIFIABLE_SHARE_CONSUMER = "org.apache.kafka.tools.VerifiableShareConsumer"
RECORDS = 1_000


def test_two_java_share_consumers_read_every_record_once(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster, tmp_path: Path
) -> None:
    topic, group = f"jqueue-{uuid.uuid4().hex[:6]}", f"jsg-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(RECORDS):
        producer.produce(topic, str(i).encode(), partition=i % 2)
    assert producer.flush(30) == 0
    tools = [
        start_tool(
            VERIFIABLE_SHARE_CONSUMER,
            "--topic", topic, "--group-id", group, "--bootstrap-server", kafka_cluster.bootstrap,
            "--offset-reset-strategy", "earliest", "--acknowledgement-mode", "sync", "--verbose",
            log=tmp_path / f"share-{n}.log",
        )
        for n in range(2)
    ]  # fmt: skip
    events: list[dict[str, Any]] = []
    queue: Queue[dict[str, Any]] = Queue()

    def read(tool: subprocess.Popen[str]) -> None:  # each tool's events, as they come
        assert tool.stdout is not None
        for line in tool.stdout:
            if line.startswith("{"):
                queue.put(json.loads(line))

    for tool in tools:
        threading.Thread(target=read, args=(tool,), daemon=True).start()
    try:
        deadline = time.monotonic() + 120
        consumed: Counter[tuple[int, int]] = Counter()
        acknowledged: Counter[tuple[int, int]] = Counter()
        while time.monotonic() < deadline and (len(consumed) < RECORDS or len(acknowledged) < RECORDS):
            try:
                event = queue.get(timeout=1)
            except Empty:
                continue
            events.append(event)
            if event.get("name") == "record_data":
                consumed[(event["partition"], event["offset"])] += 1
            elif event.get("name") == "offsets_acknowledged" and event.get("success"):
                for p in event["partitions"]:
                    acknowledged.update((p["partition"], o) for o in p["offsets"])
        print(Counter(e.get("name") for e in events))
    finally:
        for tool in tools:
            tool.terminate()
        for tool in tools:
            try:
                tool.wait(30)
            except subprocess.TimeoutExpired:
                tool.kill()
    logs = "\n".join((tmp_path / f"share-{n}.log").read_text()[-2000:] for n in range(2))
    assert len(consumed) == RECORDS, f"{len(consumed)} of {RECORDS} consumed\n{events[-5:]}\n{logs}"
    assert set(consumed.values()) == {1}, "a record was consumed twice"
    assert len(acknowledged) == RECORDS and set(acknowledged.values()) == {1}, "each acknowledged once"
