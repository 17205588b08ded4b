"""Rolling shard pods, decided step by step by a pure function (no API server).

The story of a threads change on 3 shards: hold every pod (partition = 3), drain shard 2,
replace it, wait for its new pod, then shard 1, then shard 0 — and the placement moves only the
drained shard's partitions, at epoch + 1, never into a failover.
"""

from __future__ import annotations

from groupcoord.controlplane.placement import place
from groupcoord_operator import build
from groupcoord_operator.health import READY, STARTING, shard_states
from groupcoord_operator.rollout import RolloutStep, plan_rollout
from groupcoord_operator.spec import parse_spec

SPEC = {"kafka": {"bootstrapServers": "kafka:9092"}, "stateTopic": {"partitions": 12}, "shards": 3}


def sts(threads: int, partition: int = 0) -> dict:
    obj = build.build_shard_statefulset("gc", "kafka", parse_spec({**SPEC, "threadsPerShard": threads}))
    obj["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = partition
    return obj


def digest(obj: dict) -> str:
    return obj["spec"]["template"]["metadata"]["annotations"][build.TEMPLATE_HASH]


def pod(index: int, template: str, ready: bool = True) -> dict:
    return {
        "metadata": {
            "name": f"gc-shard-{index}",
            "labels": {"apps.kubernetes.io/pod-index": str(index)},
            "annotations": {build.TEMPLATE_HASH: template},
        },
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


OLD, NEW = sts(2), sts(4)
ALL = {0, 1, 2}


def test_no_change_and_a_fresh_install_roll_nothing():
    pods = [pod(i, digest(OLD)) for i in range(3)]
    assert plan_rollout(3, OLD, OLD, pods, ALL) == RolloutStep()
    assert plan_rollout(3, None, NEW, [], set()) == RolloutStep()
    assert digest(sts(2, partition=0)) == digest(OLD)


def test_a_new_template_rolls_highest_first_drain_replace_wait():
    old = [pod(i, digest(OLD)) for i in range(3)]
    # 1. a new template: written with every pod held; nothing drained before it is accepted
    step = plan_rollout(3, OLD, NEW, old, ALL)
    assert (step.partition, step.drain, step.replacing, step.pending) == (3, set(), None, True)
    # 1b. accepted: shard 2 (busy) is drained first
    step = plan_rollout(3, sts(4, 3), NEW, old, ALL)
    assert (step.partition, step.drain, step.replacing, step.pending) == (3, {2}, None, True)
    assert "moving partitions off shard 2" in step.message
    # 2. once shard 2 leads nothing, its pod is replaced
    step = plan_rollout(3, sts(4, 3), NEW, old, {0, 1})
    assert (step.partition, step.drain, step.replacing) == (2, {2}, 2)
    # 3. its new pod starting: wait, shard 2 still out of the placement
    starting = [*old[:2], pod(2, digest(NEW), ready=False)]
    step = plan_rollout(3, sts(4, 2), NEW, starting, {0, 1}, replacing=2)
    assert (step.partition, step.drain, step.replacing) == (2, {2}, 2)
    assert "waiting for its new pod" in step.message
    # ... the old pod still terminating counts as not replaced either
    assert plan_rollout(3, sts(4, 2), NEW, old, {0, 1}, replacing=2).replacing == 2
    # 4. shard 2 Ready on the new template: drain shard 1
    rolled = [*old[:2], pod(2, digest(NEW))]
    step = plan_rollout(3, sts(4, 2), NEW, rolled, ALL, replacing=2)
    assert (step.partition, step.drain, step.replacing) == (2, {1}, None)
    # 5. ... and so on down to shard 0; then the rollout is complete
    done = [pod(i, digest(NEW)) for i in range(3)]
    assert plan_rollout(3, sts(4, 0), NEW, done, ALL, replacing=0) == RolloutStep()


def test_a_new_template_mid_rollout_restarts_from_the_top():
    newer = sts(8)
    pods = [pod(0, digest(OLD)), pod(1, digest(OLD)), pod(2, digest(NEW))]
    step = plan_rollout(3, sts(4, 2), newer, pods, ALL)
    assert (step.partition, step.drain) == (3, set()), "held again"
    step = plan_rollout(3, sts(8, 3), newer, pods, ALL)
    assert (step.partition, step.drain) == (3, {2}), "shard 2 runs the intermediate template: again"


def test_a_single_shard_is_replaced_without_a_drain():
    one = {**SPEC, "shards": 1}
    old = build.build_shard_statefulset("gc", "kafka", parse_spec(one))
    new = build.build_shard_statefulset("gc", "kafka", parse_spec({**one, "threadsPerShard": 4}))
    assert plan_rollout(1, old, new, [pod(0, digest(old))], {0}).partition == 1, "held"
    new["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = 1
    step = plan_rollout(1, new, new, [pod(0, digest(old))], {0})
    assert (step.partition, step.replacing) == (0, 0), "nowhere to move to: replace at once"


def test_draining_moves_only_that_shards_partitions_and_the_replacement_is_not_a_failure():
    before = place(12, [0, 1, 2], None, standbys=1)
    drained = place(12, [0, 1], before, standbys=1)
    moved = [p for p in drained if drained[p].leader != before[p].leader]
    assert sorted(moved) == sorted(p for p, a in before.items() if a.leader == 2)
    assert all(drained[p].epoch == before[p].epoch + 1 for p in moved), "fenced: epoch + 1"
    assert all(2 not in a.standbys and a.leader != 2 for a in drained.values())
    # while replaced, shard 2's NotReady pod is Starting, not Failed (no Degraded, no failover)
    pods = [pod(0, "x"), pod(1, "x"), pod(2, "y", ready=False)]
    previous = dict.fromkeys(range(3), READY)
    assert shard_states(3, pods, previous, replacing=[2]) == {0: READY, 1: READY, 2: STARTING}
    assert shard_states(3, pods, previous)[2] == "Failed", "an unplanned NotReady still fails over"
