"""Issue 15: ``groupcoord groups`` (kafka-consumer-groups.sh's commands) against the running
cluster, with real clients, and librdkafka's Admin APIs — the calls kafka-consumer-groups.sh
makes — against the gateway.

* describe shows, per partition, the committed offset, the log end, the lag and the member
  that owns it, in both group protocols;
* reset-offsets on a group with members is refused with Kafka's message and moves nothing;
* on the empty group it prints the plan (dry run), commits it (--execute), and a consumer of the
  group resumes exactly there;
* delete refuses a group with members (NON_EMPTY_GROUP) and deletes an empty one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.cli import main as groupcoord
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.gateway.security.listener_security import ListenerSecurity
from groupcoord.local_cluster import ClusterOptions
from groupcoord_testing import BackgroundCluster
from tests.security.tls import Pki, make_pki

from .test_consumer_groups import wait_until

pytestmark = pytest.mark.broker
PARTITIONS = 2


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``groupcoord ARGV`` in this process: (exit status, stdout, stderr)."""
    try:
        status = groupcoord(list(argv))
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    out, err = capsys.readouterr()
    return status, out, err


def rows(out: str) -> list[list[str]]:
    """The table's data lines, split into cells (the header dropped)."""
    lines = [line.split() for line in out.splitlines() if line.strip()]
    start = next(i for i, cells in enumerate(lines) if cells[0] == "GROUP")
    return lines[start + 1 :]


def produce(bootstrap: str, topic: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        for p in range(PARTITIONS):
            producer.produce(topic, f"{i}".encode(), partition=p)
    assert producer.flush(15) == 0


def consumer_of(bootstrap: str, group: str, topic: str, protocol: str, client_id: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "client.id": client_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    wait_until(
        lambda: bool(consumer.poll(0.2) or True) and len(consumer.assignment()) == PARTITIONS,
        what="an assignment",
    )
    return consumer


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    result = admin.list_consumer_group_offsets([request])[group].result(15)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


@pytest.fixture
def topic(cluster: BackgroundCluster) -> Iterator[str]:
    """A fresh two-partition topic with 10 records on each partition."""
    name = f"cli-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for fut in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        fut.result(15)
    produce(cluster.bootstrap, name, 10)
    yield name


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_describe_shows_lag_and_owner_and_a_live_group_is_neither_reset_nor_deleted(
    cluster: BackgroundCluster, topic: str, protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap, group = cluster.bootstrap, f"cli-live-{uuid.uuid4().hex[:6]}"
    consumer = consumer_of(bootstrap, group, topic, protocol, client_id="orders-app")
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, 4) for p in range(PARTITIONS)], asynchronous=False)
        member_id = consumer.memberid()

        status, out, _ = run(capsys, "groups", "list", "--bootstrap", bootstrap)
        assert status == 0 and group in out.split()

        status, out, _ = run(capsys, "groups", "--bootstrap", bootstrap, "describe", group)
        assert status == 0
        assert rows(out) == [
            [group, topic, str(p), "4", "10", "6", member_id, "127.0.0.1", "orders-app"]
            for p in range(PARTITIONS)
        ]

        status, _, err = run(
            capsys,
            "groups",
            "reset-offsets",
            group,
            "--topic",
            topic,
            "--to-earliest",
            "--execute",
            "--bootstrap",
            bootstrap,
        )
        assert status != 0
        assert (
            f"Assignments can only be reset if the group '{group}' is inactive, but the current state is Stable."
            in err
        )
        assert committed(bootstrap, group, topic) == {0: 4, 1: 4}

        status, _, err = run(capsys, "groups", "delete", group, "--bootstrap", bootstrap)
        assert status == 1 and "NON_EMPTY_GROUP" in err
    finally:
        consumer.close()


