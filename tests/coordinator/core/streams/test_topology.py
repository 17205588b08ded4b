"""A streams group's topology against the cluster's topics, as KIP-1071's word count and join
examples meet them: internal topics sized and listed for creation, the statuses a member sees
while something is missing, and the topologies no cluster could serve."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.coordinator.core.streams.task_assignor import Subtopology
from groupcoord.coordinator.core.streams.topology import (
    CopartitionGroup,
    InternalTopic,
    InvalidTopology,
    SubtopologySpec,
    TopicToCreate,
    Topology,
    TopologyStatus,
    configure_topology,
)

REPARTITION = "wc-count-repartition"
CHANGELOG = "wc-count-store-changelog"


def word_count(epoch: int = 0) -> Topology:
    """Subtopology 0 splits lines into words and repartitions them by word; subtopology 1
    counts them in a store backed by a changelog."""
    return Topology(
        epoch,
        (
            SubtopologySpec("0", source_topics=("lines",), repartition_sink_topics=(REPARTITION,)),
            SubtopologySpec(
                "1",
                repartition_source_topics=(InternalTopic(REPARTITION, configs={"cleanup.policy": "delete"}),),
                state_changelog_topics=(InternalTopic(CHANGELOG, configs={"cleanup.policy": "compact"}),),
            ),
        ),
    )


def test_a_word_count_asks_for_its_internal_topics_sized_as_its_input() -> None:
    configured = configure_topology(word_count(), {"lines": 6})
    assert configured.status is TopologyStatus.MISSING_INTERNAL_TOPICS and not configured.ready
    assert configured.topics_to_create == (
        TopicToCreate(REPARTITION, 6, -1, {"cleanup.policy": "delete"}),
        TopicToCreate(CHANGELOG, 6, -1, {"cleanup.policy": "compact"}),
    )
    assert configured.subtopologies == {"0": Subtopology(6, False), "1": Subtopology(6, True)}


def test_once_its_internal_topics_exist_the_topology_is_ready_for_tasks() -> None:
    configured = configure_topology(word_count(3), {"lines": 6, REPARTITION: 6, CHANGELOG: 6})
    assert configured.ready and configured.epoch == 3 and configured.topics_to_create == ()
    assert configured.subtopologies == {"0": Subtopology(6, False), "1": Subtopology(6, True)}


def test_a_missing_input_topic_holds_every_task_back() -> None:
    configured = configure_topology(word_count(), {})
    assert configured.status is TopologyStatus.MISSING_SOURCE_TOPICS
    assert configured.detail == "Source topics lines are missing."
    assert configured.subtopologies is None


def test_an_internal_topic_of_another_size_is_reported_not_recreated() -> None:
    configured = configure_topology(word_count(), {"lines": 6, REPARTITION: 6, CHANGELOG: 4})
    assert configured.status is TopologyStatus.INCORRECTLY_PARTITIONED_TOPICS
    assert "expected 6, found 4" in configured.detail
    assert configured.topics_to_create == ()


def join(left: int, right: int, repartitioned: bool = False) -> tuple[Topology, dict[str, int]]:
    """A stream-table join of ``orders`` and ``customers``; with ``repartitioned`` the orders
    are re-keyed first (through a repartition topic sized by an 8-partition input)."""
    if not repartitioned:
        sub = SubtopologySpec(
            "0", ("orders", "customers"), copartition_groups=(CopartitionGroup(source_topics=(0, 1)),)
        )
        return Topology(1, (sub,)), {"orders": left, "customers": right}
    rekey = SubtopologySpec("0", ("raw-orders",), repartition_sink_topics=("orders-by-customer",))
    joined = SubtopologySpec(
        "1",
        ("customers",),
        repartition_source_topics=(InternalTopic("orders-by-customer"),),
        copartition_groups=(CopartitionGroup(source_topics=(0,), repartition_source_topics=(0,)),),
    )
    return Topology(1, (rekey, joined)), {"raw-orders": 8, "customers": right}


def test_a_join_of_topics_of_different_sizes_is_incorrectly_partitioned() -> None:
    configured = configure_topology(*join(4, 6))
    assert configured.status is TopologyStatus.INCORRECTLY_PARTITIONED_TOPICS
    assert "Topics not co-partitioned" in configured.detail


def test_a_repartition_topic_joined_with_a_table_takes_the_tables_size() -> None:
    configured = configure_topology(*join(0, 5, repartitioned=True))
    assert configured.topics_to_create == (TopicToCreate("orders-by-customer", 5, -1, {}),)
    assert configured.subtopologies == {"0": Subtopology(8, False), "1": Subtopology(5, False)}


def test_a_repartition_topic_nothing_writes_is_an_invalid_topology() -> None:
    orphan = SubtopologySpec("0", repartition_source_topics=(InternalTopic("nobody-writes-me"),))
    with pytest.raises(InvalidTopology, match="nobody-writes-me"):
        configure_topology(Topology(0, (orphan,)), {})


def test_fixed_repartition_sizes_that_a_join_cannot_reconcile_are_invalid() -> None:
    sub = SubtopologySpec(
        "0",
        repartition_source_topics=(InternalTopic("a", partitions=3), InternalTopic("b", partitions=4)),
        copartition_groups=(CopartitionGroup(repartition_source_topics=(0, 1)),),
    )
    with pytest.raises(InvalidTopology, match="same number of partitions"):
        configure_topology(Topology(0, (sub,)), {})


def test_a_source_regex_is_refused_until_regexes_are_served() -> None:
    with pytest.raises(InvalidTopology, match="regex"):
        configure_topology(Topology(0, (SubtopologySpec("0", source_topic_regex=("in-.*",)),)), {})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=5), st.integers(1, 12), st.booleans())
def test_a_chain_of_repartitions_is_sized_by_its_widest_input(inputs: list[int], extra: int, stateful: bool) -> None:
    """Subtopology i reads input i and the repartition topic of subtopology i - 1, and writes
    its own: each repartition topic is as wide as the widest input upstream of it."""
    subs = []
    for i, _ in enumerate(inputs):
        subs.append(
            SubtopologySpec(
                str(i),
                (f"in-{i}",),
                repartition_sink_topics=(f"rep-{i}",),
                repartition_source_topics=(InternalTopic(f"rep-{i - 1}"),) if i else (),
                state_changelog_topics=(InternalTopic(f"store-{i}"),) if stateful else (),
            )
        )
    subs.append(SubtopologySpec("last", repartition_source_topics=(InternalTopic(f"rep-{len(inputs) - 1}"),)))
    counts = {f"in-{i}": n for i, n in enumerate(inputs)}
    configured = configure_topology(Topology(0, tuple(subs)), counts)
    sizes = {t.name: t.partitions for t in configured.topics_to_create}
    for i in range(len(inputs)):
        assert sizes[f"rep-{i}"] == max(inputs[: i + 1])
        assert configured.subtopologies is not None
        assert configured.subtopologies[str(i)] == Subtopology(max(inputs[: i + 1]), stateful)
    created = {**counts, **sizes}
    ready = configure_topology(Topology(0, tuple(subs)), created)
    assert ready.ready and ready.subtopologies == configured.subtopologies
