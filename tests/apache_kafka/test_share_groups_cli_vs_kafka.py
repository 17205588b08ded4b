"""``groupcoord share-groups`` prints what ``kafka-share-groups.sh`` prints: both ask the same
gateway about the same share groups at the same moment — one with a live member on two topics,
one empty — and every listing and description (offsets, members, state, verbose or not, a
missing group) reads the same, line for line."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord_testing import BackgroundCluster
from tests.e2e.test_share_groups import earliest, produce, share_consumer

from .conftest import run_tool

SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


@pytest.fixture(scope="module")
def groups(cluster: BackgroundCluster) -> Iterator[tuple[str, str]]:
    """A share group with a live member reading two topics (the member keeps what its last poll
    acquired), and an empty one whose member read and left."""
    tag = uuid.uuid4().hex[:6]
    live, empty = f"sg-live-{tag}", f"sg-empty-{tag}"
    topics = [f"share-cli-a-{tag}", f"share-cli-b-{tag}"]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for topic in topics:
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        produce(cluster.bootstrap, topic, 10, 2)
    for group in (live, empty):
        earliest(cluster.bootstrap, group)
    leaving = share_consumer(cluster.bootstrap, empty)
    leaving.subscribe(topics[:1])
    deadline = time.monotonic() + 30
    while not [m for m in leaving.poll(0.5) if m.error() is None] and time.monotonic() < deadline:
        pass
    leaving.close()
    member: ShareConsumer = share_consumer(cluster.bootstrap, live, **{"client.id": "cli-app"})
    member.subscribe(topics)
    deadline = time.monotonic() + 30
    while not [m for m in member.poll(0.5) if m.error() is None] and time.monotonic() < deadline:
        pass
    try:
        yield live, empty
    finally:
        member.close()


def ours(bootstrap: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "groupcoord.cli", "share-groups", *args, "--bootstrap", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return (done.stdout + done.stderr).strip()


def kafkas(bootstrap: str, *args: str) -> str:
    done = run_tool(SHARE_GROUP_COMMAND, "--bootstrap-server", bootstrap, *args, timeout=60)
    text = (done.stdout + done.stderr).strip()
    # its stack trace after a failed describe is Java's, not a column of the table
    return "\n".join(line for line in text.splitlines() if not line.startswith(("\tat ", "Caused by", "java.", "org.")))


@pytest.mark.parametrize(
    ("our_args", "kafka_args"),
    [
        (["describe", "{live}"], ["--describe", "--group", "{live}"]),
        (["describe", "{live}", "--offsets", "--verbose"], ["--describe", "--group", "{live}", "--offsets", "--verbose"]),
        (["describe", "{live}", "--members"], ["--describe", "--group", "{live}", "--members"]),
        (["describe", "{live}", "--members", "--verbose"], ["--describe", "--group", "{live}", "--members", "--verbose"]),
        (["describe", "{live}", "--state"], ["--describe", "--group", "{live}", "--state"]),
        (["describe", "{live}", "--state", "--verbose"], ["--describe", "--group", "{live}", "--state", "--verbose"]),
        (["describe", "{empty}"], ["--describe", "--group", "{empty}"]),
        (["describe", "{empty}", "--members"], ["--describe", "--group", "{empty}", "--members"]),
        (["describe", "{empty}", "{live}"], ["--describe", "--group", "{empty}", "--group", "{live}"]),
        (["describe", "sg-nobody-{live}"], ["--describe", "--group", "sg-nobody-{live}"]),
    ],
    ids=lambda args: "-".join(a.strip("-{}") for a in args),
)
def test_describe_prints_what_kafka_share_groups_prints(
    cluster: BackgroundCluster, groups: tuple[str, str], our_args: list[str], kafka_args: list[str]
) -> None:
    live, empty = groups
    names = {"live": live, "empty": empty}
    assert ours(cluster.bootstrap, *(a.format(**names) for a in our_args)) == kafkas(
        cluster.bootstrap, *(a.format(**names) for a in kafka_args)
    )


def rows_in_any_order(text: str) -> tuple[str, list[str]]:
    """A listing's header (or first row) and its rows sorted: Kafka's tool prints groups in the
    order ListGroups named them, ours sorts them."""
    lines = text.splitlines()
    return (lines[0] if lines and lines[0].startswith("GROUP") else "", sorted(line for line in lines if not line.startswith("GROUP")))


def test_list_prints_what_kafka_share_groups_prints(cluster: BackgroundCluster, groups: tuple[str, str]) -> None:
    """Other tests' share groups are listed too: both tools see the same gateway. The same
    lines; the order is each tool's."""
    for our_args, kafka_args in (
        ([], []),
        (["--state"], ["--state"]),
        (["--state", "Stable"], ["--state", "Stable"]),
        (["--state", "empty,stable"], ["--state", "empty,stable"]),
    ):
        mine = ours(cluster.bootstrap, "list", *our_args)
        assert rows_in_any_order(mine) == rows_in_any_order(kafkas(cluster.bootstrap, "--list", *kafka_args))
        assert groups[0] in mine and (groups[1] in mine) == ("Stable" not in our_args)