def test_reset_an_empty_group_then_a_consumer_resumes_there_and_delete_removes_it(
    cluster: BackgroundCluster, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap, group = cluster.bootstrap, f"cli-empty-{uuid.uuid4().hex[:6]}"
    consumer = consumer_of(bootstrap, group, topic, "classic", client_id="batch")
    consumer.commit(offsets=[TopicPartition(topic, p, 8) for p in range(PARTITIONS)], asynchronous=False)
    consumer.close()
    time.sleep(1.1)  # records produced from here on are after `middle`
    middle = datetime.now(UTC)
    time.sleep(0.1)
    produce(bootstrap, topic, 5)  # offsets 10..14 on each partition

    status, out, _ = run(capsys, "groups", "describe", group, "--bootstrap", bootstrap)
    assert status == 0 and f"Consumer group '{group}' has no active members." in out
    assert [r[:6] for r in rows(out)] == [[group, topic, str(p), "8", "15", "7"] for p in range(PARTITIONS)]

    # a dry run prints the plan and moves nothing
    status, out, err = run(
        capsys,
        "groups",
        "reset-offsets",
        group,
        "--topic",
        topic,
        "--to-datetime",
        middle.isoformat(),
        "--bootstrap",
        bootstrap,
    )
    assert status == 0 and "No action will be performed" in err
    assert rows(out) == [[group, topic, str(p), "10"] for p in range(PARTITIONS)]
    assert committed(bootstrap, group, topic) == {0: 8, 1: 8}

    for argv, expected in [
        (("--shift-by", "-5", "--topic", f"{topic}:1"), {0: 8, 1: 3}),
        (("--shift-by", "-100", "--topic", f"{topic}:0"), {0: 0, 1: 3}),  # clamped to the log start
        (("--to-latest", "--topic", topic), {0: 15, 1: 15}),
        (("--to-datetime", middle.isoformat(), "--topic", topic), {0: 10, 1: 10}),
    ]:
        status, out, err = run(
            capsys, "groups", "reset-offsets", group, *argv, "--execute", "--bootstrap", bootstrap
        )
        assert status == 0, err
        assert committed(bootstrap, group, topic) == expected, argv

    # a consumer of the group (KIP-848 protocol this time) resumes where the reset put it
    resumed = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
        }
    )
    resumed.subscribe([topic])
    first: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 60
        while len(first) < PARTITIONS and time.monotonic() < deadline:
            msg = resumed.poll(0.5)
            if msg is not None and msg.error() is None:
                first.setdefault(msg.partition(), msg.offset())
    finally:
        resumed.close()
    assert first == {0: 10, 1: 10}

    status, out, err = run(capsys, "groups", "delete", group, "--bootstrap", bootstrap)
    assert status == 0 and f"Deletion of requested consumer groups ('{group}') was successful." in out
    status, out, _ = run(capsys, "groups", "list", "--bootstrap", bootstrap)
    assert group not in out.split()
    status, _, err = run(capsys, "groups", "describe", group, "--bootstrap", bootstrap)
    assert status == 1 and f"Consumer group '{group}' does not exist." in err


