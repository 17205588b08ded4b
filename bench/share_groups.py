"""share-groups: KIP-932 share consumers, in one run, against Apache Kafka 4.4's own share
groups, against groupcoord in front of the same Kafka 4.4, and against groupcoord in front of
tansu (the embedded broker, which has no share groups of its own).

For 1, 4 and 16 librdkafka share consumers (confluent-kafka's ``ShareConsumer``, one thread
each, explicit acknowledgement) on a 16-partition topic holding ``--records`` records, on a
fresh share group reading from the earliest offset: how long until every record was delivered
(records/s), and the latency of the acknowledgements (``commit_sync`` of each poll's records,
p50/p99). Records delivered more than once are counted (none should be).

Then dead-letter queues (KIP-1191): ``--dlq-consumers`` consumers of a group with
``errors.deadletterqueue.topic.name`` set reject every record, and the run lasts until the DLQ
topic holds one dead letter per record (``dead_letters_per_s``), against Kafka 4.4's own share
coordinator and through groupcoord in front of it (tansu is left out: its ListOffsets "latest"
cannot count a topic's records).

Ratios are groupcoord / Kafka (``*_per_s``: higher is better; ``*_ms``: lower is better), and
``ratios_tansu`` groupcoord-in-front-of-tansu / Kafka. The machine's load average is taken
before and after: figures from a busy machine are not figures.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

NAME = "share-groups"
DESCRIPTION = "KIP-932 share consumers: Kafka 4.4's own share groups vs groupcoord in front of it, and of tansu"

PARTITIONS = 16


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def earliest(bootstrap: str, group: str, **configs: str) -> None:
    from confluent_kafka.admin import (  # noqa: PLC0415
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group)
    for name, value in {"share.auto.offset.reset": "earliest", **configs}.items():
        resource.add_incremental_config(ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET))
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result(30)


def consume(
    bootstrap: str,
    topic: str,
    records: int,
    consumers: int,
    timeout_s: float,
    dlq: str | None = None,
    dlq_count: Any = None,
) -> dict[str, Any]:
    """``consumers`` share consumers of a fresh group read ``records`` records of ``topic``; with
    ``dlq``, the group's DLQ topic, they reject every record, and the run ends when
    ``dlq_count()`` says the DLQ holds one per record."""
    from confluent_kafka import AcknowledgeType, ShareConsumer  # noqa: PLC0415

    group = f"bench-share-{uuid.uuid4().hex[:8]}"
    ack = AcknowledgeType.ACCEPT
    if dlq is None:
        earliest(bootstrap, group)
    else:
        earliest(bootstrap, group, **{"errors.deadletterqueue.topic.name": dlq})
        ack = AcknowledgeType.REJECT
    seen: set[tuple[int, int]] = set()
    duplicates = 0
    ack_ms: list[float] = []
    lock = threading.Lock()
    done = threading.Event()
    errors: list[str] = []
    started = threading.Barrier(consumers + 1)

    def member() -> None:
        nonlocal duplicates
        consumer = ShareConsumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
        )
        try:
            consumer.subscribe([topic])
            started.wait()
            while not done.is_set():
                batch = [m for m in consumer.poll(0.2)]
                mine = []
                for m in batch:
                    if m.error() is not None:
                        errors.append(str(m.error()))
                        continue
                    consumer.acknowledge(m, ack)
                    mine.append((m.partition(), m.offset()))
                if batch:
                    t0 = time.perf_counter()
                    consumer.commit_sync()
                    elapsed = (time.perf_counter() - t0) * 1000
                    with lock:
                        ack_ms.append(elapsed)
                        for key in mine:
                            if key in seen:
                                duplicates += 1
                            seen.add(key)
                        if len(seen) >= records and dlq_count is None:
                            done.set()
        finally:
            consumer.close()

    threads = [threading.Thread(target=member, daemon=True) for _ in range(consumers)]
    for t in threads:
        t.start()
    started.wait()
    begun = time.perf_counter()
    if dlq_count is not None:
        while time.perf_counter() - begun < timeout_s and dlq_count() < records:
            time.sleep(0.05)
        done.set()
    done.wait(max(timeout_s - (time.perf_counter() - begun), 0))
    elapsed = time.perf_counter() - begun
    done.set()
    for t in threads:
        t.join(60)
    out: dict[str, Any] = {
        "consumers": consumers,
        "delivered": len(seen),
        "duplicates": duplicates,
        "records_per_s": round(len(seen) / elapsed, 1),
        "ack_p50_ms": round(_pct(ack_ms, 0.5), 2),
        "ack_p99_ms": round(_pct(ack_ms, 0.99), 2),
        "errors": sorted(set(errors))[:5],
        "complete": len(seen) >= records,
    }
    if dlq_count is not None:
        out["dead_letters"] = dlq_count()
        out["dead_letters_per_s"] = round(out["dead_letters"] / elapsed, 1)
        out["complete"] = out["complete"] and out["dead_letters"] >= records
    return out


def dlq_counter(bootstrap: str, topic: str) -> Any:
    """How many records ``topic`` (one partition) holds, from its high watermark."""
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-count-{uuid.uuid4().hex[:6]}"})
    return lambda: reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1]


def produce(bootstrap: str, topic: str, records: int, size: int) -> None:
    from confluent_kafka import Producer  # noqa: PLC0415

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    payload = b"x" * size
    for i in range(records):
        producer.produce(topic, payload, partition=i % PARTITIONS)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def run(args: list[str]) -> dict[str, object]:
    from _up_process import UpProcess  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415
    from kafka_side_by_side import ratios, side_by_side  # noqa: PLC0415

    from groupcoord.embedded_broker import EmbeddedBroker, free_port  # noqa: PLC0415
    from groupcoord_testing.apache_kafka import VERSIONS, ApacheKafka  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog=NAME)
    parser.add_argument("--kafka-version", default=VERSIONS["kafka-4.4"])
    parser.add_argument("--kafka-heap-mb", type=int, default=1024)
    parser.add_argument("--shards", type=int, default=2, help="groupcoord shard processes")
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=100, help="record bytes")
    parser.add_argument("--consumers", default="1,4,16", help="share consumers per run")
    parser.add_argument("--timeout", type=float, default=120, help="seconds a run may take")
    parser.add_argument("--dlq-consumers", type=int, default=4, help="share consumers rejecting into a DLQ (0: none)")
    opts = parser.parse_args(args)
    sizes = [int(n) for n in opts.consumers.split(",") if n.strip()]

    load_before = os.getloadavg()
    begun = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="share-groups-") as tmp:
        kafka = ApacheKafka(Path(tmp), version=opts.kafka_version, heap_mb=opts.kafka_heap_mb)
        with (
            kafka,
            UpProcess(kafka.bootstrap, free_port(), opts.shards, 1) as up,
            EmbeddedBroker() as tansu,
            UpProcess(tansu.bootstrap, free_port(), opts.shards, 1) as up_tansu,
        ):
            bootstraps = {"kafka": kafka.bootstrap, "groupcoord": up.bootstrap}
            topic = f"bench-share-{uuid.uuid4().hex[:6]}"
            for upstream in (kafka.bootstrap, tansu.bootstrap):
                admin = AdminClient({"bootstrap.servers": upstream})
                admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
                produce(upstream, topic, opts.records, opts.size)
            # warm-up: Kafka's share coordinator creates its state topic at the first share-partition
            for bootstrap in (*bootstraps.values(), up_tansu.bootstrap):
                consume(bootstrap, topic, min(opts.records, 1_000), 1, opts.timeout)
            runs = []
            for n in sizes:
                run = side_by_side(lambda _t, b, n=n: consume(b, topic, opts.records, n, opts.timeout), bootstraps)
                run["groupcoord_tansu"] = consume(up_tansu.bootstrap, topic, opts.records, n, opts.timeout)
                run["ratios_tansu"] = ratios(run["kafka"], run["groupcoord_tansu"])
                runs.append(run)
            if opts.dlq_consumers:

                def rejecting(_t: Any, bootstrap: str) -> dict[str, Any]:
                    dlq = f"dlq.bench-{uuid.uuid4().hex[:6]}"
                    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
                    config = {"errors.deadletterqueue.group.enable": "true"}
                    admin.create_topics([NewTopic(dlq, 1, 1, config=config)])[dlq].result(30)
                    count = dlq_counter(kafka.bootstrap, dlq)
                    return consume(bootstrap, topic, opts.records, opts.dlq_consumers, opts.timeout, dlq, count)

                dead_letters = side_by_side(rejecting, bootstraps)
    return {
        "kafka_version": opts.kafka_version,
        "groupcoord": {"shards": opts.shards},
        "cpus": os.cpu_count(),
        "records": opts.records,
        "partitions": PARTITIONS,
        "ratios_are": "groupcoord / Kafka: *_per_s higher is better, *_ms lower is better",
        "runs": runs,
        "dead_letters": dead_letters if opts.dlq_consumers else None,
        "seconds": round(time.monotonic() - begun, 1),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
