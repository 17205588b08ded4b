"""Transactional offsets (TxnOffsetCommit): pending per producer until the upstream decides.

Modelled on Apache Kafka's ``OffsetMetadataManager`` (``pendingTransactionalOffsets``,
``openTransactions``, ``replayEndTransactionMarker``). A TxnOffsetCommit writes one
:class:`PendingTxnOffsetKey` record per partition, as a transactional batch of the client's
producer (see ``CoordinatorResult.transaction``); the upstream transaction coordinator then
writes a COMMIT or ABORT marker into the same state partition, which the log reader hands to
``replay`` as a :class:`TxnMarkerKey` record. Nothing here guesses an outcome: pending offsets
stay pending (and OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT) until
the marker for their producer is in the log.

Commit order: Kafka applies a pending offset at COMMIT only if its record is newer in the log
than the record of the committed offset. Here each pending offset is marked *beaten* when a
newer record is applied to its partition (an ordinary commit after it, or another producer's
transactional offset written after it); replay counts the offset records it sees
(``ordinal``), which orders them as the log does, also after the loader's compaction (it keeps
each key's last record in the order of those last occurrences). A marker therefore gives the
same state whether it is replayed at its place in the log (a load) or later, after records the
leader wrote meanwhile (the leader learns of markers by reading its partition). The same holds for the producer's own later writes: a
leader may replay a COMMIT after it already replayed the producer's next transaction's offsets
(written after the marker in the log), so a marker carries the producer's sequence at its place
in the log and decides only offsets written before it.

Compaction: an applied offset must outlive its pending record, which the producer's next
transaction supersedes. So after a COMMIT marker the leader writes the applied values again as
ordinary, *restated* offset records (:meth:`PendingTransactions.restatements`); a restated record
beats only the producers it lists, so it changes nothing a later marker decides.

Fencing: a producer's transaction of epoch *e* can only end with a marker of epoch >= *e*, and
once the producer writes with a newer epoch its older transaction is over (InitProducerId
aborted it). Kafka's coordinator and tansu 0.6.0 (measured) write that ABORT marker into our
partition before the new epoch can write; should one still be missing, a pending record of a
newer epoch drops the producer's offsets of older epochs all the same (they are never
applied). A marker decides only the offsets of transactions it can end: a COMMIT applies those
whose transaction ends with its epoch and aborts older ones. Under transaction version 1 a
transaction's markers carry its own epoch; under version 2 (KIP-890 part 2, TxnOffsetCommit v5
and later) the transaction coordinator bumps the epoch as the transaction ends, and its markers
carry the transaction's epoch + 1 (``PendingTxnOffsetValue.epoch_bump``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from groupcoord.coordinator.core.contract import CoordinatorRecord
from groupcoord.records.v1 import offsets_pb2 as rpb

OffsetKey = tuple[str, str, int]  # group, topic, partition


@dataclass(slots=True)
class PendingOffset:
    value: rpb.OffsetCommitValue
    ordinal: int
    epoch: int
    sequence: int  # the base sequence of its batch: orders the producer's writes here
    ends_at: int  # the epoch of the markers that end its transaction (epoch + 1 under version 2)
    beaten: bool = False  # a newer record of its partition was applied: it can never apply


@dataclass(slots=True)
class ProducerSequence:
    """The producer's epoch and next sequence number in this state partition."""

    epoch: int
    next_sequence: int


