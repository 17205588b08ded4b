"""A share session ends with the connection that opened it, as Kafka 4.4 ends it: a share
consumer killed (``kill -9``) while it holds records closes its connections with the process, and
the records it held are given back at once — long before their locks
(``share.record.lock.duration.ms``, here 15 s) would run out — as released records: the next
consumer gets them with their delivery counts one higher.

The same scenario against Kafka 4.4's own share groups and against groupcoord in front of the
same Kafka; both must answer alike. (A consumer that hangs with its connection open keeps its
records until their locks run out: ``tests/e2e/test_share_groups.py``.)
"""

from __future__ import annotations

import signal
import time
import uuid

from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka
from tests.e2e.test_share_groups import earliest, produce, share_consumer, start_holder

LOCK_MS = 15_000


def killed_holder_then_next(kafka: ApacheKafka, bootstrap: str) -> tuple[list[list[int]], dict[int, int], float]:
    """What a consumer acquired before it was killed, what the next consumer got (offset ->
    delivery count), and how long after the kill the first of them came."""
    topic, group = f"sess-end-{uuid.uuid4().hex[:6]}", f"sg-sess-end-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    produce(kafka.bootstrap, topic, 10, 1)
    earliest(bootstrap, group, **{"share.record.lock.duration.ms": str(LOCK_MS)})
    holder, held = start_holder(bootstrap, group, topic)
    holder.send_signal(signal.SIGKILL)
    holder.wait(10)
    killed_at = time.monotonic()
    consumer = share_consumer(bootstrap, group)
    again: dict[int, int] = {}
    first_after = float("inf")
    try:
        consumer.subscribe([topic])
        while len(again) < 10 and time.monotonic() < killed_at + LOCK_MS / 1000 + 20:
            for m in consumer.poll(0.5):
                assert m.error() is None, m.error()
                if not again:
                    first_after = time.monotonic() - killed_at
                again.setdefault(m.offset(), m.delivery_count())
    finally:
        consumer.close()
    return held, again, first_after


def test_a_killed_share_consumers_records_come_back_at_once_as_on_kafka(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster
) -> None:
    seen = {
        side: killed_holder_then_next(kafka, bootstrap)
        for side, bootstrap in (("Kafka 4.4", kafka.bootstrap), ("groupcoord", kafka_cluster.bootstrap))
    }
    for side, (held, again, first_after) in seen.items():
        assert held == [[o, 1] for o in range(10)], (side, held)
        assert again == {o: 2 for o in range(10)}, (side, again)
        assert first_after < LOCK_MS / 1000 - 5, f"{side}: the records came {first_after:.1f} s after the kill"