def test_bad_input_is_one_line(
    cluster: BackgroundCluster, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = cluster.bootstrap
    for argv, message in [
        (("--topic", "no-such-topic", "--to-earliest"), "Topic 'no-such-topic' does not exist"),
        (("--topic", f"{topic}:7", "--to-earliest"), f"Topic '{topic}' has 2 partitions; no partition 7"),
        (("--topic", topic, "--to-datetime", "yesterday"), "is not ISO 8601"),
        (("--topic", topic, "--shift-by", "1"), "since there is no current committed offset"),
    ]:
        status, _, err = run(
            capsys,
            "groups",
            "reset-offsets",
            f"nobody-{uuid.uuid4().hex[:4]}",
            *argv,
            "--bootstrap",
            bootstrap,
        )
        assert status != 0 and message in err, (argv, err)
        assert "Traceback" not in err


def test_the_installed_command_runs(cluster: BackgroundCluster) -> None:
    """The console script, as an operator runs it."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "groupcoord.cli",
            "groups",
            "list",
            "--state",
            "--bootstrap",
            cluster.bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:2] == ["GROUP", "STATE"]


def test_librdkafka_admin_apis_that_kafka_consumer_groups_uses(
    cluster: BackgroundCluster, topic: str
) -> None:
    """list_consumer_groups, describe_consumer_groups, list/alter_consumer_group_offsets (the
    Admin calls kafka-consumer-groups.sh makes for --list, --describe and --reset-offsets)."""
    bootstrap, group = cluster.bootstrap, f"cli-rdk-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    consumer = consumer_of(bootstrap, group, topic, "consumer", client_id="rdk-app")
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, 3) for p in range(PARTITIONS)], asynchronous=False)
        listed = admin.list_consumer_groups().result(15)
        assert group in {g.group_id for g in listed.valid}
        description = admin.describe_consumer_groups([group])[group].result(15)
        assert str(description.state).endswith("STABLE")
        assert [m.client_id for m in description.members] == ["rdk-app"]
        assert sorted(tp.partition for tp in description.members[0].assignment.topic_partitions) == [0, 1]
        assert committed(bootstrap, group, topic) == {0: 3, 1: 3}
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(topic, p, 1) for p in range(PARTITIONS)]
        )
        refused = admin.alter_consumer_group_offsets([request])[group].result(15)  # a live group
        assert {tp.error.code() if tp.error else None for tp in refused.topic_partitions} == {
            KafkaError.UNKNOWN_MEMBER_ID
        }
        assert committed(bootstrap, group, topic) == {0: 3, 1: 3}
    finally:
        consumer.close()
    wait_until(
        lambda: str(admin.describe_consumer_groups([group])[group].result(15).state).endswith("EMPTY"),
        what="the group to empty",
    )
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p, 1) for p in range(PARTITIONS)])
    altered = admin.alter_consumer_group_offsets([request])[group].result(15)
    assert all(tp.error is None for tp in altered.topic_partitions)
    assert committed(bootstrap, group, topic) == {0: 1, 1: 1}


# Issue 26: the rest of kafka-consumer-groups.sh — describe's views, --all-groups, every reset
# scenario and scope, --export/--from-file, delete-offsets, --output json, --command-config.


def as_json(out: str) -> Any:
    """The one JSON document a ``--output json`` run printed."""
    return json.loads(out)


def test_describe_views_list_filters_and_json(
    cluster: BackgroundCluster, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = cluster.bootstrap
    live, empty = f"cli-view-{uuid.uuid4().hex[:6]}", f"cli-idle-{uuid.uuid4().hex[:6]}"
    idle = consumer_of(bootstrap, empty, topic, "classic", client_id="idle-app")
    idle.commit(offsets=[TopicPartition(topic, p, 2) for p in range(PARTITIONS)], asynchronous=False)
    idle.close()
    consumer = consumer_of(bootstrap, live, topic, "consumer", client_id="view-app")
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, 5) for p in range(PARTITIONS)], asynchronous=False)
        member_id = consumer.memberid()
        wait_until(
            lambda: (
                run(capsys, "groups", "describe", empty, "--state", "--bootstrap", bootstrap)[1].find("Empty")
                > 0
            ),
            what="the idle group to be Empty",
        )

        status, out, _ = run(capsys, "groups", "describe", live, "--members", "--bootstrap", bootstrap)
        assert status == 0 and rows(out) == [[live, member_id, "127.0.0.1", "view-app", "2"]]
        status, out, _ = run(
            capsys, "groups", "describe", live, "--members", "--verbose", "--bootstrap", bootstrap
        )
        (verbose,) = rows(out)
        # a KIP-848 member: its epoch, its assignment and the group's target assignment (epoch, partitions)
        assert status == 0 and verbose[4] == "2" and verbose[6] == verbose[8] == f"{topic}:0,1", out
        assert int(verbose[5]) >= 1 and int(verbose[7]) >= 1
        status, out, _ = run(capsys, "groups", "describe", live, "--state", "--bootstrap", bootstrap)
        host, port = bootstrap.rsplit(":", 1)
        assert status == 0
        (line,) = rows(out)
        assert line[0] == live and line[1] == f"{host}:{port}" and line[-2:] == ["Stable", "1"], out
        status, out, _ = run(
            capsys, "groups", "describe", live, "--state", "--verbose", "--bootstrap", bootstrap
        )
        (line,) = rows(out)
        assert status == 0 and line[-4] == "Stable" and int(line[-3]) >= 1 and int(line[-2]) >= 1, out
        status, out, _ = run(
            capsys, "groups", "describe", live, "--offsets", "--verbose", "--bootstrap", bootstrap
        )
        assert status == 0 and [r[:7] for r in rows(out)] == [
            [live, topic, str(p), "-", "5", "10", "5"] for p in range(PARTITIONS)
        ]

        # --all-groups, one JSON document
        status, out, _ = run(
            capsys, "groups", "describe", "--all-groups", "--output", "json", "--bootstrap", bootstrap
        )
        assert status == 0
        described = {g["group"]: g for g in as_json(out)["groups"]}
        assert described[live]["state"] == "Stable" and described[empty]["state"] == "Empty"
        assert [
            (o["partition"], o["current_offset"], o["log_end_offset"], o["lag"], o["consumer_id"])
            for o in described[live]["offsets"]
        ] == [(p, 5, 10, 5, member_id) for p in range(PARTITIONS)]
        assert [
            (o["partition"], o["current_offset"], o["consumer_id"]) for o in described[empty]["offsets"]
        ] == [(p, 2, None) for p in range(PARTITIONS)]
        status, out, _ = run(
            capsys, "groups", "describe", live, "--members", "--output", "json", "--bootstrap", bootstrap
        )
        (doc,) = as_json(out)["groups"]
        assert [(c["consumer_id"], c["client_id"], c["partitions"]) for c in doc["consumers"]] == [
            (member_id, "view-app", 2)
        ]

        # list --state with a filter, in both outputs
        status, out, _ = run(capsys, "groups", "list", "--state", "Stable", "--bootstrap", bootstrap)
        listed = {r[0]: r[1] for r in rows(out)}
        assert status == 0 and listed.get(live) == "Stable" and empty not in listed
        status, out, _ = run(
            capsys, "groups", "list", "--state", "empty", "--output", "json", "--bootstrap", bootstrap
        )
        states = {g["group"]: g["state"] for g in as_json(out)["groups"]}
        assert status == 0 and states.get(empty) == "Empty" and live not in states
        status, out, _ = run(
            capsys, "groups", "list", "--type", "consumer", "--output", "json", "--bootstrap", bootstrap
        )
        types = {g["group"]: g["type"] for g in as_json(out)["groups"]}
        assert status == 0 and types.get(live) == "Consumer" and empty not in types
        status, out, _ = run(capsys, "groups", "list", "--state", "--type", "--bootstrap", bootstrap)
        listed_types = {r[0]: r[1:] for r in rows(out)}
        assert listed_types[live] == ["Consumer", "Stable"] and listed_types[empty] == ["Classic", "Empty"]
        status, _, err = run(capsys, "groups", "list", "--state", "Sleeping", "--bootstrap", bootstrap)
        assert status == 1 and "Invalid state list 'Sleeping'" in err

        # a live group's offsets of a topic it is subscribed to are not deleted
        status, out, _ = run(
            capsys, "groups", "delete-offsets", live, "--topic", topic, "--bootstrap", bootstrap
        )
        assert status == 1 and "GroupSubscribedToTopicException" in out, out
        assert committed(bootstrap, live, topic) == {0: 5, 1: 5}
    finally:
        consumer.close()


def test_every_reset_scenario_export_from_file_and_delete_offsets(
    cluster: BackgroundCluster, topic: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bootstrap, group = cluster.bootstrap, f"cli-scen-{uuid.uuid4().hex[:6]}"
    consumer = consumer_of(bootstrap, group, topic, "classic", client_id="batch")
    consumer.commit(offsets=[TopicPartition(topic, p, 8) for p in range(PARTITIONS)], asynchronous=False)
    consumer.close()

    def reset(*argv: str) -> tuple[int, str, str]:
        return run(capsys, "groups", "reset-offsets", group, *argv, "--bootstrap", bootstrap)

    status, _, err = reset("--to-earliest", "--execute")
    assert status == 1 and "One of the reset scopes should be defined: --all-topics, --topic." in err
    for argv, expected in [
        (("--all-topics", "--to-offset", "3"), {0: 3, 1: 3}),
        (("--topic", f"{topic}:0", "--to-offset", "99"), {0: 10, 1: 3}),  # clamped to the log end
        (("--all-topics", "--by-duration", "PT1H"), {0: 0, 1: 0}),  # every record is younger
        (("--all-topics", "--shift-by", "4"), {0: 4, 1: 4}),
    ]:
        status, out, err = reset(*argv, "--execute")
        assert status == 0, err
        assert committed(bootstrap, group, topic) == expected, argv

    # --to-current is a no-op plan; --export prints Kafka's CSV and moves nothing
    status, out, err = reset("--all-topics", "--to-current", "--dry-run", "--export")
    assert status == 0 and out == f"{topic},0,4\n{topic},1,4\n" and "No action will be performed" not in err
    status, out, _ = reset("--all-topics", "--to-latest", "--export")
    assert status == 0 and out == f"{topic},0,10\n{topic},1,10\n"
    assert committed(bootstrap, group, topic) == {0: 4, 1: 4}
    plan = tmp_path / "plan.csv"
    plan.write_text(out.replace(f"{topic},1,10", f"{topic},1,6"))
    status, out, _ = reset("--from-file", str(plan), "--execute")
    assert status == 0 and rows(out) == [[group, topic, "0", "10"], [group, topic, "1", "6"]]
    assert committed(bootstrap, group, topic) == {0: 10, 1: 6}

    # --all-groups in JSON: this group's plan, executed false, nothing moved
    status, out, _ = run(
        capsys,
        "groups",
        "reset-offsets",
        "--all-groups",
        "--all-topics",
        "--to-earliest",
        "--output",
        "json",
        "--bootstrap",
        bootstrap,
    )
    doc = as_json(out)
    ours = next(g for g in doc["groups"] if g["group"] == group)
    assert doc["executed"] is False and ours["error"] is None
    assert ours["offsets"] == [{"topic": topic, "partition": p, "offset": 0} for p in range(PARTITIONS)]
    assert committed(bootstrap, group, topic) == {0: 10, 1: 6}

    # delete-offsets: one partition, then a topic that does not exist
    status, out, _ = run(
        capsys, "groups", "delete-offsets", group, "--topic", f"{topic}:1", "--bootstrap", bootstrap
    )
    assert status == 0 and f"Request succeeded for deleting offsets from group {group}." in out
    assert rows_of(out, "TOPIC") == [[topic, "1", "Successful"]]
    assert committed(bootstrap, group, topic) == {0: 10, 1: -1001}
    status, out, _ = run(
        capsys,
        "groups",
        "delete-offsets",
        "--group",
        group,
        "--topic",
        "no-such-topic",
        "--output",
        "json",
        "--bootstrap",
        bootstrap,
    )
    assert status == 1 and as_json(out) == {
        "group": group,
        "error": "UNKNOWN_TOPIC_OR_PARTITION",
        "partitions": [{"topic": "no-such-topic", "partition": None, "status": "UNKNOWN_TOPIC_OR_PARTITION"}],
    }
    assert committed(bootstrap, group, topic) == {0: 10, 1: -1001}

    # (--all-groups is deleted on the secured cluster below, where every group is the test's own)
    status, out, _ = run(
        capsys, "groups", "delete", "--group", group, "--output", "json", "--bootstrap", bootstrap
    )
    assert status == 0 and as_json(out) == {"deleted": [group], "failed": {}}


def rows_of(out: str, first: str) -> list[list[str]]:
    """The data lines after the header line starting with ``first``."""
    lines = [line.split() for line in out.splitlines() if line.strip()]
    start = next(i for i, cells in enumerate(lines) if cells[0] == first)
    return lines[start + 1 :]


# --command-config over SASL_SSL (and mutual TLS): a gateway that takes nothing else

USERS = {"ops": "ops-secret"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("cli-pki"))


@pytest.fixture(scope="module")
def secure_cluster(
    broker: EmbeddedBroker, pki: Pki, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BackgroundCluster]:
    credentials = tmp_path_factory.mktemp("cli-creds") / "users.json"
    credentials.write_text(json.dumps(USERS))
    security = ListenerSecurity(
        ssl_certfile=str(pki.server_cert),
        ssl_keyfile=str(pki.server_key),
        ssl_cafile=str(pki.ca),
        ssl_client_auth="required",
        sasl="credentials",
        sasl_credentials=str(credentials),
    )
    options = ClusterOptions(
        port=0,
        partitions=4,
        metrics=False,
        state_topic=f"__cli_{uuid.uuid4().hex[:6]}",
        listener_security=security,
    )
    with BackgroundCluster((broker.host, broker.port), options) as c:
        yield c


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_command_config_over_sasl_ssl_with_json_parsed_back(
    secure_cluster: BackgroundCluster,
    pki: Pki,
    mechanism: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bootstrap = secure_cluster.bootstrap
    client = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": "ops",
        "sasl.password": USERS["ops"],
        "ssl.ca.location": str(pki.ca),
        "ssl.certificate.location": str(pki.client_cert),
        "ssl.key.location": str(pki.client_key),
    }
    name, group = f"sec-cli-{uuid.uuid4().hex[:6]}", f"sec-cli-g-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, **client})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, **client})
    for i in range(6):
        producer.produce(name, b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(20) == 0
    committer = Consumer(
        {"bootstrap.servers": bootstrap, **client, "group.id": group, "enable.auto.commit": False}
    )
    committer.commit(offsets=[TopicPartition(name, p, 1) for p in range(PARTITIONS)], asynchronous=False)
    committer.close()

    module = "scram.ScramLoginModule" if mechanism.startswith("SCRAM") else "plain.PlainLoginModule"
    keystore = tmp_path / "ops.pem"
    keystore.write_text(pki.client_key.read_text() + pki.client_cert.read_text())
    properties = tmp_path / "ops.properties"
    properties.write_text(
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={mechanism}\n"
        f"sasl.jaas.config=org.apache.kafka.common.security.{module} required \\\n"
        f'    username="ops" password="{USERS["ops"]}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={pki.ca}\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={keystore}\n"
        "linger.ms=5\n"
    )
    config = ("--command-config", str(properties), "--bootstrap", bootstrap, "--timeout", "20")

    status, out, err = run(capsys, "groups", "describe", group, "--output", "json", *config)
    assert status == 0, err
    assert "WARN: These configurations '[linger.ms]' were supplied but are not used." in err
    (doc,) = as_json(out)["groups"]
    assert doc["group"] == group and doc["state"] == "Empty"
    assert [
        (o["topic"], o["partition"], o["current_offset"], o["log_end_offset"], o["lag"])
        for o in doc["offsets"]
    ] == [(name, p, 1, 3, 2) for p in range(PARTITIONS)]
    status, out, err = run(capsys, "groups", "list", "--output", "json", *config)
    assert status == 0 and group in {g["group"] for g in as_json(out)["groups"]}, err
    status, out, err = run(
        capsys,
        "groups",
        "reset-offsets",
        group,
        "--all-topics",
        "--to-latest",
        "--execute",
        "--output",
        "json",
        *config,
    )
    assert status == 0 and as_json(out)["executed"] is True, err
    status, out, err = run(capsys, "groups", "delete-offsets", group, "--topic", f"{name}:0", *config)
    assert status == 0 and f"Request succeeded for deleting offsets from group {group}." in out, err
    status, out, err = run(capsys, "groups", "describe", group, "--output", "json", *config)
    (doc,) = as_json(out)["groups"]
    assert [(o["partition"], o["current_offset"]) for o in doc["offsets"]] == [(1, 3)]

    status, out, err = run(capsys, "groups", "delete", "--all-groups", "--output", "json", *config)
    assert status == 0 and group in as_json(out)["deleted"] and as_json(out)["failed"] == {}, err
    status, out, err = run(capsys, "groups", "list", *config)
    assert status == 0 and group not in out.split(), err

    # without the properties, or with a wrong password, the secured gateway is not reached
    status, _, err = run(capsys, "groups", "list", "--bootstrap", bootstrap, "--timeout", "5")
    assert status != 0 and "Error:" in err and "Traceback" not in err
    properties.write_text(properties.read_text().replace(USERS["ops"], "wrong"))
    status, _, err = run(capsys, "groups", "list", "--output", "json", *config)
    assert status != 0 and "Error:" in err and "Traceback" not in err


def test_share_groups_are_left_to_kafka_share_groups(cluster: BackgroundCluster, capsys: pytest.CaptureFixture[str]) -> None:
    """A share group (KIP-932) is not a consumer group: listing and describing every group
    leaves it out, as kafka-consumer-groups.sh does, rather than describing it as a dead one."""
    import asyncio  # noqa: PLC0415

    from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest  # noqa: PLC0415
    from kio.static.primitive import i32  # noqa: PLC0415

    from groupcoord.common.kafka_wire.exchange import exchange  # noqa: PLC0415

    share = f"cli-share-{uuid.uuid4().hex[:6]}"
    host, port = cluster.bootstrap.rsplit(":", 1)
    joined = asyncio.run(
        exchange(
            (host, int(port)),
            ShareGroupHeartbeatRequest(group_id=share, member_id=uuid.uuid4().hex[:22], member_epoch=i32(0), subscribed_topic_names=("x",)),
            "cli-test",
            15,
        )
    )
    assert joined.error_code.value == 0, joined
    assert groupcoord(["groups", "list", "--bootstrap", cluster.bootstrap]) == 0
    assert share not in capsys.readouterr().out.split()
    assert groupcoord(["groups", "describe", "--all-groups", "--state", "--bootstrap", cluster.bootstrap]) == 0
    assert share not in capsys.readouterr().out
