"""The runtime calls every hook of the CoordinatorShard Protocol directly (no probing), so the
shards it hosts must have all of them; the transactional hooks only a TransactionalShard has,
which a shard declares through ``transactions()``; the topic-metadata follower's hook only a
TopicMetadataShard has."""

from __future__ import annotations

import inspect

import pytest
import register_pb2
from register_shard import RegisterShard

from groupcoord.common.records import FIRST_OUTSIDE_TYPE_ID, STATE_TOPIC_RECORD_TYPES, RecordTypeRegistry
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import CoordinatorMetricsShard, CoordinatorShard, TransactionalShard
from groupcoord.coordinator.core.group_coordinator_shard import GroupCoordinatorShard
from groupcoord.coordinator.runtime.timers import LoopTimer
from groupcoord.coordinator.runtime.topic_metadata import TopicMetadataShard
from groupcoord.rpc.v1 import offsets_pb2


def hooks(protocol: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(protocol) if not name.startswith("_")}


def test_the_protocols_declare_the_hooks_the_runtime_calls() -> None:
    assert hooks(CoordinatorShard) == {
        "replay",
        "on_loaded",
        "transactions",
        "metrics",
        "data",
        "restore",
    }
    assert hooks(CoordinatorMetricsShard) == {"group_counts", "export", "observe_written"}
    assert hooks(TransactionalShard) == {
        "open_transactions",
        "producer_sequences",
        "after_markers",
        "transaction_stats",
    }
    assert hooks(TopicMetadataShard) - hooks(CoordinatorShard) == {"on_metadata_update"}


def test_the_register_shard_implements_every_hook_and_is_not_transactional() -> None:
    shard = RegisterShard(0, LoopTimer(lambda _event: None))
    assert all(hasattr(shard, name) for name in hooks(CoordinatorShard))
    assert all(hasattr(shard.metrics(), name) for name in hooks(CoordinatorMetricsShard))
    assert shard.transactions() is None  # so no marker follower runs for it


def test_the_group_coordinator_shard_is_transactional() -> None:
    shard = GroupCoordinatorShard(LoopTimer(lambda _event: None), GroupConfig())
    assert shard.transactions() is shard
    assert all(hasattr(shard, name) for name in hooks(TransactionalShard) | hooks(TopicMetadataShard))
    assert shard.metrics().group_counts() == {"consumer": 0, "classic": 0}
    assert shard.metrics().group_state_counts() == {"consumer": {}, "classic": {}, "share": {}, "streams": {}}


def test_the_group_coordinator_shards_group_counts_are_its_state_counts_summed() -> None:
    shard = GroupCoordinatorShard(LoopTimer(lambda _event: None), GroupConfig())
    for group in ("a", "b"):  # an offset commit with no generation creates a simple classic group
        request = offsets_pb2.OffsetCommitRequest(
            api_version=8,
            group_id=group,
            generation_id_or_member_epoch=-1,
            retention_time_ms=-1,
            topics=[
                offsets_pb2.OffsetCommitRequestTopic(
                    name="orders",
                    partitions=[
                        offsets_pb2.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)
                    ],
                )
            ],
        )
        for record in shard.offset_commit(request, 0).records:
            shard.replay(record)
    counts = shard.metrics().group_state_counts()
    assert shard.metrics().group_counts() == {kind: sum(counts[kind].values()) for kind in ("consumer", "classic")}
    assert shard.metrics().group_counts() == {"consumer": 0, "classic": 2}


def test_outside_record_types_cannot_take_the_products_ids() -> None:
    registry = RecordTypeRegistry(STATE_TOPIC_RECORD_TYPES)
    with pytest.raises(ValueError, match="the product's"):
        registry.register(FIRST_OUTSIDE_TYPE_ID - 1, register_pb2.RegisterKey, register_pb2.RegisterValue)
    registry.register(FIRST_OUTSIDE_TYPE_ID, register_pb2.RegisterKey, register_pb2.RegisterValue)
    assert registry.by_id(FIRST_OUTSIDE_TYPE_ID).key_type is register_pb2.RegisterKey
