"""The group coordinator shard's own metrics (Kafka's ``GroupCoordinatorMetricsShard``).

The runtime hosts any shard and knows none of its metrics (core/contract.py,
:class:`~groupcoord.coordinator.core.contract.CoordinatorMetricsShard`); what a group
coordinator shard measures is said here, next to the group types it counts:

* gauges, read from the state each time the runtime exports them: groups by protocol and
  state, and the records of share-partitions not done yet;
* counters, from the records each live request or timer writes (never records replayed during
  a load, which would recount history): a consumer or share group's epoch going up or a
  classic group's generation going up is a rebalance; an offset record is a commit. An offset
  tombstone is an expiry when a timer wrote it (the only timer that deletes offsets is
  retention expiry, which also deletes an empty group whose offsets all expired) and a
  deletion otherwise (OffsetDelete, DeleteGroups, a repair). A transactional offset counts as
  a commit when a COMMIT marker applied it: the leader then writes it as an ordinary
  (restated) offset record.

The names they are exported under are the observability facade's
(``groupcoord.observability.shard_metrics.ShardMetrics``), named after Kafka's metrics; this
module calls it through :class:`GroupMetricsSink`, so the core imports no metrics library.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import Any, Protocol

from google.protobuf.message import Message

from groupcoord.coordinator.core.contract import CoordinatorRecord
from groupcoord.coordinator.core.group import GroupType
from groupcoord.coordinator.core.share.delivery import records_in_flight
from groupcoord.coordinator.core.state import GroupCoordinatorState
from groupcoord.records.v1.classic_group_pb2 import ClassicGroupMetadataKey
from groupcoord.records.v1.consumer_group_pb2 import ConsumerGroupMetadataKey
from groupcoord.records.v1.offsets_pb2 import OffsetCommitKey
from groupcoord.records.v1.share_group_pb2 import ShareGroupMetadataKey
from groupcoord.records.v1.streams_group_pb2 import StreamsGroupMetadataKey


class GroupMetricsSink(Protocol):
    """What of the process's metrics facade a group coordinator shard calls."""

    def set_group_counts(self, partition: int, counts: Mapping[str, Mapping[str, int]] | None = None) -> None: ...

    def set_share_records_in_flight(self, partition: int, records: dict[tuple[str, str, int], int]) -> None: ...

    def record_rebalance(self, protocol: str, *, partition: int | None = None) -> None: ...

    def record_offset_commits(self, n: int = 1, *, partition: int | None = None) -> None: ...

    def record_offset_expirations(self, n: int = 1) -> None: ...

    def record_offset_deletions(self, n: int = 1) -> None: ...


REBALANCE_RECORDS: dict[type[Message], tuple[str, Callable[[Any], int]]] = {
    ConsumerGroupMetadataKey: (GroupType.CONSUMER.value, attrgetter("epoch")),
    ShareGroupMetadataKey: (GroupType.SHARE.value, attrgetter("epoch")),
    StreamsGroupMetadataKey: (GroupType.STREAMS.value, attrgetter("epoch")),
    ClassicGroupMetadataKey: (GroupType.CLASSIC.value, attrgetter("generation_id")),
}
"""The record of each group type whose value carries the number a rebalance raises (the group
epoch, the classic generation), with the protocol label and how to read that number."""


class GroupCoordinatorMetricsShard:
    """The :class:`~groupcoord.coordinator.core.contract.CoordinatorMetricsShard` of a group
    coordinator shard: reads the shard's state root, never changes it."""

    def __init__(self, data: GroupCoordinatorState) -> None:
        # the root stays the same object (a revert refills its fields), so holding it is safe
        self._data = data

    def group_counts(self) -> dict[str, int]:
        """Groups hosted here by protocol (the control plane's partition status)."""
        counts = {kind.value: 0 for kind in (GroupType.CONSUMER, GroupType.CLASSIC)}
        for group in self._data.groups.values():
            counts[group.group_type.value] = counts.get(group.group_type.value, 0) + 1
        return counts

    def group_state_counts(self) -> dict[str, dict[str, int]]:
        """Groups by protocol (consumer, classic, share), then by snake_case state, for the
        metrics (never per group: bounded cardinality)."""
        counts: dict[str, dict[str, int]] = {kind.value: {} for kind in GroupType}
        for group in self._data.groups.values():
            state = re.sub(r"(?<!^)(?=[A-Z])", "_", group.state_name()).lower()
            of_kind = counts[group.group_type.value]
            of_kind[state] = of_kind.get(state, 0) + 1
        return counts

    def share_records_in_flight(self) -> dict[tuple[str, str, int], int]:
        """Per share-partition (group, topic name, partition), its records not done yet:
        Kafka's ``InFlightMessageCount``; share-partitions with none are left out."""
        return records_in_flight(self._data.share_partitions, self._data.image)

    def export(self, partition: int, sink: GroupMetricsSink) -> None:
        sink.set_group_counts(partition, self.group_state_counts())
        sink.set_share_records_in_flight(partition, self.share_records_in_flight())

    def observe_written(
        self,
        partition: int,
        records: Sequence[CoordinatorRecord],
        sink: GroupMetricsSink,
        seen: dict[Any, Any],
        *,
        by_timer: bool,
    ) -> None:
        """See the module docstring; ``seen`` maps (protocol, group id) to the last epoch or
        generation written (bounded by the groups)."""
        commits = deletions = 0
        for record in records:
            kind = type(record.key)
            if kind is OffsetCommitKey:
                if record.value is None:
                    deletions += 1
                else:
                    commits += 1
                continue
            rebalance = REBALANCE_RECORDS.get(kind)
            if rebalance is not None:
                protocol, number = rebalance
                value = record.value
                epoch = None if value is None else number(value)
                _rebalance(sink, seen, partition, protocol, record.key.group_id, epoch)  # type: ignore[attr-defined]
        if commits:
            sink.record_offset_commits(commits, partition=partition)
        if deletions and by_timer:
            sink.record_offset_expirations(deletions)
        elif deletions:
            sink.record_offset_deletions(deletions)


def _rebalance(
    sink: GroupMetricsSink, seen: dict[Any, Any], partition: int, protocol: str, group_id: str, epoch: int | None
) -> None:
    """A group's epoch (consumer, share) or generation (classic) as written; None: deleted."""
    key = (protocol, group_id)
    if epoch is None:
        seen.pop(key, None)
        return
    if epoch > seen.get(key, 0):
        sink.record_rebalance(protocol, partition=partition)
    seen[key] = epoch
