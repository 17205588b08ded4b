"""Kafka 4.4's own ``kafka-consumer-groups.sh`` (``ConsumerGroupCommand``) prints the same thing
through the gateway as it prints against Kafka 4.4's own group coordinator, for the same groups
(tests/apache_kafka/group_shape.py builds them on both): --list (with --state and --type),
--describe (--members --verbose, --offsets, --state), --reset-offsets with every scope and --to-*
option, dry run and execute, refused while the group has members, --delete and --delete-offsets.

Reference: ``tools/src/main/java/org/apache/kafka/tools/consumer/group/ConsumerGroupCommand.java``
and Kafka's ``ConsumerGroupCommandTest``/``ResetConsumerGroupOffsetTest``/``DeleteOffsetsConsumerGroupCommandIntegrationTest``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

from .group_shape import Shape, assert_same, group_shape


@pytest.fixture(scope="module")
def shape(kafka: ApacheKafka, kafka_cluster: BackgroundCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shape]:
    with group_shape(kafka.bootstrap, kafka_cluster.bootstrap, tmp_path_factory.mktemp("cgc")) as built:
        yield built


def test_list_groups_with_states_and_types(shape: Shape) -> None:
    g = shape.group
    listed = assert_same(shape, "--list", listing=True)
    assert {g("empty"), g("classic"), g("consumer")} <= set(listed.split())
    states = assert_same(shape, "--list", "--state", listing=True)
    assert re.search(rf"{g('classic')}\s+Stable", states) and re.search(rf"{g('empty')}\s+Empty", states), states
    stable = assert_same(shape, "--list", "--state", "Stable", listing=True)
    assert g("consumer") in stable and g("empty") not in stable
    types = assert_same(shape, "--list", "--state", "--type", listing=True)
    assert re.search(rf"{g('consumer')}\s+Consumer\s+Stable", types), types
    assert re.search(rf"{g('classic')}\s+Classic\s+Stable", types), types
    consumer_only = assert_same(shape, "--list", "--type", "consumer", listing=True)
    assert g("consumer") in consumer_only and g("classic") not in consumer_only


@pytest.mark.parametrize("role", ["classic", "consumer"])
def test_describe_a_group_with_a_live_member(shape: Shape, role: str) -> None:
    group = shape.group(role)
    offsets = assert_same(shape, "--describe", "--group", group)
    assert re.search(rf"{group}\s+{shape.topic('orders')}\s+2\s+3\s+10\s+7\s+<{role}-member>\s+/127\.0\.0\.1\s", offsets), offsets
    assert_same(shape, "--describe", "--group", group, "--offsets", "--verbose")
    members = assert_same(shape, "--describe", "--group", group, "--members", "--verbose")
    assert "CURRENT-ASSIGNMENT" in members and f"{shape.topic('orders')}:0,1,2" in members, members
    state = assert_same(shape, "--describe", "--group", group, "--state", "--verbose")
    assert "<bootstrap>" in state and "Stable" in state, state


def test_describe_an_empty_and_a_missing_group(shape: Shape) -> None:
    empty = assert_same(shape, "--describe", "--group", shape.group("empty"))
    assert f"Consumer group '{shape.group('empty')}' has no active members." in empty, empty
    assert_same(shape, "--describe", "--group", shape.group("empty"), "--members")
    state = assert_same(shape, "--describe", "--group", shape.group("empty"), "--state")
    assert "Empty" in state, state
    missing = assert_same(shape, "--describe", "--group", shape.group("missing"))
    assert f"GroupIdNotFoundException: Group {shape.group('missing')} not found." in missing, missing


def test_reset_offsets_every_scope_and_option(shape: Shape) -> None:
    reset = ("--reset-offsets", "--group", shape.group("reset"))
    orders, audit = shape.topic("orders"), shape.topic("audit")
    plan = shape.workdir / "plan.csv"
    plan.write_text(f"{orders},0,2\n{orders},1,6\n{audit},0,9\n")
    steps: list[tuple[tuple[str, ...], str]] = [
        # (arguments, a line Kafka's output must hold)
        (("--all-topics", "--to-earliest"), "WARN: No action will be performed"),
        (("--all-topics", "--to-earliest", "--dry-run"), f"{orders} 0 0"),
        (("--all-topics", "--to-earliest", "--execute"), f"{audit} 0 0"),
        (("--topic", orders, "--to-latest", "--execute"), f"{orders} 2 10"),
        (("--topic", f"{orders}:0,1", "--to-offset", "4", "--execute"), f"{orders} 1 4"),
        (("--topic", f"{orders}:2", "--to-offset", "40", "--execute"), f"{orders} 2 10"),
        (("--all-topics", "--to-current", "--dry-run"), f"{orders} 0 4"),
        (("--all-topics", "--shift-by", "-2", "--execute"), f"{orders} 2 8"),
        (("--all-topics", "--shift-by", "-20", "--dry-run"), f"{orders} 2 0"),
        (("--topic", audit, "--to-datetime", shape.datetime, "--execute"), f"{audit} 0 5"),
        (("--all-topics", "--by-duration", "PT2H", "--execute"), f"{orders} 1 8"),
        (("--from-file", str(plan), "--execute"), f"{audit} 0 9"),
        (("--all-topics", "--to-earliest", "--dry-run", "--export"), f"{orders},1,0"),
        (("--topic", shape.topic("absent"), "--to-earliest", "--execute"), "Error"),
    ]
    for args, expected in steps:
        out = assert_same(shape, *reset, *args, rows_in_any_order=True)
        assert expected in " ".join(out.split()) or expected in out, f"{args}: {out}"
    final = assert_same(shape, "--describe", "--group", shape.group("reset"), "--offsets", "--verbose")
    assert re.search(rf"{orders}\s+1\s+-\s+6\s+10\s+4", final), final

    for live in ("classic", "consumer"):
        refused = assert_same(shape, "--reset-offsets", "--group", shape.group(live), "--all-topics", "--to-earliest", "--execute")
        assert (
            f"Assignments can only be reset if the group '{shape.group(live)}' is inactive, but the current state is Stable."
            in refused
        ), refused
    assert_same(shape, "--reset-offsets", "--group", shape.group("missing"), "--all-topics", "--to-earliest", "--execute")
    every = assert_same(shape, "--reset-offsets", "--all-groups", "--all-topics", "--to-latest", "--dry-run", listing=True)
    assert re.search(rf"{shape.group('empty')}\s+{audit}\s+0\s+10", every), every


def test_delete_groups(shape: Shape) -> None:
    g = shape.group
    for live in ("classic", "consumer"):
        refused = assert_same(shape, "--delete", "--group", g(live))
        assert "The group is not empty." in refused, refused
    missing = assert_same(shape, "--delete", "--group", g("missing"))
    assert "The group id does not exist." in missing, missing
    deleted = assert_same(shape, "--delete", "--group", g("delete"))
    assert f"Deletion of requested consumer groups ('{g('delete')}') was successful." in deleted, deleted
    assert_same(shape, "--describe", "--group", g("delete"))
    assert_same(shape, "--delete", "--group", g("delete"), "--group", g("classic"))


def test_delete_offsets(shape: Shape) -> None:
    group, orders, audit = shape.group("offsets"), shape.topic("orders"), shape.topic("audit")
    done = assert_same(shape, "--delete-offsets", "--group", group, "--topic", audit, rows_in_any_order=True)
    assert "Request succeeded for deleting offsets" in done and re.search(rf"{audit}\s+0\s+Successful", done), done
    left = assert_same(shape, "--describe", "--group", group)
    assert audit not in left and orders in left, left
    # a partition the topic does not have: Kafka's request handler refuses it, the rest is deleted
    partial = assert_same(shape, "--delete-offsets", "--group", group, "--topic", f"{orders}:0,5", rows_in_any_order=True)
    assert "UnknownTopicOrPartitionException" in partial and re.search(rf"{orders}\s+0\s+Successful", partial), partial
    assert_same(shape, "--delete-offsets", "--group", group, "--topic", shape.topic("absent"))
    subscribed = assert_same(shape, "--delete-offsets", "--group", shape.group("classic"), "--topic", orders)
    assert "GroupSubscribedToTopicException" in subscribed, subscribed
    assert_same(shape, "--delete-offsets", "--group", shape.group("consumer"), "--topic", f"{orders}:1")
    assert_same(shape, "--delete-offsets", "--group", shape.group("missing"), "--topic", orders)
