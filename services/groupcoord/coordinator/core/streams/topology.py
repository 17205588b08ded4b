"""A streams group's topology against the cluster's topics: its tasks, and its internal topics
(Kafka's ``InternalTopicManager.configureTopics``, KIP-1071).

Members send the application's topology: subtopologies, each reading source topics (the
user's) and repartition source topics (internal, written by another subtopology's repartition
sinks), keeping state stores backed by changelog topics (internal), and co-partition groups
(topics a join reads partition by partition, so they must have equal partition counts).

:func:`configure_topology` decides what the coordinator must know before it can assign:

* the partition count of every internal topic whose count the topology leaves open (0): a
  repartition topic takes the largest count of the source topics of the subtopologies that
  write it (to a fixed point: repartition topics may feed each other), then a co-partition
  group forces its repartition topics to its user topics' common count (or, if all of its
  topics are repartition topics, to their largest); a changelog topic takes the largest
  count of its subtopology's sources, one partition per task;
* each subtopology's tasks: one per partition of its widest source, stateful when it has
  changelog topics (its tasks get standbys);
* the status a member's heartbeat carries until the topology is ready, as Kafka answers it:
  ``MISSING_SOURCE_TOPICS`` (no task can be assigned), ``INCORRECTLY_PARTITIONED_TOPICS``
  (user topics of a co-partition group differ, or an internal topic exists with another
  count), ``MISSING_INTERNAL_TOPICS`` (with the topics to create: the coordinator's side
  creates them, then assigns).

A topology that cannot be configured whatever topics exist (a repartition topic nothing
writes, fixed repartition counts in a co-partition group that differ) raises
:class:`InvalidTopology`: the heartbeat's STREAMS_INVALID_TOPOLOGY.

Pure: topic partition counts come in as a mapping (the topics image's), nothing is asked.
Not yet: source topic regexes (``source_topic_regex``) — a topology with one is refused as
invalid until they are resolved against the topics image.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from groupcoord.coordinator.core.streams.task_assignor import Subtopology


@dataclass(frozen=True, slots=True)
class InternalTopic:
    """A repartition or changelog topic as the topology asks for it."""

    name: str
    partitions: int = 0  # 0: decided here
    replication_factor: int = 0  # 0: the cluster's default
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CopartitionGroup:
    """Indexes into its subtopology's ``source_topics`` and ``repartition_source_topics``."""

    source_topics: tuple[int, ...] = ()
    repartition_source_topics: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class SubtopologySpec:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[InternalTopic, ...] = ()
    state_changelog_topics: tuple[InternalTopic, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()
    source_topic_regex: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Topology:
    epoch: int
    subtopologies: tuple[SubtopologySpec, ...]


class TopologyStatus(enum.IntEnum):
    """StreamsGroupHeartbeatResponse's status codes for a topology not ready yet."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3


@dataclass(frozen=True, slots=True)
class TopicToCreate:
    name: str
    partitions: int
    replication_factor: int  # -1: the cluster's default (CreateTopics' own convention)
    configs: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class ConfiguredTopology:
    epoch: int
    # subtopology id -> its tasks; None while a source topic is missing or partitions disagree
    subtopologies: Mapping[str, Subtopology] | None
    topics_to_create: tuple[TopicToCreate, ...] = ()
    status: TopologyStatus | None = None  # None: ready, tasks may be assigned
    detail: str = ""

    @property
    def ready(self) -> bool:
        return self.status is None


class InvalidTopology(ValueError):
    """The topology cannot be configured on any cluster (STREAMS_INVALID_TOPOLOGY)."""


def configure_topology(topology: Topology, partition_counts: Mapping[str, int]) -> ConfiguredTopology:
    """``topology`` against the cluster's topics (name -> partition count)."""
    for sub in topology.subtopologies:
        if sub.source_topic_regex:
            raise InvalidTopology(f"subtopology {sub.subtopology_id}: source topic regexes are not served yet")
    missing = sorted({t for sub in topology.subtopologies for t in sub.source_topics if t not in partition_counts})
    if missing:
        return ConfiguredTopology(
            topology.epoch, None, status=TopologyStatus.MISSING_SOURCE_TOPICS,
            detail=f"Source topics {', '.join(missing)} are missing.",
        )
    decided: dict[str, int] = {}
    try:
        _decide_repartition_counts(topology, partition_counts, decided)
        _enforce_copartitioning(topology, partition_counts, decided)
    except _NotCopartitioned as exc:
        return ConfiguredTopology(
            topology.epoch, None, status=TopologyStatus.INCORRECTLY_PARTITIONED_TOPICS, detail=str(exc)
        )

    def count(topic: str) -> int:
        return partition_counts[topic] if topic in partition_counts else decided[topic]

    internal: dict[str, TopicToCreate] = {}
    subtopologies: dict[str, Subtopology] = {}
    for sub in topology.subtopologies:
        sources = [*sub.source_topics, *(t.name for t in sub.repartition_source_topics)]
        width = max((count(t) for t in sources), default=0)
        for topic in sub.repartition_source_topics:
            internal[topic.name] = _to_create(topic, decided.get(topic.name, topic.partitions))
        for topic in sub.state_changelog_topics:
            internal[topic.name] = _to_create(topic, topic.partitions or width)
        subtopologies[sub.subtopology_id] = Subtopology(width, stateful=bool(sub.state_changelog_topics))
    for name, wanted in sorted(internal.items()):
        found = partition_counts.get(name)
        if found is not None and found != wanted.partitions:
            return ConfiguredTopology(
                topology.epoch, None, status=TopologyStatus.INCORRECTLY_PARTITIONED_TOPICS,
                detail=f"Existing topic {name} has different number of partitions: expected "
                f"{wanted.partitions}, found {found}",
            )
    to_create = tuple(t for name, t in sorted(internal.items()) if name not in partition_counts)
    if to_create:
        return ConfiguredTopology(
            topology.epoch, subtopologies, to_create, TopologyStatus.MISSING_INTERNAL_TOPICS,
            f"Internal topics are missing: {', '.join(t.name for t in to_create)}",
        )
    return ConfiguredTopology(topology.epoch, subtopologies)


class _NotCopartitioned(Exception):
    pass


def _to_create(topic: InternalTopic, partitions: int) -> TopicToCreate:
    return TopicToCreate(topic.name, partitions, topic.replication_factor or -1, dict(topic.configs))


def _decide_repartition_counts(topology: Topology, counts: Mapping[str, int], decided: dict[str, int]) -> None:
    """Open repartition topics: the widest source of the subtopologies writing them, until
    every count is known (repartition topics may feed each other)."""
    fixed = {t.name: t.partitions for sub in topology.subtopologies for t in sub.repartition_source_topics}
    decided.update({name: n for name, n in fixed.items() if n > 0})
    open_topics = sorted(name for name, n in fixed.items() if n == 0)
    while open_topics:
        progress = False
        for name in list(open_topics):
            widths = [
                decided.get(source, counts.get(source))
                for sub in topology.subtopologies
                if name in sub.repartition_sink_topics
                for source in (*sub.source_topics, *(t.name for t in sub.repartition_source_topics))
            ]
            known = [w for w in widths if w is not None]
            if known and len(known) == len(widths):
                decided[name] = max(known)
                open_topics.remove(name)
                progress = True
        if not progress:
            raise InvalidTopology(
                f"Failed to compute number of partitions for all repartition topics: {', '.join(open_topics)}"
            )


def _enforce_copartitioning(topology: Topology, counts: Mapping[str, int], decided: dict[str, int]) -> None:
    open_counts = {t.name for sub in topology.subtopologies for t in sub.repartition_source_topics if t.partitions == 0}
    coerced: dict[str, int] = {}  # an open topic takes one group's count; a second group must agree
    for sub in topology.subtopologies:
        for group in sub.copartition_groups:
            user = sorted({sub.source_topics[i] for i in group.source_topics})
            internal = sorted({sub.repartition_source_topics[i].name for i in group.repartition_source_topics})
            if user:
                user_counts = {t: counts[t] for t in user}
                if len(set(user_counts.values())) > 1:
                    raise _NotCopartitioned(f"Topics not co-partitioned: {user_counts}")
                target = next(iter(user_counts.values()))
            else:
                fixed = {t: decided[t] for t in internal if t not in open_counts}
                if len(set(fixed.values())) > 1:
                    raise InvalidTopology(f"Following topics do not have the same number of partitions: {fixed}")
                target = next(iter(fixed.values())) if fixed else max((decided[t] for t in internal), default=0)
            for topic in internal:
                if topic in open_counts and coerced.setdefault(topic, target) == target:
                    decided[topic] = target
                elif decided[topic] != target:
                    raise InvalidTopology(
                        f"Number of partitions [{decided[topic]}] of repartition topic [{topic}] doesn't match "
                        f"number of partitions [{target}] of the source topic."
                    )
