"""``groupcoord groups`` against Kafka 4.4's own ``kafka-consumer-groups.sh``
(``ConsumerGroupCommand``), both run on the same groups through the same gateway (issue 26):
the same tables — column names, rows, state names, member ids, epochs, assignments — and the
same messages. The group shape is tests/apache_kafka/group_shape.py's (an empty group, a classic
and a KIP-848 group each with a live member, groups kept for resetting and deleting offsets).

What is compared: the table lines, split into cells (our columns are laid out with Kafka's
widths, but a cell wider than Kafka's minimum shifts the rest; the cells are the contract), and
the other lines (notices, errors) as a set, since Kafka prints some to stderr and we print them
to stdout. Not compared: exit statuses (Kafka's tool exits 0 after printing most errors, ours 1),
and the HOST column's leading ``/`` (Java's ``InetAddress.toString``), which ours leaves out.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

from .conftest import CONSUMER_GROUP_COMMAND, run_tool
from .group_shape import Shape, group_shape

HEADERS = ("GROUP", "TOPIC")


@pytest.fixture(scope="module")
def shape(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Shape]:
    with group_shape(kafka.bootstrap, kafka_cluster.bootstrap, tmp_path_factory.mktemp("cli-vs")) as built:
        yield built


def _split(text: str) -> tuple[list[list[str]], set[str]]:
    """(table lines as cells, every other line) of one run's output."""
    table: list[list[str]] = []
    other: set[str] = set()
    in_table = False
    for line in text.splitlines():
        if not line.strip() or line.startswith("SLF4J"):
            in_table = False if not line.strip() else in_table
            continue
        cells = line.replace("/127.0.0.1", "127.0.0.1").split()
        if cells[0] in HEADERS or in_table:
            in_table = True
            table.append(cells)
        else:
            other.add(line.strip())
    return table, other


def compare(
    shape: Shape,
    kafka_args: tuple[str, ...],
    our_args: tuple[str, ...],
    *,
    only_prefix: bool = False,
    unordered: bool = False,
) -> str:
    """Kafka's tool and ours against the gateway; returns Kafka's output after asserting ours is it."""
    gateway = shape.sides[1].bootstrap
    theirs = run_tool(CONSUMER_GROUP_COMMAND, "--bootstrap-server", gateway, *kafka_args)
    ours = subprocess.run(
        [sys.executable, "-m", "groupcoord.cli", "groups", *our_args, "--bootstrap", gateway],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    kafka_text, our_text = theirs.stdout + theirs.stderr, ours.stdout + ours.stderr
    # tables are printed to stdout by both; a message may be on either stream
    (kafka_table, kafka_other), (our_table, our_other) = _split(theirs.stdout), _split(ours.stdout)
    kafka_other |= _split(theirs.stderr)[1] | {" ".join(r) for r in _split(theirs.stderr)[0]}
    our_other |= _split(ours.stderr)[1] | {" ".join(r) for r in _split(ours.stderr)[0]}
    if only_prefix:  # a listing: the lines of this module's groups
        kafka_table = [r for r in kafka_table if r[0] in HEADERS or shape.prefix in r[0]]
        our_table = [r for r in our_table if r[0] in HEADERS or shape.prefix in r[0]]
    if unordered:  # Kafka prints from a HashMap: the order of its rows means nothing
        kafka_table, our_table = sorted(kafka_table), sorted(our_table)
    context = f"{' '.join(kafka_args)}\n--- Kafka 4.4:\n{kafka_text}\n--- groupcoord groups:\n{our_text}"
    assert our_table == kafka_table, context
    assert our_other == kafka_other, context
    assert "Traceback" not in our_text, context
    return kafka_text


@pytest.mark.parametrize("role", ["empty", "classic", "consumer"])
@pytest.mark.parametrize(
    "view",
    [
        (),
        ("--offsets",),
        ("--offsets", "--verbose"),
        ("--members",),
        ("--members", "--verbose"),
        ("--state",),
        ("--state", "--verbose"),
    ],
)
def test_describe_views_match(shape: Shape, role: str, view: tuple[str, ...]) -> None:
    group = shape.group(role)
    out = compare(shape, ("--describe", "--group", group, *view), ("describe", group, *view))
    assert group in out, out


def test_describe_of_a_live_kip848_member_shows_epochs_like_kafka(shape: Shape) -> None:
    out = compare(
        shape,
        ("--describe", "--group", shape.group("consumer"), "--members", "--verbose"),
        ("describe", shape.group("consumer"), "--members", "--verbose"),
    )
    assert re.search(rf"\s\d+\s+{shape.topic('audit')}:0;{shape.topic('orders')}:0,1,2\s+\d+\s", out), out


@pytest.mark.parametrize(
    "options",
    [
        ("--state",),
        ("--state", "Stable"),
        ("--state", "--type"),
        ("--type", "consumer"),
        ("--type", "classic"),
    ],
)
def test_list_with_states_and_types_matches(shape: Shape, options: tuple[str, ...]) -> None:
    out = compare(shape, ("--list", *options), ("list", *options), only_prefix=True, unordered=True)
    assert shape.prefix in out, out


@pytest.mark.parametrize(
    "scenario",
    [
        ("--all-topics", "--to-earliest"),
        ("--all-topics", "--to-latest"),
        ("--all-topics", "--to-current"),
        ("--all-topics", "--shift-by", "-2"),
        ("--topic", "{orders}:0,1", "--to-offset", "4"),
        ("--topic", "{audit}", "--to-datetime", "{datetime}"),
    ],
)
@pytest.mark.parametrize("export", [(), ("--export",)])
def test_reset_dry_runs_match(shape: Shape, scenario: tuple[str, ...], export: tuple[str, ...]) -> None:
    args = tuple(
        a.format(orders=shape.topic("orders"), audit=shape.topic("audit"), datetime=shape.datetime)
        for a in scenario
    )
    group = shape.group("reset")
    out = compare(
        shape,
        ("--reset-offsets", "--group", group, *args, "--dry-run", *export),
        ("reset-offsets", group, *args, "--dry-run", *export),
        unordered=True,
    )
    if export:
        # CSV lines are single cells; a table-less output lands in the "other" set, compared above
        assert re.search(rf"^{shape.prefix}-\w+,0,\d+$", out, re.MULTILINE), out


def test_refused_resets_and_deletes_match(shape: Shape) -> None:
    for live in ("classic", "consumer"):
        out = compare(
            shape,
            ("--reset-offsets", "--group", shape.group(live), "--all-topics", "--to-earliest", "--execute"),
            ("reset-offsets", shape.group(live), "--all-topics", "--to-earliest", "--execute"),
        )
        assert "is inactive, but the current state is Stable." in out, out
    out = compare(
        shape,
        ("--delete-offsets", "--group", shape.group("classic"), "--topic", shape.topic("orders")),
        ("delete-offsets", shape.group("classic"), "--topic", shape.topic("orders")),
        unordered=True,
    )
    assert "GroupSubscribedToTopicException" in out, out
