"""A Kafka Streams 4.4 application with ``group.protocol=streams`` (KIP-1071) through the gateway,
in front of upstreams that have no streams groups (Kafka 3.9, tansu) and of Kafka 4.4, whose own
streams groups the gateway does not use: the groups are ours on every upstream.

The application is Kafka's word count (``java/WordCount.java``), exactly-once
(``exactly_once_v2``: its offsets go in TxnOffsetCommit at its member epoch): a repartition
topic and a changelog it never creates itself (the coordinator's side does, here the gateway,
with the member's rights), and one standby per task (the group config
``streams.num.standby.replicas``). The case, as KIP-1071 and a platform team's migration tell it:

0. the application runs with the classic protocol through the gateway, counts, and stops;
1. restarted with ``group.protocol=streams`` as three instances (offline migration): the
   internal topics already exist, the tasks spread over the three, each task active on exactly
   one, and the counts of what comes next are exact: the classic group's offsets carried on;
2. one instance is killed -9 mid-run and another added: the tasks spread again, counts exact;
3. the shard process leading the group's state partition is killed -9: the instances go on,
   their heartbeats and commits served by the partition's next leader, counts exact;
4. Kafka's own ``kafka-streams-groups.sh`` (``StreamsGroupCommand``) lists the group and
   describes its three members, their tasks and standbys; the instances stop, leave, and the
   group is Empty.
"""

from __future__ import annotations

import os
import re
import signal
import struct
import threading
import time
import uuid
from collections import Counter
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

from groupcoord.common.partitioning import partition_for
from groupcoord_testing.kafka_streams import Instance

from .conftest import run_tool
from .copier import copier_cluster, upstream_named

STREAMS_GROUP_COMMAND = "org.apache.kafka.tools.streams.StreamsGroupCommand"
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
ALL_TASKS = {"0_0", "0_1", "1_0", "1_1"}


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


def settled(output: str, app: str, members: int) -> bool:
    lines = [line for line in output.splitlines() if line.startswith(app)]
    standbys = [tasks_of(line, "STANDBY") for line in lines]
    actives = [tasks_of(line, "ACTIVE") for line in lines]
    return (
        len(lines) == members
        and sorted(t for a in actives for t in a) == sorted(ALL_TASKS)
        and sorted(t for s in standbys for t in s) == ["1_0", "1_1"]
        and not any(s & a for s, a in zip(standbys, actives, strict=True))
    )


def wait_for_description(bootstrap: str, app: str, members: int, *instances: Instance) -> str:
    """``kafka-streams-groups.sh --describe --members`` once it shows the group settled."""
    output = ""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        described = run_tool(
            STREAMS_GROUP_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--group", app, "--members"
        )
        output = described.stdout + described.stderr
        if settled(described.stdout, app, members):
            return output
        time.sleep(2)
    raise AssertionError(f"not settled:\n{output}\n" + "\n".join(i.report() for i in instances))


def split(instances: list[Instance]) -> bool:
    """Every instance running, each with tasks, every task active on exactly one."""
    tasks = [i.tasks() for i in instances]
    if not all(i.running() for i in instances) or not all(tasks):
        return False
    every = [t for ts in tasks for t in ts or ()]
    return sorted(every) == sorted(ALL_TASKS)


@pytest.mark.parametrize("upstream_name", ["tansu", "kafka-3.9", "kafka-4.4"])
def test_kafka_streams_runs_as_a_streams_group_in_front_of_any_upstream(
    upstream_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the operator's streams session timeout (group.streams.session.timeout.ms) at 15 s, so the
    # killed instance's tasks move in 15 s rather than Kafka's default 45 s
    monkeypatch.setenv("GROUPCOORD_GROUP_STREAMS_GROUP_MIN_SESSION_TIMEOUT_MS", "15000")
    monkeypatch.setenv("GROUPCOORD_GROUP_STREAMS_GROUP_SESSION_TIMEOUT_MS", "15000")
    app = f"wordcount-{uuid.uuid4().hex[:6]}"
    with (
        upstream_named(upstream_name, tmp_path) as upstream,
        copier_cluster(upstream, tmp_path / "cluster") as cluster,
    ):
        host, port = cluster.gateway.bootstrap_address
        bootstrap = f"{host}:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic("lines", 2, 1), NewTopic("counts", 2, 1)]).values():
            future.result(30)
        batches = [lines_of(150), lines_of(120, offset=150), lines_of(120, offset=270), lines_of(90, offset=390)]
        counts = Counts(bootstrap)
        instances: list[Instance] = []

        def start(name: str, protocol: str = "streams") -> Instance:
            instances.append(Instance(bootstrap, app, tmp_path, name, protocol))
            return instances[-1]

        def counted(n: int) -> None:
            want = expected_counts([line for batch in batches[:n] for line in batch])
            wait_until(lambda: counts.latest == want, 120, f"the first {n} batches counted exactly", *live())

        def live() -> list[Instance]:
            return [i for i in instances if i.process.poll() is None]

        try:
            # 0. the application as it ran before: the classic protocol, through the gateway
            produce(bootstrap, batches[0])
            classic = start("classic", "classic")
            wait_until(lambda: classic.tasks() == ALL_TASKS, 120, "the classic instance runs every task", classic)
            counted(1)
            classic.stop()

            # 1. offline migration: restarted with group.protocol=streams, three instances; the
            # classic group's committed offsets carry on (a lost offset would count twice)
            set_group_configs(bootstrap, app, streams_num_standby_replicas="1")
            trio = [start("a"), start("b"), start("c")]
            wait_until(lambda: split(trio), 180, "the tasks spread over three instances", *trio)
            internal = {t for t in admin.list_topics(timeout=10).topics if t.startswith(app)}
            assert {t.rsplit("-", 1)[-1] for t in internal} == {"repartition", "changelog"}, internal
            produce(bootstrap, batches[1])
            counted(2)

            # 2. one instance killed -9 mid-run and another added
            trio[0].kill()
            produce(bootstrap, batches[2])
            trio = [trio[1], trio[2], start("d")]
            wait_until(lambda: split(trio), 180, "the tasks spread over the instances left and the new one", *trio)
            counted(3)

            # 3. the group's shard killed -9: the instances go on, the counts stay exact
            control = cluster.cluster.control  # type: ignore[union-attr]
            assert control is not None
            leader = control.placement[partition_for(app, cluster.options.partitions)].leader
            os.killpg(control.processes[leader].process.pid, signal.SIGKILL)
            produce(bootstrap, batches[3])
            counted(4)

            # 4. Kafka's own tool sees the group as Kafka would show it
            listed = run_tool(STREAMS_GROUP_COMMAND, "--bootstrap-server", bootstrap, "--list")
            assert app in listed.stdout.split(), listed.stdout + listed.stderr
            # three members; every task active once; one standby per stateful task
            # (streams.num.standby.replicas=1: subtopology 1 keeps the counts) on a process not
            # running it; asked again while the standbys still settle after the changes above
            described = wait_for_description(bootstrap, app, 3, *trio)
            assert described, "kafka-streams-groups.sh never showed the settled group"
        finally:
            for instance in live():  # all asked at once: each leaves while the others close
                os.killpg(instance.process.pid, signal.SIGTERM)
            codes = {i.name: i.stop() for i in instances}
            counts.close()
        for instance in trio:
            code = codes[instance.name]
            assert code == 128 + signal.SIGTERM and instance.lines[-1] == "STATE NOT_RUNNING", instance.report()
        state = run_tool(STREAMS_GROUP_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--group", app, "--state")
        assert "Empty" in state.stdout, state.stdout + state.stderr
