"""Throughput of one shard with ``--threads 1`` vs ``--threads 2`` (worker processes).

A real shard process (``groupcoord shard``'s supervisor and workers hosting the register test
shard, started by tests/coordinator/runtime/register_shard_process.py) leads 4 state-topic
partitions on the embedded broker. The same two client processes drive it in both runs, each
over gRPC envelope streams (batches of envelopes, as the gateway sends them) to the worker that
owns each partition (port = base + partition % threads), so the only difference between the
runs is the number of worker processes. Two workloads:
``get`` (read-only: a lookup + gRPC, no broker), ``get_heavy`` (the handler also does ~3000
iterations of Python work, modelling handlers heavier than a lookup such as an assignor run)
and ``put`` (a record per request, written acks=all and confirmed before the reply).

Everything — broker, shard workers, clients — shares this machine's cores. When a request
costs the client about as much CPU as the worker (a bare lookup over Python gRPC), two cores
are saturated by one worker plus its clients and a second worker cannot help; the heavier the
handler, the closer the speedup gets to the core count. ``cpu_count`` and the load average
(other work on the machine) are reported with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import grpc
from _register_shard import REGISTER_SHARD_DIR, register_pb2, register_pb2_grpc

from groupcoord.common.partitioning import worker_for
from groupcoord.controlplane.local import free_port_block
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.rpc.v1 import shard_control_pb2 as sc
from groupcoord.rpc.v1 import shard_control_pb2_grpc as sc_grpc

NAME = "threads"
DESCRIPTION = "shard throughput with 1 vs 2 worker processes (--threads), read-only and write requests"

PARTITIONS = 4
CLIENTS = 2
STREAMS_PER_CLIENT = 4
FEED_BATCH = 64  # envelopes per stream message


WORKLOADS = {
    # name: (api, handler work iterations)
    "get": ("get", 0),
    "get_heavy": ("get", 3000),
    "put": ("put", 0),
}


def _envelopes(
    workload: str, partitions: list[int], n: int, salt: int
) -> list[register_pb2.RegisterEnvelope]:
    api, work = WORKLOADS[workload]
    out = []
    for i in range(n):
        p = partitions[i % len(partitions)]
        name = f"k{(i + salt) % 500}"
        env = register_pb2.RegisterEnvelope(correlation_id=i, partition=p)
        if api == "put":
            env.put.CopyFrom(register_pb2.RegisterPutRequest(name=name, value=i, padding=b"m" * 24))
        else:
            env.get.CopyFrom(register_pb2.RegisterGetRequest(name=name, work=work))
        out.append(env)
    return out


async def _drive(
    base_port: int, workers: int, api: str, n: int, salt: int, go: Any, out: Any
) -> tuple[int, int, float, float]:
    by_worker: dict[int, list[int]] = {}
    for p in range(PARTITIONS):
        by_worker.setdefault(worker_for(p, workers), []).append(p)
    channels = {w: grpc.aio.insecure_channel(f"127.0.0.1:{base_port + w}") for w in by_worker}
    plans = []
    for s in range(STREAMS_PER_CLIENT):
        w = sorted(by_worker)[s % len(by_worker)]
        plans.append(
            (
                register_pb2_grpc.RegisterStub(channels[w]),
                _envelopes(api, by_worker[w], n // STREAMS_PER_CLIENT, salt + s),
            )
        )
    for ch in channels.values():
        await ch.channel_ready()

    async def one(
        stub: register_pb2_grpc.RegisterStub, envs: list[register_pb2.RegisterEnvelope]
    ) -> tuple[int, int]:
        async def feed() -> Any:  # as the gateway does: what is queued goes as one batch
            for i in range(0, len(envs), FEED_BATCH):
                yield register_pb2.RegisterBatch(envelopes=envs[i : i + FEED_BATCH])

        ok = errors = 0
        async for batch in stub.Batches(feed()):
            for reply in batch.replies:
                if reply.error_code:
                    errors += 1
                else:
                    ok += 1
        return ok, errors

    out.put("ready")  # connected and envelopes built: start together with the other clients
    await asyncio.to_thread(go.wait)
    t0 = time.time()
    results = await asyncio.gather(*(one(stub, envs) for stub, envs in plans))
    t1 = time.time()
    for ch in channels.values():
        await ch.close()
    return sum(r[0] for r in results), sum(r[1] for r in results), t0, t1


def _client(base_port: int, workers: int, api: str, n: int, salt: int, go: Any, out: Any) -> None:
    out.put(asyncio.run(_drive(base_port, workers, api, n, salt, go, out)))


async def _lead_all(base_port: int, workers: int) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{base_port}") as ch:
        control = sc_grpc.ShardControlStub(ch)
        for _ in range(300):
            try:
                pings = []
                for w in range(workers):
                    async with grpc.aio.insecure_channel(f"127.0.0.1:{base_port + w}") as wch:
                        pings.append(
                            await sc_grpc.ShardControlStub(wch).Ping(sc.ShardPingRequest(), timeout=1)
                        )
                break
            except grpc.aio.AioRpcError:
                await asyncio.sleep(0.1)
        leaders = [sc.PartitionEpoch(partition=p, epoch=1) for p in range(PARTITIONS)]
        await control.SetLeadership(sc.SetLeadershipRequest(leaders=leaders))
        for _ in range(300):
            st = await control.Status(sc.StatusRequest())
            if len(st.partitions) == PARTITIONS and all(
                p.state == sc.PARTITION_STATE_ACTIVE for p in st.partitions
            ):
                return
            await asyncio.sleep(0.1)
    raise RuntimeError("partitions did not become active")


def _measure(bootstrap: str, workers: int, requests: dict[str, int]) -> dict[str, Any]:
    base = free_port_block(workers)
    shard = subprocess.Popen(
        [
            *(sys.executable, str(REGISTER_SHARD_DIR / "register_shard_process.py"), "--log-level", "WARNING"),
            *("--threads", str(workers), "--kafka", bootstrap, "--partitions", str(PARTITIONS)),
            *(
                "--state-topic",
                f"bench-{uuid.uuid4().hex[:6]}",
                "--grpc-port",
                str(base),
                "--grpc-host",
                "127.0.0.1",
            ),
            *("--metrics-port", "0"),
        ],
        start_new_session=True,
    )
    try:
        asyncio.run(_lead_all(base, workers))
        ctx = multiprocessing.get_context("spawn")
        result: dict[str, Any] = {}
        for api, n in requests.items():
            queue, go = ctx.Queue(), ctx.Event()
            procs = [
                ctx.Process(target=_client, args=(base, workers, api, n // CLIENTS, c * 1000, go, queue))
                for c in range(CLIENTS)
            ]
            for p in procs:
                p.start()
            assert [queue.get(timeout=120) for _ in procs] == ["ready"] * CLIENTS
            go.set()
            outs = [queue.get(timeout=600) for _ in procs]
            for p in procs:
                p.join()
            ok = sum(o[0] for o in outs)
            errors = sum(o[1] for o in outs)
            elapsed = max(o[3] for o in outs) - min(o[2] for o in outs)
            result[api] = {
                "requests": ok + errors,
                "errors": errors,
                "seconds": round(elapsed, 3),
                "per_s": round(ok / elapsed),
            }
        return result
    finally:
        os.killpg(shard.pid, signal.SIGTERM)
        try:
            shard.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(shard.pid, signal.SIGKILL)
            shard.wait()


def run(args: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog=f"bench {NAME}")
    parser.add_argument("--gets", type=int, default=20_000, help="read-only requests per run")
    parser.add_argument(
        "--heavy", type=int, default=6_000, help="read-only requests with handler work per run"
    )
    parser.add_argument("--puts", type=int, default=20_000, help="write requests per run")
    parser.add_argument("--rounds", type=int, default=2, help="alternating 1/2-worker runs; best counts")
    opts = parser.parse_args(args)
    requests = {"get": opts.gets, "get_heavy": opts.heavy, "put": opts.puts}
    samples: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    load_before = os.getloadavg()
    with EmbeddedBroker() as broker:
        for _ in range(opts.rounds):  # alternate, so drifting background load hits both alike
            for workers in (1, 2):
                samples[workers].append(_measure(broker.bootstrap, workers, requests))
    best = {w: {k: max(s[k]["per_s"] for s in samples[w]) for k in requests} for w in samples}
    return {
        "cpu_count": os.cpu_count(),
        "design": "N worker processes per shard (GIL: threads would not run Python in parallel); "
        "partition p on worker p % N, each with its own loop, producer and gRPC port",
        "best_per_s_threads_1": best[1],
        "best_per_s_threads_2": best[2],
        "speedup": {k: round(best[2][k] / best[1][k], 2) for k in requests},
        "samples_per_s": {w: [{k: s[k]["per_s"] for k in requests} for s in samples[w]] for w in samples},
        "errors": sum(s[k]["errors"] for w in samples for s in samples[w] for k in requests),
        "load_average_before_after": [load_before, os.getloadavg()],
    }
