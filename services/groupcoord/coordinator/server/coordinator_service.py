"""The Coordinator gRPC service (proto/groupcoord/rpc/v1/coordinator.proto) on a shard worker.

The gateway keeps a few ``Coordinator.Batches`` streams per worker; every envelope names its
partition and carries one API request. The one table from the envelope's oneof field to the
typed operation that runs on the partition's coordinator shard is the shard's
(:data:`groupcoord.coordinator.core.group_operations.OPERATIONS`, derived from the group APIs'
declarations); this module binds it, the shard factory and the topic-metadata follower to a
worker.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Collection, Coroutine
from typing import Any

import grpc

from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import ArmedTimers, CoordinatorShard
from groupcoord.coordinator.core.group_coordinator_shard import GroupCoordinatorShard
from groupcoord.coordinator.core.group_operations import OPERATIONS
from groupcoord.coordinator.runtime.topic_metadata import TopicMetadataRefresher, follow_topics
from groupcoord.coordinator.runtime.worker_runtime import WorkerRuntime
from groupcoord.coordinator.server.assignor_plugins import UnknownAssignor, consumer_assignors
from groupcoord.coordinator.server.envelopes import EnvelopeDispatcher
from groupcoord.coordinator.server.hosted_shards import HostedShards
from groupcoord.rpc.v1 import coordinator_pb2, coordinator_pb2_grpc

AUDITED = frozenset({"delete_groups", "offset_delete", "alter_group_configs"})
"""The group-admin operations a worker logs with the client principal of their envelope."""


def _subscribed(request: Any) -> Collection[str]:
    # Only a heartbeat that sets its subscription carries the field (a join, a change): a
    # steady heartbeat costs one comparison here.
    return request.subscribed_topic_names.names if request.HasField("subscribed_topic_names") else ()


def _topology_sources(request: Any) -> Collection[str]:
    # Only a joining streams member sends its topology.
    if not request.HasField("topology"):
        return ()
    return [topic for sub in request.topology.subtopologies for topic in sub.source_topics]


NAMED_TOPICS: dict[str, Callable[[Any], Collection[str]]] = {
    "consumer_group_heartbeat": _subscribed,
    "share_group_heartbeat": _subscribed,
    "streams_group_heartbeat": _topology_sources,
    # kafka-share-groups.sh --reset-offsets of a topic created a moment ago (Kafka 4.4 sets it)
    "alter_share_group_offsets": lambda request: [t.topic_name for t in request.topics],
}
"""The requests that wait for the topics they name when the shard's image lacks one, by what
they name (see :meth:`~groupcoord.coordinator.runtime.topic_metadata.TopicMetadataRefresher.lacking`)."""


def _ids_only(request: Any) -> Collection[bytes]:
    return [t.topic_id for t in request.topics if t.topic_id and not t.name]


NAMED_TOPIC_IDS: dict[str, Callable[[Any], Collection[bytes]]] = {
    # OffsetCommit v10 and TxnOffsetCommit v6 (KIP-1319) of a topic created a moment ago: its
    # id came from the upstream's metadata, which Kafka's own coordinator shares
    "offset_commit": _ids_only,
    "txn_offset_commit": _ids_only,
}
"""The requests that wait for the topics they name by id only when the shard's image lacks one."""


class CoordinatorServicer(coordinator_pb2_grpc.CoordinatorServicer):
    def __init__(self, runtime: WorkerRuntime, topics: TopicMetadataRefresher | None = None) -> None:
        def hold(api: str, request: Any) -> Awaitable[None] | None:
            if topics is None:
                return None
            named, by_id = NAMED_TOPICS.get(api), NAMED_TOPIC_IDS.get(api)
            names = named(request) if named is not None else ()
            ids = by_id(request) if by_id is not None else ()
            return topics.lacking(names, ids) if names or ids else None

        self.dispatcher = EnvelopeDispatcher(
            runtime, coordinator_pb2.CoordinatorReply, OPERATIONS, audited=AUDITED, hold=hold
        )

    async def Batches(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        def batch(replies: list[Any]) -> coordinator_pb2.CoordinatorReplyBatch:
            return coordinator_pb2.CoordinatorReplyBatch(replies=replies)

        async for reply in self.dispatcher.batches(request_iterator, context, batch):
            yield reply


def add_coordinator_service(
    server: grpc.aio.Server, runtime: WorkerRuntime
) -> tuple[Coroutine[Any, Any, None], ...]:
    """The Coordinator service on ``server``, and the worker-lifetime task it needs: the
    follower of the upstream cluster's topics (ids, partition counts, racks) that keeps every
    active partition on them, so KIP-848 groups rebalance when their topics change, and that
    the service asks at once for topics a subscription names and the image lacks."""
    from groupcoord.coordinator.core.topics_image import TopicsImage  # noqa: PLC0415

    hidden = runtime.coordinator_topics
    topics = follow_topics(runtime, lambda found: TopicsImage.from_descriptions(found, hidden))
    coordinator_pb2_grpc.add_CoordinatorServicer_to_server(CoordinatorServicer(runtime, topics), server)
    return (topics.run(),)


def check_consumer_assignors(command: str = "groupcoord shard") -> None:
    """Stop ``command``, with one line, when the configured assignors name one that is
    neither built in nor installed: before its workers start, not at a partition's load
    (``groupcoord shard`` runs it as GROUP_COORDINATOR's check; ``groupcoord up`` before
    it starts the shard processes, whose errors it does not show)."""
    try:
        consumer_assignors(GroupConfig.from_env(os.environ).consumer_group_assignors)
    except UnknownAssignor as exc:
        raise SystemExit(f"{command}: {exc}") from None


def group_shard_factory(partition: int, armed: ArmedTimers) -> CoordinatorShard:
    """The coordinator shard of one partition; group config from the ``GROUPCOORD_GROUP_*``
    environment (set by the operator from the resource's group-config defaults), and its
    consumer groups' assignors, built in or installed plugins."""
    config = GroupConfig.from_env(os.environ)
    assignors = consumer_assignors(config.consumer_group_assignors)
    return GroupCoordinatorShard(armed, config, partition=partition, assignors=assignors)


GROUP_COORDINATOR = HostedShards(group_shard_factory, add_coordinator_service, check_consumer_assignors)
"""What the product's workers host: the group coordinator's shards behind the Coordinator service."""
