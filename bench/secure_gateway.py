"""secure-gateway: the cost of TLS + SASL on the client listeners, plaintext measured in the same run.

Two local clusters (shards + gateway) in front of one embedded broker, one with plaintext
listeners, one with TLS and SASL SCRAM-SHA-512 from a credential store. For each:
- heartbeat throughput: one KIP-848 member's ConsumerGroupHeartbeat at its epoch, pipelined
  (a window of 32 in flight) on one authenticated connection (our wire client);
- produce throughput through the gateway: confluent-kafka producer, N records of S bytes.
Ratios are secure / plaintext (higher is better).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import tempfile
import time
import uuid
from pathlib import Path

NAME = "secure-gateway"
DESCRIPTION = "heartbeat and produce throughput through the gateway: TLS+SASL SCRAM-SHA-512 vs plaintext"
WINDOW = 32


async def heartbeat_rate(bootstrap: str, security: object, topic: str, heartbeats: int) -> float:
    from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest  # noqa: PLC0415
    from kio.static.primitive import i32, i32Timedelta  # noqa: PLC0415

    from groupcoord.common.kafka_wire import codec  # noqa: PLC0415
    from groupcoord.common.kafka_wire.framing import ClientConnection, frame_bytes  # noqa: PLC0415
    from groupcoord.common.kafka_wire.secure_connection import open_kafka_connection  # noqa: PLC0415

    host, port = bootstrap.rsplit(":", 1)
    reader, writer = await open_kafka_connection((host, int(port)), security, "bench")  # type: ignore[arg-type]
    conn = ClientConnection()
    group, member = f"bench-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex[:22]

    def request(epoch: int, join: bool) -> ConsumerGroupHeartbeatRequest:
        return ConsumerGroupHeartbeatRequest(
            group_id=group,
            member_id=member,
            member_epoch=i32(epoch),
            instance_id=None,
            rack_id=None,
            rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            subscribed_topic_names=(topic,) if join else None,
            server_assignor=None,
            topic_partitions=() if join else None,
        )

    async def responses(count: int) -> list[bytes]:
        got: list[bytes] = []
        while len(got) < count:
            got.extend(payload for _, payload in conn.receive_data(await reader.read(1 << 20)))
        return got

    deadline = time.monotonic() + 30
    while True:  # retriable while the coordinator loads (as clients retry)
        writer.write(frame_bytes(codec.encode_request(0, "bench", request(0, True))))
        (payload,) = await responses(1)
        _, joined = codec.decode_response(68, 0, payload)
        if int(joined.error_code) != 14 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert int(joined.error_code) == 0, f"join answered {joined.error_code}: {joined.error_message}"
    epoch = int(joined.member_epoch)
    # The group epoch moves on once the coordinator has learned the topic's partitions and assigned
    # them: heartbeat one at a time (as a client does) until the member holds partitions and its
    # epoch has held for 1 s,
    # so the pipelined heartbeats below are all at the member's current epoch.
    steady_since, settle_deadline = time.monotonic(), time.monotonic() + 30
    assigned = joined.assignment is not None and bool(joined.assignment.topic_partitions)
    while (not assigned or time.monotonic() - steady_since < 1.0) and time.monotonic() < settle_deadline:
        writer.write(frame_bytes(codec.encode_request(1, "bench", request(epoch, False))))
        (payload,) = await responses(1)
        _, beat = codec.decode_response(68, 0, payload)
        assert int(beat.error_code) == 0, f"settling heartbeat answered {beat.error_code}: {beat.error_message}"
        assigned = assigned or (beat.assignment is not None and bool(beat.assignment.topic_partitions))
        if int(beat.member_epoch) != epoch:
            epoch, steady_since = int(beat.member_epoch), time.monotonic()
        await asyncio.sleep(0.1)
    frame = frame_bytes(codec.encode_request(1, "bench", request(epoch, False)))
    start = time.perf_counter()
    sent = done = 0
    last = b""
    while done < heartbeats:
        while sent - done < WINDOW and sent < heartbeats:
            writer.write(frame)
            sent += 1
        got = await responses(1)
        done += len(got)
        last = got[-1]
    elapsed = time.perf_counter() - start
    _, answer = codec.decode_response(68, 0, last)
    assert int(answer.error_code) == 0, f"heartbeats were answered {answer.error_code}: {answer.error_message}"
    writer.close()
    return heartbeats / elapsed


def produce_rate(bootstrap: str, config: dict, topic: str, records: int, size: int) -> dict[str, float]:
    """Produce throughput and per-record delivery latency (produce() to its delivery report),
    after a warm-up that opens the connections and learns the topic's leader."""
    from confluent_kafka import Producer  # noqa: PLC0415

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "queue.buffering.max.messages": records + 10, **config})
    payload = b"x" * size
    for _ in range(min(5_000, records)):
        producer.produce(topic, payload)
        producer.poll(0)
    producer.flush(60)
    latencies: list[float] = []

    def delivered(err, _msg, sent: float) -> None:
        assert err is None, err
        latencies.append(time.perf_counter() - sent)

    start = time.perf_counter()
    for _ in range(records):
        sent = time.perf_counter()
        producer.produce(topic, payload, on_delivery=lambda err, msg, sent=sent: delivered(err, msg, sent))
        producer.poll(0)
    producer.flush(60)
    elapsed = time.perf_counter() - start
    latencies.sort()
    return {
        "produce_msgs_per_s": round(records / elapsed),
        "produce_p50_ms": round(1000 * latencies[len(latencies) // 2], 2),
        "produce_p99_ms": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 2),
    }


def run(args: list[str]) -> dict[str, object]:
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    from groupcoord.common.kafka_security import KafkaSecurity  # noqa: PLC0415
    from groupcoord.embedded_broker import EmbeddedBroker  # noqa: PLC0415
    from groupcoord.gateway.security.listener_security import ListenerSecurity  # noqa: PLC0415
    from groupcoord.local_cluster import ClusterOptions  # noqa: PLC0415
    from groupcoord_testing import BackgroundCluster  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog=NAME)
    parser.add_argument("--heartbeats", type=int, default=20_000)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    opts = parser.parse_args(args)

    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker() as broker:
        import sys  # noqa: PLC0415

        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.security.tls import make_pki  # noqa: PLC0415

        pki = make_pki(Path(tmp) / "pki")
        users = Path(tmp) / "users.json"
        users.write_text(json.dumps({"bench": "bench-secret"}))
        variants = {
            "plaintext": (ListenerSecurity(), KafkaSecurity(), {}),
            "tls_sasl_scram512": (
                ListenerSecurity(
                    ssl_certfile=str(pki.server_cert),
                    ssl_keyfile=str(pki.server_key),
                    sasl="credentials",
                    sasl_credentials=str(users),
                ),
                KafkaSecurity("SASL_SSL", str(pki.ca), sasl_mechanism="SCRAM-SHA-512", sasl_username="bench", sasl_password="bench-secret"),
                {
                    "security.protocol": "SASL_SSL",
                    "sasl.mechanism": "SCRAM-SHA-512",
                    "sasl.username": "bench",
                    "sasl.password": "bench-secret",
                    "ssl.ca.location": str(pki.ca),
                },
            ),
        }
        results: dict[str, dict[str, float]] = {}
        load_before = os.getloadavg()
        for label, (listener, client_security, client_config) in variants.items():
            options = ClusterOptions(
                port=0, partitions=4, metrics=False, state_topic=f"__bench_{uuid.uuid4().hex[:6]}", listener_security=listener
            )
            with BackgroundCluster((broker.host, broker.port), options) as cluster:
                topic = f"bench-{label}-{uuid.uuid4().hex[:6]}"
                admin = AdminClient({"bootstrap.servers": broker.bootstrap})
                admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
                results[label] = {
                    "heartbeats_per_s": round(asyncio.run(heartbeat_rate(cluster.bootstrap, client_security, topic, opts.heartbeats))),
                    **produce_rate(cluster.bootstrap, client_config, topic, opts.records, opts.size),
                }
    p, s = results["plaintext"], results["tls_sasl_scram512"]
    return {
        "heartbeats": opts.heartbeats,
        "records": opts.records,
        "record_bytes": opts.size,
        **results,
        "load_average_before_after": [load_before, os.getloadavg()],
        "ratios": {
            "heartbeat_throughput_ratio": round(s["heartbeats_per_s"] / p["heartbeats_per_s"], 3),
            "produce_throughput_ratio": round(s["produce_msgs_per_s"] / p["produce_msgs_per_s"], 3),
            "produce_p99_ratio": round(s["produce_p99_ms"] / p["produce_p99_ms"], 3),
        },
    }
