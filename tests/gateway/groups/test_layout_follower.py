"""The gateway's layout follower, step by step: placements from the resource, worker counts
only from the shards (here an ``ask`` function standing in for ShardControl.Ping; the real
processes are in tests/e2e/test_kubernetes_layout.py)."""

from __future__ import annotations

import asyncio

from groupcoord.controlplane.placement import place
from groupcoord.gateway.groups.layout import LayoutFollower


class Shards:
    """What each shard answers when asked (None: no answer), and how often it was asked."""

    def __init__(self, workers: dict[int, int | None]) -> None:
        self.workers = workers
        self.asked: list[int] = []

    async def ask(self, shard: int, address: tuple[str, int]) -> int | None:
        assert address == (f"shard-{shard}", 50051)
        self.asked.append(shard)
        return self.workers.get(shard)


def follower(shards: Shards) -> LayoutFollower:
    return LayoutFollower(lambda s: (f"shard-{s}", 50051), ask=shards.ask, retry_s=0.05, suspect_every_s=0.05)


async def test_a_shard_that_does_not_answer_gets_nothing_routed_until_it_does() -> None:
    shards = Shards({0: 2, 1: None})
    f = follower(shards)
    table = f.table
    placement = place(4, [0, 1])
    await f.placement_changed(placement)
    try:
        on_1 = [p for p, a in placement.items() if a.leader == 1]
        on_0 = [p for p, a in placement.items() if a.leader == 0]
        assert table.partitions == 4
        assert all(table.address_of(p) is None for p in on_1)  # held, never a guessed worker
        assert all(table.address_of(p) == ("shard-0", 50051 + p % 2) for p in on_0)
        shards.workers[1] = 3
        await asyncio.sleep(0.3)
        assert all(table.address_of(p) == ("shard-1", 50051 + p % 3) for p in on_1)
    finally:
        await f.close()


async def test_every_placement_asks_again_and_a_refusal_triggers_a_recheck() -> None:
    shards = Shards({0: 1, 1: 1})
    f = follower(shards)
    table = f.table  # a refused partition reaches f.suspect through the table's on_stale
    placement = place(4, [0, 1])
    await f.placement_changed(placement)
    try:
        odd = next(p for p, a in placement.items() if p % 2 == 1)
        leader = placement[odd].leader
        assert table.address_of(odd) == (f"shard-{leader}", 50051)
        shards.workers[leader] = 2  # restarted with two workers under the same placement
        version = table.version
        table.report_stale(odd)  # worker 0 said NOT_COORDINATOR
        await table.wait_for_change(version, 2)
        assert table.address_of(odd) == (f"shard-{leader}", 50052)
        asked = len(shards.asked)
        await f.placement_changed(place(4, [0, 1], placement))
        assert len(shards.asked) == asked + 2  # both leaders asked again, nothing cached
    finally:
        await f.close()
