"""In Kubernetes mode a shard takes leadership only from the GroupCoordinator's status.

A real shard process (two workers, the group core, mutual TLS with certificates of a CA made
for the test) follows a resource on a real Kubernetes API server as it does in a pod. A
forged ``ShardControl.SetLeadership`` with epoch 2^31-1, even with the control plane's
certificate, is refused: it would have made that epoch the partitions' highest fence marker
and fenced every later leader. The operator's next epochs are then taken up. The kubelet's
plaintext gRPC probe reaches health on its own port, and nothing else is plaintext.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest
from e2e.kube import SERVING, check, has_status, until

from groupcoord.common import internal_tls
from groupcoord.common.internal_tls import CONTROL_PLANE, SHARD_NAME, InternalTls
from groupcoord.controlplane.local import free_port_block
from groupcoord.controlplane.placement import Assignment, place
from groupcoord.embedded_broker import EmbeddedBroker, free_port
from groupcoord.rpc.v1 import shard_control_pb2 as sc
from groupcoord.rpc.v1 import shard_control_pb2_grpc as sc_grpc

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(120)]

NAME = "lead"
PARTITIONS, WORKERS = 4, 2
FORGED_EPOCH = 2**31 - 1


async def active_epochs(control: InternalTls, grpc_port: int) -> dict[int, int]:
    """partition -> epoch of every ACTIVE partition, over worker 0's fan-out to its peers."""
    async with control.channel(f"127.0.0.1:{grpc_port}") as channel:
        try:
            status = await sc_grpc.ShardControlStub(channel).Status(sc.StatusRequest(), timeout=5)
        except grpc.aio.AioRpcError:
            return {}
    return {p.partition: p.epoch for p in status.partitions if p.state == sc.PARTITION_STATE_ACTIVE}


async def test_a_forged_set_leadership_is_refused_and_the_operators_next_epochs_are_taken(
    workload_namespace: Any, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    kube = workload_namespace
    certificates = internal_tls.issue(tmp_path / "tls")
    control = InternalTls.from_dir(certificates[CONTROL_PLANE])
    grpc_port, health_port = free_port_block(WORKERS), free_port()
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "groupcoord.cli", "shard", "--shard-id", "0"),
            *("--threads", str(WORKERS), "--kafka", broker.bootstrap, "--partitions", str(PARTITIONS)),
            *("--state-topic", f"state-{uuid.uuid4().hex[:8]}", "--grpc-host", "127.0.0.1"),
            *("--grpc-port", str(grpc_port), "--metrics-port", "0", "--metric-samples-interval", "0"),
            *("--leadership", f"kubernetes:{kube.namespace}/{NAME}", "--health-port", str(health_port)),
            *("--internal-tls-dir", str(certificates[SHARD_NAME])),
        ],
        start_new_session=True,
        env={**os.environ, "KUBECONFIG": str(kube.kubeconfig)},
    )
    try:
        first = place(PARTITIONS, [0])
        await kube.publish(NAME, first, shards=1, new=True)
        # The kubelet's plaintext probe: health alone on its port; the gRPC port wants a certificate.
        await until("ready on the health port", lambda: has_status(check(health_port), SERVING), timeout=60)
        assert await check(grpc_port) is None
        expected = {p: a.epoch for p, a in first.items()}

        async def led(epochs: dict[int, int]) -> bool:
            return await active_epochs(control, grpc_port) == epochs

        await until("every partition active at the placed epochs", lambda: led(expected), timeout=60)

        forged = sc.SetLeadershipRequest(
            leaders=[sc.PartitionEpoch(partition=p, epoch=FORGED_EPOCH) for p in range(PARTITIONS)]
        )
        for worker in range(WORKERS):  # worker 0 and, directly, its peer
            async with control.channel(f"127.0.0.1:{grpc_port + worker}") as channel:
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await sc_grpc.ShardControlStub(channel).SetLeadership(forged, timeout=5)
            assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert await active_epochs(control, grpc_port) == expected

        # The operator's next epochs (a move: epoch + 1) are taken up, not fenced.
        second = {p: Assignment(leader=0, epoch=a.epoch + 1) for p, a in first.items()}
        await kube.publish(NAME, second)
        expected = {p: a.epoch for p, a in second.items()}
        await until("every partition active at the operator's next epochs", lambda: led(expected), timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
