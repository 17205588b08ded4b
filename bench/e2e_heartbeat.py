"""e2e-heartbeat: KIP-848 steady-state heartbeats per second through gateway + shards.

Starts the embedded broker and a local cluster (gateway + shard processes), joins M members
spread over G groups with ConsumerGroupHeartbeat v1 (client-generated member ids), waits for
every member to reach a stable epoch, then sends steady-state heartbeats (epoch only, every
other field null: what a stable Java/librdkafka member sends) as fast as the cluster answers,
with W requests in flight per connection. Prints heartbeats/s and p50/p99 latency; the load
generator sends precomputed frames so its own cost stays small.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import statistics
import time
import uuid
from collections.abc import Sequence

NAME = "e2e-heartbeat"
DESCRIPTION = "KIP-848 steady-state heartbeats/s and p50/p99 through gateway + shards"


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def _connection(host: str, port: int):  # noqa: ANN202
    reader, writer = await asyncio.open_connection(host, port)
    return reader, writer


async def _call(reader, writer, frame: bytes, conn):  # noqa: ANN001, ANN202
    writer.write(frame)
    while True:
        got = conn.receive_data(await reader.read(1 << 16))
        if got:
            return got[0][1]


async def scenario(
    bootstrap: str,
    topic: str,
    groups: int,
    members: int,
    seconds: float,
    window: int,
    conns: int,
    settle_s: float = 0.0,
) -> dict:
    """``settle_s``: a round that changes nothing counts as stable only if another round,
    ``settle_s`` later, changes nothing either (Kafka 4.4's own coordinator updates target
    assignments off the heartbeat path, at most every ``group.consumer.assignment.interval.ms``;
    a member heartbeating at an epoch it was since moved past is fenced)."""
    from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest  # noqa: PLC0415
    from kio.static.primitive import i32, i32Timedelta  # noqa: PLC0415

    from groupcoord.common.kafka_wire import codec  # noqa: PLC0415
    from groupcoord.common.kafka_wire.framing import ClientConnection, frame_bytes  # noqa: PLC0415

    host, port = bootstrap.rsplit(":", 1)
    port_i = int(port)
    group_ids = [f"hb-{uuid.uuid4().hex[:6]}-{g}" for g in range(groups)]
    member_list = [(group_ids[i % groups], uuid.uuid4().hex) for i in range(members)]

    # join every member, then heartbeat round after round (acknowledging each assignment by
    # reporting it as owned) until a whole round changes no epoch: the group is stable
    from kio.schema.consumer_group_heartbeat.v1.request import TopicPartitions  # noqa: PLC0415

    reader, writer = await _connection(host, port_i)
    conn = ClientConnection()
    epochs: dict[str, int] = {}
    owned: dict[str, tuple] = {}
    quiet = False  # the previous round changed nothing
    for _ in range(50):
        changed = False
        for gid, mid in member_list:
            joining = mid not in epochs
            req = ConsumerGroupHeartbeatRequest(
                group_id=gid,
                member_id=mid,
                member_epoch=i32(epochs.get(mid, 0)),
                rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30 if joining else -0.001)),
                subscribed_topic_names=(topic,) if joining else None,
                topic_partitions=() if joining else owned.get(mid, ()),
            )
            payload = await _call(reader, writer, frame_bytes(codec.encode_request(1, "bench", req)), conn)
            _, resp = codec.decode_response(68, 1, payload)
            if int(resp.error_code.value) != 0:
                raise RuntimeError(f"heartbeat failed: {resp.error_code} {resp.error_message}")
            if joining or int(resp.member_epoch) != epochs[mid] or resp.assignment is not None:
                changed = True
            epochs[mid] = int(resp.member_epoch)
            if resp.assignment is not None:
                owned[mid] = tuple(
                    TopicPartitions(topic_id=tp.topic_id, partitions=tp.partitions)
                    for tp in resp.assignment.topic_partitions
                )
        if not changed and (quiet or not settle_s):
            break
        quiet = not changed
        if quiet:
            await asyncio.sleep(settle_s)
    else:
        raise RuntimeError("the group did not become stable")
    writer.close()

    def steady(gid: str, mid: str, cid: int) -> bytes:
        req = ConsumerGroupHeartbeatRequest(
            group_id=gid, member_id=mid, member_epoch=i32(epochs[mid]), topic_partitions=None
        )
        return frame_bytes(codec.encode_request(cid, "bench", req))

    latencies: list[float] = []
    errors = 0
    count = 0
    deadline = time.perf_counter() + seconds

    async def driver(slice_: list[tuple[str, str]]) -> None:
        nonlocal errors, count
        r, w = await _connection(host, port_i)
        c = ClientConnection()
        frames = [steady(g, m, i) for i, (g, m) in enumerate(slice_)]
        sent: dict[int, float] = {}
        i = 0
        while time.perf_counter() < deadline:
            while len(sent) < window:
                idx = i % len(frames)
                cid = i
                frame = frames[idx]
                frame = frame[:8] + cid.to_bytes(4, "big") + frame[12:]
                sent[cid] = time.perf_counter()
                w.write(frame)
                i += 1
            for rcid, payload in c.receive_data(await r.read(1 << 16)):
                t0 = sent.pop(rcid)
                latencies.append((time.perf_counter() - t0) * 1000)
                # v1 response: header (correlation id, tagged fields) then throttle, error code
                if payload[9:11] != b"\x00\x00":
                    errors += 1
                count += 1
        w.close()

    per = max(1, len(member_list) // conns)
    start = time.perf_counter()
    await asyncio.gather(*(driver(member_list[k * per : (k + 1) * per]) for k in range(conns)))
    elapsed = time.perf_counter() - start
    return {
        "members": members,
        "groups": groups,
        "connections": conns,
        "in_flight_per_connection": window,
        "heartbeats": count,
        "heartbeats_per_s": round(count / elapsed),
        "p50_ms": round(statistics.median(latencies), 3) if latencies else None,
        "p99_ms": round(_pct(latencies, 0.99), 3),
        "target": {"heartbeats_per_s": 10_000, "p99_ms": 20},
        "errors": errors,
    }


def add_load_options(parser: argparse.ArgumentParser) -> None:
    """The heartbeat load's shape: the options every heartbeat benchmark takes."""
    parser.add_argument("--groups", type=int, default=100, help="heartbeating groups")
    parser.add_argument("--members", type=int, default=1000, help="heartbeating members")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--connections", type=int, default=4)


