"""Committed offsets: OffsetCommit v2-10, OffsetFetch v1-10, OffsetDelete, retention and expiry.

Modelled on Apache Kafka's ``OffsetMetadataManager``. Works on any group through the ``Group``
protocol (core/group.py): a classic group validates a commit by generation, a consumer
(KIP-848) group by member epoch and per-partition assignment epochs (its own code). Offsets
are records (type 25) keyed by (group, topic, partition); the last acknowledged commit of a
partition is its value, so "the last successful commit wins" is the log's compaction rule.

Topics are keyed by name: a v10 request naming a topic only by id is resolved through
the topics image in the partition state (or the gateway may fill the name); an id
neither knows is answered UNKNOWN_TOPIC_ID.

Transactional offsets (TxnOffsetCommit) are pending per producer until the upstream's marker
decides them (:mod:`.txn_offsets`); OffsetFetch with ``require_stable`` answers
UNSTABLE_OFFSET_COMMIT for a partition while any is pending, and retention never expires an
offset (nor deletes a group) with pending transactional offsets, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.common.group_api_declarations import TRANSACTION_V2_TXN_OFFSET_COMMIT
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import (
    CoordinatorRecord,
    CoordinatorResult,
    ScheduleTimer,
    TransactionalWrite,
    deadline_timer,
)
from groupcoord.coordinator.core.group import Group, OffsetCommitValidation, SimpleGroups
from groupcoord.coordinator.core.state import ActsOnState, GroupCoordinatorState
from groupcoord.coordinator.core.txn_offsets import OffsetKey, pending_record
from groupcoord.records.v1 import offsets_pb2 as rpb
from groupcoord.rpc.v1 import offsets_pb2 as pb

EXPIRY_TIMER_KEY = "offsets-expiry"
# OffsetCommit v9+ answers GROUP_ID_NOT_FOUND for a member's commit to a missing group; older
# versions ILLEGAL_GENERATION (what those clients understand).
_GROUP_ID_NOT_FOUND_VERSION = 9
# TxnOffsetCommit v6 (KIP-1319): topics by id, and GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH
# answered as they are (older versions get ILLEGAL_GENERATION for both, as Kafka answers them)
_TXN_TOPIC_ID_VERSION = 6
_RETENTION_TIME_VERSIONS = range(2, 5)  # OffsetCommit v2-4 carry retention_time_ms
_NO_RETENTION = -1


@dataclass(slots=True)
class CommittedOffset:
    """One committed offset: a value, never mutated once built (a revert's copy of the state
    shares it, core/state.py: replace it, never assign its fields). Not ``frozen``: a takeover
    builds one per offset record for each of the runtime's two replicas (a million and more),
    and a frozen dataclass is built ~3.5x slower (its ``__init__`` goes through
    ``object.__setattr__``); a named tuple would be built fast but read slower, and OffsetFetch
    reads every field it answers (bench/takeover.py, bench/offsets_core.py)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int  # -1 = follow offsets.retention.minutes
    topic_id: bytes

    @classmethod
    def from_value(cls, v: rpb.OffsetCommitValue) -> CommittedOffset:
        return cls(
            v.offset, v.leader_epoch, v.metadata, v.commit_timestamp_ms, v.expire_timestamp_ms, v.topic_id
        )


def offset_record(
    group_id: str, topic: str, partition: int, value: CommittedOffset | None
) -> CoordinatorRecord:
    key = rpb.OffsetCommitKey(group_id=group_id, topic=topic, partition=partition)
    if value is None:
        return CoordinatorRecord(key, None)
    return CoordinatorRecord(
        key,
        rpb.OffsetCommitValue(
            offset=value.offset,
            leader_epoch=value.leader_epoch,
            metadata=value.metadata,
            commit_timestamp_ms=value.commit_timestamp_ms,
            expire_timestamp_ms=value.expire_timestamp_ms,
            topic_id=value.topic_id,
        ),
    )


