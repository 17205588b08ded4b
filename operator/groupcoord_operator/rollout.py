"""Rolling the shard pods one at a time, each only after its partitions moved away.

A changed pod template (``threadsPerShard``, image, resources, pod overrides...) would, left
to the StatefulSet controller, restart shard pods while they still lead partitions: every
restart a failover, each orphaning 1/N of the groups at once. Instead the StatefulSet's
``RollingUpdate.partition`` is held at the shard count when the template changes, and lowered
one ordinal at a time, highest first, in this order per shard:

1. **drain** — the placement in force is recomputed without the shard, so its partitions (and
   standby duties) move to the other shards at epoch + 1 (written to the status; the shard sees
   it and resigns, the new leaders load);
2. **replace** — on a later reconcile, once the status shows the shard leads nothing, the
   partition is lowered to its ordinal and the controller replaces that pod;
3. **wait** — until the new pod runs the new template and is Ready; only then the next shard.

Nothing is drained before the API server has taken the new template (written first with every
pod held), so a template it refuses moves no partition.

The replaced shard takes back its share once Ready (balance), as after any scale-out. This
module decides the step from what it reads; :mod:`groupcoord_operator.reconcile` performs it.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from groupcoord_operator.build import TEMPLATE_HASH
from groupcoord_operator.health import pod_is_ready, pod_shard_id


@dataclass(frozen=True)
class RolloutStep:
    """What the reconcile does now.

    ``partition``: the StatefulSet ``rollingUpdate.partition`` to write; ``drain``: shards
    that must lead nothing (placement leaves them out); ``replacing``: the shard whose pod is
    being replaced on purpose (its NotReady is not a failure), remembered in
    ``status.rollout.replacingShard`` so every reconcile — on any operator replica — knows it;
    ``pending``: a rollout is under way.
    """

    partition: int = 0
    drain: frozenset[int] = field(default_factory=frozenset)
    replacing: int | None = None
    pending: bool = False
    message: str = ""


def _template_hash(obj: Mapping[str, Any] | None) -> str | None:
    meta = (((obj or {}).get("spec") or {}).get("template") or {}).get("metadata") or {}
    return (meta.get("annotations") or {}).get(TEMPLATE_HASH)


def _pod_hash(pod: Mapping[str, Any]) -> str | None:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(TEMPLATE_HASH)


def plan_rollout(
    shards: int,
    current: Mapping[str, Any] | None,
    desired: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    busy: Iterable[int],
    replacing: int | None = None,
) -> RolloutStep:
    """The next step of rolling ``current`` (the StatefulSet as it is) to ``desired``.

    ``busy``: shards that lead or stand by for some partition in the placement in force;
    ``replacing``: the shard whose replacement an earlier step started (from the status).
    """
    want = _template_hash(desired)
    if current is None:
        return RolloutStep()  # a fresh StatefulSet: its pods start on the desired template
    strategy = ((current.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate") or {}
    partition = min(int(strategy.get("partition") or 0), shards)
    new_template = _template_hash(current) != want
    if new_template:
        partition = shards  # a new template: hold every pod until its turn

    by_id = {sid: pod for pod in pods if (sid := pod_shard_id(pod)) is not None and sid < shards}
    if not by_id:
        return RolloutStep()  # no pod runs yet: they all start on the desired template

    def updated(sid: int) -> bool:
        pod = by_id.get(sid)
        return (
            pod is not None
            and _pod_hash(pod) == want
            and not (pod.get("metadata") or {}).get("deletionTimestamp")
        )

    if replacing is not None and replacing < shards:
        pod = by_id.get(replacing)
        if not (pod is not None and pod_is_ready(pod) and (updated(replacing) or replacing < partition)):
            return RolloutStep(
                partition,
                drain=frozenset({replacing}),
                replacing=replacing,
                pending=True,
                message=f"replacing shard {replacing}: waiting for its new pod to be Ready",
            )
    if new_template:
        # first only written, every pod held: nothing is drained before the API server has
        # accepted the new template (a refused one changes nothing that runs)
        return RolloutStep(partition, pending=True, message="new shard pod template: pods held, rolling next")
    outdated = [s for s in range(partition) if not updated(s)]
    if not outdated:
        return RolloutStep()  # every pod runs the template: nothing under way
    target = outdated[-1]
    if target in set(busy) and shards > 1:
        return RolloutStep(
            partition,
            drain=frozenset({target}),
            pending=True,
            message=f"moving partitions off shard {target} before replacing its pod",
        )
    return RolloutStep(
        target,
        drain=frozenset({target}),
        replacing=target,
        pending=True,
        message=f"replacing shard {target} (it leads no partition)",
    )
