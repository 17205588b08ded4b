"""The state topic's replication, fitted to the Kafka cluster it is created on.

Kafka's own offsets topic defaults to replication factor 3 with ``min.insync.replicas`` 2:
acks=all writes survive one broker down and lose nothing when a second one fails. A smaller
cluster (a laptop, a test, a 2-broker staging cluster) cannot host 3 replicas, and Kafka would
refuse to create the topic at all (INVALID_REPLICATION_FACTOR). So the factor is clamped to the
broker count, and ``min.insync.replicas`` keeps the same margin below it (3/2 on 2 brokers
becomes 2/1, so a restarting broker does not stop state writes) — never below 1, never above the
factor. The shard that creates the topic applies this; the operator computes the same to say so
in the resource's status. Pure: no I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Replication:
    """What the state topic is (or would be) created with, and why it differs from the request."""

    replication_factor: int
    min_insync_replicas: int
    clamped: bool = False
    message: str = ""
    #: how a state topic that already existed differs from it (:func:`existing_topic_problems`)
    problems: tuple[str, ...] = ()


def fit_replication(replication_factor: int, min_insync_replicas: int, brokers: int | None) -> Replication:
    """Clamp ``replication_factor`` to ``brokers`` (None: unknown, keep as asked).

    ``min_insync_replicas`` is first capped at ``replication_factor``; when the factor is
    clamped, it keeps its margin (``replication_factor - min_insync_replicas``) below the new
    factor.
    """
    if replication_factor < 1 or min_insync_replicas < 1:
        raise ValueError("replication factor and min.insync.replicas must be at least 1")
    min_isr = min(min_insync_replicas, replication_factor)
    if brokers is None or brokers >= replication_factor:
        return Replication(replication_factor, min_isr)
    brokers = max(brokers, 1)
    margin = replication_factor - min_isr
    fitted_isr = max(1, min(min_isr, brokers - margin))
    return Replication(
        brokers,
        fitted_isr,
        clamped=True,
        message=(
            f"the Kafka cluster has {brokers} broker(s): state topic replication factor "
            f"{replication_factor} clamped to {brokers}, min.insync.replicas {min_insync_replicas} "
            f"to {fitted_isr}"
        ),
    )


def existing_topic_problems(
    topic: str, expected: Replication, replicas: int, configs: Mapping[str, str], *, check_min_isr: bool
) -> tuple[str, ...]:
    """What is wrong with a state topic someone else created (or changed): each a sentence.

    ``replicas`` is its replication factor, ``configs`` its topic configs as the cluster
    describes them (a config it does not list has Kafka's default: ``cleanup.policy`` delete,
    ``min.insync.replicas`` 1). Not compacted means Kafka deletes groups and offsets by
    retention; fewer replicas or a lower ``min.insync.replicas`` than asked means an
    acknowledged commit can be lost with fewer broker failures than the operator planned for.
    ``check_min_isr``: the options asked for a ``min.insync.replicas``.
    """
    problems = []
    policy = configs.get("cleanup.policy") or "delete"
    if "compact" not in (p.strip() for p in policy.split(",")):
        problems.append(
            f"state topic {topic}: cleanup.policy is {policy!r}, not compact: Kafka deletes its "
            "records by retention, and the groups and offsets in them"
        )
    if replicas < expected.replication_factor:
        problems.append(
            f"state topic {topic}: replication factor {replicas}, below the {expected.replication_factor} asked"
        )
    min_isr = configs.get("min.insync.replicas") or "1"
    if check_min_isr and min_isr.isdigit() and int(min_isr) < expected.min_insync_replicas:
        problems.append(
            f"state topic {topic}: min.insync.replicas {min_isr}, below the "
            f"{expected.min_insync_replicas} asked"
        )
    return tuple(problems)
