"""Takeover time: load a state-topic partition holding N groups and M committed offsets.

Figures: a cold takeover (write the epoch marker, read the whole partition, filter by fence,
compact in memory, decode, replay into the live and the committed replica) and a warm takeover
from a hot standby that has been tailing the partition (only the tail is read). Those use the
register test shard's records (tests/coordinator/runtime/register_shard.py), sized like offset commits
(key ~ group/topic/partition, value ~ offset + metadata) and like group metadata for the
groups, written under a previous leader's epoch as a real log would be. A last figure loads
the same number of real ``OffsetCommit`` records into the real group cores
(``GroupCoordinatorShard``): what a takeover costs with today's offsets core.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Iterator

from _register_shard import register_pb2, register_shard

from groupcoord.coordinator.core.contract import CoordinatorRecord, serialize_record
from groupcoord.coordinator.runtime.fencing import Fence
from groupcoord.coordinator.runtime.statelog import StateLogWriter, ensure_topic
from groupcoord.coordinator.runtime.worker_runtime import WorkerRuntime
from groupcoord.embedded_broker import EmbeddedBroker

NAME = "takeover"
DESCRIPTION = "time to take over a partition with N groups / M offsets: full reload vs hot standby"

OFFSET_PADDING = b"m" * 24  # offset + leader epoch + metadata + timestamps of a commit
GROUP_PADDING = b"g" * 300  # group metadata: protocol, members, assignment


async def populate(bootstrap: str, topic: str, groups: int, offsets: int) -> int:
    """``groups`` group records and ``offsets`` offset commits spread over them."""
    per_group = max(offsets // max(groups, 1), 1)

    def records() -> Iterator[tuple[bytes, bytes | None]]:
        for g in range(groups):
            key = register_pb2.RegisterKey(name=f"group-{g:06d}")
            yield serialize_record(
                CoordinatorRecord(key, register_pb2.RegisterValue(value=g, padding=GROUP_PADDING))
            )
        for i in range(offsets):
            key = register_pb2.RegisterKey(name=f"group-{i // per_group:06d}/orders-topic/{i % per_group}")
            yield serialize_record(
                CoordinatorRecord(key, register_pb2.RegisterValue(value=i, padding=OFFSET_PADDING))
            )

    return await _write_log(bootstrap, topic, records())


async def measure(bootstrap: str, groups: int, offsets: int, tail: int) -> dict[str, object]:
    topic = f"bench-state-{uuid.uuid4().hex[:6]}"
    await ensure_topic(bootstrap, topic, 1)
    t0 = time.perf_counter()
    written = await populate(bootstrap, topic, groups, offsets)
    populate_s = time.perf_counter() - t0

    def runtime(shard_id: str) -> WorkerRuntime:
        return WorkerRuntime(
            bootstrap=bootstrap,
            topic=topic,
            partitions=1,
            shard_factory=register_shard.RegisterShard,
            shard_id=shard_id,
        )

    cold = runtime("cold")
    await cold.start()
    t0 = time.perf_counter()
    await cold.become_leader(0, 3)
    cold_s = time.perf_counter() - t0
    part = cold.partition(0)
    assert part is not None and isinstance(part.shard, register_shard.RegisterShard)
    registers = len(part.shard.values)
    records_loaded = part.records_loaded

    standby = runtime("standby")
    await standby.start()
    await standby.start_standby(0)
    sp = standby.partition(0)
    assert sp is not None
    while sp.lag is None or sp.lag > 0:
        await asyncio.sleep(0.05)
    # The old leader keeps writing after the standby caught up: the takeover reads this tail.
    await asyncio.gather(
        *(cold.submit(0, register_shard.OPERATIONS["put"](_put(f"tail-{i}", i))) for i in range(tail))
    )
    await cold.resign(0)
    t0 = time.perf_counter()
    await standby.become_leader(0, 4)
    warm_s = time.perf_counter() - t0
    sp = standby.partition(0)
    assert sp is not None and isinstance(sp.shard, register_shard.RegisterShard)
    assert len(sp.shard.values) == registers + tail
    await cold.close()
    await standby.close()
    return {
        "groups": groups,
        "offsets": offsets,
        "log_records": written,
        "records_replayed": records_loaded,
        "populate_s": round(populate_s, 2),
        "cold_takeover_decoding_core_s": round(cold_s, 3),
        "cold_decoding_records_per_s": round(records_loaded / cold_s),
        "warm_takeover_tail_records": tail,
        "warm_takeover_s": round(warm_s, 3),
        "speedup_warm_vs_cold_decoding": round(cold_s / warm_s, 1),
        "target": "cold takeover of 10,000 groups + 1,000,000 offsets <= 5 s",
        "target_met_decoding_core": cold_s <= 5.0 if (groups, offsets) == (10_000, 1_000_000) else None,
        "note": "register test shard records sized like offset commits/group metadata; "
        "group_core_offsets: the real GroupCoordinatorShard loading real OffsetCommit records",
    }


async def measure_group_core(bootstrap: str, groups: int, offsets: int) -> dict[str, object]:
    """Cold takeover with the real group cores (GroupCoordinatorShard) over real offset records."""
    from groupcoord.coordinator.server.coordinator_service import group_shard_factory  # noqa: PLC0415
    from groupcoord.records.v1.offsets_pb2 import OffsetCommitKey, OffsetCommitValue  # noqa: PLC0415

    topic = f"bench-offsets-{uuid.uuid4().hex[:6]}"
    await ensure_topic(bootstrap, topic, 1)
    per_group = max(offsets // max(groups, 1), 1)

    def records() -> Iterator[tuple[bytes, bytes | None]]:
        for i in range(offsets):
            key = OffsetCommitKey(
                group_id=f"group-{i // per_group:06d}", topic="orders-topic", partition=i % per_group
            )
            value = OffsetCommitValue(
                offset=1_000_000 + i,
                leader_epoch=5,
                commit_timestamp_ms=1_700_000_000_000,
                expire_timestamp_ms=-1,
            )
            yield serialize_record(CoordinatorRecord(key, value))

    t0 = time.perf_counter()
    written = await _write_log(bootstrap, topic, records())
    populate_s = time.perf_counter() - t0
    rt = WorkerRuntime(bootstrap=bootstrap, topic=topic, partitions=1, shard_factory=group_shard_factory)
    await rt.start()
    t0 = time.perf_counter()
    await rt.become_leader(0, 2)
    load_s = time.perf_counter() - t0
    part = rt.partition(0)
    assert part is not None
    loaded_groups = len(part.shard.groups)  # type: ignore[union-attr]
    await rt.close()
    return {
        "log_records": written,
        "groups_loaded": loaded_groups,
        "populate_s": round(populate_s, 2),
        "cold_takeover_s": round(load_s, 3),
        "records_per_s": round(offsets / load_s),
        "target_met": load_s <= 5.0 if offsets >= 1_000_000 else None,
    }


async def _write_log(bootstrap: str, topic: str, entries: Iterator[tuple[bytes, bytes | None]]) -> int:
    """Write ``entries`` to partition 0 under a previous leader's fence, as a real log holds them."""
    writer = StateLogWriter(bootstrap, topic)
    await writer.start()
    old = Fence.new(1)
    written = 1
    try:
        await writer.append(0, [old.marker("previous-leader")], None)
        pending: list[asyncio.Future[object]] = []
        chunk: list[tuple[bytes, bytes | None]] = []
        for entry in entries:
            chunk.append(entry)
            if len(chunk) >= 50_000:
                pending.append(asyncio.ensure_future(writer.append(0, chunk, old.tag())))
                written += len(chunk)
                chunk = []
                if len(pending) > 4:
                    await pending.pop(0)
        if chunk:
            pending.append(asyncio.ensure_future(writer.append(0, chunk, old.tag())))
            written += len(chunk)
        await asyncio.gather(*pending)
    finally:
        await writer.stop()
    return written


def _put(name: str, value: int):  # type: ignore[no-untyped-def]

    return register_pb2.RegisterPutRequest(name=name, value=value, padding=OFFSET_PADDING)


def run(args: list[str]) -> dict[str, object]:
    parser = argparse.ArgumentParser(prog=f"bench {NAME}")
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--offsets", type=int, default=1_000_000)
    parser.add_argument("--tail", type=int, default=1_000, help="records written after the standby caught up")
    parser.add_argument("--kafka", help="use this cluster instead of an embedded broker")
    parser.add_argument("--no-group-core", action="store_true", help="skip the real group cores' figure")
    opts = parser.parse_args(args)

    async def both(bootstrap: str) -> dict[str, object]:
        result = await measure(bootstrap, opts.groups, opts.offsets, opts.tail)
        if not opts.no_group_core:
            result["group_core_offsets"] = await measure_group_core(bootstrap, opts.groups, opts.offsets)
        return result

    if opts.kafka:
        return asyncio.run(both(opts.kafka))
    with EmbeddedBroker() as broker:
        result = asyncio.run(both(broker.bootstrap))
    return {"broker": "embedded tansu (in-memory)", **result}
