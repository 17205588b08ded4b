"""Which brokers the upstream Kafka cluster has, asked the way any client would.

The operator needs the number for two things it reports in the resource's status: the
replication the shards will create the state topic with (clamped to the broker count, see
:mod:`groupcoord.common.topic_replication`), and whether the gateway exposes a listener port for
every broker. It asks only where it needs no credentials (a PLAINTEXT cluster): Kafka
credentials stay in Secrets the operator has no right to read. The answer is cached per
bootstrap address for a minute, failures too, so a reconcile never waits on Kafka more than
once a minute; an unreachable or secured cluster gives None ("unknown") and the shards, which
do have the credentials, clamp on their own.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time

log = logging.getLogger(__name__)

CACHE_SECONDS = 60.0
TIMEOUT_MS = 3000

_cache: dict[str, tuple[float, tuple[int, ...] | None]] = {}
_guard = threading.Lock()


async def _node_ids(bootstrap: str) -> tuple[int, ...]:
    from aiokafka.admin import AIOKafkaAdminClient  # noqa: PLC0415

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS)
    await asyncio.wait_for(admin.start(), TIMEOUT_MS / 1000)
    try:
        cluster = await asyncio.wait_for(admin.describe_cluster(), TIMEOUT_MS / 1000)
        return tuple(sorted(int(b["node_id"]) for b in cluster.get("brokers") or ()))
    finally:
        await admin.close()


def broker_node_ids(bootstrap: str, *, secured: bool, now: float | None = None) -> tuple[int, ...] | None:
    """The node ids of the brokers of the cluster at ``bootstrap``, or None when unknown."""
    if secured or os.environ.get("GROUPCOORD_OPERATOR_KAFKA_PROBE", "true").lower() == "false":
        return None
    now = time.monotonic() if now is None else now
    with _guard:
        cached = _cache.get(bootstrap)
        if cached is not None and now - cached[0] < CACHE_SECONDS:
            return cached[1]
    try:
        found: tuple[int, ...] | None = asyncio.run(_node_ids(bootstrap)) or None
    except Exception as exc:  # unreachable, DNS, timeouts: unknown, asked again in a minute
        log.info("kafka %s: broker count unknown (%s)", bootstrap, exc)
        found = None
    with _guard:
        _cache[bootstrap] = (now, found)
    return found
