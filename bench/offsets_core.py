"""offsets-core: OffsetCommit/OffsetFetch throughput through the sans-IO core (no I/O).

Each commit runs the handler (group validation, record building) and replays its records
into the live state, as the runtime does, plus the state-topic serialization of the records.
Figures: commits per second and per-commit latency p50/p99 for a classic-group member
committing 1 partition and 10 partitions per request, an admin commit to an empty group, and
the read-only OffsetFetch; the 1-partition member commit is the baseline for the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from _core_test_doubles import MockClock, MockTimer

from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import apply_timer_intents, serialize_record
from groupcoord.coordinator.core.group_coordinator_shard import GroupCoordinatorShard
from groupcoord.rpc.v1 import classic_group_pb2 as cpb
from groupcoord.rpc.v1 import offsets_pb2 as opb

NAME = "offsets-core"
DESCRIPTION = "offset commits (and fetches) per second through the core; p50/p99 per request"


def _shard_with_member() -> tuple[GroupCoordinatorShard, MockClock, str, int]:
    clock = MockClock()
    timer = MockTimer(clock)
    shard = GroupCoordinatorShard(timer, GroupConfig(classic_group_initial_rebalance_delay_ms=0))

    def apply(result):  # noqa: ANN001, ANN202
        apply_timer_intents(timer, result.timers)
        for r in result.records:
            shard.replay(r)
        return result

    join = cpb.JoinGroupRequest(
        api_version=5,
        group_id="g",
        session_timeout_ms=600_000,
        rebalance_timeout_ms=600_000,
        protocol_type="consumer",
        protocols=[cpb.JoinGroupProtocol(name="range")],
        client_id="bench",
    )
    join.group_instance_id = "bench-0"
    apply(shard.join_group(join, 0, token="t"))
    for _, op in timer.pop_expired():
        apply(op())
    member_id = next(iter(shard.classic.groups["g"].members))  # type: ignore[attr-defined]
    generation = shard.classic.groups["g"].generation_id  # type: ignore[attr-defined]
    apply(
        shard.sync_group(
            cpb.SyncGroupRequest(
                api_version=5,
                group_id="g",
                member_id=member_id,
                generation_id=generation,
                group_instance_id="bench-0",
            ),
            0,
        )
    )
    return shard, clock, member_id, generation


def _commit_request(member_id: str, generation: int, partitions: int, n: int) -> opb.OffsetCommitRequest:
    request = opb.OffsetCommitRequest(
        api_version=9, group_id="g", member_id=member_id, generation_id_or_member_epoch=generation
    )
    topic = request.topics.add(name="topic")
    for p in range(partitions):
        topic.partitions.add(
            partition_index=(n * partitions + p) % 64,
            committed_offset=n,
            committed_leader_epoch=1,
            committed_metadata="",
        )
    return request


def _measure(op: Callable[[int], None], seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds
    n = 0
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        op(n)
        t1 = time.perf_counter()
        latencies.append(t1 - t0)
        n += 1
        if t1 >= deadline:
            break
    elapsed = time.perf_counter() - start
    latencies.sort()
    return {
        "requests": n,
        "per_second": round(n / elapsed, 1),
        "p50_us": round(latencies[len(latencies) // 2] * 1e6, 2),
        "p99_us": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1e6, 2),
        "mean_us": round(statistics.fmean(latencies) * 1e6, 2),
    }


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog=NAME)
    parser.add_argument("--seconds", type=float, default=2.0, help="duration of each measurement")
    opts = parser.parse_args(args)
    shard, clock, member_id, generation = _shard_with_member()

    def commit(partitions: int) -> Callable[[int], None]:
        # Requests are built beforehand: the figure is the core's cost, not protobuf building.
        requests = [_commit_request(member_id, generation, partitions, n) for n in range(256)]

        def op(n: int) -> None:
            result = shard.offset_commit(requests[n % 256], clock.now_ms)
            for r in result.records:
                serialize_record(r)
                shard.replay(r)
            assert result.response.topics[0].partitions[0].error_code == 0

        return op

    admin_requests = [_commit_request("", -1, 1, n) for n in range(256)]
    for request in admin_requests:
        request.group_id = "simple"

    def admin_commit(n: int) -> None:
        result = shard.offset_commit(admin_requests[n % 256], clock.now_ms)
        for r in result.records:
            serialize_record(r)
            shard.replay(r)

    fetch_request = opb.OffsetFetchRequest(api_version=9)
    fetch_request.groups.add(group_id="g", member_epoch=-1, all_topics=True)

    def fetch(n: int) -> None:
        shard.offset_fetch(fetch_request, clock.now_ms)

    figures = {
        "member_commit_1_partition": _measure(commit(1), opts.seconds),
        "member_commit_10_partitions": _measure(commit(10), opts.seconds),
        "admin_commit_1_partition": _measure(admin_commit, opts.seconds),
        "fetch_all_64_partitions": _measure(fetch, opts.seconds),
    }
    base = figures["member_commit_1_partition"]["per_second"]
    return {
        "figures": figures,
        "baseline": "member_commit_1_partition",
        "ratios_to_baseline": {k: round(v["per_second"] / base, 3) for k, v in figures.items()},
        "partition_commits_per_second_10_partition_requests": round(
            figures["member_commit_10_partitions"]["per_second"] * 10, 1
        ),
    }
