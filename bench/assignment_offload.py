"""assignment-offload: other groups' heartbeats while a 1,000-member × 50,000-partition group reassigns.

One state-topic partition, led by the real worker runtime (event loop, timers, write pipeline)
in front of the embedded tansu, hosts a 1,000-member KIP-848 group with heterogeneous
subscriptions (20 of 1,000 topics of 50 partitions each, as bench/assignor.py's case) and 200
one-member groups. The small groups heartbeat steadily at a fixed rate (open loop: each
heartbeat's latency counts from when it was due, so a stalled loop shows in full). Three phases
of the same length, one run:

* ``baseline``: nothing else happens;
* ``offloaded``: every ``--churn-ms`` a member of the big group leaves and another joins (each a
  full reassignment), assignments off the partition's loop (KIP-1263; the default);
* ``inline``: the partition reloaded with ``consumer_group_assignor_offload_min_size = -1``, the
  same churn, assignments on the loop as before.

Reported per phase: heartbeats/s answered, p50/p99/max latency, assignments written (target
epochs) and the CPU of the process; the ratios are each phase's p99 over the baseline's. The
issue's goal: other groups' p99 during such assignments at most 2x their p99 without them. The
upstream is tansu, in process memory, and no gateway or gRPC hop is on the path: what this
isolates is the partition's loop, which is what the offload changes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
import uuid
from typing import Any

from groupcoord.coordinator.core.contract import write_operation
from groupcoord.coordinator.core.group_operations import OPERATIONS
from groupcoord.coordinator.core.topics_image import TopicImage, TopicsImage
from groupcoord.coordinator.runtime.statelog import ensure_topic
from groupcoord.coordinator.runtime.worker_runtime import WorkerRuntime
from groupcoord.coordinator.server.coordinator_service import group_shard_factory
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.rpc.v1 import consumer_group_pb2 as pb

NAME = "assignment-offload"
DESCRIPTION = "other groups' heartbeat p99 while a 1k-member x 50k-partition group reassigns: offloaded vs inline"

P = 0
BIG = "big"
LONG_MS = 600_000  # sessions and rebalance timeouts that outlast the run
ENV = {
    "GROUPCOORD_GROUP_CONSUMER_GROUP_SESSION_TIMEOUT_MS": str(LONG_MS),
    "GROUPCOORD_GROUP_CONSUMER_GROUP_MAX_SESSION_TIMEOUT_MS": str(LONG_MS),
}
OFFLOAD_SIZE = "GROUPCOORD_GROUP_CONSUMER_GROUP_ASSIGNOR_OFFLOAD_MIN_SIZE"


def _join(group: str, member: str, topics: list[str]) -> Any:
    r = pb.ConsumerGroupHeartbeatRequest(
        api_version=1, group_id=group, member_id=member, member_epoch=0, rebalance_timeout_ms=LONG_MS
    )
    r.subscribed_topic_names.SetInParent()
    r.subscribed_topic_names.names.extend(topics)
    r.topic_partitions.SetInParent()
    return OPERATIONS["consumer_group_heartbeat"](r)


def _steady(group: str, member: str, epoch: int, owned: Any) -> Any:
    r = pb.ConsumerGroupHeartbeatRequest(api_version=1, group_id=group, member_id=member, member_epoch=epoch)
    r.rebalance_timeout_ms = -1
    r.topic_partitions.SetInParent()
    r.topic_partitions.topic_partitions.extend(owned)
    return OPERATIONS["consumer_group_heartbeat"](r)


def _leave(group: str, member: str) -> Any:
    return OPERATIONS["consumer_group_heartbeat"](
        pb.ConsumerGroupHeartbeatRequest(api_version=1, group_id=group, member_id=member, member_epoch=-1)
    )


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system


class Bench:
    def __init__(self, bootstrap: str, topic: str, opts: argparse.Namespace) -> None:
        self.bootstrap, self.topic, self.opts = bootstrap, topic, opts
        rng = random.Random(7)
        names = [f"t{i:04d}" for i in range(opts.topics)]
        self.image = TopicsImage.of(
            TopicImage(uuid.uuid5(uuid.NAMESPACE_OID, n).bytes, n, opts.partitions_per_topic) for n in names
        )
        self.subscriptions = [sorted(rng.sample(names, 20)) for _ in range(opts.members)]
        self.small_topic = names[0]
        self.runtime: WorkerRuntime | None = None
        self.small: dict[str, tuple[int, Any]] = {}  # group -> (epoch, owned)
        self.big_members = [f"m{i:05d}" for i in range(opts.members)]
        self.joined = opts.members

    async def lead(self, epoch: int, offload: bool) -> WorkerRuntime:
        os.environ.update(ENV)
        if offload:
            os.environ.pop(OFFLOAD_SIZE, None)
        else:
            os.environ[OFFLOAD_SIZE] = "-1"
        if self.runtime is not None:
            await self.runtime.close()
        rt = self.runtime = WorkerRuntime(
            bootstrap=self.bootstrap,
            topic=self.topic,
            partitions=1,
            shard_factory=group_shard_factory,
            shard_id=f"bench-{epoch}",
        )
        await rt.start()
        await rt.become_leader(P, epoch)
        image = self.image
        update = write_operation("on_metadata_update", lambda s, now, _: s.on_metadata_update(image, now))
        await rt.submit(P, update, every_replica=True)
        return rt

    def group(self, *, committed: bool = False) -> Any:
        """The big group in the live replica, or in the committed one (what the log holds)."""
        assert self.runtime is not None
        part = self.runtime.partition(P)
        assert part is not None
        shard = part.committed_shard if committed else part.shard
        assert shard is not None
        return shard.groups[BIG]  # type: ignore[attr-defined]

    async def settled(self, timeout_s: float = 60.0) -> None:
        """Until the big group's target is computed for its epoch (no run in flight) and in
        the log: the next phase may reload the partition, and its members do not heartbeat
        between phases, so a target computed but not yet written when the runtime closed
        would never be asked for again (one run hung so on 2026-11-28). A group that does not
        settle fails the run instead of hanging it."""
        deadline = time.monotonic() + timeout_s
        while True:
            g, c = self.group(), self.group(committed=True)
            if g.assignment_epoch == g.group_epoch == c.assignment_epoch == c.group_epoch:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the big group did not settle in {timeout_s:.0f} s: group epoch {g.group_epoch}, "
                    f"assignment epoch {g.assignment_epoch}"
                )
            await asyncio.sleep(0.05)

    async def form(self) -> float:
        rt = self.runtime
        assert rt is not None
        t0 = time.perf_counter()
        futures = [rt.submit(P, _join(BIG, m, s)) for m, s in zip(self.big_members, self.subscriptions, strict=True)]
        for f in futures:
            assert (await f).error_code == 0
        for i in range(self.opts.small_groups):
            resp = await rt.submit(P, _join(f"small-{i}", f"s{i}", [self.small_topic]))
            assert resp.error_code == 0 and resp.HasField("assignment"), resp
            self.small[f"small-{i}"] = (resp.member_epoch, list(resp.assignment.topic_partitions))
        await self.settled()
        return time.perf_counter() - t0

    async def phase(self, churn: bool) -> dict[str, Any]:
        rt = self.runtime
        assert rt is not None
        loop = asyncio.get_running_loop()
        rate, seconds = self.opts.rate, self.opts.seconds
        latencies: list[float] = []
        pending: set[asyncio.Future[Any]] = set()
        groups = list(self.small)
        epochs_before = self.group().assignment_epoch
        cpu0, start = _cpu_s(), loop.time()

        def done(due: float, fut: asyncio.Future[Any]) -> None:
            pending.discard(fut)
            if not fut.cancelled() and fut.exception() is None and fut.result().error_code == 0:
                latencies.append(loop.time() - due)

        async def heartbeats() -> None:
            n = 0
            while (now := loop.time()) < start + seconds:
                while n < (now - start) * rate:  # every heartbeat due by now, each from its due time
                    due = start + n / rate
                    group = groups[n % len(groups)]
                    epoch, owned = self.small[group]
                    fut = rt.submit(P, _steady(group, f"s{group.split('-')[1]}", epoch, owned))
                    pending.add(fut)
                    fut.add_done_callback(lambda f, d=due: done(d, f))
                    n += 1
                await asyncio.sleep(0.001)

        async def churning() -> None:
            i = 0
            while loop.time() < start + seconds:
                await asyncio.sleep(self.opts.churn_ms / 1000)
                leaving = self.big_members[i % len(self.big_members)]
                newcomer = f"n{self.joined:05d}"
                self.joined += 1
                await rt.submit(P, _leave(BIG, leaving))
                await rt.submit(P, _join(BIG, newcomer, self.subscriptions[i % len(self.subscriptions)]))
                self.big_members[i % len(self.big_members)] = newcomer
                i += 1

        await asyncio.gather(heartbeats(), *([churning()] if churn else []))
        if pending:
            await asyncio.wait(pending, timeout=30)
        elapsed = loop.time() - start
        cpu = _cpu_s() - cpu0
        await self.settled()
        latencies.sort()
        n = len(latencies)
        return {
            "heartbeats_per_s": round(n / elapsed),
            "p50_ms": round(statistics.median(latencies) * 1000, 2),
            "p99_ms": round(latencies[min(n - 1, int(0.99 * n))] * 1000, 2),
            "max_ms": round(latencies[-1] * 1000, 1),
            "assignments_written": self.group().assignment_epoch - epochs_before,
            "cpu_percent_of_one_core": round(100 * cpu / elapsed),
        }


async def _run(bootstrap: str, opts: argparse.Namespace) -> dict[str, Any]:
    topic = f"bench-state-{uuid.uuid4().hex[:6]}"
    await ensure_topic(bootstrap, topic, 1)
    bench = Bench(bootstrap, topic, opts)
    try:
        await bench.lead(1, offload=True)
        formed_s = await bench.form()
        baseline = await bench.phase(churn=False)
        offloaded = await bench.phase(churn=True)
        await bench.lead(2, offload=False)  # a reload from the log, assignments inline
        await bench.settled()
        inline = await bench.phase(churn=True)
    finally:
        if bench.runtime is not None:
            await bench.runtime.close()
    return {
        "group": {
            "members": opts.members,
            "topics": opts.topics,
            "partitions": opts.topics * opts.partitions_per_topic,
            "formed_in_s": round(formed_s, 1),
        },
        "other_groups": opts.small_groups,
        "heartbeat_rate": opts.rate,
        "phase_s": opts.seconds,
        "churn_every_ms": opts.churn_ms,
        "baseline": baseline,
        "offloaded": offloaded,
        "inline": inline,
        "p99_over_baseline": {
            "offloaded": round(offloaded["p99_ms"] / baseline["p99_ms"], 2),
            "inline": round(inline["p99_ms"] / baseline["p99_ms"], 2),
        },
        "goal": "offloaded p99 <= 2x baseline",
    }


def run(args: list[str]) -> dict[str, object]:
    parser = argparse.ArgumentParser(prog=NAME)
    parser.add_argument("--members", type=int, default=1_000)
    parser.add_argument("--topics", type=int, default=1_000)
    parser.add_argument("--partitions-per-topic", type=int, default=50)
    parser.add_argument("--small-groups", type=int, default=200)
    parser.add_argument("--rate", type=float, default=1_000.0, help="heartbeats/s of the other groups")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each phase")
    parser.add_argument("--churn-ms", type=float, default=1_000.0, help="a leave and a join this often")
    opts = parser.parse_args(args)
    load_before = os.getloadavg()
    with EmbeddedBroker() as broker:
        result = asyncio.run(_run(broker.bootstrap, opts))
    return {
        "broker": "embedded tansu (in-memory)",
        "load_average_before": [round(x, 2) for x in load_before],
        **result,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