# --- replay: the partition state is the only argument (the replay switch binds it) -------------
def replay_offset(
    data: GroupCoordinatorState,
    simple: SimpleGroups,
    k: rpb.OffsetCommitKey,
    value: rpb.OffsetCommitValue | None,
) -> None:
    transactions = data.transactions
    if transactions.open_by_key or transactions.unrestated:  # cheap without transactions (usual)
        key = (k.group_id, k.topic, k.partition)
        if key in transactions.open_by_key or key in transactions.unrestated:
            transactions.on_committed_offset(key, value)
    offsets = data.offsets
    if value is None:
        topics = offsets.get(k.group_id)
        if topics is not None:
            parts = topics.get(k.topic)
            if parts is not None:
                parts.pop(k.partition, None)
                if not parts:
                    del topics[k.topic]
            if not topics:
                del offsets[k.group_id]
        return
    group_id = k.group_id
    topics = offsets.get(group_id)
    if topics is None:
        topics = offsets[group_id] = {}
    topics.setdefault(k.topic, {})[k.partition] = CommittedOffset.from_value(value)
    # An offset commit makes its group exist (Kafka's "simple" group), also on replay.
    groups = data.groups
    if group_id not in groups:
        groups[group_id] = simple.new_group(group_id)

def replay_pending(
    data: GroupCoordinatorState,
    simple: SimpleGroups,
    k: rpb.PendingTxnOffsetKey,
    value: rpb.PendingTxnOffsetValue | None,
) -> None:
    data.transactions.replay_pending(k, value)
    groups = data.groups
    if value is not None and k.group_id not in groups:
        groups[k.group_id] = simple.new_group(k.group_id)  # Kafka's simple group, as above

def replay_marker(
    data: GroupCoordinatorState, simple: SimpleGroups, k: rpb.TxnMarkerKey, value: rpb.TxnMarkerValue | None
) -> None:
    for (group_id, topic, partition), committed in data.transactions.replay_marker(k, value):
        data.offsets.setdefault(group_id, {}).setdefault(topic, {})[partition] = (
            CommittedOffset.from_value(committed)
        )
        if group_id not in data.groups:
            data.groups[group_id] = simple.new_group(group_id)


