"""gRPC message limits between the gateway and the shards: a request larger than gRPC's
default 4 MiB (any legal Kafka request may be up to socket.request.max.bytes) gets its own
answer and never breaks the stream other groups share."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from groupcoord.common import grpc_limits
from groupcoord.rpc.v1 import offsets_pb2
from groupcoord.rpc.v1.coordinator_pb2 import CoordinatorEnvelope as Envelope
from groupcoord_testing import BackgroundCluster

pytestmark = pytest.mark.broker


def commit(group: str, partitions: int, topic: str = "orders") -> Envelope:
    request = offsets_pb2.OffsetCommitRequest(api_version=8, group_id=group, generation_id_or_member_epoch=-1)
    t = request.topics.add(name=topic)
    for i in range(partitions):
        t.partitions.add(partition_index=i, committed_offset=(1 << 40) + i, committed_leader_epoch=-1)
    return Envelope(offset_commit=request)


def test_an_offset_commit_of_200000_partitions_fails_alone_beside_a_healthy_group(
    cluster: BackgroundCluster,
) -> None:
    """Both groups on the same state partition, so on the same gRPC stream."""
    apis = cluster.gateway.group_handler
    healthy = f"healthy-{uuid.uuid4().hex[:6]}"
    partition = apis.leadership.partition_of(healthy)
    huge = next(
        g for i in range(100_000) if apis.leadership.partition_of(g := f"huge-{i}-{healthy}") == partition
    )
    big = commit(huge, 200_000)
    assert big.ByteSize() > 4 * 1024 * 1024  # over gRPC's default message size

    async def scenario() -> tuple[object, list[object]]:
        async def healthy_commits() -> list[object]:
            replies = []
            for _ in range(20):
                replies.append(await apis.call_partition(partition, commit(healthy, 3)))
                await asyncio.sleep(0.01)
            return replies

        return await asyncio.gather(apis.call_partition(partition, big), healthy_commits())

    big_reply, healthy_replies = cluster.run(scenario())
    # Kafka's coordinator refuses records over one batch: RecordTooLargeException, answered
    # UNKNOWN_SERVER_ERROR for this request only
    assert big_reply.error_code == -1, big_reply
    assert all(r.error_code == 0 for r in healthy_replies), [r.error_message for r in healthy_replies]
    assert all(p.error_code == 0 for r in healthy_replies for t in r.response.topics for p in t.partitions)


def test_an_envelope_over_the_message_limit_is_refused_before_it_is_sent(cluster: BackgroundCluster) -> None:
    from groupcoord.gateway.groups.worker_client import WorkerClient  # noqa: PLC0415

    apis = cluster.gateway.group_handler
    group = f"g-{uuid.uuid4().hex[:6]}"
    partition = apis.leadership.partition_of(group)
    address = apis.leadership.address_of(partition)

    async def scenario() -> tuple[object, object]:
        client = WorkerClient(max_message_bytes=64 * 1024, tls=apis.shards.tls)
        try:
            big, small = commit(group, 20_000), commit(group, 2)
            big.partition = small.partition = partition
            return await asyncio.gather(client.call(address, big), client.call(address, small))
        finally:
            await client.close()

    refused, fine = cluster.run(scenario())
    assert refused.error_code == -1 and "exceeds" in refused.error_message
    assert fine.error_code == 0


def test_batches_are_packed_under_the_limit_in_order() -> None:
    envelopes = [commit(f"g{i}", 100 * (i % 7)) for i in range(50)]
    limit = 4096
    batches = list(grpc_limits.packed(envelopes, limit))
    assert [e for b in batches for e in b] == envelopes
    for b in batches:
        assert len(b) == 1 or sum(e.ByteSize() + grpc_limits.PER_ITEM_OVERHEAD for e in b) <= limit
