"""franz-go (github.com/twmb/franz-go, v1.22), a client written apart from librdkafka and Kafka's
Java clients, through the gateway in front of every upstream (issue 42: "clients we have not yet
met"): as a KIP-848 consumer group member (its ``ServerSideBalancer``) and as a share group
member (its ``ShareGroup``, KIP-932, with explicit acknowledgements).

The client is ``tests/clients/franz`` (one JSON line per record it was given), built by
``scripts/test`` into ``$GROUPCOORD_FRANZ_CLIENT``.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord_testing import BackgroundCluster
from tests.e2e.test_share_groups import earliest, produce
from tests.real_parts import unavailable

pytestmark = [pytest.mark.broker, pytest.mark.upstreams("tansu", "kafka-4.4", "kafka-3.9")]

RECORDS, PARTITIONS = 1_000, 4


def franz_client() -> str:
    path = os.environ.get("GROUPCOORD_FRANZ_CLIENT", "")
    if not os.access(path, os.X_OK):
        unavailable("the franz-go client is not built (scripts/test builds tests/clients/franz, Go needed)")
    return path


class Member:
    """One franz-go client process, its output lines read as they come (a thread each)."""

    def __init__(self, bootstrap: str, mode: str, group: str, topic: str, *args: str) -> None:
        command = [franz_client(), "-mode", mode, "-bootstrap", bootstrap, "-group", group, "-topic", topic, *args]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.events: list[dict[str, Any]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def stop(self) -> str:
        """Kill it (what it printed is done) and return its stderr's end."""
        self.process.kill()
        _, err = self.process.communicate(timeout=30)
        self.reader.join(10)
        return err[-2000:]


def run_until(
    members: list[Member], done: Callable[[list[dict[str, Any]]], bool], timeout: float = 90, linger: float = 0
) -> list[dict[str, Any]]:
    """Every member's events once ``done`` holds for them together (or ``timeout`` passed),
    and ``linger`` seconds more."""
    deadline = time.monotonic() + timeout
    try:
        while not done([e for m in members for e in list(m.events)]) and time.monotonic() < deadline:
            assert all(m.process.poll() is None for m in members), "a franz-go member exited"
            time.sleep(0.2)
        time.sleep(linger)
    finally:
        logs = [m.stop() for m in members]
    everything = [e for m in members for e in m.events]
    assert [e for e in everything if e["event"] == "error"] == [], logs
    return everything


def records(events: list[dict[str, Any]]) -> Counter[tuple[int, int, int]]:
    return Counter((e["partition"], e["offset"], e["delivery"]) for e in events if e["event"] == "record")


def new_topic(bootstrap: str) -> str:
    topic = f"franz-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    return topic


def test_two_franz_go_kip_848_members_read_every_record_and_commit(cluster: BackgroundCluster) -> None:
    topic, group = new_topic(cluster.bootstrap), f"franz-g-{uuid.uuid4().hex[:6]}"
    produce(cluster.bootstrap, topic, RECORDS, PARTITIONS)
    members = [Member(cluster.bootstrap, "consumer", group, topic, "-idle", "60s") for _ in range(2)]
    read = records(run_until(members, lambda seen: len({k[:2] for k in records(seen)}) >= RECORDS))
    assert len({k[:2] for k in read}) == RECORDS, f"{len(read)} of {RECORDS} records read"
    # what they committed: every partition at its end, as Kafka's admin client reads it
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition  # noqa: PLC0415

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    committed = admin.list_consumer_group_offsets([request])[group].result(30)
    assert sorted(tp.offset for tp in committed.topic_partitions) == [RECORDS // PARTITIONS] * PARTITIONS


def test_franz_go_share_members_get_each_record_once_and_a_released_one_again(cluster: BackgroundCluster) -> None:
    topic, group = new_topic(cluster.bootstrap), f"franz-s-{uuid.uuid4().hex[:6]}"
    earliest(cluster.bootstrap, group)
    produce(cluster.bootstrap, topic, RECORDS, PARTITIONS)
    # the record at offset 3 of its partition is released once, the one at offset 4 rejected
    members = [
        Member(cluster.bootstrap, "share", group, topic, "-idle", "60s", "-release", "3", "-reject", "4")
        for _ in range(2)
    ]
    released_again = {(p, 3, 2) for p in range(PARTITIONS)}

    def done(seen: list[dict[str, Any]]) -> bool:
        got = records(seen)
        return len({k[:2] for k in got}) >= RECORDS and released_again <= set(got)

    deliveries = records(run_until(members, done, linger=3))  # a rejected one would come by then
    assert all(n == 1 for n in deliveries.values()), "a record delivered twice at one delivery count"
    offsets = Counter((p, o) for p, o, _ in deliveries)
    assert len(offsets) == RECORDS, f"{len(offsets)} of {RECORDS} records delivered"
    again = sorted((p, o, d) for (p, o, d) in deliveries if d > 1)
    assert again == [(p, 3, 2) for p in range(PARTITIONS)], "only the released records come again"
    assert all(offsets[(p, 4)] == 1 for p in range(PARTITIONS)), "a rejected record came again"
