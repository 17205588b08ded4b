"""Which shard worker leads each state-topic partition, as the gateway sees it.

The gateway never guesses: leadership comes from the control plane (the local control plane
of ``groupcoord up`` updates a :class:`LeadershipTable` directly; on Kubernetes a watcher of
the GroupCoordinator resource's status does). No leader known means the partition is being
moved, which clients must see as COORDINATOR_NOT_AVAILABLE and retry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from groupcoord.common.partitioning import partition_for, worker_for

Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ShardEndpoint:
    """A shard's gRPC base address and its worker count (worker i listens on port + i)."""

    host: str
    base_port: int
    workers: int = 1

    def worker_address(self, partition: int) -> Address:
        return self.host, self.base_port + worker_for(partition, self.workers)


@dataclass
class LeadershipTable:
    """partition -> (leader shard id, epoch), plus where each shard listens."""

    partitions: int
    leaders: dict[int, tuple[int, int]] = field(default_factory=dict)
    shards: dict[int, ShardEndpoint] = field(default_factory=dict)

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions)

    def address_of(self, partition: int) -> Address | None:
        leader = self.leaders.get(partition)
        if leader is None:
            return None
        endpoint = self.shards.get(leader[0])
        return None if endpoint is None else endpoint.worker_address(partition)

    def update(self, leaders: dict[int, tuple[int, int]], shards: dict[int, ShardEndpoint]) -> None:
        self.leaders = dict(leaders)
        self.shards = dict(shards)