@dataclass(slots=True)
class PendingTransactions:
    """Pending transactional offsets of one state partition, built only by replay.

    Plain data with its replay rules: a COMMIT marker's offsets are returned by
    :meth:`replay_marker` for the offsets manager to apply, never applied through a callback
    (state holds no wiring, see core/state.py)."""

    by_producer: dict[int, dict[OffsetKey, PendingOffset]] = field(default_factory=dict)
    open_by_key: dict[OffsetKey, set[int]] = field(default_factory=dict)
    sequences: dict[int, ProducerSequence] = field(default_factory=dict)
    # Offsets a COMMIT marker applied that no ordinary record states yet (see restatements).
    unrestated: dict[OffsetKey, rpb.OffsetCommitValue] = field(default_factory=dict)
    ordinal: int = 0
    commits_applied: int = 0
    aborts_applied: int = 0

    # ------------------------------------------------------------------------------ queries
    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        return (group_id, topic, partition) in self.open_by_key

    def group_has_pending(self, group_id: str) -> bool:
        return any(k[0] == group_id for k in self.open_by_key)

    def producer_sequences(self) -> dict[int, tuple[int, int]]:
        """Producer id -> (epoch, next sequence) here: where a marker follower starts from."""
        return {pid: (s.epoch, s.next_sequence) for pid, s in self.sequences.items()}

    def next_sequence(self, producer_id: int, producer_epoch: int) -> int | None:
        """The base sequence of the producer's next batch here; None if the epoch is stale."""
        seq = self.sequences.get(producer_id)
        if seq is None or producer_epoch > seq.epoch:
            return 0
        if producer_epoch < seq.epoch:
            return None
        return seq.next_sequence

    def tombstones(self, group_id: str, topic: str, partition: int) -> list[CoordinatorRecord]:
        """Records clearing the pending offsets of a partition whose offset is deleted: Kafka
        drops them with the offset's tombstone, and these keep that true after compaction. Not
        tombstones: a cleared record keeps the producer's epoch, which fences its older
        transactions on replay."""
        key = (group_id, topic, partition)
        return [
            CoordinatorRecord(
                rpb.PendingTxnOffsetKey(
                    producer_id=producer_id, group_id=group_id, topic=topic, partition=partition
                ),
                rpb.PendingTxnOffsetValue(
                    producer_epoch=self.sequences[producer_id].epoch,
                    base_sequence=self.sequences[producer_id].next_sequence,  # keeps it known
                    cleared=True,
                ),
            )
            for producer_id in sorted(self.open_by_key.get(key, ()))
        ]

    def restatements(self) -> list[CoordinatorRecord]:
        """Ordinary records restating the offsets COMMIT markers applied (written by the leader
        right after it replays markers, and after a load): see the module docstring."""
        records = []
        for (group_id, topic, partition), value in sorted(self.unrestated.items()):
            beaten = sorted(
                pid
                for pid in self.open_by_key.get((group_id, topic, partition), ())
                if self.by_producer[pid][(group_id, topic, partition)].beaten
            )
            restated = rpb.OffsetCommitValue()
            restated.CopyFrom(value)
            restated.restated = True
            restated.beats_producers.extend(beaten)
            key = rpb.OffsetCommitKey(group_id=group_id, topic=topic, partition=partition)
            records.append(CoordinatorRecord(key, restated))
        return records

    # ------------------------------------------------------------------------------ replay
    def on_committed_offset(self, key: OffsetKey, value: rpb.OffsetCommitValue | None) -> None:
        """An ordinary offset record (or tombstone) for ``key`` is replayed. Called only while
        the key has pending offsets or an unrestated applied offset. A tombstone drops every
        producer's pending offset for it, as in Kafka."""
        self.unrestated.pop(key, None)
        producers = self.open_by_key.get(key)
        if not producers:
            return
        self.ordinal += 1
        if value is None:
            for producer_id in self.open_by_key.pop(key):
                pending = self.by_producer.get(producer_id)
                if pending is not None:
                    pending.pop(key, None)
                    if not pending:
                        del self.by_producer[producer_id]
            return
        beats = set(value.beats_producers) if value.restated else producers
        for producer_id in producers:
            if producer_id in beats:
                self.by_producer[producer_id][key].beaten = True

    def replay_pending(self, k: rpb.PendingTxnOffsetKey, v: rpb.PendingTxnOffsetValue | None) -> None:
        key = (k.group_id, k.topic, k.partition)
        if v is None:
            return  # never written
        seq = self.sequences.get(k.producer_id)
        end = v.base_sequence + v.batch_records
        if seq is None or v.producer_epoch > seq.epoch:
            self.sequences[k.producer_id] = ProducerSequence(v.producer_epoch, end)
        elif v.producer_epoch == seq.epoch and end > seq.next_sequence:
            seq.next_sequence = end
        self.ordinal += 1
        pending = self.by_producer.setdefault(k.producer_id, {})
        fenced = {kk: o for kk, o in pending.items() if o.epoch < v.producer_epoch}
        if fenced:  # the producer moved to a newer epoch: its older transaction is over
            for kk in fenced:
                del pending[kk]
            self.aborts_applied += 1
            self._resolve(k.producer_id, fenced, commit=False)  # applies nothing
        if v.cleared:
            # Written beside the tombstone of the offset itself (see tombstones()): after
            # compaction the offset's tombstone may be gone, this one says the same.
            if pending.pop(key, None) is not None:
                self._close(k.producer_id, key)
            if not pending:
                del self.by_producer[k.producer_id]
            return
        ends_at = v.producer_epoch + 1 if v.epoch_bump else v.producer_epoch
        pending[key] = PendingOffset(v.offset, self.ordinal, v.producer_epoch, v.base_sequence, ends_at)
        self.open_by_key.setdefault(key, set()).add(k.producer_id)

    def replay_marker(
        self, _k: rpb.TxnMarkerKey, v: rpb.TxnMarkerValue | None
    ) -> list[tuple[OffsetKey, rpb.OffsetCommitValue]]:
        """Decide the producer's offsets the marker covers; returns the offsets a COMMIT
        applies, for the offsets manager to make committed."""
        if v is None:
            return []
        pending = self.by_producer.get(v.producer_id)
        if not pending:
            return []  # a marker of a transaction that committed no offsets here
        epoch = v.producer_epoch
        bound = v.sequence_bound if v.HasField("sequence_bound") else None
        # The bound is the producer's sequence in the marker's own epoch: it orders the marker
        # only against offsets written in that epoch.
        decided = {
            k: o
            for k, o in pending.items()
            if o.ends_at < epoch
            or (o.ends_at == epoch and (o.epoch != epoch or bound is None or o.sequence < bound))
        }
        if not decided:
            return []  # a late marker decides nothing written after it
        for key in decided:
            del pending[key]
        if not pending:
            del self.by_producer[v.producer_id]
        if v.commit:
            self.commits_applied += 1
        else:
            self.aborts_applied += 1
        # Offsets of a transaction that ends with an older epoch belong to a transaction that
        # fencing aborted.
        older = {k: o for k, o in decided.items() if o.ends_at < v.producer_epoch}
        if older:
            self._resolve(v.producer_id, older, commit=False)
        return self._resolve(v.producer_id, {k: o for k, o in decided.items() if k not in older}, v.commit)

    def _resolve(
        self, producer_id: int, decided: dict[OffsetKey, PendingOffset], commit: bool
    ) -> list[tuple[OffsetKey, rpb.OffsetCommitValue]]:
        """Close the decided offsets; returns those that become committed."""
        applied: list[tuple[OffsetKey, rpb.OffsetCommitValue]] = []
        for key, offset in decided.items():
            self._close(producer_id, key)
            if not commit or offset.beaten:
                continue
            applied.append((key, offset.value))
            self.unrestated[key] = offset.value
            for other in self.open_by_key.get(key, ()):
                older = self.by_producer[other][key]
                if older.ordinal < offset.ordinal:
                    older.beaten = True
        return applied

    def _close(self, producer_id: int, key: OffsetKey) -> None:
        producers = self.open_by_key.get(key)
        if producers is not None:
            producers.discard(producer_id)
            if not producers:
                del self.open_by_key[key]


def pending_record(
    producer_id: int,
    producer_epoch: int,
    key: OffsetKey,
    value: rpb.OffsetCommitValue,
    base_sequence: int,
    batch_records: int,
    epoch_bump: bool = False,
) -> CoordinatorRecord:
    group_id, topic, partition = key
    return CoordinatorRecord(
        rpb.PendingTxnOffsetKey(producer_id=producer_id, group_id=group_id, topic=topic, partition=partition),
        rpb.PendingTxnOffsetValue(
            offset=value,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            batch_records=batch_records,
            epoch_bump=epoch_bump,
        ),
    )
