"""The Coordinator gRPC service (proto/groupcoord/rpc/v1/coordinator.proto) on a shard worker.

The gateway keeps a few ``Coordinator.Batches`` streams per worker; every envelope names its
partition and carries one API request. The one table from the envelope's oneof field to the
typed operation that runs on the partition's coordinator shard is the shard's
(:data:`groupcoord.coordinator.core.group_operations.OPERATIONS`, derived from the group APIs'
declarations); this module binds it, the shard factory and the topic-metadata follower to a
worker.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import grpc

from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import ArmedTimers, CoordinatorShard
from groupcoord.coordinator.core.group_coordinator_shard import GroupCoordinatorShard
from groupcoord.coordinator.core.group_operations import OPERATIONS
from groupcoord.coordinator.runtime.worker_runtime import WorkerRuntime
from groupcoord.coordinator.server.envelopes import EnvelopeDispatcher
from groupcoord.coordinator.server.hosted_shards import HostedShards
from groupcoord.rpc.v1 import coordinator_pb2, coordinator_pb2_grpc

AUDITED = frozenset({"delete_groups", "offset_delete", "alter_group_configs"})
"""The group-admin operations a worker logs with the client principal of their envelope."""


class CoordinatorServicer(coordinator_pb2_grpc.CoordinatorServicer):
    def __init__(self, runtime: WorkerRuntime) -> None:
        self.dispatcher = EnvelopeDispatcher(
            runtime, coordinator_pb2.CoordinatorReply, OPERATIONS, audited=AUDITED
        )

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
