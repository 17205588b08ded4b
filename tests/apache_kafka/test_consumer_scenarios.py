"""Kafka's own consumer system tests (``tests/kafkatest/tests/client/consumer_test.py`` and the
core of ``consumer_protocol_migration_test.py``) with Kafka 4.4's Java consumer, through the
gateway in front of Kafka 4.4: 3 VerifiableConsumers in one group reading a 6-partition topic
while a VerifiableProducer writes to it, in the classic protocol with the eager ``range`` and
the ``cooperative-sticky`` assignors and in the consumer protocol (KIP-848).

Each scenario ends with kafkatest's checks and a few it leaves implicit: every acknowledged record
consumed; nothing consumed twice where kafkatest says so (clean shutdowns, eager or KIP-848
rebalances), elsewhere only within an at-least-once window (what a consumer had consumed past
the group's commit when it let the partition go: killed, or its commit refused during a
cooperative rebalance or in a mixed group); no partition ever owned by two consumers at once;
committed offsets never going back; the last committed offsets equal to the positions, or the
difference such a window. Run against Kafka 4.4's own coordinator (``kafka.bootstrap``) the same
scenarios pass, which is how the at-least-once cases were told apart from our faults.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

from .verifiable import COOPERATIVE_STICKY, RANGE, VerifiableConsumerGroup, VerifiableProducer, wait_until

PARTITIONS = 6
CONSUMERS = 3
MIN_RECORDS = 1500  # produced by the end of each scenario, at 100 a second

MODES = {
    "range": {"group_protocol": "classic", "assignment_strategy": RANGE},
    "cooperative-sticky": {"group_protocol": "classic", "assignment_strategy": COOPERATIVE_STICKY},
    "consumer": {"group_protocol": "consumer"},
}


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)


class Scenario:
    """One test's topic, producer and consumer group, all through ``bootstrap``."""

    def __init__(self, bootstrap: str, workdir: Path) -> None:
        self.bootstrap = bootstrap
        self.workdir = workdir
        suffix = uuid.uuid4().hex[:6]
        self.topic, self.group_id = f"verifiable-{suffix}", f"verifiable-g-{suffix}"
        create_topic(bootstrap, self.topic)
        self.producer: VerifiableProducer | None = None
        self.group: VerifiableConsumerGroup | None = None
        self.mode = ""

    def start_producer(self, throughput: int = 100) -> VerifiableProducer:
        self.producer = VerifiableProducer(
            self.bootstrap, self.topic, self.workdir / "producer.log", throughput=throughput
        ).start()
        return self.producer

    def consumers(self, mode: str, **options: object) -> VerifiableConsumerGroup:
        self.mode = mode
        self.group = VerifiableConsumerGroup(
            self.bootstrap, self.topic, self.group_id, self.workdir, size=CONSUMERS, **MODES[mode] | options
        )
        return self.group

    def finish(self, *, exactly_once: bool) -> None:
        """Stop the producer, let the live consumers read to its end, stop them; then the checks.

        ``exactly_once`` where kafkatest asserts that nothing was consumed twice (every shutdown
        clean, eager or KIP-848 rebalances); otherwise a record may come twice only within an
        at-least-once window: what a consumer had consumed past the group's committed offset when
        it let the partition go (killed, or its commit refused because a cooperative rebalance was
        under way — the Java client's RebalanceInProgressException, with Kafka's own coordinator
        as with ours: VerifiableConsumer commits after each poll and not on revocation).
        """
        assert self.producer is not None and self.group is not None
        group, producer = self.group, self.producer
        producer.await_acked(MIN_RECORDS)
        producer.stop()
        assert producer.errors == [], producer.errors[:5]
        acked = producer.acknowledged()
        if group.joined():
            group.await_position(producer.ends())
        group.stop_all()
        group.dump(self.workdir / "timeline.jsonl")

        assert group.errors == [], group.errors[:10]
        assert group.missing(acked) == {}, "acknowledged records never consumed"
        assert group.double_ownership() == [], "a partition owned by two consumers at once"
        assert group.committed_going_back() == [], "a committed offset went back"
        positions, commits, windows = group.positions(), group.last_commits(), group.windows()
        if exactly_once:
            # kafkatest: "if the total records consumed matches the current position, we haven't
            # seen any duplicates; this can only be guaranteed with a clean shutdown"
            assert group.duplicates() == {}
            assert sum(positions.values()) == group.total_consumed()
            assert windows == {}, "records left uncommitted by a consumer giving its partition up"
            assert commits == positions
        else:
            assert group.unexplained_duplicates() == {}, "consumed twice outside an at-least-once window"
            assert sum(positions.values()) <= group.total_consumed()
            for tp, position in positions.items():
                # the last commit is the position, or a consumer let the rest go uncommitted
                assert commits.get(tp) == position or any(
                    w.start == commits.get(tp, 0) and w.stop == position for w in windows.get(tp, [])
                ), f"{tp}: committed {commits.get(tp)}, consumed to {position}"

    @property
    def rebalances_commit_everything(self) -> bool:
        """Whether every record consumed is committed before its partition moves on a clean
        rebalance: eager and KIP-848 groups, not cooperative classic ones (see :meth:`finish`)."""
        return self.mode != "cooperative-sticky"

    def close(self) -> None:
        if self.group is not None:
            self.group.close()
        if self.producer is not None:
            self.producer.close()