def left_group(bootstrap: str, topics: list[str]) -> str:
    """A new share group whose one member read ``topics`` and left: Empty, with start offsets."""
    group = f"sg-left-{uuid.uuid4().hex[:6]}"
    earliest(bootstrap, group)
    member = share_consumer(bootstrap, group)
    member.subscribe(topics)
    deadline = time.monotonic() + 30
    while not [m for m in member.poll(0.5) if m.error() is None] and time.monotonic() < deadline:
        pass
    member.close()
    return group


def test_reset_and_delete_offsets_print_what_kafka_share_groups_prints(
    cluster: BackgroundCluster, groups: tuple[str, str]
) -> None:
    """The same plans (rows in any order: Kafka's tool prints a hash map's), the same refusals of
    a group with a member, and the same results when each tool resets and deletes the offsets of
    a group of its own."""
    live, empty = groups
    topic = next(line.split()[1] for line in ours(cluster.bootstrap, "describe", empty).splitlines()[1:])
    names = {"live": live, "empty": empty, "topic": topic}
    for our_args, kafka_args in (
        (["{empty}", "--topic", "{topic}", "--to-earliest", "--dry-run"], ["--topic", "{topic}", "--to-earliest", "--dry-run"]),
        # (not --to-latest: the embedded broker's ListOffsets "latest" counts batches, which
        # Kafka's tool prints; ours reads the log end from a Fetch)
        (["{empty}", "--all-topics", "--to-earliest", "--dry-run"], ["--all-topics", "--to-earliest", "--dry-run"]),
        (["{empty}", "--topic", "{topic}:1", "--to-offset", "1", "--dry-run"], ["--topic", "{topic}:1", "--to-offset", "1", "--dry-run"]),
        (["{empty}", "--topic", "{topic}", "--to-current", "--dry-run"], ["--topic", "{topic}", "--to-current", "--dry-run"]),
        (
            ["{empty}", "--topic", "{topic}", "--to-datetime", "2020-01-01T00:00:00.000", "--dry-run"],
            ["--topic", "{topic}", "--to-datetime", "2020-01-01T00:00:00.000", "--dry-run"],
        ),
        (["{live}", "--topic", "{topic}", "--to-earliest", "--execute"], ["--topic", "{topic}", "--to-earliest", "--execute"]),
    ):
        group = (our_args[0]).format(**names)
        mine = ours(cluster.bootstrap, "reset-offsets", *(a.format(**names) for a in our_args))
        theirs = kafkas(cluster.bootstrap, "--reset-offsets", "--group", group, *(a.format(**names) for a in kafka_args))
        assert rows_in_any_order(mine) == rows_in_any_order(theirs), (our_args, mine, theirs)
    assert ours(cluster.bootstrap, "delete-offsets", live, "--topic", topic) == kafkas(
        cluster.bootstrap, "--delete-offsets", "--group", live, "--topic", topic
    )
    done: dict[str, list[str]] = {}
    for side, run, reset, delete, describe in (
        ("groupcoord", ours, ["reset-offsets"], ["delete-offsets"], ["describe"]),
        ("Kafka", kafkas, ["--reset-offsets", "--group"], ["--delete-offsets", "--group"], ["--describe", "--group"]),
    ):
        group = left_group(cluster.bootstrap, [topic])
        done[side] = [
            run(cluster.bootstrap, *reset, group, "--topic", topic, "--to-earliest", "--execute").replace(group, "<group>"),
            run(cluster.bootstrap, *describe, group).replace(group, "<group>"),
            run(cluster.bootstrap, *delete, group, "--topic", topic, "--topic", f"nosuch-{topic}"),
            run(cluster.bootstrap, *describe, group).replace(group, "<group>"),
        ]
    print(done)
    assert [rows_in_any_order(text) for text in done["groupcoord"]] == [rows_in_any_order(text) for text in done["Kafka"]]
    assert "Successful" in done["groupcoord"][2]
