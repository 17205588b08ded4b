"""A Kafka Streams 4.4 application with ``group.protocol=streams`` (KIP-1071) through the gateway,
in front of upstreams that have no streams groups: Kafka 3.9 and tansu.

The application is Kafka's word count (``java/WordCount.java``), exactly-once
(``exactly_once_v2``: its offsets go in TxnOffsetCommit at its member epoch): a repartition
topic and a changelog it never creates itself (the coordinator's side does, here the gateway,
with the member's rights), and one standby per task (the group config
``streams.num.standby.replicas``). The case, as KIP-1071 tells it:

1. one instance joins: the group is NotReady until its internal topics exist, then gets all
   four tasks and counts every word;
2. a second instance joins: the tasks are split between the two processes, each task active on
   exactly one, after the first revoked what it gives up, and its standby on the other;
3. the shard process leading the group's state partition is killed -9: the instances go on,
   their heartbeats and commits served by the partition's next leader, and the counts of what is
   produced afterwards are exact;
4. Kafka's own ``kafka-streams-groups.sh`` (``StreamsGroupCommand``) lists and describes the
   group; the instances stop, leave, and the group is Empty.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import struct
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from real_parts import start_apache_kafka

from groupcoord.common.partitioning import partition_for
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord_testing.apache_kafka import java_command

from .conftest import VERSIONS, run_tool
from .copier import Upstream, copier_cluster

WORD_COUNT = str(Path(__file__).parent / "java" / "WordCount.java")
STREAMS_GROUP_COMMAND = "org.apache.kafka.tools.streams.StreamsGroupCommand"
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
ALL_TASKS = {"0_0", "0_1", "1_0", "1_1"}


@contextlib.contextmanager
def upstream_without_streams_groups(name: str, workdir: Path) -> Iterator[Upstream]:
    if name == "tansu":
        with EmbeddedBroker(log_path=workdir / "tansu.log") as broker:
            yield broker
        return
    kafka = start_apache_kafka(name, workdir)
    try:
        yield kafka
    finally:
        kafka.stop()


class Instance:
    """One Kafka Streams instance (its own process and state directory), its stdout followed."""

    def __init__(self, bootstrap: str, app: str, workdir: Path, name: str, guarantee: str = "exactly_once_v2") -> None:
        self.name = name
        self.log = workdir / f"{name}.log"
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            java_command(
                VERSIONS["kafka-4.4"], WORD_COUNT, bootstrap, app, "lines", "counts",
                str(workdir / f"{name}-state"), "streams", guarantee, heap_mb=256,
            ),  # fmt: skip
            stdout=subprocess.PIPE,
            stderr=self.log.open("w"),
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.strip())

    def tasks(self) -> set[str] | None:
        """The active tasks it reported when it last reached RUNNING (None: never)."""
        reported = [line for line in self.lines if line.startswith("TASKS")]
        return set(reported[-1].split()[1:]) if reported else None

    def running(self) -> bool:
        states = [line for line in self.lines if line.startswith("STATE")]
        return bool(states) and states[-1] == "STATE RUNNING"

    def stop(self) -> int:
        """SIGTERM: the shutdown hook closes the instance (it leaves the group); the JVM then
        exits with 143, as any JVM ended by SIGTERM."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            return self.process.wait(40)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            return self.process.wait(10)

    def report(self) -> str:
        tail = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
        return f"{self.name}: {self.lines[-10:]}\n{tail}"


def wait_until(check: object, timeout: float, what: str, *instances: Instance) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        for instance in instances:
            assert instance.process.poll() is None, f"{instance.name} exited\n{instance.report()}"
        time.sleep(0.5)
    raise AssertionError(f"timed out: {what}\n" + "\n".join(i.report() for i in instances))


def set_group_configs(bootstrap: str, group: str, **configs: str) -> None:
    """``streams_num_standby_replicas`` for ``streams.num.standby.replicas``, as
    ``kafka-configs.sh --entity-type groups`` sets it."""
    resource = ConfigResource(ResourceType.GROUP, group)
    for name, value in configs.items():
        resource.add_incremental_config(
            ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
        )
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the futures are done
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def produce(bootstrap: str, lines: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, line in enumerate(lines):
        producer.produce("lines", key=str(i), value=line)
    assert producer.flush(30) == 0


class Counts:
    """The latest count of each word in the output topic, read as it is written."""

    def __init__(self, bootstrap: str) -> None:
        self.latest: dict[str, int] = {}
        self.stop = threading.Event()
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        self.consumer.subscribe(["counts"])
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            message = self.consumer.poll(0.5)
            if message is not None and not message.error():
                self.latest[message.key().decode()] = struct.unpack(">q", message.value())[0]
        self.consumer.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)


