"""The local control plane with real shard processes (hosting the runtime's register test shard)
against a real broker: placement, failover of a killed shard, restart and rebalance back."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from groupcoord.controlplane.local import LocalControlPlane
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.rpc.v1 import shard_control_pb2 as sc

pytestmark = pytest.mark.broker

REGISTER_SHARD_PROCESS = (
    Path(__file__).resolve().parents[1] / "coordinator" / "runtime" / "register_shard_process.py"
)


def leaders_by_shard(cp: LocalControlPlane) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for p, a in cp.placement.items():
        out.setdefault(a.leader, []).append(p)
    return out


async def wait_for(predicate, timeout: float = 60.0) -> None:  # noqa: ANN001
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.1)


async def test_a_killed_shard_fails_over_and_gets_its_share_back(broker: EmbeddedBroker, tmp_path) -> None:
    # The shard processes host the register test shard (a test-only entry point with the
    # arguments of ``groupcoord shard``).
    published: list[dict] = []
    cp = LocalControlPlane(
        kafka=broker.bootstrap,
        shards=2,
        partitions=6,
        state_topic="__cp_test_state",
        shard_command=(sys.executable, str(REGISTER_SHARD_PROCESS)),
        metrics=False,
        log_dir=tmp_path,
        state_file=tmp_path / "state.json",
        on_placement=lambda placement, _procs: published.append(dict(placement)),
    )
    await cp.start()
    try:
        # given two live shards, then each leads three partitions at epoch 1
        assert {s: len(ps) for s, ps in leaders_by_shard(cp).items()} == {0: 3, 1: 3}
        assert {a.epoch for a in cp.placement.values()} == {1}
        before = dict(cp.placement)
        victim = cp.processes[1]
        moved = leaders_by_shard(cp)[1]

        # when shard 1 is killed with SIGKILL
        os.killpg(victim.process.pid, signal.SIGKILL)
        await wait_for(lambda: all(a.leader == 0 for a in cp.placement.values()))

        # then its partitions move to shard 0 with epoch + 1, the others keep their epoch
        for p in moved:
            assert cp.placement[p].epoch == before[p].epoch + 1
        for p in leaders_by_shard(cp)[0]:
            if p not in moved:
                assert cp.placement[p].epoch == before[p].epoch

        # and the restarted shard gets a balanced share back, again with new epochs
        await wait_for(lambda: len(leaders_by_shard(cp).get(1, [])) == 3)
        assert victim.restarts == 1
        assert all(published[i] != published[i + 1] for i in range(len(published) - 1))
        # and every partition is active on exactly the shard the placement names, at its epoch
        expected = {(str(a.leader), p, a.epoch) for p, a in cp.placement.items()}
        for _ in range(100):
            statuses = await cp.status()
            active = {
                (s.shard_id, p.partition, p.epoch)
                for s in statuses
                for p in s.partitions
                if p.state == sc.PARTITION_STATE_ACTIVE
            }
            if active == expected:
                break
            await asyncio.sleep(0.2)
        assert active == expected
        assert (tmp_path / "state.json").exists()
    finally:
        await cp.stop()
    assert all(p.process.poll() is not None for p in cp.processes.values())
