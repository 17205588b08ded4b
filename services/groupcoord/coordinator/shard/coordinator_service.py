"""The Coordinator gRPC service (proto/groupcoord/rpc/v1/coordinator.proto) on a shard worker.

The gateway keeps one ``Coordinator.Stream`` per worker; every envelope names its partition
and carries one API request whose oneof field name is the core's handler name
(``offset_commit`` → ``shard.offset_commit(request, now_ms)``), so this module is only a
binding of the generic :class:`~.rpc.EnvelopeDispatcher` plus the list of read-only APIs —
those never wait on a partition's writes.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
from typing import Any

import grpc

from groupcoord.coordinator.core.contract import Shard, Timer
from groupcoord.coordinator.shard.rpc import EnvelopeDispatcher
from groupcoord.coordinator.shard.runtime import ShardRuntime
from groupcoord.rpc.v1 import coordinator_pb2, coordinator_pb2_grpc

READ_ONLY_APIS = frozenset(
    {
        "offset_fetch",
        "list_groups",
        "describe_groups",
        "describe_group_configs",
        "consumer_group_describe",
    }
)

GROUP_SHARD = "groupcoord.coordinator.core.group_coordinator_shard:GroupCoordinatorShard"


class CoordinatorServicer(coordinator_pb2_grpc.CoordinatorServicer):
    def __init__(self, runtime: ShardRuntime, read_only: frozenset[str] = READ_ONLY_APIS) -> None:
        self.dispatcher = EnvelopeDispatcher(runtime, coordinator_pb2.CoordinatorReply, read_only)

    async def Stream(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        async for reply in self.dispatcher.stream(request_iterator, context):
            yield reply

    async def Batches(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        def batch(replies: list[Any]) -> coordinator_pb2.CoordinatorReplyBatch:
            return coordinator_pb2.CoordinatorReplyBatch(replies=replies)

        async for reply in self.dispatcher.batches(request_iterator, context, batch):
            yield reply


def add_coordinator_service(server: grpc.aio.Server, runtime: ShardRuntime) -> None:
    coordinator_pb2_grpc.add_CoordinatorServicer_to_server(CoordinatorServicer(runtime), server)


def group_shard_factory(partition: int, timer: Timer) -> Shard:
    """Build the group cores' shard for a partition (imported on first use).

    The constructor receives whichever of ``partition``, ``timer`` and ``config`` it declares;
    the group config comes from the ``GROUPCOORD_GROUP_*`` environment (set by the operator
    from the resource's group-config defaults).
    """
    from groupcoord.coordinator.core.config import GroupConfig  # noqa: PLC0415

    module_name, cls_name = GROUP_SHARD.split(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    params = inspect.signature(cls).parameters
    offered = (("partition", partition), ("timer", timer), ("config", GroupConfig.from_env(os.environ)))
    kwargs = {k: v for k, v in offered if k in params}
    return cls(**kwargs)  # type: ignore[no-any-return]


def group_core() -> Any:
    """The ``--core group`` binding used by :mod:`.worker`."""
    from groupcoord.coordinator.shard.worker import Core  # noqa: PLC0415 - worker imports us lazily

    return Core(group_shard_factory, add_coordinator_service, background=(follow_topic_metadata,))


async def follow_topic_metadata(runtime: ShardRuntime) -> None:
    """Worker-lifetime task: keep every active partition on the upstream cluster's topics
    (ids, partition counts, racks), so KIP-848 groups rebalance when their topics change."""
    from groupcoord.coordinator.core.topics_image import TopicsImage  # noqa: PLC0415
    from groupcoord.coordinator.shard.topic_metadata import follow_topics  # noqa: PLC0415

    refresher = follow_topics(runtime, TopicsImage.from_descriptions)
    refresher.start()
    try:
        await asyncio.Event().wait()
    finally:
        await refresher.stop()
