"""The Coordinator gRPC service (proto/groupcoord/rpc/v1/coordinator.proto) on a shard worker.

The gateway keeps a few ``Coordinator.Batches`` streams per worker; every envelope names its
partition and carries one API request. :data:`OPERATIONS` is the one table from the envelope's
oneof field to the typed operation that runs on the partition's coordinator shard.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

import grpc

from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import (
    ArmedTimers,
    CoordinatorOperation,
    CoordinatorShard,
    read_operation,
    write_operation,
)
from groupcoord.coordinator.core.group_coordinator_shard import GroupCoordinatorShard
from groupcoord.coordinator.runtime.worker_runtime import WorkerRuntime
from groupcoord.coordinator.server.envelopes import EnvelopeDispatcher
from groupcoord.coordinator.server.hosted_shards import HostedShards
from groupcoord.rpc.v1 import coordinator_pb2, coordinator_pb2_grpc

Operation = Callable[[Any], CoordinatorOperation[GroupCoordinatorShard, Any]]
OPERATIONS: dict[str, Operation] = {
    # Writes: answered once their records are written and confirmed.
    "join_group": lambda r: write_operation("join_group", lambda s, now, token: s.join_group(r, now, token)),
    "sync_group": lambda r: write_operation("sync_group", lambda s, now, token: s.sync_group(r, now, token)),
    "heartbeat": lambda r: write_operation("heartbeat", lambda s, now, _: s.heartbeat(r, now)),
    "leave_group": lambda r: write_operation("leave_group", lambda s, now, _: s.leave_group(r, now)),
    "offset_commit": lambda r: write_operation("offset_commit", lambda s, now, _: s.offset_commit(r, now)),
    "offset_delete": lambda r: write_operation("offset_delete", lambda s, now, _: s.offset_delete(r, now)),
    "txn_offset_commit": lambda r: write_operation(
        "txn_offset_commit",
        lambda s, now, _: s.txn_offset_commit(r, now),
        lambda s: s.has_pending_transaction(r.producer_id),
    ),
    "delete_groups": lambda r: write_operation("delete_groups", lambda s, now, _: s.delete_groups(r, now)),
    "alter_group_configs": lambda r: write_operation(
        "alter_group_configs", lambda s, now, _: s.alter_group_configs(r, now)
    ),
    "consumer_group_heartbeat": lambda r: write_operation(
        "consumer_group_heartbeat", lambda s, now, _: s.consumer_group_heartbeat(r, now)
    ),
    # Reads: never wait on a write.
    "offset_fetch": lambda r: read_operation("offset_fetch", lambda s, now, _: s.offset_fetch(r, now)),
    "list_groups": lambda r: read_operation("list_groups", lambda s, now, _: s.list_groups(r, now)),
    "describe_groups": lambda r: read_operation(
        "describe_groups", lambda s, now, _: s.describe_groups(r, now)
    ),
    "describe_group_configs": lambda r: read_operation(
        "describe_group_configs", lambda s, now, _: s.describe_group_configs(r, now)
    ),
    "consumer_group_describe": lambda r: read_operation(
        "consumer_group_describe", lambda s, now, _: s.consumer_group_describe(r, now)
    ),
}
"""The Coordinator service's oneof field → the operation on the partition's coordinator shard
(Kafka's ``scheduleWriteOperation`` / ``scheduleReadOperation`` per API). Reads never wait on
a write."""


class CoordinatorServicer(coordinator_pb2_grpc.CoordinatorServicer):
    def __init__(self, runtime: WorkerRuntime) -> None:
        self.dispatcher = EnvelopeDispatcher(runtime, coordinator_pb2.CoordinatorReply, OPERATIONS)

    async def Batches(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        def batch(replies: list[Any]) -> coordinator_pb2.CoordinatorReplyBatch:
            return coordinator_pb2.CoordinatorReplyBatch(replies=replies)

        async for reply in self.dispatcher.batches(request_iterator, context, batch):
            yield reply


def add_coordinator_service(server: grpc.aio.Server, runtime: WorkerRuntime) -> None:
    coordinator_pb2_grpc.add_CoordinatorServicer_to_server(CoordinatorServicer(runtime), server)


def group_shard_factory(partition: int, armed: ArmedTimers) -> CoordinatorShard:
    """The coordinator shard of one partition; group config from the ``GROUPCOORD_GROUP_*``
    environment (set by the operator from the resource's group-config defaults)."""
    return GroupCoordinatorShard(armed, GroupConfig.from_env(os.environ), partition=partition)


async def follow_topic_metadata(runtime: WorkerRuntime) -> None:
    """Worker-lifetime task: keep every active partition on the upstream cluster's topics
    (ids, partition counts, racks), so KIP-848 groups rebalance when their topics change."""
    from groupcoord.coordinator.core.topics_image import TopicsImage  # noqa: PLC0415
    from groupcoord.coordinator.runtime.topic_metadata import follow_topics  # noqa: PLC0415

    refresher = follow_topics(runtime, TopicsImage.from_descriptions)
    refresher.start()
    try:
        await asyncio.Event().wait()
    finally:
        await refresher.stop()


GROUP_COORDINATOR = HostedShards(
    group_shard_factory, add_coordinator_service, background=(follow_topic_metadata,)
)
"""What the product's workers host: the group coordinator's shards behind the Coordinator service."""
