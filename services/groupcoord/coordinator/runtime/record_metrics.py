"""Counting what a partition writes, for the rebalance and offset metrics.

Coordinator shards stay free of metrics: the runtime looks at the records each live request or timer
writes (never at records replayed during a load, which would recount history) and turns them
into counts — a consumer or share group's epoch going up or a classic group's generation going
up is a rebalance; an offset record is a commit. An offset tombstone is an expiry when a timer wrote it
(the only timer that deletes offsets is retention expiry, which also deletes an empty group
whose offsets all expired) and a deletion otherwise (OffsetDelete, DeleteGroups, a repair).
A transactional offset counts as a commit when a COMMIT marker applied it: the leader then
writes it as an ordinary (restated) offset record.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from groupcoord.coordinator.core.contract import CoordinatorRecord
from groupcoord.records.v1.classic_group_pb2 import ClassicGroupMetadataKey
from groupcoord.records.v1.consumer_group_pb2 import ConsumerGroupMetadataKey
from groupcoord.records.v1.offsets_pb2 import OffsetCommitKey
from groupcoord.records.v1.share_group_pb2 import ShareGroupMetadataKey


class RecordCounter:
    """Per partition: remembers the last epoch/generation seen per group (bounded by groups)."""

    def __init__(self) -> None:
        self._epochs: dict[tuple[str, str], int] = {}

    def observe(
        self, metrics: Any, partition: int, records: Iterable[CoordinatorRecord], *, by_timer: bool = False
    ) -> None:
        commits = deletions = 0
        for record in records:
            kind = type(record.key)
            if kind is OffsetCommitKey:
                if record.value is None:
                    deletions += 1
                else:
                    commits += 1
            elif kind is ConsumerGroupMetadataKey:
                value = record.value
                epoch = None if value is None else value.epoch  # type: ignore[attr-defined]
                self._rebalance(metrics, partition, "consumer", record.key.group_id, epoch)  # type: ignore[attr-defined]
            elif kind is ShareGroupMetadataKey:
                value = record.value
                epoch = None if value is None else value.epoch  # type: ignore[attr-defined]
                self._rebalance(metrics, partition, "share", record.key.group_id, epoch)  # type: ignore[attr-defined]
            elif kind is ClassicGroupMetadataKey:
                value = record.value
                generation = None if value is None else value.generation_id  # type: ignore[attr-defined]
                self._rebalance(metrics, partition, "classic", record.key.group_id, generation)  # type: ignore[attr-defined]
        if commits:
            metrics.record_offset_commits(commits, partition=partition)
        if deletions and by_timer:
            metrics.record_offset_expirations(deletions)
        elif deletions:
            metrics.record_offset_deletions(deletions)

    def _rebalance(
        self, metrics: Any, partition: int, protocol: str, group_id: str, epoch: int | None
    ) -> None:
        """A group's epoch (consumer, share) or generation (classic) as written; None: deleted."""
        key = (protocol, group_id)
        if epoch is None:
            self._epochs.pop(key, None)
            return
        if epoch > self._epochs.get(key, 0):
            metrics.record_rebalance(protocol, partition=partition)
        self._epochs[key] = epoch
