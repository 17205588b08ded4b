"""What a partition writes, counted for the metrics: offset tombstones a timer writes are
retention expiries, the others deletions (the group cores on a real runtime and broker)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from prometheus_client import CollectorRegistry

from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import ArmedTimers, CoordinatorShard
from groupcoord.coordinator.core.group_coordinator_shard import GroupCoordinatorShard
from groupcoord.coordinator.core.group_operations import OPERATIONS
from groupcoord.coordinator.runtime.statelog import ensure_topic
from groupcoord.coordinator.runtime.worker_runtime import WorkerRuntime
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.observability.shard_metrics import ShardMetrics
from groupcoord.rpc.v1 import offsets_pb2 as pb

pytestmark = pytest.mark.broker

RETENTION_MS = 300  # offsets.retention.minutes, shrunk so the test sees an expiry


def _short_retention(partition: int, armed: ArmedTimers) -> CoordinatorShard:
    config = GroupConfig(offsets_retention_ms=RETENTION_MS, offsets_retention_check_interval_ms=100)
    return GroupCoordinatorShard(armed, config, partition=partition)


def _commit(group: str, partitions: list[int]) -> object:
    return OPERATIONS["offset_commit"](
        pb.OffsetCommitRequest(
            api_version=8,
            group_id=group,
            generation_id_or_member_epoch=-1,
            retention_time_ms=-1,
            topics=[
                pb.OffsetCommitRequestTopic(
                    name="orders",
                    partitions=[
                        pb.OffsetCommitRequestPartition(partition_index=p, committed_offset=10)
                        for p in partitions
                    ],
                )
            ],
        )
    )


async def test_expired_offsets_count_as_expirations_and_deleted_ones_as_deletions(
    broker: EmbeddedBroker,
) -> None:
    topic = f"state-{uuid.uuid4().hex[:8]}"
    await ensure_topic(broker.bootstrap, topic, 1)
    registry = CollectorRegistry()
    rt = WorkerRuntime(
        bootstrap=broker.bootstrap,
        topic=topic,
        partitions=1,
        shard_factory=_short_retention,
        metrics=ShardMetrics("0", registry),
    )

    def counted(name: str) -> float:
        return registry.get_sample_value(f"groupcoord_offset_{name}_total", {"shard": "0"}) or 0.0

    await rt.start()
    try:
        await rt.become_leader(0, 1)
        await rt.submit(0, _commit("expiring", [0, 1]))
        for _ in range(100):  # retention 300 ms, checked every 100 ms
            if counted("expiration") == 2:
                break
            await asyncio.sleep(0.05)
        assert counted("expiration") == 2 and counted("deletion") == 0

        await rt.submit(0, _commit("kept", [0]))
        delete = pb.OffsetDeleteRequest(
            api_version=0,
            group_id="kept",
            topics=[
                pb.OffsetDeleteRequestTopic(
                    name="orders", partitions=[pb.OffsetDeleteRequestPartition(partition_index=0)]
                )
            ],
        )
        response = await rt.submit(0, OPERATIONS["offset_delete"](delete))
        assert response.error_code == 0
        assert counted("deletion") == 1 and counted("expiration") == 2
        assert counted("commit") == 3
    finally:
        await rt.close()
