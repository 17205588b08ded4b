"""A partition's group coordinator state as plain data, apart from the code that acts on it.

Everything replay builds for one state-topic partition lives in one :class:`GroupCoordinatorState`:
the groups (classic, consumer and share groups with their members), the committed offsets, the
pending transactional offsets, the dynamic group configs, the delivery states of the share
groups' share-partitions, and the topics image the runtime last delivered. The code acting on
it is wiring the shard builds once and a revert never copies:

* ClassicContext, ConsumerContext, ShareContext, OffsetMetadataManager, GroupAdmin and
  GroupConfigManager (:class:`ActsOnState`) hold this root (``data``), the config and the
  callables the shard wires in; the shard's metrics object (core/group_metrics.py) reads it.
  ClassicContext also holds the parked JoinGroup/SyncGroup requests (``waiters``: connections,
  not state; a revert drops them, ``GroupCoordinatorShard.restore``), ConsumerContext the
  read-only view of the armed timers and the (stateless) assignors, ShareContext the group
  configs it reads a share group's settings from.
* OnlineMigration holds the ClassicContext, ClassicMembersOfConsumerGroups the
  ConsumerContext: they reach the root through those.
* The replay switch binds each record type's replay function to the root: replay needs
  nothing else.

None keeps a container of the root across calls, since a revert refills the root's fields.

Why the split: the runtime reverts a failed write by making the live replica's state equal to
the committed replica's (runtime/replicas.py). Copying only this data — never the wiring —
means a manager may hold any callable (a closure, a lambda, a bound method) without a revert
rebinding or sharing it by accident, and nothing in here may hold one: state objects take what
they need (the topics image, a config) as arguments.

How a handler does not mutate, in every group type: it copies what it changes, changes the
copy, and returns the records describing the change; the state moves only when the runtime
replays them. Members are immutable values, so "copy" means building new member values
(``replace_member``, ``dataclasses.replace``) and copying the few group-level fields or
counters the handler reads back. A classic handler copies its whole group (``GroupChange``:
dicts of member references, cheap for classic groups) because Kafka's classic logic is a
sequence of mutations it reads back as it goes; a consumer handler copies only the member and
counters it touches because a consumer group may hold thousands of members and a heartbeat
changes one. Same rule, sized to what the handler touches.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from groupcoord.coordinator.core.topics_image import UNKNOWN_IMAGE, TopicsImage
from groupcoord.coordinator.core.txn_offsets import PendingTransactions

if TYPE_CHECKING:  # the managers import this module: their types are annotations only here
    from groupcoord.coordinator.core.adoption import AdoptionDecision
    from groupcoord.coordinator.core.group import Group
    from groupcoord.coordinator.core.offsets import CommittedOffset
    from groupcoord.coordinator.core.share.share_partition import SharePartition

    OffsetsByGroup = dict[str, dict[str, dict[int, CommittedOffset]]]
    """group id -> topic -> partition -> committed offset."""


@dataclass(slots=True)
class GroupCoordinatorState:
    """The whole state of one partition's group coordinator, built only by replay (the image:
    by ``on_metadata_update``, delivered to both replicas). Equal states answer every request
    alike: tests compare a live state with one replayed from the log."""

    groups: dict[str, Group] = field(default_factory=dict)
    offsets: OffsetsByGroup = field(default_factory=dict)
    transactions: PendingTransactions = field(default_factory=PendingTransactions)
    group_configs: dict[str, dict[str, int | str | bool]] = field(default_factory=dict)  # group id -> name -> value
    # (group id, topic id, partition) -> the delivery state of that share-partition (immutable)
    share_partitions: dict[tuple[str, bytes, int], SharePartition] = field(default_factory=dict)
    # group id -> how it became ours (adopted from the upstream's coordinator, or held first)
    adoptions: dict[str, AdoptionDecision] = field(default_factory=dict)
    # Immutable input, shared by copies (never copied: its mappings are read-only proxies).
    image: TopicsImage = UNKNOWN_IMAGE

    def copy(self) -> GroupCoordinatorState:
        """A copy sharing nothing a replay may change (the runtime's revert, runtime/replicas.py).

        Containers are copied and the immutable values in them shared: committed offsets,
        members (frozen), config values, the image. Each group copies itself (``Group.copy``:
        its containers, sharing its frozen members), and the pending transactions, small and
        holding mutable protobuf values, are deep-copied. A deep copy of everything cost ~1 s
        on the partition's loop for 100k offsets; figures in runtime/replicas.py.
        """
        return GroupCoordinatorState(
            groups={group_id: group.copy() for group_id, group in self.groups.items()},
            offsets={
                group_id: {topic: dict(partitions) for topic, partitions in topics.items()}
                for group_id, topics in self.offsets.items()
            },
            transactions=copy.deepcopy(self.transactions),
            group_configs={group_id: dict(values) for group_id, values in self.group_configs.items()},
            share_partitions=dict(self.share_partitions),
            adoptions=dict(self.adoptions),
            image=self.image,
        )

    def assign(self, other: GroupCoordinatorState) -> None:
        """Take ``other``'s data in place (this root stays the one the managers hold)."""
        for f in fields(self):
            setattr(self, f.name, getattr(other, f.name))


class ActsOnState:
    """A part of the shard acting on the partition's state (``data``): it reads the groups and
    the image through the root on every access, never keeps them, since a revert refills the
    root with other containers."""

    data: GroupCoordinatorState

    @property
    def groups(self) -> dict[str, Group]:
        return self.data.groups

    @property
    def image(self) -> TopicsImage:
        """The cluster's topics as the runtime last delivered them."""
        return self.data.image
