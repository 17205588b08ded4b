"""e2e-heartbeat: KIP-848 steady-state heartbeats per second through gateway + shards.

Starts the embedded broker and a local cluster (gateway + shard processes), joins M members
spread over G groups with ConsumerGroupHeartbeat v1 (client-generated member ids), waits for
every member to reach a stable epoch, then sends steady-state heartbeats (epoch only, every
other field null: what a stable Java/librdkafka member sends) as fast as the cluster answers,
with W requests in flight per connection. Prints heartbeats/s and p50/p99 latency; the load
generator sends precomputed frames so its own cost stays small.

Then the latency curve (``--rates``): the same shape of load sent open loop at fixed rates, rate
after rate until p99 passes 40 ms or the generator falls behind its schedule; the knee is the
highest rate whose p99 is at most 20 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

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


async def join(
    bootstrap: str, topic: str, groups: int, members: int, settle_s: float = 0.0
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Join ``members`` over ``groups`` and heartbeat round after round (acknowledging each
    assignment by reporting it as owned) until a whole round changes no epoch: every group is
    stable. The (group, member) pairs and each member's epoch.

    ``settle_s``: a round that changes nothing counts as stable only if another round,
    ``settle_s`` later, changes nothing either (Kafka 4.4's own coordinator updates target
    assignments off the heartbeat path, at most every ``group.consumer.assignment.interval.ms``;
    a member heartbeating at an epoch it was since moved past is fenced)."""
    from kio.schema.consumer_group_heartbeat.v1.request import (  # noqa: PLC0415
        ConsumerGroupHeartbeatRequest,
        TopicPartitions,
    )
    from kio.static.primitive import i32, i32Timedelta  # noqa: PLC0415

    from groupcoord.common.kafka_wire import codec  # noqa: PLC0415
    from groupcoord.common.kafka_wire.framing import ClientConnection, frame_bytes  # noqa: PLC0415

    host, port = bootstrap.rsplit(":", 1)
    port_i = int(port)
    group_ids = [f"hb-{uuid.uuid4().hex[:6]}-{g}" for g in range(groups)]
    member_list = [(group_ids[i % groups], uuid.uuid4().hex) for i in range(members)]

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

    return member_list, epochs


def steady_frame(group_id: str, member_id: str, epoch: int, correlation_id: int) -> bytes:
    """A stable member's heartbeat (epoch only, every other field null), framed."""
    from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest  # noqa: PLC0415
    from kio.static.primitive import i32  # noqa: PLC0415

    from groupcoord.common.kafka_wire import codec  # noqa: PLC0415
    from groupcoord.common.kafka_wire.framing import frame_bytes  # noqa: PLC0415

    req = ConsumerGroupHeartbeatRequest(group_id=group_id, member_id=member_id, member_epoch=i32(epoch), topic_partitions=None)
    return frame_bytes(codec.encode_request(correlation_id, "bench", req))


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
    """Closed loop: ``window`` heartbeats in flight on each of ``conns`` connections, as fast as
    the cluster answers (``settle_s``: see :func:`join`)."""
    from groupcoord.common.kafka_wire.framing import ClientConnection  # noqa: PLC0415

    host, port = bootstrap.rsplit(":", 1)
    port_i = int(port)
    member_list, epochs = await join(bootstrap, topic, groups, members, settle_s)

    def steady(gid: str, mid: str, cid: int) -> bytes:
        return steady_frame(gid, mid, epochs[mid], cid)

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


KNEE_P99_MS = 20.0  # the bound: the knee is the highest rate with p99 at most this
GENERATOR_LATE_MS = 5.0  # a point counts only if the generator wrote on time (p99 late at most this)
DEFAULT_RATES = (1_000, 2_000, 3_000, 4_000, 5_000, 6_000, 8_000, 10_000, 12_000, 16_000, 20_000)


async def open_loop(
    host: str, port: int, member_list: list[tuple[str, str]], epochs: dict[str, int], rate: int, seconds: float, conns: int
) -> dict[str, object]:
    """Open loop: heartbeats sent at ``rate`` per second in all, on a fixed schedule whatever
    the answers (as members heartbeat on their own clocks), spread over ``conns`` connections.
    Each latency counts from when its heartbeat was written; how late the writes were against
    the schedule is ``generator_late_p99_ms``: on a small machine this generator competes for
    the CPU with the cluster, and a point where it fell behind measures it, not the cluster."""
    from groupcoord.common.kafka_wire.framing import ClientConnection  # noqa: PLC0415

    latencies: list[float] = []
    late: list[float] = []  # how long after it was due each heartbeat left here (the generator's own lag)
    sent_total = 0
    errors = 0
    per_conn = rate / conns
    slices = [member_list[k::conns] for k in range(conns)]

    async def one(members_: list[tuple[str, str]]) -> None:
        nonlocal sent_total, errors
        reader, writer = await _connection(host, port)
        frames = [steady_frame(g, m, epochs[m], 0) for g, m in members_]
        due: dict[int, float] = {}
        start = time.perf_counter()
        end = start + seconds
        done = asyncio.Event()

        async def receive() -> None:
            nonlocal errors
            c = ClientConnection()
            while not (done.is_set() and not due):
                try:
                    data = await asyncio.wait_for(reader.read(1 << 16), timeout=2.0)
                except TimeoutError:
                    return  # answers lost past the end are counted as missing
                if not data:
                    return
                now = time.perf_counter()
                for cid, payload in c.receive_data(data):
                    latencies.append((now - due.pop(cid)) * 1000)
                    errors += payload[9:11] != b"\x00\x00"

        receiver = asyncio.create_task(receive())
        k = 0
        while True:
            now = time.perf_counter()
            if now >= end:
                break
            while start + k / per_conn <= now:  # everything due by now
                frame = frames[k % len(frames)]
                due[k] = now
                late.append((now - (start + k / per_conn)) * 1000)
                writer.write(frame[:8] + k.to_bytes(4, "big") + frame[12:])
                k += 1
            await asyncio.sleep(max(0.0, start + k / per_conn - time.perf_counter()))
        sent_total += k
        done.set()
        await receiver
        writer.close()

    await asyncio.gather(*(one(sl) for sl in slices if sl))
    return {
        "rate": rate,
        "sent": sent_total,
        "answered": len(latencies),
        "p50_ms": round(statistics.median(latencies), 3) if latencies else None,
        "p99_ms": round(_pct(latencies, 0.99), 3) if len(latencies) == sent_total else None,
        "errors": errors,
        "generator_late_p99_ms": round(_pct(late, 0.99), 3),
    }


