"""A shard process as an operator runs it: worker processes, ShardControl, envelope streams
(``groupcoord shard``'s supervisor and workers, hosting the runtime's register test shard)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator

import grpc
import pytest
import register_pb2
import register_pb2_grpc
import register_shard_process
from register_shard import RegisterShard

from groupcoord.common.partitioning import worker_for
from groupcoord.controlplane.local import free_port_block
from groupcoord.coordinator.runtime.worker_runtime import WorkerRuntime
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.rpc.v1 import shard_control_pb2 as sc
from groupcoord.rpc.v1 import shard_control_pb2_grpc as sc_grpc

pytestmark = [pytest.mark.broker, pytest.mark.slow]

PARTITIONS = 4
WORKERS = 2


@pytest.fixture
def shard(broker: EmbeddedBroker) -> Iterator[tuple[subprocess.Popen[bytes], int, int, str]]:
    topic = f"state-{uuid.uuid4().hex[:8]}"
    grpc_port = free_port_block(WORKERS)
    metrics_port = free_port_block(1)
    proc = subprocess.Popen(
        [
            *(sys.executable, str(register_shard_process.PATH)),
            *("--shard-id", "7", "--threads", str(WORKERS), "--kafka", broker.bootstrap),
            *("--state-topic", topic, "--partitions", str(PARTITIONS)),
            *("--grpc-port", str(grpc_port), "--grpc-host", "127.0.0.1", "--metrics-port", str(metrics_port)),
        ],
        start_new_session=True,
    )
    try:
        yield proc, grpc_port, metrics_port, topic
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


async def wait_for(predicate, what: str, attempts: int = 300):  # type: ignore[no-untyped-def]
    last: object = None
    for _ in range(attempts):
        try:
            last = await predicate()
            if last:
                return last
        except grpc.aio.AioRpcError as exc:
            last = exc
        await asyncio.sleep(0.1)
    raise AssertionError(f"{what}: {last}")


async def stream_calls(
    port: int, envelopes: list[register_pb2.RegisterEnvelope]
) -> dict[int, register_pb2.RegisterReply]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
        batches = register_pb2_grpc.RegisterStub(ch).Batches(
            iter([register_pb2.RegisterBatch(envelopes=envelopes)])
        )
        return {r.correlation_id: r async for batch in batches for r in batch.replies}


async def test_shard_process_serves_its_partitions_from_two_workers(shard, broker) -> None:
    proc, grpc_port, metrics_port, topic = shard
    async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as ch:
        control = sc_grpc.ShardControlStub(ch)
        for w in range(WORKERS):
            async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port + w}") as wch:
                ping = await wait_for(
                    lambda wch=wch: sc_grpc.ShardControlStub(wch).Ping(sc.ShardPingRequest()), "ping"
                )
                assert (ping.shard_id, ping.worker, ping.workers) == ("7", w, WORKERS)

        # The control plane talks to worker 0 only; it fans out to worker 1.
        leaders = [sc.PartitionEpoch(partition=p, epoch=1) for p in range(PARTITIONS)]
        await control.SetLeadership(sc.SetLeadershipRequest(leaders=leaders))

        async def all_active() -> sc.StatusResponse | None:
            st = await control.Status(sc.StatusRequest())
            ok = len(st.partitions) == PARTITIONS and all(
                p.state == sc.PARTITION_STATE_ACTIVE for p in st.partitions
            )
            return st if ok else None

        status = await wait_for(all_active, "partitions active")
        assert [(p.partition, p.worker, p.epoch) for p in status.partitions] == [
            (p, worker_for(p, WORKERS), 1) for p in range(PARTITIONS)
        ]

    # Each worker answers for its own partitions; the wrong worker says NOT_COORDINATOR.
    for w in range(WORKERS):
        envs = [
            register_pb2.RegisterEnvelope(
                correlation_id=p * 100 + i,
                partition=p,
                put=register_pb2.RegisterPutRequest(name=f"n{i}", value=p),
            )
            for p in range(PARTITIONS)
            for i in range(20)
        ]
        replies = await stream_calls(grpc_port + w, envs)
        assert len(replies) == len(envs)
        for e in envs:
            expected = 0 if worker_for(e.partition, WORKERS) == w else 16
            assert replies[e.correlation_id].error_code == expected

    # One metrics port for the shard process: every worker's series, labelled by worker.
    active = [f'groupcoord_partition_count{{shard="7",state="active",worker="{w}"}} 2.0' for w in range(2)]

    async def scrape() -> str | None:  # gauges are published once a second
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        text = (await asyncio.to_thread(urllib.request.urlopen, url, timeout=5)).read().decode()
        return text if all(line in text for line in active) else None

    body = await wait_for(scrape, "both workers publish their two active partitions")
    for w in range(WORKERS):
        assert f'groupcoord_shard_worker_up{{shard="7",worker="{w}"}} 1.0' in body
        # each worker answered all 80 puts (20 per partition) sent to it, its own or not
        assert (
            'groupcoord_request_latency_seconds_count{api="put",component="shard",shard="7",'
            f'worker="{w}"}} 80.0'
        ) in body
        assert f'groupcoord_thread_idle_ratio_avg{{shard="7",worker="{w}"}}' in body  # custom collector
        assert f'process_resident_memory_bytes{{worker="{w}"}}' in body
    assert "groupcoord_state_write_latency_seconds_count" in body
    assert body.count("# TYPE groupcoord_partition_count gauge") == 1  # merged, not repeated

    proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.wait, 30) == 0

    # What the shard acknowledged is on the state topic: another shard takes partition 3 over.
    rt = WorkerRuntime(
        bootstrap=broker.bootstrap, topic=topic, partitions=PARTITIONS, shard_factory=RegisterShard
    )
    await rt.start()
    try:
        await rt.become_leader(3, 2)
        assert rt.partition(3).shard.values == {f"n{i}": 3 for i in range(20)}
    finally:
        await rt.close()


async def test_a_dying_worker_takes_the_shard_down(shard) -> None:
    proc, grpc_port, _, _ = shard
    async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port + 1}") as ch:
        await wait_for(lambda: sc_grpc.ShardControlStub(ch).Ping(sc.ShardPingRequest()), "ping")
    worker_pids = subprocess.run(
        ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True
    ).stdout.split()
    assert len(worker_pids) >= WORKERS
    os.kill(int(worker_pids[-1]), signal.SIGKILL)
    assert await asyncio.to_thread(proc.wait, 30) == 1
