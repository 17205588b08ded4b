"""Metric samples go to a real broker's metrics topic and come back with the known activity."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from prometheus_client import CollectorRegistry

from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.observability.metric_samples import MetricSample, MetricSamplePublisher, collect_samples
from groupcoord.observability.shard_metrics import ShardMetrics

pytestmark = pytest.mark.broker


async def read_all(bootstrap: str, topic: str, expected: int) -> list[tuple[bytes, MetricSample]]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    out: list[tuple[bytes, MetricSample]] = []
    try:
        async with asyncio.timeout(30):
            while len(out) < expected:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    out.extend((r.key, MetricSample.from_json(r.value)) for r in records)
        for records in (await consumer.getmany(timeout_ms=1000)).values():  # nothing beyond
            out.extend((r.key, MetricSample.from_json(r.value)) for r in records)
    finally:
        await consumer.stop()
    return out


def test_top_n_groups_are_the_busiest_and_bounded() -> None:
    m = ShardMetrics("0", CollectorRegistry())
    for i in range(50):
        for _ in range(i + 1):
            m.observe_request("Heartbeat", 0.001, partition=0, group=f"g{i}")
    (sample,) = collect_samples(m, ts=100.0, interval_s=10.0, top_n=3)
    assert sample.top_groups == [
        {"group": "g49", "requests": 50},
        {"group": "g48", "requests": 49},
        {"group": "g47", "requests": 48},
    ]
    assert sample.requests == {"Heartbeat": sum(range(1, 51))}


async def test_publisher_writes_periodic_samples_to_the_metrics_topic(broker: EmbeddedBroker) -> None:
    topic = f"__groupcoord_metrics_{uuid.uuid4().hex[:8]}"
    m = ShardMetrics("7", CollectorRegistry())
    m.add_thread("0")
    m.set_partition_states({0: "active", 1: "active"})
    m.set_group_counts(0, consumer={"stable": 11}, classic={})
    m.set_group_counts(1, consumer={}, classic={"stable": 1})
    async with MetricSamplePublisher(m, broker.bootstrap, topic=topic, interval_s=0.3, top_n=3) as pub:
        for _ in range(40):
            m.observe_request("ConsumerGroupHeartbeat", 0.001, partition=0, group="hot")
        for i in range(10):
            m.observe_request("ConsumerGroupHeartbeat", 0.001, partition=0, group=f"g{i}")
        m.observe_event(0.0, 0.06, partition=0)
        for _ in range(5):
            m.observe_request("OffsetCommit", 0.002, partition=1, group="cold")
        m.record_offset_commits(5, partition=1)
        async with asyncio.timeout(20):  # the task publishes on its own, interval after interval
            while pub.published < 4:
                await asyncio.sleep(0.05)
        for _ in range(10):
            m.observe_request("OffsetFetch", 0.001, partition=1, group="cold")
    published = pub.published  # stop() published the final partial interval too

    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        assert topic in await admin.list_topics()
    finally:
        await admin.close()

    records = await read_all(broker.bootstrap, topic, published)
    assert len(records) == published >= 6  # ≥ 3 intervals × 2 partitions
    requests: dict[int, Counter[str]] = {0: Counter(), 1: Counter()}
    commits = 0
    for key, s in records:
        assert key == f"7/{s.partition}".encode() and s.shard == "7" and s.version == 1
        assert s.interval_s > 0 and s.threads == 1 and len(s.top_groups) <= 3
        requests[s.partition].update(s.requests)
        commits += s.offset_commits
        if s.partition == 0:
            assert s.groups == {"consumer": {"stable": 11}, "classic": {}}
    assert requests[0] == {"ConsumerGroupHeartbeat": 50}
    assert requests[1] == {"OffsetCommit": 5, "OffsetFetch": 10}
    assert commits == 5
    busy = [s for _, s in records if s.partition == 0 and s.requests]
    assert len(busy) == 1
    assert busy[0].top_groups[0] == {"group": "hot", "requests": 40}
    assert busy[0].busy_s == pytest.approx(0.06)
    # A busy ratio is capped at 1.0: on a slow machine the first interval may last less than
    # the 60 ms of loop time observed in it.
    assert busy[0].busy_ratio == pytest.approx(min(1.0, 0.06 / busy[0].interval_s))
