"""classic-rebalance-core: cost of a full JoinGroup/SyncGroup rebalance through the sans-IO core.

For groups of 10, 100 and 1,000 members (formed once), each sample is one complete rebalance:
the leader rejoins (starting it), every other member rejoins (the last join completes the
phase and answers all waiting JoinGroups), the followers send SyncGroup (they wait) and the
leader's SyncGroup delivers every assignment. Every request's records are serialized as for
the state topic and replayed into the live state, as the runtime does. Figures per size: the
rebalance's wall time (p50/p99), the cost per member, and records written per rebalance.
The 10-member rebalance is the baseline for the per-member ratios (1.0 = linear scaling).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from _core_test_doubles import MockClock, MockTimer

from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import (
    PENDING,
    CoordinatorResult,
    apply_timer_intents,
    serialize_record,
)
from groupcoord.coordinator.core.group_coordinator_shard import GroupCoordinatorShard
from groupcoord.rpc.v1 import classic_group_pb2 as pb

NAME = "classic-rebalance-core"
DESCRIPTION = "full JoinGroup/SyncGroup rebalance through the core for 10, 100, 1000 members (p50/p99)"


class _Driver:
    def __init__(self) -> None:
        self.clock = MockClock()
        self.timer = MockTimer(self.clock)
        self.shard = GroupCoordinatorShard(
            self.timer, GroupConfig(classic_group_initial_rebalance_delay_ms=0)
        )
        self.answers: dict[Any, Any] = {}
        self.records = 0
        self._n = 0

    def apply(self, result: CoordinatorResult[Any]) -> Any:
        apply_timer_intents(self.timer, result.timers)
        for r in result.records:
            serialize_record(r)
            self.shard.replay(r)
        self.records += len(result.records)
        for token, response in result.completions:
            self.answers[token] = response
        return result.response

    def call(self, api: str, request: Any) -> Any:
        self._n += 1
        token = self._n
        response = self.apply(getattr(self.shard, api)(request, self.clock.now_ms, token=token))
        if response is not PENDING:
            self.answers[token] = response
        return token


def _join(member_id: str, metadata: bytes) -> pb.JoinGroupRequest:
    return pb.JoinGroupRequest(
        api_version=9,
        group_id="g",
        member_id=member_id,
        session_timeout_ms=600_000,
        rebalance_timeout_ms=600_000,
        protocol_type="consumer",
        protocols=[pb.JoinGroupProtocol(name="range", metadata=metadata)],
        client_id="bench",
    )


def _form(d: _Driver, size: int) -> list[str]:
    ids = []
    for _ in range(size):
        token = d.call("join_group", _join("", b"m"))
        ids.append(d.answers[token].member_id)  # MEMBER_ID_REQUIRED
        d.call("join_group", _join(ids[-1], b"m"))
    while expired := d.timer.pop_expired():  # the initial-delay timer re-arms once per newcomer batch
        for _, op in expired:
            d.apply(op())
    return ids


def _rebalance(d: _Driver, ids: list[str], generation_tag: int) -> None:
    group = d.shard.groups["g"]
    leader = group.leader_id  # type: ignore[attr-defined]
    followers = [m for m in ids if m != leader]
    metadata = generation_tag.to_bytes(4, "big")
    join_tokens = [d.call("join_group", _join(leader, metadata))]
    join_tokens += [d.call("join_group", _join(m, metadata)) for m in followers]
    generation = d.answers[join_tokens[0]].generation_id
    assert all(d.answers[t].error_code == 0 for t in join_tokens)
    sync_tokens = [
        d.call(
            "sync_group",
            pb.SyncGroupRequest(api_version=5, group_id="g", member_id=m, generation_id=generation),
        )
        for m in followers
    ]
    assignments = [pb.SyncGroupAssignment(member_id=m, assignment=metadata + m.encode()) for m in ids]
    d.call(
        "sync_group",
        pb.SyncGroupRequest(
            api_version=5, group_id="g", member_id=leader, generation_id=generation, assignments=assignments
        ),
    )
    assert all(d.answers[t].error_code == 0 for t in sync_tokens)
    assert group.state_name() == "Stable"


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog=NAME)
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--seconds", type=float, default=3.0, help="time budget per size")
    parser.add_argument("--min-samples", type=int, default=5)
    opts = parser.parse_args(args)
    figures: dict[str, dict[str, float]] = {}
    for size in (int(s) for s in opts.sizes.split(",")):
        d = _Driver()
        ids = _form(d, size)
        samples: list[float] = []
        records: list[int] = []
        deadline = time.perf_counter() + opts.seconds
        tag = 0
        while len(samples) < opts.min_samples or time.perf_counter() < deadline:
            tag += 1
            before = d.records
            d.answers.clear()
            t0 = time.perf_counter()
            _rebalance(d, ids, tag)
            samples.append(time.perf_counter() - t0)
            records.append(d.records - before)
            if len(samples) >= 200:
                break
        samples.sort()
        p50 = samples[len(samples) // 2]
        figures[str(size)] = {
            "rebalances": len(samples),
            "rebalances_per_second": round(len(samples) / sum(samples), 2),
            "p50_ms": round(p50 * 1e3, 3),
            "p99_ms": round(samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1e3, 3),
            "p50_us_per_member": round(p50 * 1e6 / size, 2),
            "records_per_rebalance": records[-1],
        }
    base_key = next(iter(figures))
    base = figures[base_key]["p50_us_per_member"]
    return {
        "figures": figures,
        "baseline": base_key,
        "per_member_cost_ratio_to_baseline": {
            k: round(v["p50_us_per_member"] / base, 3) for k, v in figures.items()
        },
    }