@pytest.fixture
def scenario(kafka_cluster: BackgroundCluster, tmp_path: Path) -> Iterator[Scenario]:
    s = Scenario(kafka_cluster.bootstrap, tmp_path)
    try:
        yield s
    finally:
        s.close()


@pytest.mark.parametrize("mode", MODES)
def test_group_consumption(scenario: Scenario, mode: str) -> None:
    """consumer_test.py's test_group_consumption: consumers started one by one then stopped one
    by one, the topic readable after every rebalance."""
    scenario.start_producer()
    group = scenario.consumers(mode)
    for started in range(1, CONSUMERS + 1):
        group.start_node(started - 1)
        group.await_members(started)
        wait_until(lambda: group.valid_assignment(PARTITIONS), 30, "every partition assigned once")
        group.await_consumed()
    for stopped in range(1, CONSUMERS):
        group.stop_node(stopped - 1)
        group.await_members(CONSUMERS - stopped)
        wait_until(lambda: group.valid_assignment(PARTITIONS), 30, "every partition assigned once")
        group.await_consumed()
    scenario.finish(exactly_once=scenario.rebalances_commit_everything)


@pytest.mark.parametrize(("mode", "clean"), [(m, True) for m in MODES] + [(m, False) for m in MODES])
def test_consumer_rolling_bounce(scenario: Scenario, mode: str, clean: bool) -> None:
    """consumer_test.py's test_consumer_bounce (rolling): each consumer stopped and restarted in
    turn, the group consuming again before the next; hard (SIGKILL) as well as clean."""
    scenario.start_producer()
    group = scenario.consumers(mode, session_timeout_ms=6_000)
    group.start()
    group.await_members(CONSUMERS)
    group.await_consumed()
    # a hard-killed KIP-848 member holds its partitions until its session (the broker's 45 s,
    # not the client's) expires: one bounce of it is slow enough
    bounced = CONSUMERS if clean or MODES[mode]["group_protocol"] == "classic" else 1
    for idx in range(bounced):
        group.stop_node(idx, clean_shutdown=clean)
        group.start_node(idx)
        group.await_members(CONSUMERS, timeout=90)
        wait_until(lambda: group.valid_assignment(PARTITIONS), 90, "every partition assigned once")
        group.await_consumed()
    scenario.finish(exactly_once=clean and scenario.rebalances_commit_everything)


@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
@pytest.mark.parametrize("mode", ["range", "consumer"])
def test_static_consumer_bounce(scenario: Scenario, mode: str, static: bool) -> None:
    """consumer_test.py's test_static_consumer_bounce_with_eager_assignment, and the same in the
    consumer protocol: bouncing the other members revokes partitions of the first one only when
    they are dynamic; static members (KIP-345, KIP-848's group.instance.id) come back to their
    assignment without a rebalance."""
    scenario.start_producer()
    group = scenario.consumers(mode, static_membership=static, session_timeout_ms=60_000)
    group.start()
    group.await_members(CONSUMERS)
    # counted from a settled group: the revocations that spread the first joiner's partitions
    # over the others are the group forming, not a bounce
    wait_until(lambda: group.balanced_assignment(PARTITIONS), 60, "every partition assigned once, evenly")
    group.await_consumed()
    revokes_before = group.num_revokes_for_alive(keep_alive=1)
    for idx in range(1, CONSUMERS):
        group.stop_node(idx)
        group.start_node(idx)
        group.await_members(CONSUMERS)
        wait_until(lambda: group.balanced_assignment(PARTITIONS), 60, "every partition assigned once, evenly")
        group.await_consumed()
    revokes = group.num_revokes_for_alive(keep_alive=1) - revokes_before
    if static:
        assert revokes == 0, f"{revokes} revocations of the live static member"
    elif mode == "range":  # an eager rebalance revokes everything from everyone
        assert revokes != 0, "bouncing dynamic members revoked nothing from the live one"
    # KIP-848 with dynamic members: the live member gives back a partition only if it already
    # received one of the leaver's before the new member joined; a quick rejoin leaves it
    # untouched (CI saw 0 revocations once), so only the checks of every scenario apply
    scenario.finish(exactly_once=True)


