"""The Coordinator gRPC service (proto/groupcoord/rpc/v1/coordinator.proto) on a shard worker.

The gateway keeps a few ``Coordinator.Batches`` streams per worker; every envelope names its
partition and carries one API request. :data:`OPERATIONS` is the one table from the envelope's
oneof field to the typed operation that runs on the partition's coordinator shard, derived from
the group APIs' declarations (:mod:`groupcoord.common.group_api_declarations`): the shard
handler of each API is registered here against its declaration, which names the field and says
whether the operation reads or writes.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from groupcoord.common.group_api_declarations import SHARD_APIS, GroupApi, registered
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import (
    ArmedTimers,
    CoordinatorOperation,
    CoordinatorResult,
    CoordinatorShard,
    Token,
    read_operation,
    write_operation,
)
from groupcoord.coordinator.core.group_coordinator_shard import GroupCoordinatorShard
from groupcoord.coordinator.runtime.worker_runtime import WorkerRuntime
from groupcoord.coordinator.server.envelopes import EnvelopeDispatcher
from groupcoord.coordinator.server.hosted_shards import HostedShards
from groupcoord.rpc.v1 import coordinator_pb2, coordinator_pb2_grpc

Operation = Callable[[Any], CoordinatorOperation[GroupCoordinatorShard, Any]]


@dataclass(frozen=True, slots=True)
class ShardHandler:
    """What a group API's operation does on the partition's coordinator shard: ``run(shard,
    request, now_ms, token)``; for a write, ``needs_markers(shard, request)`` when it must first
    see every transaction marker already in the log (see :class:`CoordinatorOperation`)."""

    run: Callable[[GroupCoordinatorShard, Any, int, Token], CoordinatorResult[Any]]
    needs_markers: Callable[[GroupCoordinatorShard, Any], bool] | None = None


def _operation(api: GroupApi, handler: ShardHandler) -> tuple[str, Operation]:
    """(oneof field, operation of one request) for ``api``: named and made a read or a write as
    declared (Kafka's ``scheduleReadOperation`` / ``scheduleWriteOperation``)."""
    if api.operation is None:
        raise ValueError(f"{api.key.name} is declared without a shard operation")
    name, run, needs_markers = api.operation.name, handler.run, handler.needs_markers
    if api.operation.read_only:
        if needs_markers is not None:  # a read never waits on the log: the declaration is wrong
            raise ValueError(f"{api.key.name} is declared read-only but its handler needs markers")
        return name, lambda r: read_operation(name, lambda s, now, token: run(s, r, now, token))
    if needs_markers is None:
        return name, lambda r: write_operation(name, lambda s, now, token: run(s, r, now, token))
    return name, lambda r: write_operation(
        name, lambda s, now, token: run(s, r, now, token), lambda s: needs_markers(s, r)
    )


OPERATIONS: dict[str, Operation] = dict(
    _operation(api, handler)
    for api, handler in registered(
        "shard operation",
        {
            ApiKey.OFFSET_COMMIT: ShardHandler(lambda s, r, now, _: s.offset_commit(r, now)),
            ApiKey.OFFSET_FETCH: ShardHandler(lambda s, r, now, _: s.offset_fetch(r, now)),
            ApiKey.JOIN_GROUP: ShardHandler(lambda s, r, now, token: s.join_group(r, now, token)),
            ApiKey.HEARTBEAT: ShardHandler(lambda s, r, now, _: s.heartbeat(r, now)),
            ApiKey.LEAVE_GROUP: ShardHandler(lambda s, r, now, _: s.leave_group(r, now)),
            ApiKey.SYNC_GROUP: ShardHandler(lambda s, r, now, token: s.sync_group(r, now, token)),
            ApiKey.DESCRIBE_GROUPS: ShardHandler(lambda s, r, now, _: s.describe_groups(r, now)),
            ApiKey.LIST_GROUPS: ShardHandler(lambda s, r, now, _: s.list_groups(r, now)),
            ApiKey.TXN_OFFSET_COMMIT: ShardHandler(
                lambda s, r, now, _: s.txn_offset_commit(r, now),
                lambda s, r: s.has_pending_transaction(r.producer_id),
            ),
            ApiKey.DESCRIBE_CONFIGS: ShardHandler(lambda s, r, now, _: s.describe_group_configs(r, now)),
            ApiKey.DELETE_GROUPS: ShardHandler(lambda s, r, now, _: s.delete_groups(r, now)),
            ApiKey.INCREMENTAL_ALTER_CONFIGS: ShardHandler(
                lambda s, r, now, _: s.alter_group_configs(r, now)
            ),
            ApiKey.OFFSET_DELETE: ShardHandler(lambda s, r, now, _: s.offset_delete(r, now)),
            ApiKey.CONSUMER_GROUP_HEARTBEAT: ShardHandler(
                lambda s, r, now, _: s.consumer_group_heartbeat(r, now)
            ),
            ApiKey.CONSUMER_GROUP_DESCRIBE: ShardHandler(
                lambda s, r, now, _: s.consumer_group_describe(r, now)
            ),
            ApiKey.SHARE_GROUP_HEARTBEAT: ShardHandler(lambda s, r, now, _: s.share_group_heartbeat(r, now)),
            ApiKey.SHARE_GROUP_DESCRIBE: ShardHandler(lambda s, r, now, _: s.share_group_describe(r, now)),
            ApiKey.SHARE_FETCH: ShardHandler(lambda s, r, now, _: s.share_delivery(r, now)),
            ApiKey.SHARE_ACKNOWLEDGE: ShardHandler(lambda s, r, now, _: s.share_delivery(r, now)),
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: ShardHandler(
                lambda s, r, now, _: s.describe_share_group_offsets(r, now)
            ),
            ApiKey.ALTER_SHARE_GROUP_OFFSETS: ShardHandler(lambda s, r, now, _: s.alter_share_group_offsets(r, now)),
            ApiKey.DELETE_SHARE_GROUP_OFFSETS: ShardHandler(lambda s, r, now, _: s.delete_share_group_offsets(r, now)),
        },
        SHARD_APIS,
    )
)
"""The Coordinator service's oneof field → the operation on the partition's coordinator shard,
one per group API declared with a shard operation (its name is the oneof field; declared reads
never wait on a write)."""


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
