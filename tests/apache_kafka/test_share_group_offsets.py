"""A share group's offsets side by side: ``kafka-share-groups.sh --describe`` (start offsets and
lag), ``--reset-offsets`` and ``--delete-offsets`` against Kafka 4.4's own share groups and
against groupcoord in front of the same Kafka, and the same outputs.

Each side: a librdkafka share consumer reads and accepts every record of a 2-partition topic;
the group is described (lag 0); more records come (lag = them); the group, empty, is reset to
the earliest offsets (start 0, lag everything); and its offsets are deleted. One difference is
Kafka's, and stays (see the test).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

from .conftest import CONSUMER_GROUP_COMMAND, run_tool

SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
PER_PARTITION = 5


def produce(bootstrap: str, topic: str, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(per_partition * 2):
        producer.produce(topic, str(i).encode(), partition=i % 2)
    assert producer.flush(30) == 0


def tool(bootstrap: str, group: str, topic: str, *args: str) -> list[str]:
    done = run_tool(SHARE_GROUP_COMMAND, "--bootstrap-server", bootstrap, "--group", group, *args, timeout=60)
    lines = [" ".join(line.split()) for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    lines = [line.replace(group, "<group>").replace(topic, "<topic>") for line in lines if "WARN" not in line]
    lines = [re.sub(r"\S+:\d+ \(\d+\)", "<coordinator>", line) for line in lines]
    return lines[:1] + sorted(lines[1:])  # rows in the order of the tool's maps: incidental


def describe_until(bootstrap: str, group: str, topic: str, lag: int, timeout: float = 30) -> list[str]:
    """The offsets as described, once both partitions show ``lag`` (Kafka persists
    share-partition state asynchronously) or the timeout passed."""
    deadline = time.monotonic() + timeout
    while True:
        lines = tool(bootstrap, group, topic, "--describe", "--offsets")
        lags = [line.split()[-1] for line in lines[1:] if line.startswith("<group> <topic>")]
        if lags == [str(lag)] * 2 or time.monotonic() > deadline:
            return lines
        time.sleep(1)


def sequence(admin_bootstrap: str, bootstrap: str, topic: str) -> dict[str, Any]:
    group = f"sgo-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group)
    resource.add_incremental_config(
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    )
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result(30)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    got = 0
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while got < 2 * PER_PARTITION and time.monotonic() < deadline:
            got += sum(1 for m in consumer.poll(0.5) if m.error() is None)
        consumer.poll(0.5)  # the implicit acknowledgement of the last records rides this poll
    finally:
        consumer.close()
    out: dict[str, Any] = {"consumed": got}
    out["all read"] = describe_until(bootstrap, group, topic, 0)
    produce(admin_bootstrap, topic, 2)
    out["two more each"] = describe_until(bootstrap, group, topic, 2)
    out["reset"] = tool(bootstrap, group, topic, "--reset-offsets", "--to-earliest", "--topic", topic, "--execute")
    out["after reset"] = describe_until(bootstrap, group, topic, PER_PARTITION + 2)
    out["delete"] = tool(bootstrap, group, topic, "--delete-offsets", "--topic", topic)
    out["after delete"] = tool(bootstrap, group, topic, "--describe", "--offsets")
    return out


def side_by_side(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster, run: Callable[[str, str], dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """``run(bootstrap, topic)`` against Kafka 4.4 and through the gateway, each on a new topic
    of 2 partitions of ``PER_PARTITION`` records: what each side gave, by side."""
    outputs = {}
    for side, bootstrap in (("Kafka 4.4", kafka.bootstrap), ("groupcoord", kafka_cluster.bootstrap)):
        topic = f"sgo-in-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        produce(kafka.bootstrap, topic, PER_PARTITION)
        outputs[side] = run(bootstrap, topic)
        print(side, json.dumps(outputs[side], indent=1))
    return outputs


def test_share_group_offsets_are_described_reset_and_deleted_as_kafka_does(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster
) -> None:
    outputs = side_by_side(kafka, kafka_cluster, lambda bootstrap, topic: sequence(kafka.bootstrap, bootstrap, topic))
    # Kafka 4.4 reports the start offset its share coordinator last persisted, which does not
    # move past records acknowledged after the last acquisition (it printed 0 for a group that
    # had read and accepted everything, with lag 0). Ours is KIP-932's start offset: the first
    # offset not done. Everything else, the lag included, is equal.
    ours, theirs = outputs["groupcoord"], outputs["Kafka 4.4"]
    for step in ("all read", "two more each"):
        assert ours[step][1:] == [f"<group> <topic> {p} {PER_PARTITION} {0 if step == 'all read' else 2}" for p in (0, 1)]
        ours[step], theirs[step] = without_start_offsets(ours[step]), without_start_offsets(theirs[step])
    assert ours == theirs


def without_start_offsets(lines: list[str]) -> list[str]:
    return [" ".join(w for i, w in enumerate(line.split()) if i != 3) for line in lines]


def never_used(bootstrap: str, topic: str) -> dict[str, Any]:
    """Offsets given to a share group nobody has joined, then its first member's reads: Kafka
    since 4.2 (KAFKA-19662) sets the group up on the reset, and the member starts there, not
    where ``share.auto.offset.reset`` (latest, Kafka's default) would have it start."""
    group = f"sgo-new-{uuid.uuid4().hex[:6]}"
    out: dict[str, Any] = {
        "reset": tool(bootstrap, group, topic, "--reset-offsets", "--to-offset", "3", "--topic", topic, "--execute"),
        "described": describe_until(bootstrap, group, topic, PER_PARTITION - 3),
        "state": tool(bootstrap, group, topic, "--describe", "--state"),
    }
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    got: list[tuple[int, int]] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < 2 * (PER_PARTITION - 3) and time.monotonic() < deadline:
            got += [(m.partition(), m.offset()) for m in consumer.poll(0.5) if m.error() is None]
        consumer.poll(1)
    finally:
        consumer.close()
    out["consumed"] = sorted(got)
    return out


def test_offsets_given_to_a_share_group_never_used_are_where_it_starts_as_on_kafka(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster
) -> None:
    outputs = side_by_side(kafka, kafka_cluster, never_used)
    assert outputs["groupcoord"]["consumed"] == [(p, o) for p in (0, 1) for o in range(3, PER_PARTITION)]
    assert outputs["groupcoord"] == outputs["Kafka 4.4"]


def committed_consumer_group(bootstrap: str, topic: str) -> str:
    """A new consumer group that committed offsets 2 and 4 of ``topic``'s two partitions."""
    group = f"sgo-cg-{uuid.uuid4().hex[:6]}"
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committer.commit(offsets=[TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 4)], asynchronous=False)
    finally:
        committer.close()
    return group


