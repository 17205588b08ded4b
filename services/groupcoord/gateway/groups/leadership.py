"""Which shard worker leads each state-topic partition, as the gateway sees it.

The gateway never guesses: leadership comes from the control plane (the local control plane
of ``groupcoord up`` updates a :class:`LeadershipTable` directly; on Kubernetes the
:class:`~.layout.LayoutFollower` of the GroupCoordinator resource's status owns the table). No leader known means the partition is being
moved: the gateway holds requests for such a partition until the table changes
(:meth:`LeadershipTable.wait_for_change`), so a failover is latency to clients, not an error.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from groupcoord.common.partitioning import partition_for, worker_for

Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ShardEndpoint:
    """A shard's gRPC base address and its worker count (worker i listens on port + i), as the
    shard itself reported it (the layout source asks; the table never assumes a count)."""

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
    version: int = 0  # how many updates the table has taken
    # Called with a shard id when one of its workers refused a partition the table routes to
    # it: the layout source asks that shard again (its worker count may have changed).
    on_stale: Callable[[int], None] | None = field(default=None, repr=False, compare=False)
    _changed: asyncio.Future[None] | None = field(default=None, repr=False, compare=False)

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions)

    def address_of(self, partition: int) -> Address | None:
        leader = self.leaders.get(partition)
        if leader is None:
            return None
        endpoint = self.shards.get(leader[0])
        return None if endpoint is None else endpoint.worker_address(partition)

    def report_stale(self, partition: int) -> None:
        leader = self.leaders.get(partition)
        if leader is not None and self.on_stale is not None:
            self.on_stale(leader[0])

    def update(self, leaders: dict[int, tuple[int, int]], shards: dict[int, ShardEndpoint]) -> None:
        """Take the control plane's new layout and wake every request waiting for it (from any
        thread: a watcher may run beside the gateway's event loop)."""
        self.leaders = dict(leaders)
        self.shards = dict(shards)
        self.version += 1
        changed, self._changed = self._changed, None
        if changed is not None:
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits any more
                changed.get_loop().call_soon_threadsafe(_settle, changed)

    async def wait_for_change(self, since: int, timeout_s: float) -> None:
        """Return once the table is newer than ``version`` ``since`` (at once if it already
        is), or after ``timeout_s``."""
        if self.version != since:
            return
        if self._changed is None:
            self._changed = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._changed), timeout_s)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