async def knee(
    bootstrap: str,
    topic: str,
    groups: int,
    members: int,
    rates: Sequence[int],
    seconds: float,
    conns: int,
    settle_s: float = 0.0,
    cpu: Callable[[], Any] | None = None,
) -> dict[str, object]:
    """The latency curve, rate by rate (open loop), until p99 passes twice the bound or answers
    go missing; the knee is the highest rate with p99 at most :data:`KNEE_P99_MS`. ``cpu``: a
    new CPU sampler (``request_path.CpuSampler``) for each rate, whose figures join the point."""
    host, port = bootstrap.rsplit(":", 1)
    member_list, epochs = await join(bootstrap, topic, groups, members, settle_s)
    curve: list[dict[str, object]] = []
    for rate in rates:
        if cpu is None:
            point = await open_loop(host, int(port), member_list, epochs, rate, seconds, conns)
        else:
            with cpu() as sampler:
                point = await open_loop(host, int(port), member_list, epochs, rate, seconds, conns)
            point |= cpu_figures(sampler.share(), rate)
        curve.append(point)
        p99 = point["p99_ms"]
        point["generator_kept_up"] = point["generator_late_p99_ms"] <= GENERATOR_LATE_MS
        if p99 is None or p99 > 2 * KNEE_P99_MS or point["errors"] or not point["generator_kept_up"]:
            break
    within = [
        p["rate"]
        for p in curve
        if p["p99_ms"] is not None and p["p99_ms"] <= KNEE_P99_MS and not p["errors"] and p["generator_kept_up"]
    ]
    return {
        "knee_heartbeats_per_s": max(within, default=0),
        "knee_p99_bound_ms": KNEE_P99_MS,
        "generator_bound": not curve[-1]["generator_kept_up"] if curve else False,
        "curve": curve,
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
        result = {**result, **cpu_figures(cpu.share(last_s=opts.seconds), result["heartbeats_per_s"])}
        rates = getattr(opts, "rates", ())
        if rates:  # the latency curve on the same cluster, new groups of the same shape
            result["latency_curve"] = asyncio.run(
                knee(
                    up.bootstrap,
                    topic,
                    opts.groups,
                    opts.members,
                    rates,
                    opts.rate_seconds,
                    opts.connections,
                    cpu=lambda: CpuSampler(processes_of(up.proc.pid, upstream, "tansu")),
                )
            )
        return result


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
    parser.add_argument(
        "--gateway-processes",
        type=lambda text: tuple(int(n) for n in text.split(",") if n),
        default=(1,),
        help="gateway processes (SO_REUSEPORT), comma-separated: one cluster and one run per "
        "count, back to back, with ratios to the first",
    )


def run(args: list[str]) -> dict[str, object]:
    parser = argparse.ArgumentParser(prog=NAME)
    add_load_options(parser)
    add_cluster_options(parser)
    parser.add_argument(
        "--no-internal-tls", action="store_true", help="plaintext gateway-shard gRPC (the cost of mutual TLS)"
    )
    parser.add_argument(
        "--rates",
        type=lambda text: tuple(int(r) for r in text.split(",") if r),
        default=DEFAULT_RATES,
        help="heartbeats/s of the open-loop latency curve after the closed-loop run, comma-separated "
        "('' for none); the knee is the highest with p99 <= 20 ms",
    )
    parser.add_argument("--rate-seconds", type=float, default=3.0, help="seconds at each rate")
    opts = parser.parse_args(args)
    common = ["--no-internal-tls"] if opts.no_internal_tls else []
    runs = {
        n: measure(opts, [*common, "--gateway-processes", str(n)]) for n in opts.gateway_processes
    }
    first, *_ = runs.values()
    result: dict[str, object] = {
        "shards": opts.shards,
        "threads_per_shard": opts.threads,
        "internal_tls": not opts.no_internal_tls,
    }
    if len(runs) == 1:
        return {**result, "gateway_processes": opts.gateway_processes[0], **first}
    result["by_gateway_processes"] = runs
    result["heartbeats_per_s_ratio_to_first"] = {
        n: round(float(r["heartbeats_per_s"]) / max(float(first["heartbeats_per_s"]), 1e-9), 2)  # type: ignore[arg-type]
        for n, r in runs.items()
    }
    return result