def from_a_consumer_group(bootstrap: str, topic: str, workdir: Path) -> dict[str, Any]:
    """A share group started where a consumer group committed (KIP-1323's use, as Kafka 4.4's
    tools do it): ``kafka-consumer-groups.sh --reset-offsets --to-current --export`` writes the
    consumer group's offsets as CSV, ``kafka-share-groups.sh --reset-offsets --from-file`` gives
    them to a share group nobody has joined."""
    consumers, shares = committed_consumer_group(bootstrap, topic), f"sgo-sg-{uuid.uuid4().hex[:6]}"
    plan = run_tool(
        CONSUMER_GROUP_COMMAND, "--bootstrap-server", bootstrap, "--group", consumers, "--reset-offsets",
        "--to-current", "--topic", topic, "--export", "--dry-run", timeout=60,
    )
    csv = workdir / f"{topic}.csv"
    csv.write_text(plan.stdout)
    return {
        "plan": sorted(plan.stdout.replace(topic, "<topic>").split()),
        "reset": tool(bootstrap, shares, topic, "--reset-offsets", "--from-file", str(csv), "--execute"),
        "described": tool(bootstrap, shares, topic, "--describe", "--offsets"),
    }


def test_a_share_group_starts_where_a_consumer_group_committed_as_on_kafka(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster, tmp_path: Path
) -> None:
    outputs = side_by_side(kafka, kafka_cluster, lambda bootstrap, topic: from_a_consumer_group(bootstrap, topic, tmp_path))
    assert outputs["groupcoord"]["described"][1:] == ["<group> <topic> 0 2 3", "<group> <topic> 1 4 1"]
    assert outputs["groupcoord"] == outputs["Kafka 4.4"]


def groupcoord_cli(bootstrap: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "groupcoord.cli", *args, "--bootstrap", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_our_clis_start_a_share_group_where_a_consumer_group_committed(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster, tmp_path: Path
) -> None:
    """KIP-1323's use with groupcoord's own commands: ``groupcoord groups reset-offsets
    --to-current --export`` writes a consumer group's offsets as CSV and ``groupcoord share-groups
    reset-offsets --from-file`` gives them to a share group nobody has joined; Kafka's tool then
    describes the start offsets the consumer group committed, and a share consumer starts there."""
    bootstrap = kafka_cluster.bootstrap
    topic = f"sgo-cli-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    produce(kafka.bootstrap, topic, PER_PARTITION)
    consumers, shares = committed_consumer_group(bootstrap, topic), f"sgo-sg-{uuid.uuid4().hex[:6]}"
    plan = groupcoord_cli(bootstrap, "groups", "reset-offsets", consumers, "--to-current", "--topic", topic, "--export", "--dry-run")
    assert sorted(plan.split()) == [f"{topic},0,2", f"{topic},1,4"]
    csv = tmp_path / "plan.csv"
    csv.write_text(plan)
    groupcoord_cli(bootstrap, "share-groups", "reset-offsets", shares, "--from-file", str(csv), "--execute")
    assert tool(bootstrap, shares, topic, "--describe", "--offsets")[1:] == ["<group> <topic> 0 2 3", "<group> <topic> 1 4 1"]
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": shares})
    consumer.subscribe([topic])
    got: set[tuple[int, int]] = set()
    deadline = time.monotonic() + 30
    try:
        while len(got) < 4 and time.monotonic() < deadline:
            got |= {(m.partition(), m.offset()) for m in consumer.poll(0.5) if m.error() is None}
    finally:
        consumer.close()
    assert sorted(got) == [(0, 2), (0, 3), (0, 4), (1, 4)]
