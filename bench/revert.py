"""revert: what the runtime's revert of a failed write costs on the partition's loop.

A revert makes the live replica's state a copy of the committed replica's
(``GroupCoordinatorState.copy``, runtime/replicas.py). Two partitions are measured: G groups
(simple classic groups) × O committed offsets each, and one KIP-848 group of N members brought
to Stable. Baseline, measured in the same run: ``copy.deepcopy`` of the whole state (sharing
only the image), the revert this replaced.
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import statistics
import time
import uuid
from collections.abc import Callable

from _core_test_doubles import MockClock, MockTimer

from groupcoord.coordinator.core.classic.classic_group import simple_group_records
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import apply_timer_intents
from groupcoord.coordinator.core.group_coordinator_shard import GroupCoordinatorShard
from groupcoord.coordinator.core.offsets import CommittedOffset, offset_record
from groupcoord.coordinator.core.state import GroupCoordinatorState
from groupcoord.coordinator.core.topics_image import TopicImage, TopicsImage
from groupcoord.rpc.v1 import consumer_group_pb2 as pb

NAME = "revert"
DESCRIPTION = "revert cost: copy of a partition's state (containers, shared values) vs a deep copy"


def _offsets_partition(groups: int, offsets: int) -> GroupCoordinatorShard:
    shard = GroupCoordinatorShard(MockTimer(MockClock()), GroupConfig())
    for g in range(groups):
        group_id = f"group-{g:06d}"
        for record in simple_group_records(group_id, 0):
            shard.replay(record)
        for p in range(offsets):
            value = CommittedOffset(p * 10, 0, "", 0, -1, b"")
            shard.replay(offset_record(group_id, "orders", p, value))
    return shard


def _consumer_partition(members: int) -> GroupCoordinatorShard:
    clock = MockClock()
    timer = MockTimer(clock)
    shard = GroupCoordinatorShard(timer, GroupConfig())
    tid = uuid.uuid5(uuid.NAMESPACE_OID, "topic").bytes
    image = TopicsImage.of([TopicImage(tid, "topic", 2 * members)])
    for record in shard.on_metadata_update(image, 0).records:
        shard.replay(record)
    epochs: dict[str, int] = {}
    owned: dict[str, list[pb.ConsumerGroupHeartbeatTopicPartitions]] = {}
    ids = [f"member-{i:05d}" for i in range(members)]
    for _ in range(5):  # join, then revocations and assignments until stable
        for m in ids:
            r = pb.ConsumerGroupHeartbeatRequest(
                api_version=1, group_id="bench", member_id=m, member_epoch=epochs.get(m, 0)
            )
            r.topic_partitions.SetInParent()
            r.topic_partitions.topic_partitions.extend(owned.get(m, []))
            if m not in epochs:
                r.rebalance_timeout_ms = 300_000
                r.subscribed_topic_names.SetInParent()
                r.subscribed_topic_names.names.append("topic")
            result = shard.consumer_group_heartbeat(r, 0)
            apply_timer_intents(timer, result.timers)
            for record in result.records:
                shard.replay(record)
            epochs[m] = result.response.member_epoch
            if result.response.HasField("assignment"):
                owned[m] = list(result.response.assignment.topic_partitions)
    return shard


def _deep_copy(data: GroupCoordinatorState) -> GroupCoordinatorState:
    return copy.deepcopy(data, {id(data.image): data.image})


def _time_ms(
    copy_of: Callable[[GroupCoordinatorState], GroupCoordinatorState],
    data: GroupCoordinatorState,
    repeat: int,
) -> float:
    samples = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        copied = copy_of(data)
        samples.append((time.perf_counter() - t0) * 1000)
        assert copied == data
    return round(statistics.median(samples), 2)


def _figures(data: GroupCoordinatorState, repeat: int) -> dict[str, object]:
    baseline = _time_ms(_deep_copy, data, repeat)
    copied = _time_ms(GroupCoordinatorState.copy, data, repeat)
    return {
        "copy_ms": copied,
        "baseline_deepcopy_ms": baseline,
        "speedup": round(baseline / max(copied, 1e-3), 1),
    }


def run(args: list[str]) -> dict[str, object]:
    parser = argparse.ArgumentParser(prog=NAME)
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--offsets", type=int, default=100, help="committed offsets per group")
    parser.add_argument("--members", type=int, default=1_000, help="members of the KIP-848 group")
    parser.add_argument("--repeat", type=int, default=5, help="copies per figure (median)")
    opts = parser.parse_args(args)
    load_before = os.getloadavg()
    offsets = _offsets_partition(opts.groups, opts.offsets)
    consumer = _consumer_partition(opts.members)
    return {
        "offsets_partition": {
            "groups": opts.groups,
            "offsets": opts.groups * opts.offsets,
            **_figures(offsets.data, opts.repeat),
        },
        "consumer_partition": {"members": opts.members, **_figures(consumer.data, opts.repeat)},
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
