"""The Coordinator gRPC service on a worker, hosting a small offsets shard of the test's own.

The shard implements ``offset_commit`` / ``offset_fetch`` on the register records (a real shard
following the contract), so the service path — envelope in, partition loop, confirmed write,
reply out by correlation id — is proven without the group coordinator.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import grpc
import pytest
from kio.schema.errors import ErrorCode
from register_pb2 import RegisterKey, RegisterValue
from register_shard import RegisterShard

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.contract import CoordinatorRecord, CoordinatorResult
from groupcoord.coordinator.runtime.statelog import ensure_topic
from groupcoord.coordinator.runtime.worker_runtime import WorkerRuntime
from groupcoord.coordinator.server.coordinator_service import add_coordinator_service
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.rpc.v1 import coordinator_pb2, coordinator_pb2_grpc, offsets_pb2

pytestmark = pytest.mark.broker


class OffsetsShard(RegisterShard):
    """Committed offsets kept as registers named ``group/topic/partition``."""

    def offset_commit(self, req: offsets_pb2.OffsetCommitRequest, now_ms: int) -> CoordinatorResult:
        if not req.group_id:
            raise CoordinatorError(ErrorCode.invalid_group_id)
        records, topics = [], []
        for t in req.topics:
            out = offsets_pb2.OffsetCommitResponseTopic(name=t.name)
            for p in t.partitions:
                name = f"{req.group_id}/{t.name}/{p.partition_index}"
                records.append(
                    CoordinatorRecord(RegisterKey(name=name), RegisterValue(value=p.committed_offset))
                )
                out.partitions.add(partition_index=p.partition_index)
            topics.append(out)
        return CoordinatorResult(records, offsets_pb2.OffsetCommitResponse(topics=topics))

    def offset_fetch(self, req: offsets_pb2.OffsetFetchRequest, now_ms: int) -> CoordinatorResult:
        resp = offsets_pb2.OffsetFetchResponse()
        for g in req.groups:
            group = resp.groups.add(group_id=g.group_id)
            for t in g.topics:
                topic = group.topics.add(name=t.name)
                for p in t.partition_indexes:
                    offset = self.values.get(f"{g.group_id}/{t.name}/{p}", -1)
                    topic.partitions.add(partition_index=p, committed_offset=offset)
        return CoordinatorResult([], resp)


def serve_offsets(server: grpc.aio.Server, runtime: WorkerRuntime) -> None:
    """The Coordinator service on ``server``, without the worker-lifetime topic follower it
    hands back: these tests commit and fetch offsets, which need no topics image."""
    for lifetime in add_coordinator_service(server, runtime):
        lifetime.close()


@pytest.fixture
async def stub(broker: EmbeddedBroker) -> AsyncIterator[coordinator_pb2_grpc.CoordinatorStub]:
    topic = f"state-{uuid.uuid4().hex[:8]}"
    await ensure_topic(broker.bootstrap, topic, 2)
    runtime = WorkerRuntime(bootstrap=broker.bootstrap, topic=topic, partitions=2, shard_factory=OffsetsShard)
    await runtime.start()
    await runtime.become_leader(0, 1)
    server = grpc.aio.server()
    serve_offsets(server, runtime)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield coordinator_pb2_grpc.CoordinatorStub(channel)
    await server.stop(grace=None)
    await runtime.close()


def commit(cid: int, group: str, offset: int, partition: int = 0) -> coordinator_pb2.CoordinatorEnvelope:
    return coordinator_pb2.CoordinatorEnvelope(
        correlation_id=cid,
        partition=partition,
        offset_commit=offsets_pb2.OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=-1,
            topics=[
                offsets_pb2.OffsetCommitRequestTopic(
                    name="orders",
                    partitions=[
                        offsets_pb2.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)
                    ],
                )
            ],
        ),
    )


def fetch(cid: int, group: str) -> coordinator_pb2.CoordinatorEnvelope:
    return coordinator_pb2.CoordinatorEnvelope(
        correlation_id=cid,
        partition=0,
        offset_fetch=offsets_pb2.OffsetFetchRequest(
            groups=[
                offsets_pb2.OffsetFetchRequestGroup(
                    group_id=group,
                    topics=[offsets_pb2.OffsetFetchRequestTopic(name="orders", partition_indexes=[0])],
                )
            ]
        ),
    )


async def call(
    stub: coordinator_pb2_grpc.CoordinatorStub, envelopes: list[coordinator_pb2.CoordinatorEnvelope]
) -> dict[int, coordinator_pb2.CoordinatorReply]:
    """Send ``envelopes`` as one batch on a ``Batches`` stream (as the gateway does); every
    reply, by correlation id."""
    batches = stub.Batches(iter([coordinator_pb2.CoordinatorBatch(envelopes=envelopes)]))
    return {r.correlation_id: r async for batch in batches for r in batch.replies}


async def test_pipelined_commits_then_fetch_over_one_stream(stub) -> None:
    envelopes = [commit(i, f"g{i}", 100 + i) for i in range(50)]
    replies = await call(stub, envelopes)
    assert sorted(replies) == list(range(50))
    assert all(r.error_code == 0 and r.WhichOneof("response") == "offset_commit" for r in replies.values())

    fetched = await call(stub, [fetch(1000 + i, f"g{i}") for i in range(50)])
    offsets = {
        cid - 1000: r.offset_fetch.groups[0].topics[0].partitions[0].committed_offset
        for cid, r in fetched.items()
    }
    assert offsets == {i: 100 + i for i in range(50)}


async def test_errors_come_back_as_kafka_codes(stub) -> None:
    envelopes = [
        commit(1, "", 5),  # the handler rejects it
        commit(2, "g", 5, partition=1),  # this worker does not lead partition 1
        coordinator_pb2.CoordinatorEnvelope(correlation_id=3, partition=0),  # no request at all
    ]
    replies = await call(stub, envelopes)
    assert replies[1].error_code == ErrorCode.invalid_group_id
    assert replies[2].error_code == ErrorCode.not_coordinator
    assert replies[3].error_code != 0
    assert all(r.WhichOneof("response") is None for r in replies.values())


async def test_the_group_cores_commit_and_reload_offsets_through_the_service(broker) -> None:
    """The real GroupCoordinatorShard behind the service, across a takeover."""
    from groupcoord.coordinator.server.coordinator_service import group_shard_factory  # noqa: PLC0415

    topic = f"state-{uuid.uuid4().hex[:8]}"
    await ensure_topic(broker.bootstrap, topic, 1)
    commit_env = commit(1, "orders-app", 42)
    commit_env.offset_commit.api_version = 8
    commit_env.offset_commit.retention_time_ms = -1
    fetch_env = fetch(2, "orders-app")
    fetch_env.offset_fetch.api_version = 8
    fetch_env.offset_fetch.groups[0].member_epoch = -1
    fetched = []
    for epoch, envelopes in ((1, [commit_env, fetch_env]), (2, [fetch_env])):
        runtime = WorkerRuntime(
            bootstrap=broker.bootstrap, topic=topic, partitions=1, shard_factory=group_shard_factory
        )
        await runtime.start()
        await runtime.become_leader(0, epoch)  # epoch 2: a takeover that reloads the commit
        server = grpc.aio.server()
        serve_offsets(server, runtime)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = coordinator_pb2_grpc.CoordinatorStub(channel)
                for env in envelopes:  # one at a time: the fetch must follow the commit
                    [reply] = (await call(stub, [env])).values()
                    assert reply.error_code == 0, reply
                    if reply.WhichOneof("response") == "offset_fetch":
                        fetched.append(reply.offset_fetch.groups[0].topics[0].partitions[0].committed_offset)
        finally:
            await server.stop(grace=None)
            await runtime.close()
    assert fetched == [42, 42]
