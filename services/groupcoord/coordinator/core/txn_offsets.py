"""Transactional offsets (TxnOffsetCommit): pending per producer until the upstream decides.

Modelled on Apache Kafka's ``OffsetMetadataManager`` (``pendingTransactionalOffsets``,
``openTransactions``, ``replayEndTransactionMarker``). A TxnOffsetCommit writes one
:class:`PendingTxnOffsetKey` record per partition, as a transactional batch of the client's
producer (see ``CoordinatorResult.transaction``); the upstream transaction coordinator then
writes a COMMIT or ABORT marker into the same state partition, which the log reader hands to
``replay`` as a :class:`TxnMarkerKey` record. Nothing here guesses an outcome: pending offsets
stay pending (and OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT) until
the marker for their producer is in the log.

Commit order: Kafka keeps "the most recent committed offset" by comparing the log offsets of
the pending record and of the committed one when a COMMIT marker applies. Replay here counts
the offset records it sees (``ordinal``), which orders them exactly as the log does, also
after the loader's compaction (it keeps each key's last record in the order of those last
occurrences). A marker therefore gives the same state whether it is replayed at its place in
the log (a load) or later, after records the leader wrote meanwhile (the leader learns of
markers by reading its partition).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from groupcoord.coordinator.core.contract import CoordinatorRecord
from groupcoord.records.v1 import offsets_pb2 as rpb

OffsetKey = tuple[str, str, int]  # group, topic, partition


@dataclass(slots=True)
class PendingOffset:
    value: rpb.OffsetCommitValue
    ordinal: int


@dataclass(slots=True)
class ProducerSequence:
    """The producer's epoch and next sequence number in this state partition."""

    epoch: int
    next_sequence: int


class PendingTransactions:
    """Pending transactional offsets of one state partition, built only by replay."""

    def __init__(self, apply_committed: Callable[[OffsetKey, rpb.OffsetCommitValue], None]) -> None:
        self._apply_committed = apply_committed
        self.by_producer: dict[int, dict[OffsetKey, PendingOffset]] = {}
        self.open_by_key: dict[OffsetKey, set[int]] = {}
        self.sequences: dict[int, ProducerSequence] = {}
        # Ordinal of the record that set a committed offset, kept only while the key has
        # pending transactional offsets (the only time it is compared).
        self._committed_ordinal: dict[OffsetKey, int] = {}
        self._ordinal = 0
        self.commits_applied = 0
        self.aborts_applied = 0

    # ------------------------------------------------------------------------------ queries
    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        return (group_id, topic, partition) in self.open_by_key

    def group_has_pending(self, group_id: str) -> bool:
        return any(k[0] == group_id for k in self.open_by_key)

    def pending_by_topic_partition(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> how many producers hold a pending offset for it (metrics)."""
        out: dict[tuple[str, int], int] = {}
        for (_g, topic, partition), producers in self.open_by_key.items():
            out[(topic, partition)] = out.get((topic, partition), 0) + len(producers)
        return out

    def tombstones(self, group_id: str, topic: str, partition: int) -> list[CoordinatorRecord]:
        """Tombstones of the pending records of a partition whose offset is deleted: Kafka drops
        pending offsets with the offset's tombstone, and these keep that true after compaction."""
        return [
            CoordinatorRecord(
                rpb.PendingTxnOffsetKey(
                    producer_id=producer_id, group_id=group_id, topic=topic, partition=partition
                ),
                None,
            )
            for producer_id in sorted(self.open_by_key.get((group_id, topic, partition), ()))
        ]

    def next_sequence(self, producer_id: int, producer_epoch: int) -> int | None:
        """The base sequence of the producer's next batch here; None if the epoch is stale."""
        seq = self.sequences.get(producer_id)
        if seq is None or producer_epoch > seq.epoch:
            return 0
        if producer_epoch < seq.epoch:
            return None
        return seq.next_sequence

    # ------------------------------------------------------------------------------ replay
    def on_committed_offset(self, key: OffsetKey, deleted: bool) -> None:
        """A plain offset record (or tombstone) for ``key`` replayed while it has pending
        offsets. A tombstone drops every producer's pending offset for it, as in Kafka."""
        self._ordinal += 1
        if deleted:
            for producer_id in self.open_by_key.pop(key, ()):
                pending = self.by_producer.get(producer_id)
                if pending is not None:
                    pending.pop(key, None)
            self._committed_ordinal.pop(key, None)
        else:
            self._committed_ordinal[key] = self._ordinal

    def replay_pending(self, k: rpb.PendingTxnOffsetKey, v: rpb.PendingTxnOffsetValue | None) -> None:
        key = (k.group_id, k.topic, k.partition)
        if v is None:
            # Written beside the tombstone of the offset itself (see tombstones()): after
            # compaction the offset's tombstone may be gone, this one says the same.
            pending = self.by_producer.get(k.producer_id)
            if pending is not None and pending.pop(key, None) is not None:
                producers = self.open_by_key.get(key)
                if producers is not None:
                    producers.discard(k.producer_id)
                    if not producers:
                        del self.open_by_key[key]
                        self._committed_ordinal.pop(key, None)
            return
        self._ordinal += 1
        self.by_producer.setdefault(k.producer_id, {})[key] = PendingOffset(v.offset, self._ordinal)
        self.open_by_key.setdefault(key, set()).add(k.producer_id)
        seq = self.sequences.get(k.producer_id)
        end = v.base_sequence + v.batch_records
        if seq is None or v.producer_epoch > seq.epoch:
            self.sequences[k.producer_id] = ProducerSequence(v.producer_epoch, end)
        elif v.producer_epoch == seq.epoch and end > seq.next_sequence:
            seq.next_sequence = end

    def replay_marker(self, _k: rpb.TxnMarkerKey, v: rpb.TxnMarkerValue | None) -> None:
        if v is None:
            return
        pending = self.by_producer.pop(v.producer_id, None)
        if pending is None:
            return  # a marker of a transaction that committed no offsets here
        if v.commit:
            self.commits_applied += 1
        else:
            self.aborts_applied += 1
        for key, offset in pending.items():
            producers = self.open_by_key.get(key)
            if producers is not None:
                producers.discard(v.producer_id)
            if v.commit and offset.ordinal > self._committed_ordinal.get(key, -1):
                self._apply_committed(key, offset.value)
                self._committed_ordinal[key] = offset.ordinal
            if not producers:
                self.open_by_key.pop(key, None)
                self._committed_ordinal.pop(key, None)


def pending_record(
    producer_id: int,
    producer_epoch: int,
    key: OffsetKey,
    value: rpb.OffsetCommitValue,
    base_sequence: int,
    batch_records: int,
) -> CoordinatorRecord:
    group_id, topic, partition = key
    return CoordinatorRecord(
        rpb.PendingTxnOffsetKey(producer_id=producer_id, group_id=group_id, topic=topic, partition=partition),
        rpb.PendingTxnOffsetValue(
            offset=value,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            batch_records=batch_records,
        ),
    )


def marker_record(offset: int, producer_id: int, producer_epoch: int, commit: bool) -> CoordinatorRecord:
    """The record the log reader makes of a control batch at ``offset``."""
    return CoordinatorRecord(
        rpb.TxnMarkerKey(offset=offset),
        rpb.TxnMarkerValue(producer_id=producer_id, producer_epoch=producer_epoch, commit=commit),
    )
