"""The state topic's record types: every type id in one table.

A record on the state topic is a (key, value) pair of protobuf messages (schemas under
``proto/groupcoord/records/v1``); the serialized key starts with a 2-byte type id naming the
message types, so the loader, the standby tail and the coordinator shards all decode a record
the same way. The ids are part of the on-disk format, which is why they live in one table here rather
than next to each model: a reader sees at once which ids are taken, and a collision is a
failure at import, not a corrupted partition. Never reuse or renumber an id.

Ranges: 0-19 consumer groups (KIP-848), 20-39 classic groups, offsets, group configs and
adoption decisions,
40-59 the runtime (leadership/fencing markers), 60-79 share groups (KIP-932), 80-99 streams
groups (KIP-1071). Ids from :data:`FIRST_OUTSIDE_TYPE_ID` are
never the product's: state machines outside it (the runtime's tests) register their own types
there (``RecordTypeRegistry.register``, which refuses a lower id, so an outside registration can
never take an id the product may give out later).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from google.protobuf.message import Message

from groupcoord.records.v1 import classic_group_pb2 as classic
from groupcoord.records.v1 import consumer_group_pb2 as consumer
from groupcoord.records.v1 import offsets_pb2 as offsets
from groupcoord.records.v1 import runtime_pb2 as runtime
from groupcoord.records.v1 import share_group_pb2 as share
from groupcoord.records.v1 import streams_group_pb2 as streams


@dataclass(frozen=True, slots=True)
class RecordType:
    type_id: int
    key_type: type[Message]
    value_type: type[Message]


FIRST_OUTSIDE_TYPE_ID = 1000
LEADER_EPOCH_TYPE_ID = 40
PENDING_TXN_OFFSET_TYPE_ID = 27
TXN_MARKER_TYPE_ID = 28  # synthesized by the log reader from control batches, never written

STATE_TOPIC_RECORD_TYPES: tuple[RecordType, ...] = (
    RecordType(0, consumer.ConsumerGroupMetadataKey, consumer.ConsumerGroupMetadataValue),
    RecordType(1, consumer.ConsumerGroupMemberMetadataKey, consumer.ConsumerGroupMemberMetadataValue),
    RecordType(
        2,
        consumer.ConsumerGroupTargetAssignmentMetadataKey,
        consumer.ConsumerGroupTargetAssignmentMetadataValue,
    ),
    RecordType(
        3, consumer.ConsumerGroupTargetAssignmentMemberKey, consumer.ConsumerGroupTargetAssignmentMemberValue
    ),
    RecordType(
        4,
        consumer.ConsumerGroupCurrentMemberAssignmentKey,
        consumer.ConsumerGroupCurrentMemberAssignmentValue,
    ),
    RecordType(5, consumer.ConsumerGroupRegularExpressionKey, consumer.ConsumerGroupRegularExpressionValue),
    RecordType(20, classic.ClassicGroupMetadataKey, classic.ClassicGroupMetadataValue),
    RecordType(21, classic.ClassicGroupMemberKey, classic.ClassicGroupMemberValue),
    RecordType(22, classic.ClassicGroupPendingMemberKey, classic.ClassicGroupPendingMemberValue),
    RecordType(25, offsets.OffsetCommitKey, offsets.OffsetCommitValue),
    RecordType(26, offsets.GroupConfigKey, offsets.GroupConfigValue),
    RecordType(PENDING_TXN_OFFSET_TYPE_ID, offsets.PendingTxnOffsetKey, offsets.PendingTxnOffsetValue),
    RecordType(TXN_MARKER_TYPE_ID, offsets.TxnMarkerKey, offsets.TxnMarkerValue),
    RecordType(29, offsets.GroupAdoptionKey, offsets.GroupAdoptionValue),
    RecordType(LEADER_EPOCH_TYPE_ID, runtime.LeaderEpochKey, runtime.LeaderEpochValue),
    RecordType(60, share.SharePartitionStateKey, share.SharePartitionStateValue),
    RecordType(61, share.ShareGroupMetadataKey, share.ShareGroupMetadataValue),
    RecordType(62, share.ShareGroupMemberKey, share.ShareGroupMemberValue),
    RecordType(63, share.ShareGroupTargetAssignmentMetadataKey, share.ShareGroupTargetAssignmentMetadataValue),
    RecordType(64, share.ShareGroupTargetAssignmentMemberKey, share.ShareGroupTargetAssignmentMemberValue),
    RecordType(80, streams.StreamsGroupMetadataKey, streams.StreamsGroupMetadataValue),
    RecordType(81, streams.StreamsGroupTopologyKey, streams.StreamsGroupTopologyValue),
    RecordType(82, streams.StreamsGroupMemberMetadataKey, streams.StreamsGroupMemberMetadataValue),
    RecordType(
        83, streams.StreamsGroupCurrentMemberAssignmentKey, streams.StreamsGroupCurrentMemberAssignmentValue
    ),
    RecordType(
        84, streams.StreamsGroupTargetAssignmentMetadataKey, streams.StreamsGroupTargetAssignmentMetadataValue
    ),
    RecordType(
        85, streams.StreamsGroupTargetAssignmentMemberKey, streams.StreamsGroupTargetAssignmentMemberValue
    ),
)


class RecordTypeRegistry:
    """Type id ↔ (key type, value type), both ways."""

    def __init__(self, types: Iterable[RecordType] = ()) -> None:
        self._by_id: dict[int, RecordType] = {}
        self._by_key: dict[type[Message], RecordType] = {}
        for rt in types:
            self._add(rt.type_id, rt.key_type, rt.value_type)

    def register(self, type_id: int, key_type: type[Message], value_type: type[Message]) -> None:
        """Add a type outside the production table (see the module docstring)."""
        if type_id < FIRST_OUTSIDE_TYPE_ID:
            raise ValueError(
                f"record type id {type_id} is the product's: outside types start at {FIRST_OUTSIDE_TYPE_ID}"
            )
        self._add(type_id, key_type, value_type)

    def _add(self, type_id: int, key_type: type[Message], value_type: type[Message]) -> None:
        existing = self._by_id.get(type_id)
        if existing is not None and existing.key_type is not key_type:
            raise ValueError(f"record type id {type_id} already used by {existing.key_type.__name__}")
        rt = RecordType(type_id, key_type, value_type)
        self._by_id[type_id] = rt
        self._by_key[key_type] = rt

    def by_id(self, type_id: int) -> RecordType:
        return self._by_id[type_id]

    def by_key(self, key_type: type[Message]) -> RecordType:
        return self._by_key[key_type]


RECORD_TYPES = RecordTypeRegistry(STATE_TOPIC_RECORD_TYPES)
