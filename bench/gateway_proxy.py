"""gateway-proxy: produce and fetch through the gateway vs directly against the broker.

Both paths are measured in the same run against the same embedded broker:
- produce throughput: confluent-kafka producer, N records of S bytes, until flushed;
- fetch throughput: a consumer with a manual assignment reading the topic from offset 0;
- produce / fetch latency: raw Produce v9 (one 100-byte record, acks=all) and Fetch v12 (1 KiB
  at offset 0) requests, kio-encoded, one at a time on one connection: the request round trip.
Ratios are gateway / direct (latency: lower is better, target <= 1.3; throughput: higher is
better, target >= 0.7).
"""

from __future__ import annotations

import argparse
import datetime
import socket
import statistics
import time
import uuid

NAME = "gateway-proxy"
DESCRIPTION = "produce/fetch throughput and p50/p99 latency through the gateway vs direct to the broker"


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def produce_throughput(bootstrap: str, topic: str, records: int, size: int) -> float:
    from confluent_kafka import Producer  # noqa: PLC0415

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "queue.buffering.max.messages": records + 10}
    )
    payload = b"x" * size
    start = time.perf_counter()
    for _ in range(records):
        producer.produce(topic, payload)
        producer.poll(0)
    producer.flush(60)
    return records / (time.perf_counter() - start)


def fetch_throughput(bootstrap: str, topic: str, records: int) -> float:
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    start = time.perf_counter()
    while seen < records:
        seen += sum(1 for m in consumer.consume(10_000, timeout=1) if m.error() is None)
    elapsed = time.perf_counter() - start
    consumer.close()
    return seen / elapsed


def _produce_request(topic: str) -> object:
    import io  # noqa: PLC0415

    from kio.records import writers  # noqa: PLC0415
    from kio.records.schema import NewRecordBatch, Record  # noqa: PLC0415
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData  # noqa: PLC0415
    from kio.static.primitive import TZAwareMicros, i8, i16, i32, i32Timedelta, i64  # noqa: PLC0415

    record = Record(
        attributes=i8(0),
        timestamp=TZAwareMicros.parse(datetime.datetime.now(datetime.UTC)),
        offset=i64(0),
        key=None,
        value=b"y" * 100,
        headers=(),
    )
    buf = io.BytesIO()
    writers.write_batch(
        buf,
        NewRecordBatch(
            producer_id=i64(-1),
            producer_epoch=i16(-1),
            base_sequence=i32(-1),
            records=(record,),
            attributes=i16(0),
        ),
    )
    return ProduceRequest(
        acks=i16(-1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        topic_data=(
            TopicProduceData(
                name=topic, partition_data=(PartitionProduceData(index=i32(0), records=buf.getvalue()),)
            ),
        ),
    )


def _fetch_request(topic: str) -> object:
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic  # noqa: PLC0415
    from kio.static.primitive import i32, i32Timedelta, i64  # noqa: PLC0415

    partition = FetchPartition(partition=i32(0), fetch_offset=i64(0), partition_max_bytes=i32(1024))
    return FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=0)),
        min_bytes=i32(1),
        topics=(FetchTopic(topic=topic, partitions=(partition,)),),
        forgotten_topics_data=(),
    )


def round_trips(bootstrap: str, request: object, rounds: int) -> list[float]:
    """Latency of one request at a time on one connection (ms), after 10 warm-up rounds."""
    from groupcoord.common.kafka_wire import codec  # noqa: PLC0415
    from groupcoord.common.kafka_wire.framing import ClientConnection, frame_bytes  # noqa: PLC0415

    host, port = bootstrap.rsplit(":", 1)
    samples = []
    with socket.create_connection((host, int(port))) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = ClientConnection()
        for i in range(rounds + 10):
            frame = frame_bytes(codec.encode_request(i, "bench", request))
            start = time.perf_counter()
            s.sendall(frame)
            got: list[tuple[int, bytes]] = []
            while not got:
                got = conn.receive_data(s.recv(1 << 20))
            if i >= 10:
                samples.append((time.perf_counter() - start) * 1000)
    return samples


def measure(bootstrap: str, topic: str, records: int, size: int, rounds: int) -> dict[str, float]:
    lat_p = round_trips(bootstrap, _produce_request(topic), rounds)
    lat_f = round_trips(bootstrap, _fetch_request(topic), rounds)
    return {
        "produce_msgs_per_s": round(produce_throughput(bootstrap, topic, records, size)),
        "produce_p50_ms": round(statistics.median(lat_p), 3),
        "produce_p99_ms": round(_pct(lat_p, 0.99), 3),
        "fetch_msgs_per_s": round(fetch_throughput(bootstrap, topic, records)),
        "fetch_p50_ms": round(statistics.median(lat_f), 3),
        "fetch_p99_ms": round(_pct(lat_f, 0.99), 3),
    }


def run(args: list[str]) -> dict[str, object]:
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    from groupcoord.embedded_broker import EmbeddedBroker  # noqa: PLC0415
    from groupcoord_testing import BackgroundCluster  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog=NAME)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=500)
    opts = parser.parse_args(args)
    with EmbeddedBroker() as broker, BackgroundCluster.proxy((broker.host, broker.port)) as gw:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        results = {}
        for label, bootstrap in (("direct", broker.bootstrap), ("gateway", gw.bootstrap)):
            topic = f"bench-{label}-{uuid.uuid4().hex[:6]}"
            for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
                fut.result(15)
            results[label] = measure(bootstrap, topic, opts.records, opts.size, opts.rounds)
    d, g = results["direct"], results["gateway"]
    ratios = {
        "produce_throughput_ratio": round(g["produce_msgs_per_s"] / d["produce_msgs_per_s"], 3),
        "fetch_throughput_ratio": round(g["fetch_msgs_per_s"] / d["fetch_msgs_per_s"], 3),
        "produce_p50_latency_ratio": round(g["produce_p50_ms"] / d["produce_p50_ms"], 3),
        "produce_p99_latency_ratio": round(g["produce_p99_ms"] / d["produce_p99_ms"], 3),
        "fetch_p50_latency_ratio": round(g["fetch_p50_ms"] / d["fetch_p50_ms"], 3),
        "fetch_p99_latency_ratio": round(g["fetch_p99_ms"] / d["fetch_p99_ms"], 3),
    }
    return {"records": opts.records, "record_bytes": opts.size, "direct": d, "gateway": g, "ratios": ratios}