class OffsetMetadataManager(ActsOnState):
    """Offsets of every group of one state-topic partition: their data is the partition's
    :class:`~groupcoord.coordinator.core.state.GroupCoordinatorState` (``offsets``,
    ``transactions``), shared with the group managers.

    ``simple`` makes Kafka's simple group (an empty classic group without protocol type) and
    the records creating it, and ``delete_group(group)`` returns the tombstones of a group:
    both belong to the group types, which the shard wires in. A v10 request naming a topic only by id is resolved
    through the state's topics image.
    """

    def __init__(
        self,
        data: GroupCoordinatorState,
        config: GroupConfig,
        simple: SimpleGroups,
        delete_group: Callable[[Group], list[CoordinatorRecord]],
    ) -> None:
        self.data = data
        self.config = config
        self._simple = simple
        self._delete_group = delete_group

    # ------------------------------------------------------------------------------ commit
    def offset_commit(
        self, request: pb.OffsetCommitRequest, now_ms: int
    ) -> CoordinatorResult[pb.OffsetCommitResponse]:
        records: list[CoordinatorRecord] = []
        group_error: ErrorCode | None = None
        group = self.groups.get(request.group_id)
        instance_id = request.group_instance_id if request.HasField("group_instance_id") else None
        if not request.group_id:
            group_error = ErrorCode.invalid_group_id
        elif group is None:
            if request.generation_id_or_member_epoch < 0:
                # A consumer without group management, or the admin client: a simple group.
                group, created = self._simple.create(request.group_id, now_ms)
                records += created
            elif request.api_version >= _GROUP_ID_NOT_FOUND_VERSION:
                group_error = ErrorCode.group_id_not_found
            else:
                group_error = ErrorCode.illegal_generation

        commit = OffsetCommitValidation(
            request.member_id,
            instance_id,
            request.generation_id_or_member_epoch,
            request.api_version,
            self.data.image,
        )
        response = pb.OffsetCommitResponse()
        expire_ms = _NO_RETENTION
        if request.api_version in _RETENTION_TIME_VERSIONS and request.retention_time_ms != _NO_RETENTION:
            expire_ms = now_ms + request.retention_time_ms
        for topic in request.topics:
            rt = response.topics.add(name=topic.name, topic_id=topic.topic_id)
            name = self._topic_name(topic.name, topic.topic_id)
            for p in topic.partitions:
                code = group_error
                if code is None and not name:
                    code = (
                        ErrorCode.unknown_topic_id if topic.topic_id else ErrorCode.unknown_topic_or_partition
                    )
                if code is None:
                    assert group is not None
                    try:
                        group.validate_offset_commit(commit, name, p.partition_index)
                    except CoordinatorError as e:
                        code = e.code
                metadata = p.committed_metadata if p.HasField("committed_metadata") else ""
                if code is None and len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                    code = ErrorCode.offset_metadata_too_large
                if code is None:
                    value = CommittedOffset(
                        offset=p.committed_offset,
                        leader_epoch=p.committed_leader_epoch,
                        metadata=metadata,
                        commit_timestamp_ms=now_ms,
                        expire_timestamp_ms=expire_ms,
                        topic_id=topic.topic_id,
                    )
                    records.append(offset_record(request.group_id, name, p.partition_index, value))
                    code = ErrorCode.none
                rt.partitions.add(partition_index=p.partition_index, error_code=code.value)
        if not any(isinstance(r.key, rpb.OffsetCommitKey) for r in records):
            records = []  # no simple group without an offset in it
        return CoordinatorResult(records=records, response=response)

    # ------------------------------------------------------------------------------ txn commit
    def txn_offset_commit(
        self, request: pb.TxnOffsetCommitRequest, now_ms: int
    ) -> CoordinatorResult[pb.TxnOffsetCommitResponse]:
        """TxnOffsetCommit v0-6 (Kafka's ``commitTransactionalOffset``): validate the member as
        ``validateTransactionalOffsetCommit`` does, then write the offsets as pending records in
        one transactional batch of the client's producer. Whether the producer is current (not
        fenced) is the upstream's to say: it refuses the batch, and that error is the answer.
        A v6 topic is named by id, resolved through the topics image (UNKNOWN_TOPIC_ID when
        the image has no such id, as Kafka's metadata cache answers it)."""
        group = self.groups.get(request.group_id)
        instance_id = request.group_instance_id if request.HasField("group_instance_id") else None
        group_error: ErrorCode | None = None
        base_sequence = self.data.transactions.next_sequence(request.producer_id, request.producer_epoch)
        by_id = request.api_version >= _TXN_TOPIC_ID_VERSION
        if not request.group_id:
            group_error = ErrorCode.invalid_group_id
        elif request.producer_id < 0 or request.producer_epoch < 0:
            group_error = ErrorCode.invalid_producer_id_mapping
        elif base_sequence is None:
            group_error = ErrorCode.invalid_producer_epoch  # an older epoch already wrote here
        elif group is None and request.generation_id >= 0:
            group_error = (
                ErrorCode.group_id_not_found if by_id else ErrorCode.illegal_generation
            )
        accepted: list[tuple[OffsetKey, rpb.OffsetCommitValue]] = []
        commit = OffsetCommitValidation(
            request.member_id,
            instance_id,
            request.generation_id,
            request.api_version,
            self.data.image,
            transactional=True,
        )
        response = pb.TxnOffsetCommitResponse()
        for topic in request.topics:
            rt = response.topics.add(name=topic.name, topic_id=topic.topic_id)
            name = self._topic_name(topic.name, topic.topic_id)
            for p in topic.partitions:
                code = group_error
                if code is None and not name:
                    code = ErrorCode.unknown_topic_id if by_id else ErrorCode.unknown_topic_or_partition
                if code is None and group is not None:
                    try:
                        group.validate_offset_commit(commit, name, p.partition_index)
                    except CoordinatorError as e:
                        # Before v6, a stale KIP-848 member epoch is ILLEGAL_GENERATION (Kafka).
                        code = (
                            ErrorCode.illegal_generation
                            if e.code is ErrorCode.stale_member_epoch and not by_id
                            else e.code
                        )
                metadata = p.committed_metadata if p.HasField("committed_metadata") else ""
                if code is None and len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                    code = ErrorCode.offset_metadata_too_large
                if code is None:
                    value = rpb.OffsetCommitValue(
                        offset=p.committed_offset,
                        leader_epoch=p.committed_leader_epoch,
                        metadata=metadata,
                        commit_timestamp_ms=now_ms,
                        expire_timestamp_ms=_NO_RETENTION,
                        topic_id=topic.topic_id,
                    )
                    accepted.append(((request.group_id, name, p.partition_index), value))
                    code = ErrorCode.none
                rt.partitions.add(partition_index=p.partition_index, error_code=code.value)
        if not accepted:
            return CoordinatorResult(response=response)
        assert base_sequence is not None
        records = [
            pending_record(
                request.producer_id,
                request.producer_epoch,
                key,
                value,
                base_sequence,
                len(accepted),
                epoch_bump=request.api_version >= TRANSACTION_V2_TXN_OFFSET_COMMIT,
            )
            for key, value in accepted
        ]
        transaction = TransactionalWrite(
            request.transactional_id, request.producer_id, request.producer_epoch, base_sequence
        )
        return CoordinatorResult(records=records, response=response, transaction=transaction)

    # ------------------------------------------------------------------------------ fetch
    def offset_fetch(
        self, request: pb.OffsetFetchRequest, now_ms: int
    ) -> CoordinatorResult[pb.OffsetFetchResponse]:
        """Read-only. Partitions without a committed offset answer -1 (as Kafka)."""
        response = pb.OffsetFetchResponse()
        for g in request.groups:
            rg = response.groups.add(group_id=g.group_id)
            group = self.groups.get(g.group_id)
            if group is not None:
                try:
                    group.validate_offset_fetch(
                        g.member_id if g.HasField("member_id") else None, g.member_epoch
                    )
                except CoordinatorError as e:
                    rg.error_code = e.code.value
                    continue
            committed = self.data.offsets.get(g.group_id, {}) if group is not None else {}
            unstable = self._unstable(g.group_id) if request.require_stable else None
            if g.all_topics:
                for name, parts in committed.items():
                    first = next(iter(parts.values()))
                    rt = rg.topics.add(name=name, topic_id=first.topic_id)
                    for index in sorted(parts):
                        rp = rt.partitions.add(partition_index=index)
                        _fill(rp, parts[index])
                        if unstable is not None and unstable(name, index):
                            _fill_unstable(rp)
                continue
            for t in g.topics:
                rt = rg.topics.add(name=t.name, topic_id=t.topic_id)
                name = self._topic_name(t.name, t.topic_id)
                parts = committed.get(name, {})
                for index in t.partition_indexes:
                    rp = rt.partitions.add(partition_index=index)
                    if not name:
                        _fill(rp, None)
                        rp.error_code = (ErrorCode.unknown_topic_id if t.topic_id else ErrorCode.none).value
                    else:
                        _fill(rp, parts.get(index))
                        if unstable is not None and unstable(name, index):
                            _fill_unstable(rp)
        return CoordinatorResult(response=response)

    def _unstable(self, group_id: str) -> Callable[[str, int], bool] | None:
        """Whether a partition of the group has pending transactional offsets (None: none has)."""
        if not self.data.transactions.open_by_key:
            return None
        return lambda topic, partition: self.data.transactions.has_pending(group_id, topic, partition)

    def _topic_name(self, name: str, topic_id: bytes) -> str:
        if name or not topic_id:
            return name
        return self.data.image.topic_name(topic_id) or ""

    # ------------------------------------------------------------------------------ delete
    def offset_delete(
        self, request: pb.OffsetDeleteRequest, now_ms: int
    ) -> CoordinatorResult[pb.OffsetDeleteResponse]:
        """OffsetDelete: not for topics the group still subscribes to (GROUP_SUBSCRIBED_TO_TOPIC)."""
        group = self.groups.get(request.group_id)
        if group is None:
            return CoordinatorResult(
                response=pb.OffsetDeleteResponse(error_code=ErrorCode.group_id_not_found.value)
            )
        try:
            group.validate_offset_delete()
        except CoordinatorError as e:
            return CoordinatorResult(response=pb.OffsetDeleteResponse(error_code=e.code.value))
        records: list[CoordinatorRecord] = []
        response = pb.OffsetDeleteResponse()
        committed = self.data.offsets.get(request.group_id, {})
        for t in request.topics:
            rt = response.topics.add(name=t.name)
            subscribed = group.is_subscribed_to_topic(t.name)
            for index in (entry.partition_index for entry in t.partitions):
                code = ErrorCode.group_subscribed_to_topic if subscribed else ErrorCode.none
                if not subscribed and index in committed.get(t.name, {}):
                    records.append(offset_record(request.group_id, t.name, index, None))
                if not subscribed:
                    records += self.data.transactions.tombstones(request.group_id, t.name, index)
                rt.partitions.add(partition_index=index, error_code=code.value)
        return CoordinatorResult(records=records, response=response)

    def delete_all_records(self, group_id: str) -> list[CoordinatorRecord]:
        """Tombstones for every offset of a group (DeleteGroups)."""
        records = [
            offset_record(group_id, topic, index, None)
            for topic, parts in self.data.offsets.get(group_id, {}).items()
            for index in parts
        ]
        for g, topic, index in list(self.data.transactions.open_by_key):
            if g == group_id:
                records += self.data.transactions.tombstones(group_id, topic, index)
        return records

    def delete_topics_records(self, topics: Collection[str]) -> list[CoordinatorRecord]:
        """Kafka's ``onPartitionsDeleted``: tombstones for every group's committed offsets of
        the deleted ``topics``, and the clearing of their pending transactional offsets. Kafka
        4.4 then answers OffsetFetch for them with no offset (-1), and a topic recreated under
        the same name starts from ``auto.offset.reset`` instead of an offset of another log."""
        records = [
            offset_record(group_id, topic, index, None)
            for group_id, by_topic in self.data.offsets.items()
            for topic in sorted(topics)
            for index in by_topic.get(topic, {})
        ]
        for group_id, topic, index in sorted(self.data.transactions.open_by_key):
            if topic in topics:
                records += self.data.transactions.tombstones(group_id, topic, index)
        return records

    # ------------------------------------------------------------------------------ expiry
    def expiry_timer(self, now_ms: int) -> ScheduleTimer:
        """The periodic retention check (offsets.retention.check.interval.ms)."""
        interval = self.config.offsets_retention_check_interval_ms
        return deadline_timer(EXPIRY_TIMER_KEY, interval, now_ms, self._expire_and_reschedule)

    def _expire_and_reschedule(self, now_ms: int) -> CoordinatorResult[None]:
        expired = self.expire_offsets(now_ms)
        return CoordinatorResult(records=expired.records, timers=[self.expiry_timer(now_ms)])

    def expire_offsets(self, now_ms: int) -> CoordinatorResult[None]:
        """Tombstone offsets past retention; delete groups left empty and without offsets.

        Kafka's rules: an offset with an explicit expire timestamp (OffsetCommit v2-4) expires
        then; otherwise once offsets.retention.minutes have passed since the group's base time
        (``Group.offset_expiration_base_ms``: for a consumer group the commit time), and
        only for topics the group no longer subscribes to.
        """
        retention = self.config.offsets_retention_ms
        records: list[CoordinatorRecord] = []
        for group_id, group in list(self.groups.items()):
            topics = self.data.offsets.get(group_id, {})
            expired_all = True
            tombstones: list[CoordinatorRecord] = []
            for topic, parts in topics.items():
                subscribed = group.is_subscribed_to_topic(topic)
                for index, committed in parts.items():
                    if subscribed or self.data.transactions.has_pending(group_id, topic, index):
                        expired_all = False
                        continue
                    if committed.expire_timestamp_ms != _NO_RETENTION:
                        expired = now_ms >= committed.expire_timestamp_ms
                    else:
                        base = group.offset_expiration_base_ms(committed.commit_timestamp_ms)
                        expired = base is not None and now_ms - base >= retention
                    if expired:
                        tombstones.append(offset_record(group_id, topic, index, None))
                    else:
                        expired_all = False
            # An empty group without offsets (all expired, or none ever) is deleted, as in
            # Kafka; deleting it tombstones its offsets, so they are not tombstoned twice.
            if expired_all and self.data.transactions.group_has_pending(group_id):
                expired_all = False  # never delete a group with an open transaction's offsets
            records += self._delete_group(group) if expired_all and group.is_empty() else tombstones
        return CoordinatorResult(records=records)


def _fill(rp: Any, committed: CommittedOffset | None) -> None:
    if committed is None:
        rp.committed_offset = -1
        rp.committed_leader_epoch = -1
        rp.metadata = ""
    else:
        rp.committed_offset = committed.offset
        rp.committed_leader_epoch = committed.leader_epoch
        rp.metadata = committed.metadata


def _fill_unstable(rp: Any) -> None:
    """A partition with pending transactional offsets under ``require_stable`` (Kafka)."""
    rp.committed_offset = -1
    rp.committed_leader_epoch = -1
    rp.metadata = ""
    rp.error_code = ErrorCode.unstable_offset_commit.value
