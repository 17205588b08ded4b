"""The live shard layout for a gateway that follows a GroupCoordinator resource (Kubernetes).

The resource's status says which shard leads each state-topic partition; the shard's address
comes from ``--shard-address-template``; how many worker processes it runs (worker ``i``
listens on the base port + ``i``, and serves partitions ``p % workers == i``) only the shard
itself knows — ``threadsPerShard`` can change, and a pod rolled with more threads comes back
with more workers. So on every placement the resource publishes, the follower asks each
leading shard (``ShardControl.Ping``: ``shard_id``, ``workers``) before the table takes the
placement, and never routes on a guess:

* a shard that does not answer (or answers with another shard id) is left out of the table:
  requests for its partitions are held by the gateway (retried as the table changes), and it
  is asked again every ``retry_s`` until it answers;
* a worker that says NOT_COORDINATOR for a partition the table routes to it makes the gateway
  ask that shard again (:meth:`LayoutFollower.suspect`): the layout may have changed under a
  placement that did not.

Clients see at most the retriable errors of a failover (held by the gateway; see
:meth:`groupcoord.gateway.groups.serving.GroupServing.call_partition`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

import grpc

from groupcoord.common import internal_tls
from groupcoord.common.internal_tls import InternalTls
from groupcoord.controlplane.placement import Assignment
from groupcoord.gateway.groups.leadership import LeadershipTable, ShardEndpoint
from groupcoord.rpc.v1 import shard_control_pb2 as sc
from groupcoord.rpc.v1 import shard_control_pb2_grpc as sc_grpc

log = logging.getLogger(__name__)
Address = tuple[str, int]


async def ask_workers(
    shard: int, address: Address, timeout_s: float = 2.0, *, tls: InternalTls | None = None
) -> int | None:
    """The worker count shard ``shard`` at ``address`` reports, or None if it does not answer
    as that shard (asked with the gateway's certificate ``tls``)."""
    async with internal_tls.channel(tls, f"{address[0]}:{address[1]}") as channel:
        try:
            ping = await sc_grpc.ShardControlStub(channel).Ping(sc.ShardPingRequest(), timeout=timeout_s)
        except grpc.aio.AioRpcError:
            return None
    if ping.shard_id != str(shard) or ping.workers < 1:
        log.warning(
            "%s:%d answers as shard %r with %d workers, not as shard %d",
            *address,
            ping.shard_id,
            ping.workers,
            shard,
        )
        return None
    return int(ping.workers)


class LayoutFollower:
    """Keeps its :class:`LeadershipTable` (``table``, the one the gateway routes by) on the
    live layout: placements from the resource status, worker counts from the shards themselves.
    The table reports refused partitions back to :meth:`suspect`."""

    def __init__(
        self,
        address_of: Callable[[int], Address],
        *,
        ask: Callable[[int, Address], Awaitable[int | None]] | None = None,
        retry_s: float = 0.5,
        suspect_every_s: float = 0.5,
    ) -> None:
        self.table = LeadershipTable(partitions=0, on_stale=self.suspect)
        self.address_of = address_of
        self._ask = ask or ask_workers
        self.retry_s = retry_s
        self.suspect_every_s = suspect_every_s
        self._placement: dict[int, Assignment] = {}
        self._workers: dict[int, int] = {}  # shard -> worker count it last reported
        self._generation = 0
        self._retry: asyncio.Task[None] | None = None
        self._suspected_at: dict[int, float] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def placement_changed(self, placement: Mapping[int, Assignment]) -> None:
        """Take a new placement: ask every leading shard for its layout, then update the table."""
        self._generation += 1
        generation = self._generation
        self._placement = dict(placement)
        shards = sorted({a.leader for a in placement.values()})
        answers = await asyncio.gather(*(self._ask(s, self.address_of(s)) for s in shards))
        if generation != self._generation:
            return  # a newer placement arrived meanwhile: it publishes
        self._workers = {s: w for s, w in zip(shards, answers, strict=True) if w is not None}
        self._publish()
        missing = [s for s in shards if s not in self._workers]
        if missing:
            log.info("layout: shards %s did not answer; their partitions wait", missing)
            self._retry_missing()

    def placement_published(self, placement: Mapping[int, Assignment]) -> None:
        """:meth:`placement_changed` in a task of its own, so a shard slow to answer does not
        hold back a newer placement (the newest one publishes)."""
        self._spawn(self.placement_changed(placement))
        log.info(
            "leadership: %d partitions on shards %s",
            len(placement),
            sorted({a.leader for a in placement.values()}),
        )

    def suspect(self, shard: int) -> None:
        """A worker of ``shard`` refused a partition the table routed to it: ask it again
        (at most every ``suspect_every_s``)."""
        loop = asyncio.get_running_loop()
        if loop.time() - self._suspected_at.get(shard, -1e9) < self.suspect_every_s:
            return
        self._suspected_at[shard] = loop.time()
        self._spawn(self._recheck(shard))

    async def close(self) -> None:
        tasks = [t for t in (self._retry, *self._tasks) if t is not None]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t

    # --- internals ----------------------------------------------------------------------

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _publish(self) -> None:
        endpoints = {}
        for shard, workers in self._workers.items():
            host, port = self.address_of(shard)
            endpoints[shard] = ShardEndpoint(host, port, workers)
        self.table.partitions = max(self.table.partitions, len(self._placement))
        self.table.update({p: (a.leader, a.epoch) for p, a in self._placement.items()}, endpoints)

    async def _recheck(self, shard: int) -> None:
        if shard not in {a.leader for a in self._placement.values()}:
            return
        generation = self._generation
        workers = await self._ask(shard, self.address_of(shard))
        if generation != self._generation or workers == self._workers.get(shard):
            return
        log.info("layout: shard %d now reports %s workers (was %s)", shard, workers, self._workers.get(shard))
        if workers is None:
            self._workers.pop(shard, None)
            self._retry_missing()
        else:
            self._workers[shard] = workers
        self._publish()

    def _retry_missing(self) -> None:
        if self._retry is None or self._retry.done():
            self._retry = asyncio.get_running_loop().create_task(self._ask_missing())

    async def _ask_missing(self) -> None:
        while True:
            await asyncio.sleep(self.retry_s)
            missing = sorted({a.leader for a in self._placement.values()} - set(self._workers))
            if not missing:
                return
            generation = self._generation
            answers = await asyncio.gather(*(self._ask(s, self.address_of(s)) for s in missing))
            if generation != self._generation:
                continue
            found = {s: w for s, w in zip(missing, answers, strict=True) if w is not None}
            if found:
                self._workers.update(found)
                self._publish()
