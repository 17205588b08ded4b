"""Issue 16 acceptance: a shard killed every few seconds for a minute is invisible to
applications. Three consumers of one group consume, commit synchronously and poll
``committed()`` throughout (what librdkafka applications do to checkpoint), while the shard
leading the group's state partition is killed with SIGKILL again and again. Afterwards: no
error ever reached an application (consume, commit or committed()), no acknowledged commit is
lost, and no partition was ever owned by two consumers. Failovers cost latency only: the
gateway holds requests for a partition between leaders until the new leader answers."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import KafkaError, TopicPartition

from groupcoord.embedded_broker import EmbeddedBroker

from .consumers import (
    AioKafkaConsumer,
    ConfluentConsumer,
    ConsumerThread,
    KafkaPythonConsumer,
    assert_acknowledged_commits_kept,
)
from .failover import busy_group, failover_cluster
from .test_consumer_groups import assert_no_double_ownership, wait_until

pytestmark = [pytest.mark.broker, pytest.mark.slow]
KILL_LOOP_S = 60.0
KILL_EVERY_S = 4.0


class CheckpointingConsumer(ConfluentConsumer):
    """A consumer application: every error its API calls return or raise is recorded, and it
    reads its committed offsets back after each batch (``committed()``)."""

    def poll_once(self) -> None:
        msgs = self.consumer.consume(500, timeout=0.2)
        batch: dict[int, int] = {}
        for m in msgs:
            if m.error() is not None:
                if m.error().code() != KafkaError._PARTITION_EOF:
                    self.history.errors.append(f"consume: {m.error()}")
                continue
            self.history.records.add((m.partition(), m.offset()))
            batch[m.partition()] = m.offset() + 1
        if not batch:
            return
        tps = [TopicPartition(self.topic, p, o) for p, o in batch.items()]
        result = self.consumer.commit(offsets=tps, asynchronous=False)  # raises on a request error
        self.history.errors += [f"commit {tp.partition}: {tp.error}" for tp in result if tp.error]
        acked = {tp.partition: tp.offset for tp in result if tp.error is None}
        if acked:
            self.history.commits.append((time.monotonic(), acked))
        for tp in self.consumer.committed([TopicPartition(self.topic, p) for p in batch], timeout=30):
            if tp.error is not None:
                self.history.errors.append(f"committed {tp.partition}: {tp.error}")
            elif tp.offset < acked.get(tp.partition, -1):
                self.history.errors.append(f"committed {tp.partition}: {tp.offset} < acked {acked}")


class CheckpointingKafkaPython(KafkaPythonConsumer):
    """kafka-python: a commit or committed() that raises is recorded by the base class."""

    def poll_once(self) -> None:
        from kafka import TopicPartition as KafkaPythonPartition  # noqa: PLC0415

        before = len(self.history.commits)
        super().poll_once()
        if len(self.history.commits) > before:
            for p, acked in self.history.commits[-1][1].items():
                seen = self.consumer.committed(KafkaPythonPartition(self.topic, p))
                if seen is None or seen < acked:
                    self.history.errors.append(f"committed {p}: {seen} < acked {acked}")


class CheckpointingAioKafka(AioKafkaConsumer):
    def poll_once(self) -> None:
        from aiokafka.structs import TopicPartition as AioPartition  # noqa: PLC0415

        before = len(self.history.commits)
        super().poll_once()
        if len(self.history.commits) > before:
            for p, acked in self.history.commits[-1][1].items():
                seen = self.loop.run_until_complete(self.consumer.committed(AioPartition(self.topic, p)))
                if seen is None or seen < acked:
                    self.history.errors.append(f"committed {p}: {seen} < acked {acked}")


# client -> (application, its configuration, seconds of kills)
CLIENTS: dict[str, tuple[type[ConsumerThread], dict[str, str], float]] = {
    "confluent-classic": (CheckpointingConsumer, {"group.protocol": "classic"}, KILL_LOOP_S),
    "confluent-consumer-protocol": (CheckpointingConsumer, {"group.protocol": "consumer"}, KILL_LOOP_S),
    "kafka-python": (CheckpointingKafkaPython, {}, KILL_LOOP_S / 2),
    "aiokafka": (CheckpointingAioKafka, {}, KILL_LOOP_S / 2),
}


@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_minute_of_shard_kills_is_invisible_to_committing_applications(
    broker: EmbeddedBroker, tmp_path, client: str
) -> None:
    application, config, kill_loop_s = CLIENTS[client]
    with failover_cluster(broker, tmp_path, "inv") as fo:
        bootstrap = fo.bootstrap
        topic, group = f"inv-{uuid.uuid4().hex[:6]}", f"inv-g-{uuid.uuid4().hex[:6]}"
        fo.create_topics(topic)
        consumers = [application(bootstrap, topic, group, f"c{i}", **config) for i in range(3)]
        state_partition = fo.state_partition(group)
        kills = 0
        with busy_group(bootstrap, topic, consumers):
            wait_until(lambda: all(c.history.commits for c in consumers), what="every consumer committing")
            # a minute of kills, and at least one every two periods's worth even where a
            # restarted shard process takes longer than a period to come back
            end, at_least = time.monotonic() + kill_loop_s, kill_loop_s // (2 * KILL_EVERY_S)
            while time.monotonic() < end or kills < at_least:
                # every few seconds, kill -9 the shard leading the group (once the other is up)
                fo.kill_leader(state_partition)
                kills += 1
                time.sleep(KILL_EVERY_S)
            # and the applications carry on committing after the last kill
            after = time.monotonic()
            wait_until(
                lambda: all(any(t > after + 1 for t, _ in c.history.commits) for c in consumers),
                timeout=60,
                what="commits after the last kill",
            )
        assert kills >= at_least
        assert {c.name: c.history.errors for c in consumers} == {c.name: [] for c in consumers}
        assert_acknowledged_commits_kept(bootstrap, topic, group, consumers)
        assert_no_double_ownership(consumers)