@pytest.mark.parametrize(("mode", "clean"), [(m, True) for m in MODES] + [("range", False)])
def test_consumer_failure(scenario: Scenario, mode: str, clean: bool) -> None:
    """consumer_test.py's test_consumer_failure: the owner of partition 0 stops for good, the
    others take its partitions over and consume on."""
    group = scenario.consumers(mode, session_timeout_ms=6_000)
    group.start()
    group.await_members(CONSUMERS)
    wait_until(lambda: group.valid_assignment(PARTITIONS), 60, "every partition assigned once")
    owner = group.owner((scenario.topic, 0))
    assert owner is not None
    producer = scenario.start_producer()
    producer.await_acked(300)
    group.stop_node(owner, clean_shutdown=clean)
    wait_until(
        lambda: len(group.joined()) == CONSUMERS - 1 and group.valid_assignment(PARTITIONS),
        60,
        "the failed consumer's partitions taken over",
    )
    group.await_consumed(300)
    scenario.finish(exactly_once=clean and scenario.rebalances_commit_everything)


def list_group(bootstrap: str, group_id: str, group_type: ConsumerGroupType) -> bool:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups(types={group_type}, request_timeout=10).result(15)
    return group_id in {g.group_id for g in listed.valid}


@pytest.mark.parametrize("mode", ["range", "cooperative-sticky"])
def test_online_migration_upgrade_and_downgrade(scenario: Scenario, mode: str) -> None:
    """consumer_protocol_migration_test.py's rolling upgrade then rolling downgrade (policy
    bidirectional): a classic group's members restarted one by one with the consumer protocol
    makes it a consumer group, restarted one by one back with the classic protocol a classic
    group again, and no record is lost or consumed twice on the way."""
    scenario.start_producer()
    group = scenario.consumers(mode)
    group.start()
    group.await_members(CONSUMERS)
    group.await_consumed()
    wait_until(
        lambda: list_group(scenario.bootstrap, scenario.group_id, ConsumerGroupType.CLASSIC),
        20,
        "a classic group",
    )
    for protocol, group_type in (
        ("consumer", ConsumerGroupType.CONSUMER),
        ("classic", ConsumerGroupType.CLASSIC),
    ):
        for idx in range(CONSUMERS):
            group.stop_node(idx)
            group.set_group_protocol(idx, protocol)
            group.start_node(idx)
            group.await_members(CONSUMERS, timeout=60)
            wait_until(lambda: group.valid_assignment(PARTITIONS), 60, "every partition assigned once")
            group.await_consumed()
        wait_until(
            lambda t=group_type: list_group(scenario.bootstrap, scenario.group_id, t),
            20,
            f"a {group_type} group",
        )
    # at least once: in a mixed group Kafka 4.4's own coordinator, too, refuses a classic
    # member's commit once its partitions moved (CommitFailedException), and they come again
    scenario.finish(exactly_once=False)


def test_consumer_protocol_in_front_of_kafka_3_9(tmp_path: Path) -> None:
    """The reason groupcoord exists: Kafka 3.9 has no KIP-848 — Kafka 4.4's consumer with
    ``group.protocol=consumer`` gives up on it directly — yet the same consumers read everything
    through the gateway in front of it."""
    from real_parts import start_apache_kafka  # noqa: PLC0415

    kafka: ApacheKafka = start_apache_kafka("kafka-3.9", tmp_path / "kafka-3.9")
    try:
        direct = Scenario(kafka.bootstrap, tmp_path)
        try:
            alone = VerifiableConsumerGroup(
                kafka.bootstrap, direct.topic, direct.group_id, tmp_path, size=1, group_protocol="consumer"
            )
            direct.group = alone
            alone.start()
            process = alone.nodes[0].process
            assert process is not None
            process.wait(60)
            assert alone.num_rebalances() == 0
            assert "does not support the new CONSUMER group protocol" in alone.nodes[0].log.read_text()
        finally:
            direct.close()

        with BackgroundCluster((kafka.host, kafka.port)) as cluster:
            scenario = Scenario(cluster.bootstrap, tmp_path)
            try:
                scenario.start_producer(throughput=300)
                group = scenario.consumers("consumer")
                group.start()
                group.await_members(CONSUMERS, timeout=60)
                wait_until(lambda: group.valid_assignment(PARTITIONS), 60, "every partition assigned once")
                group.await_consumed(500)
                assert list_group(cluster.bootstrap, scenario.group_id, ConsumerGroupType.CONSUMER)
                scenario.finish(exactly_once=True)
            finally:
                scenario.close()
    finally:
        kafka.stop()