def run_load(bootstrap: str, topic: str, opts: argparse.Namespace) -> dict[str, object]:
    """The heartbeat load of ``add_load_options``' shape against a running gateway."""
    return asyncio.run(
        scenario(bootstrap, topic, opts.groups, opts.members, opts.seconds, opts.window, opts.connections)
    )


def on_off_ratios(off: dict[str, object], on: dict[str, object]) -> dict[str, float | None]:
    """A feature's cost: throughput and p99 with it on, over the same load with it off."""
    return {
        "heartbeats_per_s_ratio_on_off": round(on["heartbeats_per_s"] / max(1, off["heartbeats_per_s"]), 3),
        "p99_ratio_on_off": round(on["p99_ms"] / off["p99_ms"], 3) if off["p99_ms"] else None,
    }


def measure(opts: argparse.Namespace, extra: Sequence[str] = ()) -> dict[str, object]:
    """The heartbeat load against a cluster of its own: the embedded broker and ``groupcoord up``
    (with the extra CLI arguments ``extra``) in processes of their own, like a real deployment:
    the load generator here must not share an interpreter (and a GIL) with the gateway."""
    from _up_process import UpProcess  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415
    from request_path import CpuSampler, processes_of  # noqa: PLC0415

    from groupcoord.embedded_broker import EmbeddedBroker, free_port  # noqa: PLC0415

    with (
        EmbeddedBroker() as broker,
        UpProcess(broker.bootstrap, free_port(), opts.shards, opts.threads, extra=list(extra)) as up,
    ):
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = f"hb-{uuid.uuid4().hex[:6]}"
        for fut in admin.create_topics([NewTopic(topic, 12, 1)]).values():
            fut.result(15)
        time.sleep(4)  # the shards' topic metadata refresh sees the topic
        assert up.proc is not None
        upstream = [broker.process.pid] if broker.process is not None else []
        with CpuSampler(processes_of(up.proc.pid, upstream, "tansu")) as cpu:
            result = run_load(up.bootstrap, topic, opts)
        return {**result, **cpu_figures(cpu.share(last_s=opts.seconds), result["heartbeats_per_s"])}


def cpu_figures(share: dict[str, float], per_s: object) -> dict[str, object]:
    """Each process's CPU over the steady window (per cent of one core, every thread: gRPC's and
    the loop's C code too), and the coordinator's CPU per heartbeat (gateway and shard
    processes; not the upstream, not the load generator)."""
    ours = sum(v for k, v in share.items() if k.startswith(("gateway", "shard")))
    return {
        "cpu_percent_of_one_core": share,
        "coordinator_cpu_us_per_heartbeat": round(ours / 100 / max(int(per_s), 1) * 1e6, 1),  # type: ignore[call-overload]
    }


def add_cluster_options(parser: argparse.ArgumentParser) -> None:
    """The shape of the cluster :func:`measure` starts."""
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)


def run(args: list[str]) -> dict[str, object]:
    parser = argparse.ArgumentParser(prog=NAME)
    add_load_options(parser)
    add_cluster_options(parser)
    parser.add_argument(
        "--no-internal-tls", action="store_true", help="plaintext gateway-shard gRPC (the cost of mutual TLS)"
    )
    opts = parser.parse_args(args)
    result = measure(opts, ["--no-internal-tls"] if opts.no_internal_tls else [])
    return {
        "shards": opts.shards,
        "threads_per_shard": opts.threads,
        "internal_tls": not opts.no_internal_tls,
        **result,
    }
