"""heartbeat-core: steady-state KIP-848 heartbeats per second through the sans-IO core, one core.

A group of N members (default 1,000) subscribed to one topic of 2N partitions is brought to
Stable; then every member heartbeats round-robin as clients do in steady state (current
epoch, only the owned partitions, nothing changed). Each heartbeat runs the handler, replays
its records (none when nothing changed) and serializes them, as the runtime would. Also
measured: a full-request heartbeat (every field set, as after an error) and a join of one
more member into the stable group (epoch bump + assignment + reconciliation).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import uuid

from _core_test_doubles import MockClock, MockTimer

from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import CoordinatorResult, apply_timer_intents, serialize_record
from groupcoord.coordinator.core.group_coordinator_shard import GroupCoordinatorShard
from groupcoord.coordinator.core.topics_image import TopicImage, TopicsImage
from groupcoord.rpc.v1 import consumer_group_pb2 as pb

NAME = "heartbeat-core"
DESCRIPTION = "KIP-848 steady-state heartbeats per second through the core (one core), p50/p99"


def _apply(shard: GroupCoordinatorShard, timer: MockTimer, result: CoordinatorResult) -> CoordinatorResult:  # type: ignore[type-arg]
    """What the runtime does with a result: the timer intents, then the records."""
    apply_timer_intents(timer, result.timers)
    for record in result.records:
        serialize_record(record)
        shard.replay(record)
    return result


def _request(member_id: str, epoch: int, owned: list[pb.ConsumerGroupHeartbeatTopicPartitions], full: bool):  # noqa: ANN202
    r = pb.ConsumerGroupHeartbeatRequest(
        api_version=1, group_id="bench", member_id=member_id, member_epoch=epoch
    )
    r.rebalance_timeout_ms = 300_000 if full or epoch == 0 else -1
    r.topic_partitions.SetInParent()
    r.topic_partitions.topic_partitions.extend(owned)
    if full or epoch == 0:
        r.subscribed_topic_names.SetInParent()
        r.subscribed_topic_names.names.append("topic")
    return r


def run(args: list[str]) -> dict[str, object]:
    parser = argparse.ArgumentParser(prog=NAME)
    parser.add_argument("--members", type=int, default=1_000)
    parser.add_argument("--heartbeats", type=int, default=50_000)
    opts = parser.parse_args(args)
    n = opts.members
    clock = MockClock()
    timer = MockTimer(clock)
    shard = GroupCoordinatorShard(timer, GroupConfig())
    tid = uuid.uuid5(uuid.NAMESPACE_OID, "topic").bytes
    _apply(shard, timer, shard.on_metadata_update(TopicsImage.of([TopicImage(tid, "topic", 2 * n)]), 0))
    ids = [f"member-{i:05d}" for i in range(n)]
    epochs = dict.fromkeys(ids, 0)
    owned: dict[str, list[pb.ConsumerGroupHeartbeatTopicPartitions]] = dict.fromkeys(ids, [])
    t0 = time.perf_counter()
    for m in ids:
        resp = _apply(shard, timer, shard.consumer_group_heartbeat(_request(m, 0, [], False), 0)).response
        epochs[m] = resp.member_epoch
    formation_s = time.perf_counter() - t0
    for _ in range(4):  # revocations, then assignments, until stable
        for m in ids:
            resp = _apply(
                shard, timer, shard.consumer_group_heartbeat(_request(m, epochs[m], owned[m], False), 0)
            ).response
            epochs[m] = resp.member_epoch
            if resp.HasField("assignment"):
                owned[m] = list(resp.assignment.topic_partitions)
    group = shard.groups["bench"]
    assert group.state_name() == "Stable", group

    samples = []
    records = 0
    start = time.perf_counter()
    for i in range(opts.heartbeats):
        m = ids[i % n]
        req = _request(m, epochs[m], owned[m], False)
        t = time.perf_counter()
        result = _apply(shard, timer, shard.consumer_group_heartbeat(req, 0))
        samples.append(time.perf_counter() - t)
        records += len(result.records)
        assert result.response.error_code == 0
    elapsed = time.perf_counter() - start
    samples.sort()

    full = []
    for m in ids[:1000]:
        t = time.perf_counter()
        _apply(shard, timer, shard.consumer_group_heartbeat(_request(m, epochs[m], owned[m], True), 0))
        full.append(time.perf_counter() - t)
    # One sample: collect first, so that a full collection that happens to fall due (its timing
    # shifts with every allocation anywhere in the process) is not what the figure measures.
    gc.collect()
    t = time.perf_counter()
    _apply(shard, timer, shard.consumer_group_heartbeat(_request("late-joiner", 0, [], False), 0))
    join_ms = (time.perf_counter() - t) * 1000
    return {
        "members": n,
        "partitions": 2 * n,
        "group_formation_s": round(formation_s, 3),
        "steady_heartbeats_per_s": round(opts.heartbeats / elapsed),
        "steady_p50_us": round(statistics.median(samples) * 1e6, 1),
        "steady_p99_us": round(samples[int(0.99 * (len(samples) - 1))] * 1e6, 1),
        "steady_records_written": records,
        "full_request_p50_us": round(statistics.median(full) * 1e6, 1),
        "join_into_stable_group_ms": round(join_ms, 2),
    }
