"""The gateway's group APIs without sockets: the API table, and requests naming several groups
split by state partition and merged back in request order (a fake shard client records every
envelope and answers from it)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode

from groupcoord.common.kafka_wire import codec
from groupcoord.common.partitioning import partition_for
from groupcoord.common.upstream_groups import NO_FEATURES
from groupcoord.gateway.groups.group_apis import GROUP_APIS, GroupApis
from groupcoord.gateway.groups.leadership import LeadershipTable, ShardEndpoint
from groupcoord.gateway.groups.worker_client import ShardReply
from groupcoord.gateway.proxy.listeners import BrokerListeners
from groupcoord.gateway.proxy.upstream import Upstream
from groupcoord.gateway.transport.server import Gateway
from groupcoord.rpc.v1 import coordinator_pb2 as pb
from groupcoord.rpc.v1 import group_admin_pb2 as ga

PARTITIONS = 3
LISTENER = ("127.0.0.1", 9092)


class RecordingShards:
    """Answers DeleteGroups / DescribeGroups for the groups each envelope names."""

    def __init__(self) -> None:
        self.sent: list[tuple[tuple[str, int], pb.CoordinatorEnvelope]] = []

    async def call(self, address: tuple[str, int], envelope: pb.CoordinatorEnvelope) -> ShardReply:
        self.sent.append((address, pb.CoordinatorEnvelope.FromString(envelope.SerializeToString())))
        if envelope.HasField("delete_groups"):
            names = envelope.delete_groups.groups_names
            return ShardReply(
                0, "", ga.DeleteGroupsResponse(results=[ga.DeletableGroupResult(group_id=g) for g in names])
            )
        names = envelope.describe_groups.groups
        return ShardReply(
            0,
            "",
            ga.DescribeGroupsResponse(
                groups=[ga.DescribedGroup(group_id=g, group_state="Stable") for g in names]
            ),
        )


def group_apis(
    leaders: dict[int, tuple[int, int]], failover_wait_s: float = 0.3
) -> tuple[GroupApis, RecordingShards]:
    table = LeadershipTable(PARTITIONS)
    table.update(leaders, {0: ShardEndpoint("shard-0", 7000), 1: ShardEndpoint("shard-1", 7000)})
    shards = RecordingShards()

    async def no_upstream(body: Any) -> Any:
        raise AssertionError("group requests never go upstream here")

    async def node(listener: tuple[str, int]) -> tuple[int, str, int]:
        return 1, *listener

    apis = GroupApis(table, shards, no_upstream, node, failover_wait_s=failover_wait_s)  # type: ignore[arg-type]
    return apis, shards


def header(api_key: int, version: int) -> SimpleNamespace:
    return SimpleNamespace(request_api_key=api_key, request_api_version=version, client_id="t")


def groups_by_partition() -> dict[int, list[str]]:
    """Group ids in request order covering every partition at least twice."""
    found: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    i = 0
    while min(len(ids) for ids in found.values()) < 2:
        gid = f"g{i}"
        found[partition_for(gid, PARTITIONS)].append(gid)
        i += 1
    return found


async def test_groups_are_split_by_partition_and_answered_in_request_order() -> None:
    by_partition = groups_by_partition()
    names = [g for pair in zip(*by_partition.values(), strict=False) for g in pair]  # interleaved
    names.append(names[0])  # a group named twice is answered twice, like Kafka
    # partition 2 has no leader (being moved) for longer than the gateway holds requests: its
    # groups get COORDINATOR_LOAD_IN_PROGRESS, which clients retry without telling the application
    apis, shards = group_apis({0: (0, 1), 1: (1, 1)})

    response = await apis.handle(header(42, 2), DeleteGroupsRequest(groups_names=tuple(names)), LISTENER)

    assert [r.group_id for r in response.results] == names
    for result in response.results:
        leaderless = partition_for(result.group_id, PARTITIONS) == 2
        assert result.error_code == (ErrorCode.coordinator_load_in_progress if leaderless else ErrorCode.none)
    # one call per partition with a leader, carrying that partition's groups in request order
    assert sorted(env.partition for _, env in shards.sent) == [0, 1]
    for address, env in shards.sent:
        expected = [g for g in names if partition_for(g, PARTITIONS) == env.partition]
        assert list(env.delete_groups.groups_names) == expected
        assert address == ("shard-0" if env.partition == 0 else "shard-1", 7000)


async def test_a_request_for_a_partition_between_leaders_waits_for_the_new_leader() -> None:
    """A failover is latency, not an error: the request is held until the control plane names
    the new leader, then answered by it."""
    gid = groups_by_partition()[2][0]
    apis, shards = group_apis({0: (0, 1), 1: (1, 1)}, failover_wait_s=10)
    request = DeleteGroupsRequest(groups_names=(gid,))

    async def failover_completes() -> None:
        await asyncio.sleep(0.2)
        apis.leadership.update({0: (0, 1), 1: (1, 1), 2: (1, 2)}, apis.leadership.shards)

    started = time.monotonic()
    response, _ = await asyncio.gather(apis.handle(header(42, 2), request, LISTENER), failover_completes())

    assert [(r.group_id, r.error_code) for r in response.results] == [(gid, ErrorCode.none)]
    assert [(address, env.partition) for address, env in shards.sent] == [(("shard-1", 7000), 2)]
    assert 0.2 <= time.monotonic() - started < 2


async def test_a_leader_that_resigned_is_asked_again_once_the_table_moves_on() -> None:
    gid = groups_by_partition()[0][0]
    apis, shards = group_apis({0: (0, 1), 1: (1, 1), 2: (1, 1)}, failover_wait_s=10)
    answer = shards.call
    refusals = iter([ShardReply(ErrorCode.not_coordinator.value, "resigned", None)])

    async def resigned_once(address: tuple[str, int], envelope: pb.CoordinatorEnvelope) -> ShardReply:
        refusal = next(refusals, None)
        if refusal is not None:
            shards.sent.append((address, envelope))
            apis.leadership.update({0: (1, 2), 1: (1, 1), 2: (1, 1)}, apis.leadership.shards)
            return refusal
        return await answer(address, envelope)

    shards.call = resigned_once  # type: ignore[method-assign]
    started = time.monotonic()
    response = await apis.handle(header(42, 2), DeleteGroupsRequest(groups_names=(gid,)), LISTENER)
    assert time.monotonic() - started < 0.2  # the table had already moved on: no wait

    assert [(r.group_id, r.error_code) for r in response.results] == [(gid, ErrorCode.none)]
    assert [address for address, _ in shards.sent] == [("shard-0", 7000), ("shard-1", 7000)]


async def test_describe_groups_uses_the_same_split_and_names_the_api_once() -> None:
    by_partition = groups_by_partition()
    names = [*by_partition[1], *by_partition[0]]
    apis, shards = group_apis({0: (0, 1), 1: (1, 1), 2: (1, 1)})

    response = await apis.handle(
        header(15, 5),
        DescribeGroupsRequest(groups=tuple(names), include_authorized_operations=False),
        LISTENER,
    )

    assert [g.group_id for g in response.groups] == names
    assert {g.group_state for g in response.groups} == {"Stable"}
    assert {env.WhichOneof("request") for _, env in shards.sent} == {"describe_groups"}


async def test_api_versions_advertises_exactly_the_table_for_served_apis() -> None:
    apis, _ = group_apis({})
    gateway = Gateway(Upstream(("upstream", 9092), BrokerListeners("127.0.0.1", 0, None)), apis)
    # the upstream claims every group API at versions 0-20: the table decides, not the upstream
    gateway.upstream._versions = ({key: (0, 20) for key in (*GROUP_APIS, 18)}, NO_FEATURES)
    advertised = await gateway.advertised()
    for key, api in GROUP_APIS.items():
        lo, hi = api.versions
        codec_lo, codec_hi = codec.CODEC_VERSIONS[key]
        assert advertised[key] == (max(lo, codec_lo), min(hi, codec_hi))
    assert set(gateway.served_apis) == set(GROUP_APIS)
