"""Records of the state topic the runtime cannot use: skipped, counted, logged once.

The gateway keeps clients from writing the state topic (its topics are internal), but whoever
reaches the upstream cluster directly can still append anything to it. A partition must keep
serving then. Kafka's ``CoordinatorLoaderImpl`` skips a record of an unknown type with a warning
but fails the load on one it cannot deserialize, which here would fail the partition on every
reload, for ever; so the loader, the standby tail and the repair skip such a record, and say so:

* ``undecodable``: its key names no record type, or its key or value is not that type's
  protobuf;
* ``unreplayable``: it decodes, but the shard's replay raises on it;
* ``impossible_fence``: its fence cannot have been written by a leader (a leadership marker
  whose value is not a marker, a ``gc.fence`` tag that is not an epoch and a nonce, a negative
  epoch, or, in the log a leader reads back behind its own marker, a newer epoch whose marker
  is not there).

Each skip counts in ``groupcoord_state_records_skipped_total{shard,partition,reason}``; the
first one of a partition (per process) is logged as a warning with its reason, the later ones
only counted, so a flood of garbage cannot flood the log.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from groupcoord.observability.shard_metrics import ShardMetrics

log = logging.getLogger(__name__)

UNDECODABLE = "undecodable"
UNREPLAYABLE = "unreplayable"
IMPOSSIBLE_FENCE = "impossible_fence"


class SkippedRecords:
    """The skipped records of one partition (kept across its loads, like its metrics)."""

    def __init__(self, partition: int, metrics: ShardMetrics | None = None) -> None:
        self.partition = partition
        self.metrics = metrics
        self.counts: Counter[str] = Counter()

    def __call__(self, reason: str, detail: str) -> None:
        if not self.counts:
            log.warning(
                "partition %d: skipping a state-topic record (%s: %s); later ones are only counted "
                "in groupcoord_state_records_skipped_total",
                self.partition,
                reason,
                detail,
            )
        self.counts[reason] += 1
        if self.metrics is not None:
            self.metrics.record_state_records_skipped(self.partition, reason)

    @property
    def total(self) -> int:
        return sum(self.counts.values())