def tasks_of(line: str, kind: str) -> set[str]:
    """The tasks of one kind in a member line of ``kafka-streams-groups.sh --describe
    --members`` ("ACTIVE: 0:[0,1]; STANDBY: 1:[0,1];" -> {"0_0", "0_1"} for ACTIVE)."""
    match = re.search(rf"(?<![-\w]){kind}: ((?:\d+:\[[\d,]*\];\s*)+)", line)
    if match is None:
        return set()
    return {f"{s}_{p}" for s, ps in re.findall(r"(\d+):\[([\d,]*)\]", match.group(1)) for p in ps.split(",") if p}


def lines_of(n: int, offset: int = 0) -> list[str]:
    """``n`` lines; line i holds the words i, i+1 and i+3 (mod 8): known counts."""
    return [" ".join(WORDS[(i + d) % len(WORDS)] for d in (0, 1, 3)) for i in range(offset, offset + n)]


def expected_counts(lines: list[str]) -> dict[str, int]:
    return dict(Counter(word for line in lines for word in line.split()))


@pytest.mark.parametrize("upstream_name", ["tansu", "kafka-3.9"])
def test_kafka_streams_runs_as_a_streams_group_where_the_upstream_has_none(upstream_name: str, tmp_path: Path) -> None:
    app = f"wordcount-{uuid.uuid4().hex[:6]}"
    with (
        upstream_without_streams_groups(upstream_name, tmp_path) as upstream,
        copier_cluster(upstream, tmp_path / "cluster") as cluster,
    ):
        host, port = cluster.gateway.bootstrap_address
        bootstrap = f"{host}:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic("lines", 2, 1), NewTopic("counts", 2, 1)]).values():
            future.result(30)
        first = lines_of(200)
        produce(bootstrap, first)
        counts = Counts(bootstrap)
        set_group_configs(bootstrap, app, streams_num_standby_replicas="1")
        a = Instance(bootstrap, app, tmp_path, "a")
        b: Instance | None = None
        try:
            # 1. alone: its internal topics created for it, then every task
            wait_until(lambda: a.tasks() == ALL_TASKS, 120, "a runs every task", a)
            internal = {t for t in admin.list_topics(timeout=10).topics if t.startswith(app)}
            assert {t.rsplit("-", 1)[-1] for t in internal} == {"repartition", "changelog"}, internal
            wait_until(lambda: counts.latest == expected_counts(first), 60, "a counted every word", a)

            # 2. a second process: the tasks split, each active on exactly one
            b = Instance(bootstrap, app, tmp_path, "b")

            def split() -> bool:
                ta, tb = a.tasks(), b.tasks()
                return (
                    a.running() and b.running() and bool(ta) and bool(tb)
                    and ta | tb == ALL_TASKS and not ta & tb
                )  # fmt: skip

            wait_until(split, 120, "the tasks split between a and b", a, b)

            # 3. the group's shard killed -9: the instances go on, the counts stay exact
            control = cluster.cluster.control  # type: ignore[union-attr]
            assert control is not None
            leader = control.placement[partition_for(app, cluster.options.partitions)].leader
            os.killpg(control.processes[leader].process.pid, signal.SIGKILL)
            second = lines_of(120, offset=200)
            produce(bootstrap, second)
            wait_until(
                lambda: counts.latest == expected_counts(first + second), 120, "every word counted after the failover", a, b
            )

            # 4. Kafka's own tool sees the group as Kafka would show it
            listed = run_tool(STREAMS_GROUP_COMMAND, "--bootstrap-server", bootstrap, "--list")
            assert app in listed.stdout.split(), listed.stdout + listed.stderr
            described = run_tool(
                STREAMS_GROUP_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--group", app, "--members"
            )
            members = [line for line in described.stdout.splitlines() if line.startswith(app)]
            assert len(members) == 2, described.stdout + described.stderr
            # one standby per stateful task (streams.num.standby.replicas=1: subtopology 1 keeps
            # the counts), on the process not running it
            standbys = [tasks_of(line, "STANDBY") for line in members]
            actives = [tasks_of(line, "ACTIVE") for line in members]
            assert sorted(t for s in standbys for t in s) == ["1_0", "1_1"], described.stdout
            assert not any(s & a for s, a in zip(standbys, actives, strict=True)), described.stdout
        finally:
            codes = [a.stop(), *([b.stop()] if b is not None else [])]
            counts.close()
        for instance, code in zip((a, b), codes, strict=False):
            assert instance is not None
            assert code == 128 + signal.SIGTERM and instance.lines[-1] == "STATE NOT_RUNNING", instance.report()
        state = run_tool(STREAMS_GROUP_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--group", app, "--state")
        assert "Empty" in state.stdout, state.stdout + state.stderr
