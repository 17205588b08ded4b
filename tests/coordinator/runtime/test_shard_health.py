"""`groupcoord shard` serves grpc.health.v1 the way a kubelet probes it.

A real shard process (two workers, the group core) against the real broker, following a
GroupCoordinator resource on a real Kubernetes API server as it does in a pod (as the chart's
workload account), probed with
the real ``grpc_health.v1`` client stub on worker 0's port (the pod's gRPC port):
NOT_SERVING until its leadership source answers, SERVING then, NOT_SERVING as soon as it is
asked to stop while it still leads partitions (draining), and a clean exit once the control
plane has moved them away.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from e2e.kube import NOT_SERVING, SERVING, check, has_status, until

from groupcoord.controlplane.local import free_port_block
from groupcoord.controlplane.placement import place
from groupcoord.coordinator.server.health import LIVENESS_SERVICE, WORKER_SERVICE
from groupcoord.embedded_broker import EmbeddedBroker

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(120)]

NAME = "hc"
PARTITIONS, WORKERS = 4, 2


async def test_shard_health_follows_start_ready_and_drain(
    workload_namespace: Any, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    kube = workload_namespace
    grpc_port = free_port_block(WORKERS)
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "groupcoord.cli", "shard", "--shard-id", "0"),
            *("--threads", str(WORKERS), "--kafka", broker.bootstrap, "--partitions", str(PARTITIONS)),
            *("--state-topic", f"state-{uuid.uuid4().hex[:8]}", "--grpc-host", "127.0.0.1"),
            *("--grpc-port", str(grpc_port), "--metrics-port", "0", "--metric-samples-interval", "0"),
            *("--leadership", f"kubernetes:{kube.namespace}/{NAME}", "--drain-timeout", "60"),
        ],
        start_new_session=True,
        env={**os.environ, "KUBECONFIG": str(kube.kubeconfig)},
    )
    try:
        # Starting: the resource does not exist yet, so the shard cannot learn what to lead.
        async def answers(worker: int) -> bool:
            return await check(grpc_port, WORKER_SERVICE, worker) is not None

        await until("worker 0 answers health checks", lambda: answers(0))
        await until("worker 1 answers health checks", lambda: answers(1))
        assert await check(grpc_port, WORKER_SERVICE, 1) == NOT_SERVING
        assert await check(grpc_port) == NOT_SERVING
        assert await check(grpc_port, LIVENESS_SERVICE) == SERVING
        await asyncio.sleep(1.5)  # a few health rounds later: still not ready
        assert await check(grpc_port) == NOT_SERVING

        # The operator publishes a placement: every partition on shard 0.
        first = place(PARTITIONS, [0])
        await kube.publish(NAME, first, shards=2, new=True)
        await until("ready", lambda: has_status(check(grpc_port), SERVING))
        assert await check(grpc_port, WORKER_SERVICE, 1) == SERVING
        assert await check(grpc_port, "no.such.service") is None  # NOT_FOUND, as the library answers

        # Asked to stop while it leads partitions: NOT_SERVING at once, and still running.
        proc.send_signal(signal.SIGTERM)
        await until("not ready once draining", lambda: has_status(check(grpc_port), NOT_SERVING), timeout=10)
        assert await check(grpc_port, WORKER_SERVICE, 1) == NOT_SERVING
        assert await check(grpc_port, LIVENESS_SERVICE) == SERVING  # draining is not wedged
        await asyncio.sleep(1)
        assert proc.poll() is None

        # The operator moves the partitions to shard 1: the drained shard exits cleanly.
        second = place(PARTITIONS, [1], first)
        await kube.publish(NAME, second)
        assert await asyncio.to_thread(proc.wait, 30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
