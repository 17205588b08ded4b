"""Committing applications with librdkafka, run in a client container during a deployment test.

``python committing_clients.py BOOTSTRAP TOPIC SECONDS GROUP:PROTOCOL...`` produces to TOPIC
all along and runs one confluent-kafka consumer per GROUP (``classic`` or ``consumer``, KIP-848),
each committing synchronously after every message and remembering the offsets the coordinator
acknowledged. It prints ``consuming`` once every group consumed (the test then disturbs the
cluster), and after SECONDS (or once /tmp/stop exists) one JSON line: per group what was consumed, the last acknowledged
commit per partition, what the coordinator answers as committed afterwards, and every error the
application saw. A committed offset below an acknowledged one is a lost commit.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 2
# What the Java client raises as a RetriableException (and librdkafka's local equivalents).
RETRIABLE = {
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._WAIT_COORD,
}
STOP_FILE = Path("/tmp/stop")  # the test may end the run early: docker exec ... touch /tmp/stop


def produce_all_along(bootstrap: str, topic: str, stop: threading.Event) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    i = 0
    while not stop.is_set():
        producer.produce(topic, f"r{i}".encode(), partition=i % PARTITIONS)
        producer.poll(0)
        i += 1
        time.sleep(0.02)
    producer.flush(30)


class CommittingConsumer(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, group: str, protocol: str, stop: threading.Event) -> None:
        super().__init__(daemon=True, name=group)
        self.bootstrap, self.topic, self.group, self.protocol, self.stop = (
            bootstrap,
            topic,
            group,
            protocol,
            stop,
        )
        self.consumed = 0
        self.acked: dict[int, int] = {}
        self.errors: list[str] = []
        self.retriable: list[str] = []
        self.last_ack_wall = 0.0  # time.time() of the last acknowledged commit
        self.started = threading.Event()

    def run(self) -> None:
        config = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "group.protocol": self.protocol,
        }
        if self.protocol == "classic":
            config["session.timeout.ms"] = 10000
        consumer = Consumer(config)
        consumer.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error() is not None:
                    self.note(msg.error())
                    continue
                self.consumed += 1
                self.started.set()
                try:
                    for tp in consumer.commit(message=msg, asynchronous=False) or []:
                        if tp.error is None and tp.offset >= 0:
                            self.acked[tp.partition] = max(self.acked.get(tp.partition, -1), tp.offset)
                            self.last_ack_wall = time.time()
                except KafkaException as exc:
                    self.note(exc.args[0])
        finally:
            consumer.close()

    def note(self, error: KafkaError) -> None:
        """Retriable errors (Kafka's RetriableException family, which librdkafka does not always
        flag on a failed commit) are expected across a failover or a rolling restart; any other
        is an error the application must handle."""
        retriable = error.retriable() or error.code() in RETRIABLE
        (self.retriable if retriable else self.errors).append(str(error))

    def committed_now(self) -> dict[int, int]:
        reader = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group})
        try:
            tps = reader.committed([TopicPartition(self.topic, p) for p in range(PARTITIONS)], timeout=60)
            return {tp.partition: tp.offset for tp in tps}
        finally:
            reader.close()


def main(argv: list[str]) -> int:
    bootstrap, topic, seconds, *groups = argv
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        fut.result(60)
    stop = threading.Event()
    producer = threading.Thread(target=produce_all_along, args=(bootstrap, topic, stop), daemon=True)
    producer.start()
    consumers = []
    for spec in groups:
        group, protocol = spec.split(":")
        consumers.append(CommittingConsumer(bootstrap, topic, group, protocol, stop))
    for c in consumers:
        c.start()
    for c in consumers:
        if not c.started.wait(120):
            print(f"{c.group} consumed nothing", flush=True)
            stop.set()
            return 2
    print("consuming", flush=True)
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline and not STOP_FILE.exists():
        time.sleep(0.2)
    stop.set()
    producer.join(60)
    for c in consumers:
        c.join(60)
    report = {
        c.group: {
            "protocol": c.protocol,
            "consumed": c.consumed,
            "acked": c.acked,
            "committed": c.committed_now(),
            "errors": c.errors,
            "retriable": c.retriable[-20:],
            "last_ack_wall": c.last_ack_wall,
        }
        for c in consumers
    }
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
