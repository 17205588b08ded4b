"""Which state-topic partition holds a group: ``abs(java_hash(group_id)) % partitions``.

The same rule Kafka uses for ``__consumer_offsets`` (``Utils.abs(groupId.hashCode) %
numPartitions``), so operators who know Kafka can predict a group's partition, and the
gateway and the shards (which both import this module) can never disagree. Java's
``String.hashCode`` works on UTF-16 code units, so non-BMP characters count as two units, as
they do in Kafka.
"""

from __future__ import annotations

import functools

DEFAULT_STATE_TOPIC = "__groupcoord_state"
DEFAULT_METRICS_TOPIC = "__groupcoord_metrics"  # the shards' metric samples (observability)
DEFAULT_PARTITIONS = 50


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, int32."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``n & 0x7fffffff`` (so Integer.MIN_VALUE maps to 0, not itself)."""
    return n & 0x7FFFFFFF


@functools.lru_cache(maxsize=1 << 16)  # asked on every request; the hash walks the whole id
def partition_for(group_id: str, partitions: int) -> int:
    """The state-topic partition that owns ``group_id``."""
    if partitions <= 0:
        raise ValueError(f"partition count must be positive, got {partitions}")
    return kafka_abs(java_string_hash(group_id)) % partitions


def worker_for(partition: int, workers: int) -> int:
    """Which worker process of a shard runs ``partition`` (its gRPC port is base port + this)."""
    if workers <= 0:
        raise ValueError(f"worker count must be positive, got {workers}")
    return partition % workers
