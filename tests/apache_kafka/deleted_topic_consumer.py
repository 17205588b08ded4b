"""A librdkafka consumer (confluent-kafka) run as its own process by test_deleted_topics: it
consumes and commits a topic, prints ``ready``, and polls on while the test deletes the topic,
until its stdin closes. A crash of librdkafka (the segfault seen through the gateway) shows as the
process's exit status, which an in-process consumer would take the test runner down with.

Arguments: bootstrap, topic, group, protocol (``consumer`` or ``classic``), records to consume.
Prints ``error <code name>`` for every error a poll returns, ``ready``, and ``closed`` at the end.
"""

from __future__ import annotations

import sys
import threading

from confluent_kafka import Consumer


def main(bootstrap: str, topic: str, group: str, protocol: str, records: int) -> None:
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    if protocol == "classic":
        config["partition.assignment.strategy"] = "cooperative-sticky"
    consumer = Consumer(config)
    consumer.subscribe([topic])
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    consumed = 0
    ready = False
    while not done.is_set():
        for message in consumer.consume(100, 0.2):
            if message.error() is not None:
                print("error", message.error().name(), flush=True)
                continue
            consumed += 1
        if not ready and consumed >= records:
            consumer.commit(asynchronous=False)
            ready = True
            print("ready", flush=True)
    consumer.close()
    print("closed", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
